"""The JSON API: sessions, events, health, and its errors."""
from __future__ import annotations

import io
import logging

import pytest
from sqlalchemy import func, select

from app.extensions import db
from app.models import Session
from app.timeutil import utcnow
from plugins.events.models import Event
from tests import streamlines as sl
from tests.conftest import make_app


def add_events(*specs):
    for level, service, message in specs:
        db.session.add(Event(level=level, service=service, message=message, created_at=utcnow()))
    db.session.commit()


def test_health(client):
    body = client.get("/api/v1/health").get_json()
    assert body["status"] == "ok" and body["database"] == "ok" and body["scheduler"] == "stopped"
    assert "plugins.events" in body["plugins"]


def test_trigger_then_get_then_list(client):
    response = client.post("/api/v1/sessions/trigger", json={"prompt": "Check the NAS", "start_tier": 2})
    assert response.status_code == 201
    created = response.get_json()
    assert created["status"] == "queued" and created["tier"] == 2 and created["trigger"] == "api"
    detail = client.get(f"/api/v1/sessions/{created['id']}").get_json()
    assert detail["prompt"] == "Check the NAS" and "response" in detail
    assert detail["created_at"].endswith("Z") and len(detail["created_at"]) == 20
    listing = client.get("/api/v1/sessions").get_json()
    assert listing["total"] == 1 and listing["sessions"][0]["id"] == created["id"]


def test_trigger_defaults_to_tier_one_without_a_prompt(client):
    created = client.post("/api/v1/sessions/trigger", json={}).get_json()
    assert created["tier"] == 1 and created["prompt"] is None


@pytest.mark.parametrize("body, message", [
    ({"start_tier": 4}, "start_tier must be 1, 2 or 3, not 4"),   # the field the client sent
    ({"start_tier": "2"}, 'start_tier must be 1, 2 or 3, not "2"'),   # as JSON writes it
    ({"start_tier": True}, "start_tier must be 1, 2 or 3, not true"),
    ({"prompt": 5}, "prompt must be a string"),
    ({"prompt": "x" * 20001}, "the limit is 20000"),
    ({"prompt": "half a pair \udcff"}, "prompt must not contain half of a surrogate pair"),
    ({"promt": "typo"}, "unknown field(s): promt; allowed: prompt, start_tier"),
    ({"tier": 2}, "unknown field(s): tier; allowed: prompt, start_tier"),   # the Run now form's name
    ({"k" * 5000: 1}, f"unknown field(s): {'k' * 40}; allowed"),   # a long name is cut, not echoed whole
    ([1, 2], "the body must be a JSON object, not an array"),
    ("prompt", "the body must be a JSON object, not a string"),
])
def test_trigger_rejects_bad_bodies(client, body, message):
    response = client.post("/api/v1/sessions/trigger", json=body)
    assert response.status_code == 400
    assert message in response.get_json()["error"]


def test_a_body_of_many_unknown_fields_names_the_first_ten_and_counts_the_rest(client):
    """Listed whole, a hundred thousand unknown keys would make the answer
    megabytes long; the first few (in order) name the mistake."""
    body = {f"f{n:06d}": 1 for n in range(100_000)}
    response = client.post("/api/v1/sessions/trigger", json=body)
    assert response.status_code == 400
    first = ", ".join(f"f{n:06d}" for n in range(10))
    assert response.get_json()["error"] == (f"unknown field(s): {first} and 99,990 more; "
                                            "allowed: prompt, start_tier")
    # Ten are named as before, with nothing added.
    ten = client.post("/api/v1/sessions/trigger", json={f"f{n:06d}": 1 for n in range(10)})
    assert ten.get_json()["error"] == f"unknown field(s): {first}; allowed: prompt, start_tier"


def test_trigger_needs_json(client):
    response = client.post("/api/v1/sessions/trigger", data="prompt=hi",
                           content_type="application/x-www-form-urlencoded")
    assert response.status_code == 415
    assert response.get_json()["error"].startswith("send a JSON body")
    # What is wrong with it, and where: not that it is no object.
    response = client.post("/api/v1/sessions/trigger", data='{"prompt": "x"', content_type="application/json")
    assert response.status_code == 400
    assert response.get_json()["error"] == ("the body is not valid JSON: Expecting ',' delimiter: "
                                            "line 1 column 15 (char 14)")
    response = client.post("/api/v1/sessions/trigger", data=b'{"prompt": "\xff"}', content_type="application/json")
    assert response.status_code == 400
    assert response.get_json()["error"].startswith("the body is not valid JSON: 'utf-8' codec can't decode byte 0xff")
    response = client.post("/api/v1/sessions/trigger", data=" ", content_type="application/json")
    assert response.status_code == 400 and response.get_json()["error"] == "the body is empty: send a JSON object"
    # A key given twice: Python's reader kept the last one, and the first was lost without a word
    response = client.post("/api/v1/sessions/trigger", data='{"prompt": "x", "start_tier": 1, "prompt": "y"}',
                           content_type="application/json")
    assert response.status_code == 400 and response.get_json()["error"] == (
        "the body is refused: the key 'prompt' is given twice in one object; give it once")
    assert client.get("/api/v1/sessions").get_json()["sessions"] == []


