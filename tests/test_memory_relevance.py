"""Relevance: the memories of the services a session is about (named in its
request or escalation reason, in trouble recently, reported by the earlier
tiers of its escalation) are packed first; the rest of the budget goes to the
most trusted others. The header still counts every eligible memory."""
from __future__ import annotations

import json
import logging
import re
from datetime import timedelta

from sqlalchemy import select

from app.extensions import db
from app.hookspecs import hookimpl
from app.runtime import change
from app.sessions import control
from app.sessions.manager import run_session
from app.timeutil import utcnow
from plugins.events.models import Event
from plugins.events.relevance import services_in_trouble
from plugins.memory import claudeops_prompt_context
from plugins.memory.context import SHORTEST_LINE, build_memory_context
from plugins.memory.models import MemoryInjection
from plugins.memory.relevance import NAMED_IN_ESCALATION, NAMED_IN_REQUEST, relevant_services
from tests import streamlines as sl
from tests.conftest import make_app
from tests.memory_helpers import add_memory, new_run

# Room for the header, two groups and about three of the memories below, not all seven.
SMALL_BUDGET = 110
HEADING = re.compile(r"^### (\S+)$", re.M)


def trusted_and_quiet():
    """Four memories of services nobody mentions, more trusted than any of
    the three below, and one each for jellyfin, postgres and caddy."""
    quiet = [add_memory(f"Quiet service {n} rotates its logs nightly", category="maintenance",
                        service=f"quiet{n}", confidence=0.95 - n * 0.01) for n in range(4)]
    jellyfin = add_memory("Takes 60s to start after restart", service="jellyfin", confidence=0.5)
    postgres = add_memory("Dependents wait 10s after a restart", category="dependency", service="postgres",
                          confidence=0.45)
    caddy = add_memory("Must start after WireGuard", category="dependency", service="caddy", confidence=0.4)
    return quiet, jellyfin, postgres, caddy


def headings(text: str) -> list[str]:
    """The service headings of the memory section, in order."""
    section = text[text.index("## Operational Memory"):].split("\n\n## ")[0]
    return HEADING.findall(section)


def run_with(prompt=None, escalation_reason=None, parent_session_id=None):
    from dataclasses import replace
    return replace(new_run(), operator_prompt=prompt, escalation_reason=escalation_reason,
                   parent_session_id=parent_session_id)


def add_event(level, service, hours_ago=0.0, session_id=None):
    db.session.add(Event(level=level, service=service, message=f"{service} is {level}", session_id=session_id,
                         created_at=utcnow() - timedelta(hours=hours_ago)))
    db.session.commit()


# --- the session's own words ----------------------------------------------------

def test_services_named_in_the_request_come_first_whole_words_any_case(app):
    quiet, jellyfin, postgres, caddy = trusted_and_quiet()
    replica = add_memory("Replica lags under load", category="behavior", service="postgres-replica",
                         confidence=0.9)
    run = run_with(prompt="Jellyfin's transcoder hangs; check JELLYFIN and the postgres-replica, not postgres_old")
    assert relevant_services(run) == {"jellyfin": NAMED_IN_REQUEST, "postgres-replica": NAMED_IN_REQUEST}

    without = build_memory_context(SMALL_BUDGET)
    assert "jellyfin" not in headings(without.text)          # too little trust to make the cut on its own
    context = build_memory_context(SMALL_BUDGET, relevant_services(run))
    # Most trusted first among them; postgres is neither "postgres-replica" nor "postgres_old".
    assert headings(context.text)[:2] == ["postgres-replica", "jellyfin"]
    assert "postgres" not in headings(context.text)
    # The rest of the budget: the most trusted others, in their order.
    assert headings(context.text)[2:] == headings(without.text)[:len(headings(context.text)) - 2]
    assert context.reasons == {jellyfin.id: NAMED_IN_REQUEST, replica.id: NAMED_IN_REQUEST}
    assert context.first == {"jellyfin": NAMED_IN_REQUEST, "postgres-replica": NAMED_IN_REQUEST}
    # N of M: M is every eligible memory, whatever went first.
    assert context.text.startswith(f"## Operational Memory ({len(context.included)} of 8 memories, ~")
    assert len(context.included) < 8


