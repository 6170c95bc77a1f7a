"""/api/v1/memories and its errors."""
from __future__ import annotations

import pytest

from app.extensions import db
from plugins.memory import store
from tests.conftest import make_app
from tests.memory_helpers import add_memory, all_memories, new_run
from tests.support.meanwhile import Meanwhile

API = "/api/v1/memories"


def test_create_and_get(client):
    response = client.post(API, json={"service": "postgres", "category": "maintenance",
                                      "observation": "Needs manual VACUUM FULL weekly", "confidence": 0.9})
    assert response.status_code == 201
    created = response.get_json()
    assert created["session_id"] is None and created["active"] is True and created["confidence"] == 0.9
    assert created["created_at"].endswith("Z")
    assert client.get(f"{API}/{created['id']}").get_json() == created


def test_create_defaults_and_clamps(client):
    body = client.post(API, json={"category": "timing", "observation": "x", "confidence": 7}).get_json()
    assert body["confidence"] == 1.0 and body["service"] is None
    body = client.post(API, json={"category": "timing", "observation": "y", "confidence": -1}).get_json()
    assert body["confidence"] == 0.0 and body["active"] is False
    body = client.post(API, json={"category": "timing", "observation": "z"}).get_json()
    assert body["confidence"] == 0.7
    # Rounded to three places, but never across the line of the active ones.
    body = client.post(API, json={"category": "timing", "observation": "w", "confidence": 0.2999}).get_json()
    assert (body["confidence"], body["active"]) == (0.299, False)
    body = client.post(API, json={"category": "timing", "observation": "v", "confidence": 0.3}).get_json()
    assert (body["confidence"], body["active"]) == (0.3, True)


@pytest.mark.parametrize("body, message", [
    ({"observation": "x"}, "category and observation are required"),
    ({"category": "misc", "observation": "x"}, "category must be one of timing, dependency"),
    ({"category": "timing", "observation": ""}, "must not be empty"),
    ({"category": "timing", "observation": 5}, "observation must be text"),
    ({"category": "timing", "observation": "x" * 2001}, "the limit is 2000"),
    ({"category": "timing", "observation": "x", "confidence": "high"}, "confidence must be a number"),
    ({"category": "timing", "observation": "x", "confidence": True}, "confidence must be a number"),
    ({"category": "timing", "observation": "x", "confidence": "0.5"},
     'confidence must be a number from 0 to 1, not a string "0.5"'),
    ({"category": "timing", "observation": "x", "confidence": [True]},
     "confidence must be a number from 0 to 1, not an array [true]"),
    ({"category": "timing", "observation": "x", "confidence": None}, "confidence must be a number, not null"),
    ({"category": "timing", "observation": "x", "service": "no spaces please"}, "service must be"),
    ({"category": "timing", "observation": "x", "session_id": 3}, "unknown field(s): session_id"),
    ({"category": "timing", "observation": "x", "confidence": 10**400}, "confidence must be a finite number"),
    ({"category": "timing", "observation": "a\x00b"}, "must not contain NUL characters"),
])
def test_create_errors(client, body, message):
    response = client.post(API, json=body)
    assert response.status_code == 400, response.get_json()
    assert message in response.get_json()["error"]
    assert all_memories() == []


def test_every_refused_field_is_named_in_one_error(client):
    """A client fixes its request once, not once for each mistake."""
    response = client.post(API, json={"category": "misc", "service": "no spaces", "observation": " "})
    assert response.status_code == 400
    assert response.get_json()["error"] == (
        "category must be one of timing, dependency, behavior, remediation, maintenance, not 'misc'; "
        "service must be 1-100 letters, digits, '_' or '-' (memories of 'no spaces' are kept under 'no-spaces'); "
        "observation must not be empty")
    memory = add_memory("Takes 60s to start")
    response = client.put(f"{API}/{memory.id}", json={"category": "Timing", "active": "yes", "observation": "Slow"})
    assert response.status_code == 400
    assert response.get_json()["error"] == (
        "category must be one of timing, dependency, behavior, remediation, maintenance, not 'Timing'; "
        "active must be true or false")
    db.session.expire_all()
    assert [(m.observation, m.category) for m in all_memories()] == [("Takes 60s to start", "timing")]


def test_a_confidence_sent_as_text_is_refused_by_every_endpoint_that_takes_one(app, client):
    """JSON has numbers: a quoted one is a client's mistake the OpenAPI
    document's ``type: number`` refuses too, not a value to guess at."""
    memory = add_memory("Jellyfin starts slowly", service="jellyfin", category="timing", confidence=0.6)
    proposed = add_memory("Caddy waits for WireGuard", service="caddy", category="dependency")
    proposed.status = "proposed"
    db.session.commit()
    for method, url in ((client.put, f"{API}/{memory.id}"), (client.post, f"{API}/{proposed.id}/approve")):
        response = method(url, json={"confidence": "0.9"})
        assert response.status_code == 400, response.get_json()
        assert response.get_json()["error"] == 'confidence must be a number from 0 to 1, not a string "0.9"'
    db.session.expire_all()
    assert (memory.confidence, proposed.confidence, proposed.status) == (0.6, 0.7, "proposed")