def test_pagination(client):
    for _ in range(5):
        client.post("/api/v1/sessions/trigger", json={})
    page = client.get("/api/v1/sessions?limit=2&offset=1").get_json()
    assert [s["id"] for s in page["sessions"]] == [4, 3]
    assert (page["total"], page["limit"], page["offset"]) == (5, 2, 1)


@pytest.mark.parametrize("query, message", [
    ("limit=0", "limit must be at least 1"), ("limit=501", "limit must be at most 500"),
    ("limit=ten", "limit must be a whole number"), ("offset=-1", "offset must be at least 0"),
    # Python's int() reads these; the API document says ASCII digits.
    ("limit=1_0", "limit must be a whole number"), ("limit=%2B5", "limit must be a whole number"),
    ("limit=%D9%A3", "limit must be a whole number"), ("limit=%205", "limit must be a whole number"),
    # More digits than Python's int() converts (4,300).
    ("limit=" + "9" * 5000, "limit must be at most 500"), ("offset=-" + "9" * 5000, "offset must be at least 0"),
])
def test_pagination_errors(client, query, message):
    for path in ("/api/v1/sessions", "/api/v1/events"):
        response = client.get(f"{path}?{query}")
        assert response.status_code == 400 and message in response.get_json()["error"]


def test_a_stop_that_comes_after_the_session_ended_is_a_conflict(client, monkeypatch):
    """The session ends between the stop's read and its update: 409, as for
    any session that has ended, not a 202 with the session completed."""
    from sqlalchemy import update
    running = Session(tier=1, trigger="api", status="running", created_at=utcnow(), started_at=utcnow())
    db.session.add(running)
    db.session.commit()
    read = db.session.get

    def read_then_the_runner_finishes(*args, **kwargs):
        found = read(*args, **kwargs)
        monkeypatch.undo()
        with db.engine.begin() as runner:
            runner.execute(update(Session).where(Session.id == running.id).values(status="completed"))
        return found
    monkeypatch.setattr(db.session, "get", read_then_the_runner_finishes)
    response = client.post(f"/api/v1/sessions/{running.id}/stop")
    assert response.status_code == 409 and "already ended (completed)" in response.get_json()["error"]
    assert db.session.get(Session, running.id, populate_existing=True).stop_requested is False


def test_stop_queued_running_and_finished(client):
    queued = client.post("/api/v1/sessions/trigger", json={}).get_json()["id"]
    response = client.post(f"/api/v1/sessions/{queued}/stop")
    assert response.status_code == 202
    assert response.get_json()["status"] == "stopped"
    assert "before it started" in response.get_json()["status_reason"]
    # Already ended: a conflict, not a silent success.
    response = client.post(f"/api/v1/sessions/{queued}/stop")
    assert response.status_code == 409 and "already ended" in response.get_json()["error"]

    running = Session(tier=1, trigger="api", status="running", created_at=utcnow(), started_at=utcnow())
    db.session.add(running)
    db.session.commit()
    response = client.post(f"/api/v1/sessions/{running.id}/stop")
    assert response.status_code == 202
    body = response.get_json()
    assert body["status"] == "running"  # the runner ends it at its next poll
    assert db.session.get(Session, running.id, populate_existing=True).stop_requested is True


def test_unknown_ids_and_routes_are_json_404(client):
    for method, path in (("get", "/api/v1/sessions/999"), ("post", "/api/v1/sessions/999/stop"),
                         ("get", "/api/v1/nothing-here")):
        response = getattr(client, method)(path)
        assert response.status_code == 404
        assert "error" in response.get_json()
    assert "session 999 not found" in client.get("/api/v1/sessions/999").get_json()["error"]


def test_wrong_method_is_json_405(client):
    response = client.delete("/api/v1/sessions")
    assert response.status_code == 405 and "error" in response.get_json()