def test_the_escalation_reason_names_services_too(app):
    trusted_and_quiet()
    run = run_with(prompt="Look at caddy", escalation_reason="Caddy and Postgres both refuse connections")
    assert relevant_services(run) == {"caddy": NAMED_IN_REQUEST, "postgres": NAMED_IN_ESCALATION}
    assert headings(build_memory_context(SMALL_BUDGET, relevant_services(run)).text)[:2] == ["postgres", "caddy"]


def test_a_name_a_memory_cannot_hold_finds_the_memories_under_their_spelling(app):
    """Events and cooldowns name a unit getty@tty1 and a host db.lan; a
    memory's service is letters, digits, _ and -, and the marker's warning
    tells the agent to write them getty-tty1 and db-lan."""
    add_memory("Scrub takes six hours", service="db-lan")
    add_memory("Respawns in 5 s", service="getty-tty1")
    add_memory("Slow", service="lan")
    assert relevant_services(run_with(prompt="Is db.lan still scrubbing?")) == {
        "lan": NAMED_IN_REQUEST, "db-lan": NAMED_IN_REQUEST}
    add_event("critical", "getty@tty1")
    assert relevant_services(new_run()) == {"getty-tty1": "critical event within the hour"}


def test_no_words_no_events_no_reads(app, monkeypatch):
    from plugins.memory import relevance
    trusted_and_quiet()
    monkeypatch.setattr(relevance, "distinct_values", lambda column: (_ for _ in ()).throw(AssertionError))
    assert relevant_services(new_run()) == {}


# --- recent trouble ---------------------------------------------------------------

def test_recent_warning_and_critical_events_come_first(app):
    quiet, jellyfin, postgres, caddy = trusted_and_quiet()
    add_event("info", "jellyfin")                  # all is well: not relevant
    add_event("warning", "postgres", hours_ago=2)
    add_event("critical", "CADDY", hours_ago=0.1)  # another case than the memory's
    add_event("critical", "postgres", hours_ago=5)
    add_event("warning", "quiet0", hours_ago=30)   # outside the default 24 hours
    add_event("critical", "nas")                   # no memory about it
    add_event("warning", None)                     # no service
    relevant = relevant_services(new_run())
    # The worst level, and when it was last seen.
    assert relevant == {"caddy": "critical event within the hour", "postgres": "critical event 5 h ago"}
    context = build_memory_context(SMALL_BUDGET, relevant)
    assert headings(context.text)[:2] == ["postgres", "caddy"]
    assert [m.id for m in context.included[:2]] == [postgres.id, caddy.id]

    change({"CLAUDEOPS_MEMORY_RELEVANT_HOURS": 48})
    assert "quiet0" in relevant_services(new_run())
    change({"CLAUDEOPS_MEMORY_RELEVANT_HOURS": 0})
    assert relevant_services(new_run()) == {}


def test_the_next_sessions_preview_puts_services_in_trouble_first(app, client):
    trusted_and_quiet()
    add_event("critical", "caddy")
    body = client.get("/api/v1/memories/context").get_json()
    assert body["first"] == {"caddy": "critical event within the hour"}
    assert headings(body["text"])[0] == "caddy"
    page = client.get("/memories/preview").get_data(as_text=True)
    assert "Put first:" in page and "caddy (critical event within the hour)" in page


# --- the hook ------------------------------------------------------------------------