def test_wrong_content_type_is_415(client):
    response = client.post(API, data="category=timing", content_type="application/x-www-form-urlencoded")
    assert response.status_code == 415


def test_list_filters(app, client):
    add_memory("Jellyfin starts slowly", service="jellyfin", category="timing")
    add_memory("Caddy after WireGuard", service="caddy", category="dependency", confidence=0.2, active=False)
    add_memory("DNS flaps during reconnects", service=None, category="remediation")

    def observations(query=""):
        return [m["observation"] for m in client.get(f"{API}?{query}").get_json()["memories"]]
    assert len(observations()) == 3
    assert observations("service=jellyfin") == ["Jellyfin starts slowly"]
    assert observations("service=general") == ["DNS flaps during reconnects"]
    # As the events' and cooldowns' filters read it: spaces around and case do not count.
    assert observations("service=%20Jellyfin%20") == ["Jellyfin starts slowly"]
    assert observations("service=general%20") == ["DNS flaps during reconnects"]
    assert len(observations("service=%20")) == 3   # no filter
    assert observations("category=dependency") == ["Caddy after WireGuard"]
    assert observations("category=Dependency%20") == ["Caddy after WireGuard"]   # as an event's level is read
    assert len(observations("status=APPROVED")) == 3
    assert observations("active=false") == ["Caddy after WireGuard"]
    assert sorted(observations("active=true")) == ["DNS flaps during reconnects", "Jellyfin starts slowly"]
    assert observations("q=wireguard") == ["Caddy after WireGuard"]
    assert observations("q=caddy") == ["Caddy after WireGuard"]          # the service matches too
    assert observations("q=100%25") == []                                 # % is literal
    body = client.get(f"{API}?limit=1&offset=1").get_json()
    assert body["total"] == 3 and len(body["memories"]) == 1


@pytest.mark.parametrize("query, message", [
    ("category=misc", "category must be one of"), ("active=maybe", "active must be true or false"),
    ("limit=0", "limit must be at least 1"), ("offset=x", "offset must be a whole number"),
])
def test_list_errors(client, query, message):
    response = client.get(f"{API}?{query}")
    assert response.status_code == 400 and message in response.get_json()["error"]


def test_partial_update(client):
    memory = add_memory("Takes 60s to start", confidence=0.7)
    body = client.put(f"{API}/{memory.id}", json={"pinned": True}).get_json()
    assert body["pinned"] is True and body["observation"] == "Takes 60s to start" and body["confidence"] == 0.7
    body = client.put(f"{API}/{memory.id}", json={"confidence": 0.1}).get_json()
    assert body["confidence"] == 0.1 and body["active"] is False
    body = client.put(f"{API}/{memory.id}", json={"confidence": 0.6, "observation": "Takes 90s"}).get_json()
    assert body["active"] is True and body["observation"] == "Takes 90s"
    body = client.put(f"{API}/{memory.id}", json={"active": False}).get_json()
    assert body["active"] is False and body["confidence"] == 0.6
    body = client.put(f"{API}/{memory.id}", json={"category": "behavior", "service": "redis"}).get_json()
    assert (body["category"], body["service"], body["observation"]) == ("behavior", "redis", "Takes 90s")
    assert client.put(f"{API}/{memory.id}", json={"service": ""}).get_json()["service"] is None


@pytest.mark.parametrize("body, message", [
    ({}, "nothing to change"),
    ({"status": "approved"}, "unknown field(s): status"),
    ({"category": "Timing"}, "category must be one of"),
    ({"active": "yes"}, "active must be true or false"),
    ({"pinned": 1}, "pinned must be true or false"),
    ({"confidence": None}, "nothing to change"),   # null means "leave as is"
])
def test_update_errors(client, body, message):
    memory = add_memory("Takes 60s to start")
    response = client.put(f"{API}/{memory.id}", json=body)
    assert response.status_code == 400 and message in response.get_json()["error"]


def test_reactivating_needs_confidence(client):
    memory = add_memory("Weak", confidence=0.2, active=False)
    response = client.put(f"{API}/{memory.id}", json={"active": True})
    assert response.status_code == 400 and "at least 0.3" in response.get_json()["error"]