def test_events_filters_and_order(client):
    add_events(("info", "jellyfin", "up"), ("warning", "postgres", "slow"), ("critical", "nas", "disk"),
               ("info", None, "all quiet"))
    body = client.get("/api/v1/events").get_json()
    assert [e["message"] for e in body["events"]] == ["all quiet", "disk", "slow", "up"]
    assert body["total"] == 4
    assert [e["message"] for e in client.get("/api/v1/events?level=info").get_json()["events"]] == ["all quiet", "up"]
    assert [e["message"] for e in client.get("/api/v1/events?level=warn").get_json()["events"]] == ["slow"]
    assert [e["message"] for e in client.get("/api/v1/events?service=nas").get_json()["events"]] == ["disk"]
    assert client.get("/api/v1/events?level=info&service=nas").get_json()["total"] == 0
    paged = client.get("/api/v1/events?limit=1&offset=1").get_json()
    assert [e["message"] for e in paged["events"]] == ["disk"] and paged["total"] == 4
    # An event about no one service is a "general" one, as a memory is.
    add_events(("warning", "general", "tagged general"))
    general = client.get("/api/v1/events?service=General").get_json()
    assert [e["message"] for e in general["events"]] == ["tagged general", "all quiet"] and general["total"] == 2


def test_events_page_by_id_skipping_and_repeating_none_while_events_arrive(client):
    add_events(*[("info", "web", f"event {n}") for n in range(1, 6)])
    ids = [e["id"] for e in client.get("/api/v1/events").get_json()["events"]]   # 5, 4, ... 1
    first = client.get("/api/v1/events?limit=2").get_json()
    add_events(("critical", "nas", "arrived meanwhile"))
    # By offset, the next page would repeat "event 4"; by id it goes on from the last one seen.
    back = client.get(f"/api/v1/events?limit=2&before={first['events'][-1]['id']}").get_json()
    assert [e["message"] for e in first["events"] + back["events"]] == [f"event {n}" for n in (5, 4, 3, 2)]
    assert back["total"] == 3
    # What arrived since the newest seen, the oldest of it first to be read: just newer than the id.
    since = client.get(f"/api/v1/events?limit=1&after={ids[2]}").get_json()
    assert [e["message"] for e in since["events"]] == ["event 4"] and since["total"] == 3
    newest = client.get(f"/api/v1/events?after={ids[0]}").get_json()
    assert [e["message"] for e in newest["events"]] == ["arrived meanwhile"]
    assert client.get("/api/v1/events?after=2147483647").get_json()["events"] == []
    for bad, said in (("before=1&after=1", "give before or after, not both"),
                      ("before=x", "before must be a whole number, not 'x'"), ("after=-1", "after must be at least 0"),
                      ("before=99999999999", "before must be at most")):
        answer = client.get(f"/api/v1/events?{bad}")
        assert answer.status_code == 400 and said in answer.get_json()["error"], bad


def test_events_service_filter_takes_a_name_as_the_page_does(client):
    """Pasted with a space, in any case: the Events page finds the events, so the API does too."""
    add_events(("warning", "postgres", "slow"), ("info", "web", "up"))
    for service in ("postgres", " Postgres ", "POSTGRES\t"):
        assert [e["message"] for e in client.get("/api/v1/events", query_string={"service": service})
                .get_json()["events"]] == ["slow"], service
        page = client.get("/events", query_string={"service": service}).get_data(as_text=True)
        assert "slow" in page and ">up<" not in page, service


def test_events_unknown_level_is_400(client):
    response = client.get("/api/v1/events?level=purple")
    assert response.status_code == 400 and "level must be one of info, warning, critical" in response.get_json()["error"]


# --- input no database (or process) can take: a precise 4xx, never a 500 -----

@pytest.mark.parametrize("method, path", [("get", "/api/v1/sessions/2147483648"),
                                          ("get", "/api/v1/sessions/9223372036854775808"),
                                          ("post", "/api/v1/sessions/99999999999999999999999/stop"),
                                          ("get", "/sessions/9223372036854775808"),
                                          # More digits than Python's int() converts (4,300).
                                          ("get", "/api/v1/sessions/" + "9" * 5000),
                                          ("post", "/api/v1/sessions/" + "9" * 5000 + "/stop"),
                                          ("get", "/sessions/" + "9" * 5000),
                                          ("delete", "/memories/" + "9" * 5000)])
def test_ids_beyond_32_bits_are_404(client, method, path):
    """Ids are INTEGER columns, 32 bits on PostgreSQL: a larger one names no row anywhere."""
    response = getattr(client, method)(path)
    assert response.status_code == 404
    if path.startswith("/api/"):
        assert "ids end at 2147483647" in response.get_json()["error"]
    # The largest id a row can have is looked up as any other.
    assert client.get("/api/v1/sessions/2147483647").get_json()["error"] == "session 2147483647 not found"


