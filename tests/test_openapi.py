"""The OpenAPI document (GET /api/v1/openapi.json): valid OpenAPI 3.1, covering
every /api/v1 URL rule, and true to the code. Schemathesis fuzzes every
operation against a seeded database (its examples, boundary and wrong-type
cases, then generated ones, valid and invalid): no 5xx; every status, content
type, header and body as documented; invalid input refused; a method a path
does not offer answered 405 with Allow."""
from __future__ import annotations

import re
import tempfile
from datetime import timedelta
from pathlib import Path

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from openapi_spec_validator import validate
from schemathesis import GenerationMode
from schemathesis.checks import (content_type_conformance, negative_data_rejection, not_a_server_error,
                                 response_headers_conformance, response_schema_conformance,
                                 status_code_conformance, unsupported_method)
from sqlalchemy import func, select

from app.extensions import db
from app.models import COMPLETED, Session
from app.sessions import control
from app.sessions.manager import run_info
from app.timeutil import utcnow
from plugins.cooldowns import store as cooldowns
from plugins.events.models import Event
from plugins.memory import store as memories
from plugins.memory.models import Memory, MemoryInjection
from plugins.memory.outcomes import record_outcome
from tests.conftest import make_app

DOC = "/api/v1/openapi.json"
# Flask answers these for every rule by itself.
IMPLICIT = {"HEAD", "OPTIONS"}

# Bounded for two shared cores: about 20 operations, each with its coverage
# cases (boundaries, wrong types, NUL, huge numbers, wrong content types)
# and this many generated ones.
EXAMPLES_PER_OPERATION = 25
EXAMPLES_ON_ROWS = 10


def seed() -> None:
    """A few of everything, so that GET-by-id paths also hit real rows."""
    for tier, prompt in ((1, None), (2, "check the NAS"), (3, "restart jellyfin if it hangs")):
        control.enqueue(tier=tier, prompt=prompt, trigger="api")
    done = control.claim(control.enqueue(tier=1, trigger="schedule").id)
    done.status, done.ended_at, done.cost_usd, done.num_turns, done.duration_ms, done.response = (
        COMPLETED, utcnow(), 0.0123, 4, 5400, "All quiet.")
    for level, service, message in (("info", "jellyfin", "up"), ("warning", "postgres", "slow queries"),
                                    ("critical", None, "disk full"), ("info", "nas", "backup done")):
        db.session.add(Event(level=level, service=service, message=message, session_id=done.id, tier=1,
                             created_at=utcnow()))
    first = memories.create("timing", "jellyfin", "Takes 60s to start after restart", 0.9)
    dns = memories.create("dependency", None, "DNS depends on the WireGuard tunnel")
    db.session.add(MemoryInjection(session_id=done.id, memory_id=dns.id, confidence=dns.confidence, position=0,
                                   reason="named in the operator's request"))
    record_outcome(dns.id, "worked", "the tunnel came back first", run_info(done))   # a track record
    memories.update(memories.create("behavior", "postgres", "Vacuum runs nightly at 02:00"), pinned=True)
    memories.update(first, confidence=0.2)   # inactive, with history
    now = utcnow()
    cooldowns.record_attempt("restart", "jellyfin", "pending", "docker restart jellyfin", done.id, 1,
                             now=now - timedelta(minutes=30))
    cooldowns.record_outcome("restart", "jellyfin", "success", "back up", done.id, 1, now=now)
    cooldowns.record_attempt("redeployment", "web", "denied", "helm upgrade web ./chart", done.id, 3,
                             message="1 of 1 in 24h used", now=now)
    db.session.commit()


# Schemathesis makes one test per operation at collection time, from a loaded
# document: so the application exists when this module is imported, in a
# state directory removed when the interpreter exits. (Its lazy loader,
# schemathesis.pytest.from_fixture, fails under pytest 9.) Its rows are added
# by the first test that asks for them.
STATE = tempfile.TemporaryDirectory(prefix="claudeops-openapi-")
APP = make_app(Path(STATE.name))
api_schema = schemathesis.openapi.from_wsgi(DOC, APP)


@pytest.fixture(scope="module")
def seeded_app():
    with APP.app_context():
        if db.session.scalar(select(func.count()).select_from(Session)) == 0:
            seed()
        db.session.remove()
    return APP