def test_delete_and_unknown_ids(client):
    memory = add_memory("Obsolete")
    assert client.delete(f"{API}/{memory.id}").get_json() == {"deleted": [memory.id]}
    for method in ("get", "put", "delete"):
        response = getattr(client, method)(f"{API}/{memory.id}", json={"pinned": True} if method == "put" else None)
        assert response.status_code == 404 and f"memory {memory.id} not found" in response.get_json()["error"]
    # The history outlives the memory.
    history = client.get(f"{API}/{memory.id}/history").get_json()["history"]
    assert [h["action"] for h in history] == ["deleted"]
    assert client.get(f"{API}/999/history").status_code == 404


def test_bulk_delete(client):
    ids = [add_memory(f"m{i}", service=f"s{i}").id for i in range(4)]
    response = client.post(f"{API}/bulk-delete", json={"ids": ids[:3]})
    assert response.get_json() == {"deleted": ids[:3]}
    assert [m.id for m in all_memories()] == ids[3:]


@pytest.mark.parametrize("body, status, message", [
    ({"ids": []}, 400, "non-empty list"), ({"ids": "1,2"}, 400, "non-empty list"),
    ({"ids": [1, "2"]}, 400, "whole numbers"), ({"ids": [True]}, 400, "whole numbers"),
    ({"ids": [1, 999]}, 404, "memory 999 not found"), ({"id": [1]}, 400, "unknown field(s): id"),
    # Ids no database integer can hold name no memory (and must not reach the driver).
    ({"ids": [1, 2**63, -(2**70)]}, 404, f"memories {-(2**70)}, {2**63} not found"),
])
def test_bulk_delete_errors_delete_nothing(client, body, status, message):
    add_memory("Kept")
    response = client.post(f"{API}/bulk-delete", json=body)
    assert response.status_code == status and message in response.get_json()["error"]
    assert len(all_memories()) == 1


def test_history_and_context_endpoints(client):
    run = new_run()
    memory = add_memory("Takes 60s to start after restart", confidence=0.9, session_id=run.session_id)
    client.put(f"{API}/{memory.id}", json={"pinned": True})
    assert [h["action"] for h in client.get(f"{API}/{memory.id}/history").get_json()["history"]] == ["pinned"]
    context = client.get(f"{API}/context").get_json()
    assert context["memory_ids"] == [memory.id] and context["budget"] == 2000
    assert context["text"].startswith("## Operational Memory (1 of 1 memories")


def test_overflowing_numbers_are_400(client):
    """1e400 parses as infinity, and an integer of 400 digits overflows a float."""
    memory = add_memory("Kept")
    for raw in ('{"category": "timing", "observation": "x", "confidence": 1e400}',
                '{"category": "timing", "observation": "x", "confidence": 1' + "0" * 400 + '}'):
        response = client.post(API, data=raw, content_type="application/json")
        assert response.status_code == 400 and "finite number" in response.get_json()["error"]
    response = client.put(f"{API}/{memory.id}", data='{"confidence": -1e999}', content_type="application/json")
    assert response.status_code == 400
    assert [m.id for m in all_memories()] == [memory.id] and all_memories()[0].confidence == 0.7


@pytest.mark.parametrize("method", ["get", "put", "delete"])
def test_memory_ids_beyond_64_bits_are_404(client, method):
    response = getattr(client, method)(f"{API}/{2**64}", json={"pinned": True})
    assert response.status_code == 404 and "ids end at" in response.get_json()["error"]


def test_the_context_preview_holds_no_lock_while_plugins_name_the_services_in_trouble(tmp_path, monkeypatch):
    """The preview changes nothing (its decay is rolled back): an operator's
    edit, or a session's batch, is not held back while it asks the plugins
    which services are in trouble (a plugin may ask a monitoring system)."""
    app = make_app(tmp_path)
    worker = make_app(tmp_path).test_client()   # a dashboard worker: another process
    with app.app_context():
        memory = add_memory("Takes 60s to start")
        db.session.commit()
        memory_id = memory.id
    done_meanwhile = []
    real = store.relevant_services

    def slow_plugins(run):
        operator = Meanwhile(worker, "put", f"{API}/{memory_id}", {"confidence": 0.5})
        operator.send()
        done_meanwhile.append(not operator.thread.is_alive())
        answers.append(operator)
        return real(run)

    answers = []
    monkeypatch.setattr(store, "relevant_services", slow_plugins)
    preview = app.test_client().get(f"{API}/context")
    assert preview.status_code == 200 and preview.get_json()["memory_ids"] == [memory_id]
    assert answers[0].answer().status_code == 200
    assert done_meanwhile == [True]


def test_a_service_named_as_a_host_is_refused_naming_the_spelling_its_memories_are_kept_under(client):
    """A marker about db.lan is kept under db-lan: the operator adding one by hand is told so."""
    response = client.post(API, json={"category": "timing", "service": "DB.lan", "observation": "Slow at night"})
    assert response.status_code == 400
    assert response.get_json()["error"] == (
        "service must be 1-100 letters, digits, '_' or '-' (memories of 'DB.lan' are kept under 'db-lan')")