@pytest.mark.parametrize("path", ["/api/v1/sessions/\uff11", "/api/v1/sessions/\u0661", "/sessions/\uff11",
                                  "/api/v1/sessions/01", "/sessions/001"])
def test_an_id_in_other_digits_than_ascii_names_no_row(app, client, path):
    """A fullwidth or Arabic-Indic "1", or a 1 after zeros, is no spelling of session 1's URL."""
    with app.app_context():
        db.session.add(Session(id=1, tier=1, trigger="api", status="completed", created_at=utcnow()))
        db.session.commit()
    assert client.get(path.rsplit("/", 1)[0] + "/1").status_code == 200
    assert client.get(path).status_code == 404


def test_405_says_which_methods_the_path_offers(client):
    response = client.delete("/api/v1/sessions")
    assert response.status_code == 405 and "error" in response.get_json()
    assert set(response.headers["Allow"].split(", ")) == {"GET", "HEAD", "OPTIONS"}


def test_a_number_of_thousands_of_digits_is_read_as_any_other(client):
    """Leading zeros included: int() alone refuses a string of over 4,300 digits."""
    for _ in range(3):
        client.post("/api/v1/sessions/trigger", json={})
    page = client.get("/api/v1/sessions?limit=" + "0" * 5000 + "2").get_json()
    assert page["limit"] == 2 and [s["id"] for s in page["sessions"]] == [3, 2]
    answer = client.get("/api/v1/events?before=" + "9" * 5000)
    assert answer.status_code == 400 and answer.get_json()["error"] == "before must be at most 2147483647"


def test_offset_beyond_any_driver_is_400(client):
    response = client.get("/api/v1/sessions?offset=99999999999999999999")
    assert response.status_code == 400 and "offset must be at most 2147483647" in response.get_json()["error"]
    assert client.get("/api/v1/sessions?offset=2147483647").get_json()["sessions"] == []


@pytest.mark.parametrize("path", ["/api/v1/events?service=n%00as", "/api/v1/sessions?limit=5&x%00=1",
                                  "/api/v1/memories?q=%00"])
def test_nul_in_a_query_is_400(client, path):
    response = client.get(path)
    assert response.status_code == 400 and "must not contain NUL characters" in response.get_json()["error"]


@pytest.mark.parametrize("path, name", [("/api/v1/memories?q=caf%E9", "q"),   # "café" in Latin-1
                                        ("/api/v1/events?service=%ED%A0%80", "service"),   # half a surrogate pair
                                        ("/api/v1/sessions?limit=5&%FF=1", "%FF"),
                                        ("/memories?q=caf%E9", "q"), ("/events?level=info&service=%C3", "service")])
def test_a_query_that_is_not_utf8_is_400_naming_the_parameter(client, path, name):
    """Werkzeug keeps such bytes as their escapes, which no filter matches:
    an empty list came back, as if nothing matched."""
    client.post("/api/v1/memories", json={"category": "timing", "observation": "the café opens late"})
    response = client.get(path)
    said = f"query parameter {name!r} is not UTF-8 text"
    assert response.status_code == 400
    assert said in (response.get_json()["error"] if path.startswith("/api/") else response.get_data(as_text=True)
                    .replace("&#39;", "'"))
    assert client.get("/api/v1/memories?q=caf%C3%A9").get_json()["total"] == 1   # UTF-8, as sent by any browser


def test_a_query_of_raw_bytes_that_are_not_utf8_is_400(client):
    response = client.get("/api/v1/memories", environ_overrides={"QUERY_STRING": b"q=caf\xe9".decode("latin-1")})
    assert (response.status_code, response.get_json()) == (400, {"error": "query is not UTF-8 text (byte 5 is not)"})


@pytest.mark.parametrize("path", ["/events?service=%00", "/memories?q=a%00b", "/memories/inbox?x%00=1",
                                  "/sessions?status=%00"])
def test_nul_in_a_dashboard_address_is_400_and_nothing_is_queried(client, path, caplog):
    """As on the API: no filter can match a NUL, and the page does not echo one."""
    response = client.get(path)
    assert response.status_code == 400
    assert "must not contain NUL characters" in response.get_data(as_text=True)
    assert "\x00" not in response.get_data(as_text=True)
    assert "NUL character" not in " ".join(r.getMessage() for r in caplog.records if r.name == "app.portable_text")
    htmx = client.get(path, headers={"HX-Request": "true"})
    assert htmx.status_code == 400 and htmx.mimetype == "text/plain"