def test_hook_claudeops_memory_relevant_services_any_plugin_can_name_services(tmp_path, caplog):
    calls = []

    class Incidents:
        @hookimpl
        def claudeops_memory_relevant_services(self, run, since):
            calls.append((run.session_id, since))
            return {"JellyFin": "open incident INC-7", "unknown-service": "nobody remembers it"}

    class Broken:
        @hookimpl
        def claudeops_memory_relevant_services(self, run, since):
            raise RuntimeError("incident tracker unreachable")

    class Confused:
        @hookimpl
        def claudeops_memory_relevant_services(self, run, since):
            return ["caddy"]

    app = make_app(tmp_path, plugins=[Incidents(), Broken(), Confused()])
    with app.app_context():
        trusted_and_quiet()
        run = new_run()
        with caplog.at_level(logging.WARNING):
            relevant = relevant_services(run)
        assert relevant == {"jellyfin": "open incident INC-7"}
        (session_id, since), = calls
        assert session_id == run.session_id
        assert abs((utcnow() - timedelta(hours=24) - since).total_seconds()) < 60
        assert "incident tracker unreachable" in caplog.text
        assert "returned list from claudeops_memory_relevant_services, not a dict" in caplog.text
        # What the session was given, and why, is recorded with it.
        section = claudeops_prompt_context(run)
        db.session.commit()
        assert headings(section.text)[0] == "jellyfin"
        rows = db.session.scalars(select(MemoryInjection).where(MemoryInjection.session_id == run.session_id)
                                  .order_by(MemoryInjection.position)).all()
        assert (rows[0].reason, rows[1].reason) == ("open incident INC-7", None)


# --- through real sessions ------------------------------------------------------------

def given_system_prompt(argv_file) -> str:
    argv = json.loads(argv_file.read_text())["argv"]
    return argv[argv.index("--append-system-prompt") + 1]


def test_an_ad_hoc_request_gets_its_services_memories_first(app, fake_cli, run_session_now):
    quiet, jellyfin, postgres, caddy = trusted_and_quiet()
    change({"CLAUDEOPS_MEMORY_BUDGET": SMALL_BUDGET})
    argv_file = fake_cli(sl.steps(sl.init(), sl.result()))
    session = run_session_now(prompt="Why does jellyfin buffer every evening?")
    system = given_system_prompt(argv_file)
    assert headings(system)[0] == "jellyfin"
    assert f"(confidence: 0.5) [m{jellyfin.id}]" in system
    given = dict(db.session.execute(select(MemoryInjection.memory_id, MemoryInjection.reason)
                                    .where(MemoryInjection.session_id == session.id)).all())
    assert given[jellyfin.id] == NAMED_IN_REQUEST and given[quiet[0].id] is None


def test_an_escalated_session_gets_the_services_of_its_chain_first(app, fake_cli, run_session_now, client):
    """Tier 1 reports postgres critical and escalates naming caddy; tier 2
    is given both first, even with recent events switched off."""
    quiet, jellyfin, postgres, caddy = trusted_and_quiet()
    change({"CLAUDEOPS_MEMORY_BUDGET": SMALL_BUDGET, "CLAUDEOPS_MEMORY_RELEVANT_HOURS": 0})
    fake_cli(sl.steps(sl.init(), sl.text("[EVENT:critical:postgres] Not accepting connections\n"
                                         "[EVENT:info:jellyfin] Healthy\n"
                                         "[ESCALATE] caddy returns 502 for every site"), sl.result()))
    parent = run_session_now(tier=1)
    argv_file = fake_cli(sl.steps(sl.init(), sl.result()))
    child = run_session(control.claim_next())
    assert (child.tier, child.parent_id) == (2, parent.id)
    system = given_system_prompt(argv_file)
    assert sorted(headings(system)[:2]) == ["caddy", "postgres"]
    assert "jellyfin" not in headings(system)   # an info event is no trouble
    given = dict(db.session.execute(select(MemoryInjection.memory_id, MemoryInjection.reason)
                                    .where(MemoryInjection.session_id == child.id)).all())
    assert given[caddy.id] == NAMED_IN_ESCALATION
    assert given[postgres.id] == "critical event from tier 1 of the escalation"
    # The memory's page says why it was given first.
    page = client.get(f"/memories/{postgres.id}").get_data(as_text=True)
    assert f"session #{child.id}" in page and "put first: critical event from tier 1 of the escalation" in page