@pytest.fixture(scope="module")
def document(seeded_app):
    response = seeded_app.test_client().get(DOC)
    assert response.status_code == 200 and response.mimetype == "application/json"
    return response.get_json()


def test_document_is_valid_openapi_3_1(document):
    validate(document)   # raises on any violation of the OpenAPI 3.1 schema
    assert document["openapi"].startswith("3.1.")
    assert document["servers"] == [{"url": "/api/v1"}]


def test_document_declares_either_no_credentials_or_a_bearer_token(document):
    bearer = document["components"]["securitySchemes"]["bearerAuth"]
    assert (bearer["type"], bearer["scheme"]) == ("http", "bearer")
    assert document["security"] == [{}, {"bearerAuth": []}]


def _api_rules(app) -> set[tuple[str, str]]:
    """(METHOD, /path/{param}) of every /api/v1 URL rule, as Flask routes them."""
    found = set()
    for rule in app.url_map.iter_rules():
        if rule.rule.startswith("/api/v1/"):
            path = re.sub(r"<(?:\w+(?:\([^)]*\))?:)?(\w+)>", r"{\1}", rule.rule.removeprefix("/api/v1"))
            found |= {(method, path) for method in rule.methods - IMPLICIT}
    return found


def test_document_lists_every_api_rule_and_nothing_else(seeded_app, document):
    """A new endpoint without documentation (or documentation of an endpoint
    that is gone) fails here."""
    documented = {(method.upper(), path) for path, item in document["paths"].items() for method in item}
    routed = _api_rules(seeded_app)
    assert routed - documented == set(), "undocumented"
    assert documented - routed == set(), "documented but not routed"
    assert ("PUT", "/memories/{memory_id}") in routed and ("GET", "/openapi.json") in routed


def test_every_operation_documents_that_the_database_may_be_unavailable(document):
    """A 503 with ``Retry-After`` while the database takes nothing (test_faults checks it)."""
    operations = [item[method] for item in document["paths"].values() for method in item]
    assert operations and all("503" in operation["responses"] for operation in operations)
    assert document["paths"]["/health"]["get"]["responses"]["503"]["description"] == (
        "the database does not answer, or (but for scope=host) the scheduler has gone silent")
    assert "Retry-After" in document["paths"]["/memories"]["post"]["responses"]["503"]["description"]


def test_every_operation_documents_its_error_statuses(document):
    """The statuses the views can answer besides success, as the code has them."""
    def statuses(path, method):
        # 401, 403 and 429 (authentication) are on every guarded operation, test_auth checks them;
        # 503 is on every operation (the test above), 413 on every one that takes a body (below).
        return set(document["paths"][path][method]["responses"]) - {"401", "403", "413", "429", "503"}
    assert statuses("/sessions/trigger", "post") == {"200", "201", "400", "415", "422"}   # 200, 422: Idempotency-Key
    assert statuses("/sessions/{session_id}/stop", "post") == {"202", "400", "404", "409"}
    assert statuses("/memories/{memory_id}", "put") == {"200", "400", "404", "415"}
    assert statuses("/memories/bulk-delete", "post") == {"200", "400", "404", "415"}
    assert statuses("/memories/{memory_id}/approve", "post") == {"200", "400", "404", "409", "415"}
    assert statuses("/memories/{memory_id}/reject", "post") == {"200", "400", "404", "409", "415"}
    assert statuses("/health", "get") == {"200", "400"}   # and its own 503 (the test above)
    # The 400 of a query parameter it does not take; the health check lets a monitor's cache-buster be,
    # and answers 400 only for a scope it does not know.
    assert document["paths"]["/health"]["get"]["responses"]["400"]["description"] == "scope is neither service nor host"
    # One that takes no body refuses one (app/web/query_check.py); one that takes a body says what of it it refuses.
    for path, method in (("/sessions/{session_id}/stop", "post"), ("/memories/{memory_id}", "delete"),
                         ("/stats", "get")):
        assert "or a request body (it takes none" in document["paths"][path][method]["responses"]["400"]["description"]
    for path, item in document["paths"].items():
        for method, operation in item.items():
            assert "400" in operation["responses"], (method, path)
            assert ("413" in operation["responses"]) == (method in ("post", "put", "patch")), (method, path)
            for status, answer in operation["responses"].items():
                if status.startswith(("4", "5")) and status != "503":
                    assert answer["content"]["application/json"]["schema"] == {
                        "$ref": "#/components/schemas/Error"}, (method, path, status)