@pytest.mark.parametrize("path, message", [
    # /sessions has no status filter: the whole list, taken for the failed ones, was the answer.
    ("/api/v1/sessions?status=failed", "unknown query parameter(s): status; allowed: limit, offset"),
    ("/api/v1/events?Limit=5", "unknown query parameter(s): Limit; allowed: after, before, level, limit, offset, "
                               "service"),
    ("/api/v1/memories?servce=web&foo=1", "unknown query parameter(s): foo, servce; allowed: active, category, "
                                          "limit, offset, q, service, status"),
    ("/api/v1/stats?verbose=1", "unknown query parameter(s): verbose; this operation takes none"),
    ("/api/v1/events?limit=1&limit=2", "query parameter limit is given 2 times; give it once"),
    ("/api/v1/events?level=info&level=critical", "query parameter level is given 2 times; give it once"),
])
def test_a_query_parameter_an_operation_does_not_take_is_400(client, path, message):
    """Left out, it would answer an unfiltered list as if filtered."""
    response = client.get(path)
    assert (response.status_code, response.get_json()) == (400, {"error": message})


def test_a_body_sent_to_an_operation_that_takes_none_is_400_and_nothing_is_done(client):
    """A stop's ``{"force": true}``, a delete's ids, a read's filter: each was left out without a word."""
    from plugins.memory.models import Memory
    client.post("/api/v1/sessions/trigger", json={})
    memory = client.post("/api/v1/memories", json={"category": "timing", "observation": "backups run at 02:00"})
    memory_id = memory.get_json()["id"]
    refused = "this operation takes no request body (send none, or {}); nothing was done"
    for method, path, body in (("post", "/api/v1/sessions/1/stop", {"force": True}),
                               ("delete", f"/api/v1/memories/{memory_id}", {"ids": [memory_id]}),
                               ("delete", f"/api/v1/memories/{memory_id}", "yes"),
                               ("get", "/api/v1/stats", {"since": "1h"})):
        response = getattr(client, method)(path, json=body)
        assert (response.status_code, response.get_json()) == (400, {"error": refused}), (method, path, body)
    plain = client.delete(f"/api/v1/memories/{memory_id}", data="please", content_type="text/plain")
    assert plain.status_code == 400
    assert db.session.get(Session, 1).status == "queued" and db.session.get(Memory, memory_id) is not None
    # No body, or an empty object (what some clients send with every POST), is no body.
    assert client.post("/api/v1/sessions/1/stop", data=" {} ", content_type="application/json").status_code == 202
    assert client.delete(f"/api/v1/memories/{memory_id}").status_code == 200


def test_the_body_of_an_operation_that_takes_one_is_left_for_its_view_to_read(app):
    """The check for a body an operation does not take reads none where the
    operation takes one: an import of megabytes is read once, by its view."""
    from app.web.query_check import body_problem

    class Unread(io.RawIOBase):
        def readable(self):
            return True

        def readinto(self, buffer):
            raise AssertionError("the body was read")

    for method, path in (("POST", "/api/v1/memories/import"), ("PUT", "/api/v1/config"),
                         ("POST", "/api/v1/sessions/trigger")):
        with app.test_request_context(path, method=method, content_type="application/json", content_length=1000,
                                      environ_overrides={"wsgi.input": Unread()}):
            assert body_problem() is None, path
    with app.test_request_context("/api/v1/stats", data=b'{"since": "1h"}', content_type="application/json"):
        assert body_problem() == "this operation takes no request body (send none, or {}); nothing was done"


def test_a_query_parameter_is_checked_only_on_the_api_and_after_authentication(tmp_path, client):
    """The dashboard's page leaves one out; an unauthenticated caller
    learns nothing from a 400 (401 first); every parameter an operation
    documents is taken, empty too."""
    page = client.get("/events?Limit=5")
    assert page.status_code == 200
    assert client.get("/api/v1/health?_=1732900000").status_code == 200   # a monitor's cache-buster
    assert client.get("/api/v1/events?=x").get_json()["error"].startswith(
        "unknown query parameter(s): (a parameter with no name); allowed:")
    assert client.get("/api/v1/events?level=&service=&limit=&offset=&before=&after=").status_code == 200
    assert client.post("/api/v1/sessions/trigger?dry=1", json={}).status_code == 400
    assert db.session.query(Session).count() == 0   # nothing was done
    closed = make_app(tmp_path / "closed", CLAUDEOPS_API_TOKEN="t" * 32)
    with closed.app_context():
        assert closed.test_client().get("/api/v1/events?Limit=5").status_code == 401
        authorised = closed.test_client().get("/api/v1/events?Limit=5", headers={"Authorization": "Bearer " + "t" * 32})
        assert authorised.status_code == 400