def test_an_escalations_worst_event_is_told_with_the_tier_that_reported_it(app):
    """Tier 1 saw postgres slow, tier 2 found it down: tier 3 is told of
    the critical event from tier 2, not of one from tier 1 there never was."""
    tier1 = new_run()
    tier2 = new_run(escalated_from=tier1)
    tier3 = new_run(escalated_from=tier2)
    for run, level in ((tier1, "warning"), (tier2, "critical")):
        db.session.add(Event(level=level, service="postgres", message=level, session_id=run.session_id,
                             tier=run.tier, created_at=utcnow() - timedelta(days=3)))
    db.session.commit()
    assert services_in_trouble(tier3, utcnow()) == {"postgres": "critical event from tier 2 of the escalation"}


# --- bounded --------------------------------------------------------------------------

def test_relevant_memories_are_read_in_a_bounded_first_pass(app, monkeypatch):
    """The first pass reads only the relevant services' memories, the second
    as many as the budget could ever hold plus what the first pass read."""
    from plugins.memory import context as context_module
    most = 2000 * 4 // SHORTEST_LINE
    for n in range(most + 20):
        add_memory(f"Observation {n} " + "w " * 20, service="web", confidence=0.9)
    for n in range(3):
        add_memory(f"Jellyfin observation {n}", service="jellyfin", confidence=0.4)
    asked = []
    original = context_module.most_trusted_first

    def spy(limit, services=None):
        asked.append((limit, services))
        return original(limit, services)
    monkeypatch.setattr(context_module, "most_trusted_first", spy)
    context = build_memory_context(2000, {"jellyfin": "named in the operator's request"})
    assert asked == [(most, ["jellyfin"]), (most + 3, None)]
    assert [m.service for m in context.included[:3]] == ["jellyfin"] * 3
    assert len({m.id for m in context.included}) == len(context.included)   # none given twice


def test_a_memory_deleted_as_a_session_is_given_its_memories_costs_the_session_nothing(app, fake_cli,
                                                                                       monkeypatch):
    """The operator deletes a memory between the section's read and the
    record of which memories it gave: that record once failed its insert,
    and the whole memory section was lost with it. The delete now waits
    for the record, a few milliseconds."""
    import threading
    import plugins.memory as memory_plugin
    kept = add_memory("Caddy waits for WireGuard", service="caddy", category="dependency")
    deleted = add_memory("Jellyfin takes 60s to start", service="jellyfin", category="timing")
    kept_id, deleted_id = kept.id, deleted.id
    client = app.test_client()
    answers = []
    operator = threading.Thread(target=lambda: answers.append(client.delete(f"/api/v1/memories/{deleted_id}")))
    build = memory_plugin.build_memory_context

    def the_operator_deletes_meanwhile(*args, **kwargs):
        context = build(*args, **kwargs)
        operator.start()
        operator.join(timeout=1)
        return context

    monkeypatch.setattr(memory_plugin, "build_memory_context", the_operator_deletes_meanwhile)
    fake_cli(sl.steps(sl.init(), sl.result("ok")))
    session = run_session(control.claim(control.enqueue(trigger="api").id))
    operator.join(timeout=30)
    assert session.status == "completed"
    assert "Caddy waits for WireGuard" in session.system_prompt
    assert "Jellyfin takes 60s to start" in session.system_prompt   # read before the delete: given
    assert [answer.status_code for answer in answers] == [200]   # the delete, done once the record was
    db.session.remove()
    given = set(db.session.scalars(select(MemoryInjection.memory_id).where(MemoryInjection.session_id == session.id)))
    assert given == {kept_id, None}   # the deleted memory's record stays, naming no memory