def test_runtime_settings_are_the_config_body(seeded_app, document):
    body = document["paths"]["/config"]["put"]["requestBody"]["content"]["application/json"]["schema"]
    runtime = {s.name for s in seeded_app.extensions["claudeops.settings"] if s.runtime}
    assert set(body["properties"]) == runtime and body["additionalProperties"] is False
    interval = body["properties"]["CLAUDEOPS_INTERVAL"]["anyOf"]
    assert interval[0]["type"] == "integer" and interval[1] == {"type": "null", "description": "remove the change"}
    # What the pattern cannot list, the description says (app/config.py _model).
    assert "No invisible character" in body["properties"]["CLAUDEOPS_TIER1_MODEL"]["anyOf"][0]["description"]


# --- schemathesis -------------------------------------------------------------

CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance,
          response_headers_conformance, unsupported_method, negative_data_rejection]


@api_schema.parametrize()
@settings(max_examples=EXAMPLES_PER_OPERATION, deadline=None, derandomize=True, database=None,
          suppress_health_check=list(HealthCheck))
def test_api_conforms_to_its_document(case, seeded_app):
    case.call_and_validate(checks=CHECKS)


# Generated ids almost never name a row. These run every operation on one
# of the rows that exist at that moment (a memory deleted by an earlier
# example is replaced), with generated bodies, valid and, where there is a
# body, invalid ones.
ROW_TABLES = {"session_id": Session, "memory_id": Memory}
BY_ID_OPERATIONS = [op for op in (result.ok() for result in api_schema.get_all_operations())
                    if any(p.name in ROW_TABLES for p in op.path_parameters)]


# Approving and rejecting need a proposed memory to succeed: they run on
# those, one made whenever none is left.
REVIEW_OPERATIONS = {"POST /memories/{memory_id}/approve", "POST /memories/{memory_id}/reject"}


def existing_ids(name: str, proposed: bool = False) -> list[int]:
    model = ROW_TABLES[name]
    with APP.app_context():
        query = select(model.id).order_by(model.id)
        ids = db.session.scalars(query.where(Memory.status == "proposed") if proposed else query).all()
        if not ids and model is Memory:
            # Directly: an earlier example may have set limits no text passes.
            memory = Memory(category="timing", service="nas", observation="A scrub takes six hours",
                            created_at=utcnow(), updated_at=utcnow(), status="proposed" if proposed else "approved")
            db.session.add(memory)
            db.session.commit()
            ids = [memory.id]
        db.session.remove()
    return ids


def test_every_by_id_operation_is_run_on_real_rows():
    assert {op.label for op in BY_ID_OPERATIONS} == {
        "GET /sessions/{session_id}", "POST /sessions/{session_id}/stop", "GET /memories/{memory_id}",
        "PUT /memories/{memory_id}", "DELETE /memories/{memory_id}", "GET /memories/{memory_id}/history",
        *REVIEW_OPERATIONS}


@pytest.mark.parametrize("operation", BY_ID_OPERATIONS, ids=lambda op: op.label)
def test_operations_on_existing_rows_conform(operation, seeded_app):
    statuses = []
    modes = [GenerationMode.POSITIVE] + ([GenerationMode.NEGATIVE] if len(operation.body) else [])
    for mode in modes:
        @given(data=st.data())
        @settings(max_examples=EXAMPLES_ON_ROWS, deadline=None, derandomize=True, database=None,
                  suppress_health_check=list(HealthCheck))
        def run(data):
            # An index, not sampled_from(rows): the draw's bounds must not depend on what rows exist.
            ids = {}
            for parameter in operation.path_parameters:
                rows = existing_ids(parameter.name, proposed=operation.label in REVIEW_OPERATIONS)
                ids[parameter.name] = rows[data.draw(st.integers(0, 999)) % len(rows)]
            case = data.draw(operation.as_strategy(generation_mode=mode, path_parameters=ids))
            statuses.append(case.call_and_validate(checks=CHECKS).status_code)
        run()
    assert any(200 <= status < 300 for status in statuses), statuses   # real rows were found