def test_a_request_body_over_the_limit_is_413_and_nothing_is_done(client, caplog):
    from app.web import MAX_REQUEST_BYTES
    body = b'{"prompt": "' + b" " * MAX_REQUEST_BYTES + b'"}'
    response = client.post("/api/v1/sessions/trigger", data=body, content_type="application/json")
    assert response.status_code == 413
    assert response.get_json()["error"].startswith("Nothing was done: the request is larger than the 32 MiB")
    assert db.session.query(Session).count() == 0
    assert f"refused POST /api/v1/sessions/trigger: a body of {len(body)} bytes, over {MAX_REQUEST_BYTES} bytes" \
        in caplog.text
    # Just within the limit, the same request is read (and refused for what it says, not its size).
    response = client.post("/api/v1/sessions/trigger", data=b'{"prompt": "' + b"x" * 30_000 + b'"}',
                           content_type="application/json")
    assert response.status_code == 400 and "the limit is 20000" in response.get_json()["error"]


def test_a_body_over_the_limit_is_413_also_where_no_view_reads_it(client):
    """A GET, a Stop, a DELETE: each said 200 or 404 before, for a body the
    README says is refused, and a client could not tell it was not read."""
    from app.web import MAX_REQUEST_BYTES
    body = b" " * (MAX_REQUEST_BYTES + 1)
    for method, path in (("get", "/api/v1/stats"), ("post", "/api/v1/sessions/99999/stop"),
                         ("delete", "/api/v1/memories/99999"), ("get", "/events")):
        response = getattr(client, method)(path, data=body, content_type="application/json")
        assert response.status_code == 413, (method, path, response.status_code)
    assert client.get("/api/v1/stats", data=b" " * 1000, content_type="application/json").status_code == 200


def test_a_dashboard_upload_over_the_limit_is_413_on_a_page(client):
    from app.web import MAX_REQUEST_BYTES
    response = client.post("/memories/import", data={"file": (io.BytesIO(b"x" * (MAX_REQUEST_BYTES + 1)), "big.json")},
                           content_type="multipart/form-data")
    assert response.status_code == 413
    page = response.get_data(as_text=True)
    assert "larger than the 32 MiB this service takes" in page and "claudeops memories import FILE" in page
    assert "<nav" in page   # within the layout, the sidebar to go on from


def chunked(client, path: str, body: bytes, content_type: str):
    """``body`` sent as a client streaming it does: no Content-Length, Transfer-Encoding: chunked."""
    return client.post(path, input_stream=io.BytesIO(body), content_type=content_type,
                       headers={"Transfer-Encoding": "chunked"}, environ_overrides={"wsgi.input_terminated": True})


def test_a_body_of_unknown_length_past_the_limit_is_413_not_cut_short(client, caplog):
    """Read to the limit and taken for all there is, an import would be done in part."""
    from app.web import MAX_REQUEST_BYTES
    from plugins.memory.models import Memory
    first = "## jellyfin\n- [timing] Takes 60s to start (confidence: 0.8)\n"
    last = "## plex\n- [timing] Takes 90s to start (confidence: 0.8)\n"
    body = (first + "\n" * MAX_REQUEST_BYTES + last).encode()
    response = chunked(client, "/api/v1/memories/import", body, "text/markdown")
    assert response.status_code == 413, response.get_data(as_text=True)[:300]
    assert response.get_json()["error"].startswith("Nothing was done: the request is larger than the 32 MiB")
    assert db.session.query(Memory).count() == 0
    assert "refused POST /api/v1/memories/import: a body of no stated size" in caplog.text
    # Within the limit, the same way, it is read whole.
    response = chunked(client, "/api/v1/memories/import", (first + last).encode(), "text/markdown")
    assert response.status_code == 201 and response.get_json()["created"] == 2
    response = chunked(client, "/api/v1/sessions/trigger", b'{"prompt": "check the NAS"}', "application/json")
    assert response.status_code == 201, response.get_json()


@pytest.mark.parametrize("path, body, where", [
    ("/api/v1/memories", b'{"category": "timing", "service": "web", "observation": "x\\ud800y"}', "observation"),
    ("/api/v1/memories", b'{"category": "timing", "service": "web", "observation": "ok", "\\udfff": 1}',
     "a field's name"),
    ("/api/v1/config", b'{"CLAUDEOPS_INTERVAL": "\\ud800"}', "CLAUDEOPS_INTERVAL"),
    ("/api/v1/memories/import", b'{"format": "claudeops-memories", "version": 1, "memories": '
                                b'[{"category": "timing", "observation": "a\\udc00"}]}', "memories[0].observation"),
])
def test_half_a_surrogate_pair_in_a_body_is_400(client, path, body, where):
    """JSON may escape one ("\\ud800"); no database stores it."""
    method = client.put if path == "/api/v1/config" else client.post
    response = method(path, data=body, content_type="application/json")
    assert response.status_code == 400, response.get_data(as_text=True)
    assert f"{where} must not contain half of a surrogate pair" in response.get_json()["error"]


def test_an_import_with_a_number_too_long_to_read_is_400(client):
    body = b'{"format": "claudeops-memories", "version": ' + b"9" * 5000 + b', "memories": []}'
    response = client.post("/api/v1/memories/import", data=body, content_type="application/json")
    assert response.status_code == 400
    assert response.get_json()["error"] == "nothing imported: not an export: it holds a number too long to read"


def test_nul_in_a_body_is_400_and_nothing_is_queued(client):
    for body in ({"prompt": "check\x00 the NAS"}, {"prompt": "ok", "x\x00": 1}):
        response = client.post("/api/v1/sessions/trigger", json=body)
        assert response.status_code == 400 and "NUL" in response.get_json()["error"]
    assert db.session.query(Session).count() == 0


def test_nul_in_the_dashboards_run_now_is_refused(client):
    response = client.post("/sessions/run", data={"tier": "1", "prompt": "a\x00b"}, follow_redirects=True)
    assert "prompt must not contain NUL characters" in response.get_data(as_text=True)
    assert db.session.query(Session).count() == 0


def test_deeply_nested_json_is_400(client):
    deep = "[" * 100_000 + "]" * 100_000
    response = client.post("/api/v1/sessions/trigger", data=deep, content_type="application/json")
    assert response.status_code == 400 and "nested too deeply" in response.get_json()["error"]


# --- a client's value a refusal repeats: its start, never a megabyte of it ---

LONG = "x" * 1_048_576
CUT = f"'{'x' * 80}…' (1,048,576 characters)"


def test_a_value_a_message_repeats_is_whole_when_short_and_cut_when_long():
    from app.echoed import echoed
    assert echoed("x" * 80) == repr("x" * 80) and echoed("it's") == repr("it's")   # as messages always read
    assert echoed(LONG) == CUT
    assert echoed(LONG, quote=False) == f"{'x' * 80}… (1,048,576 characters)" and echoed("web", quote=False) == "web"
    assert echoed(9) == "9" and echoed(["x"] * 1000) == repr(["x"] * 1000)[:80] + "…"


@pytest.mark.parametrize("path, said", [
    ("/api/v1/events?before=", "before must be a whole number, not "),
    ("/api/v1/events?level=", "level must be one of info, warning, critical, not "),
    ("/api/v1/cooldowns?action=", "action must be one of restart, redeployment, not "),
    ("/api/v1/cooldowns?outcome=", "outcome must be one of "),
    ("/api/v1/memories?active=", "active must be true or false, not "),
    ("/api/v1/memories?category=", "category must be one of "),
    ("/api/v1/memories?status=", "status must be one of "),
    ("/api/v1/memories/export?format=", "format must be json or markdown, not "),
])
def test_a_long_query_value_is_400_naming_the_parameter_and_repeating_only_its_start(client, path, said):
    response = client.get(path + LONG)
    error = response.get_json()["error"]
    assert response.status_code == 400 and error.startswith(said) and error.endswith(f"not {CUT}"), error[:200]
    assert len(error) < 300


@pytest.mark.parametrize("method, path, body, said", [
    ("post", "/api/v1/memories", {"category": LONG, "observation": "x"}, "category must be one of "),
    ("post", "/api/v1/memories", {"category": "timing", "observation": "x", "service": "a" + "@" * 1_048_575},
     "(memories of 'a@@@"),
    ("put", "/api/v1/config", {"CLAUDEOPS_TIER1_MODEL": LONG}, f"CLAUDEOPS_TIER1_MODEL={CUT}: must be a model name"),
    ("put", "/api/v1/config", {LONG: 1}, f"{'x' * 80}… (1,048,576 characters) is no setting of this service"),
    ("post", "/api/v1/memories/import", {"format": "claudeops-memories", "version": 1, "memories": [
        {"category": "timing", "observation": "x", "created_at": LONG}]},
     f"nothing imported: memory 1: {CUT} is not an ISO 8601 timestamp"),
])
def test_a_long_json_field_is_400_naming_it_and_repeating_only_its_start(client, method, path, body, said):
    response = getattr(client, method)(path, json=body)
    error = response.get_json()["error"]
    assert response.status_code == 400 and said in error and "(1,048,576 characters)" in error, error[:200]
    assert len(error) < 1_000


def test_a_trigger_sent_again_with_its_idempotency_key_queues_one_session(client):
    """A retry after a lost answer: the same session, as it is now (200)."""
    key = {"Idempotency-Key": "deploy-check:2026-11-29T10:00"}
    first = client.post("/api/v1/sessions/trigger", json={"prompt": "Check the NAS", "start_tier": 2}, headers=key)
    again = client.post("/api/v1/sessions/trigger", json={"start_tier": 2, "prompt": "Check the NAS"}, headers=key)
    assert (first.status_code, again.status_code) == (201, 200)
    assert again.get_json() == first.get_json()
    assert db.session.scalar(select(func.count()).select_from(Session)) == 1
    # The key sent with another request is no repeat.
    other = client.post("/api/v1/sessions/trigger", json={"prompt": "Check the router", "start_tier": 2}, headers=key)
    assert other.status_code == 422
    assert other.get_json()["error"] == (f"Idempotency-Key 'deploy-check:2026-11-29T10:00' queued session "
                                         f"#{first.get_json()['id']} with another start_tier or prompt; send a new "
                                         "key for a new session")
    assert client.post("/api/v1/sessions/trigger", json={"start_tier": 9}, headers=key).status_code == 400
    # Another key, or none, queues another.
    assert client.post("/api/v1/sessions/trigger", json={}, headers={"Idempotency-Key": "k2"}).status_code == 201
    assert client.post("/api/v1/sessions/trigger", json={}).status_code == 201
    assert client.post("/api/v1/sessions/trigger", json={}).status_code == 201
    assert db.session.scalar(select(func.count()).select_from(Session)) == 4


def test_a_key_or_prompt_that_looks_like_a_secret_is_repeated_all_the_same(client):
    """What is stored is redacted: the key is kept as its digest, and the
    prompt compared as it is stored."""
    for key, prompt in (("token:abc12345", "Check the NAS"), ("retry-7", "Use password=hunter2hunter2 there")):
        first = client.post("/api/v1/sessions/trigger", json={"prompt": prompt}, headers={"Idempotency-Key": key})
        again = client.post("/api/v1/sessions/trigger", json={"prompt": prompt}, headers={"Idempotency-Key": key})
        assert (first.status_code, again.status_code) == (201, 200), again.get_json()
        assert again.get_json()["id"] == first.get_json()["id"]
    other = client.post("/api/v1/sessions/trigger", json={}, headers={"Idempotency-Key": "token:xyz98765"})
    assert other.status_code == 201   # another key of that shape is another key
    assert db.session.scalar(select(func.count()).select_from(Session)) == 3


@pytest.mark.parametrize("key", ["", "has space", "k" * 81, "ünïcode", "semi;colon"])
def test_an_idempotency_key_out_of_its_shape_is_a_400(client, key):
    answer = client.post("/api/v1/sessions/trigger", json={}, headers={"Idempotency-Key": key})
    assert answer.status_code == 400
    assert answer.get_json()["error"].startswith("Idempotency-Key must be 1 to 80 letters, digits")


def test_two_triggers_with_one_key_at_the_same_moment_queue_one_session(app, monkeypatch):
    """The second looks for the first's session once the first has written
    it (app/write_lock.py): it finds it, and answers with it."""
    import threading
    from app.sessions import control
    answers = []

    def send():
        answers.append(app.test_client().post("/api/v1/sessions/trigger", json={},
                                              headers={"Idempotency-Key": "same"}).status_code)
    other = threading.Thread(target=send)
    enqueue = control.enqueue

    def the_other_between_look_and_write(**kwargs):
        if other.ident is None:
            other.start()
            other.join(timeout=1)   # done at once, unless this call holds the lock
        return enqueue(**kwargs)

    monkeypatch.setattr(control, "enqueue", the_other_between_look_and_write)
    send()
    other.join(timeout=30)
    assert sorted(answers) == [200, 201]
    db.session.remove()
    assert db.session.scalar(select(func.count()).select_from(Session)) == 1


def test_an_event_message_is_kept_to_the_length_the_document_gives(client, fake_cli, run_session_now, caplog):
    said = "Slow queries: " + "x" * 5000
    fake_cli(sl.steps(sl.init(), sl.text(f"[EVENT:warning:postgres] {said}"), sl.text(f"[EVENT:info:web] {said}"),
                      sl.result()))
    with caplog.at_level(logging.DEBUG, logger="plugins.events"):
        run_session_now()
    cut = [r for r in caplog.records if "message of 5,014 characters is kept to its first 2,000" in r.getMessage()]
    assert [r.levelno for r in cut] == [logging.WARNING, logging.DEBUG]   # once a session as a warning
    document = client.get("/api/v1/openapi.json").get_json()
    most = document["components"]["schemas"]["Event"]["properties"]["message"]["maxLength"]
    events = client.get("/api/v1/events").get_json()["events"]
    assert most == 2000 and [event["message"] for event in events] == [said[:most]] * 2
