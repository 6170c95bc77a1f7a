"""Dashboard pages through the test client: rendering, escaping, HTMX
fragments, Run now, Stop and CSRF."""
from __future__ import annotations

import re
import subprocess
import sys

import pytest
from markupsafe import escape
from sqlalchemy import func, select

from app import process_identity
from app.extensions import db
from app.models import Session, SessionActivity
from app.timeutil import isoformat, utcnow
from plugins.events.models import Event
from tests.conftest import HTMX, make_app
from tests.support.pages import message_cells, pager_links

SCRIPT = "<script>alert('x')</script>"


def add_session(**fields) -> Session:
    values = dict(tier=1, trigger="api", status="completed", created_at=utcnow())
    values.update(fields)
    session = Session(**values)
    db.session.add(session)
    db.session.commit()
    return session


def test_sidebar_lists_pages_in_order(client):
    html = client.get("/").get_data(as_text=True)
    nav = html[html.index('<nav class="sidebar"'):html.index("</nav>")]
    pages, foot = nav.split('class="sidebar-foot"')
    assert re.findall(r'>([A-Za-z ]+)</a></li>', pages) == ["Overview", "Sessions", "Events", "Memories", "Cooldowns"]
    assert re.findall(r'>([A-Za-z ]+)</a></li>', foot) == ["Config"]
    assert 'aria-current="page"' in nav.split("Sessions")[0]


def test_no_asset_comes_from_another_host(client):
    html = client.get("/").get_data(as_text=True)
    assert re.findall(r'(?:src|href)="(https?:)?//', html) == []
    assert client.get("/static/htmx.min.js").status_code == 200


def test_overview_cards(client):
    add_session(status="failed")
    db.session.add(Event(level="critical", service="nas", message="disk", created_at=utcnow()))
    db.session.commit()
    html = client.get("/").get_data(as_text=True)
    for title in ("Sessions", "Running / queued", "Last session", "Failed in 24 h", "Events in 24 h"):
        assert title in html
    assert "1 critical, 0 warning" in html


def test_overview_cards_poll_themselves_as_a_fragment(client):
    """The page's cards are a block that fetches itself again; the poll gets
    the cards alone, with what changed since."""
    full = client.get("/")
    assert "HX-Request" in full.headers["Vary"]
    page = full.get_data(as_text=True)
    assert "<html" in page and re.search(r'id="overview-cards"[^>]*hx-trigger="every 5s"', page)
    add_session(status="running")
    fragment = client.get("/", headers={"HX-Request": "true"}).get_data(as_text=True)
    assert "<html" not in fragment and fragment.lstrip().startswith("<section id=\"overview-cards\"")
    assert "a session is running" in fragment and "<nav" not in fragment


def test_sessions_page_full_and_fragment(client):
    add_session(prompt=SCRIPT)
    full = client.get("/sessions")
    assert "HX-Request" in full.headers["Vary"]
    page = full.get_data(as_text=True)
    assert "<html" in page and 'hx-trigger="every 3s"' in page and "Run now" in page
    fragment = client.get("/sessions", headers={"HX-Request": "true"}).get_data(as_text=True)
    assert "<html" not in fragment and "<table" in fragment
    restored = client.get("/sessions", headers={"HX-Request": "true", "HX-History-Restore-Request": "true"})
    assert "<html" in restored.get_data(as_text=True) and "HX-History-Restore-Request" in restored.headers["Vary"]
    assert SCRIPT not in page and "&lt;script&gt;" in page


def test_a_page_number_past_every_row_is_an_empty_page_not_an_error(client):
    from tests.memory_helpers import add_memory
    add_session(prompt="newest")
    add_memory("Takes 60s to start")
    for path in ("/sessions", "/memories"):
        for page in ("1", "2", str(2**31), str(10**20), str(2**63), "-5", "abc", "²"):
            for headers in ({}, {"HX-Request": "true"}):
                response = client.get(f"{path}?page={page}", headers=headers)
                assert response.status_code == 200, (path, page, headers)
        first = client.get(f"{path}?page=abc").get_data(as_text=True)
        assert ("#1" if path == "/sessions" else "Takes 60s to start") in first   # not a number: the first page
        far = client.get(f"{path}?page={10**20}").get_data(as_text=True)
        assert "Takes 60s to start" not in far and "/sessions/1" not in far


@pytest.mark.parametrize("path, said", [
    ("/events?level=bogus", ["the level 'bogus', none of info, warning, critical: every level is shown"]),
    ("/events?before=abc", ["before='abc', which is not a number; the page is shown without it"]),
    ("/events?before=-5", ["before=-5, which is below every id; the page is shown without it"]),
    ("/memories?page=0", ["page=0, which is no page (the first is 1); the first page is shown"]),
    ("/sessions?page=-3", ["page=-3, which is no page (the first is 1); the first page is shown"]),
    ("/memories?category=zzz&status=bogus&page=2x", [
        "the category 'zzz', none of timing, dependency, behavior, remediation, maintenance: every category is shown",
        "the status 'bogus', none of active, inactive, proposed, rejected: every status is shown",
        "page='2x', which is not a number; the page is shown without it"]),
    ("/cooldowns?action=reboot&outcome=maybe", [
        "the action 'reboot', none of restart, redeployment: every action is shown",
        "the outcome 'maybe', none of pending, success, failure, denied: every outcome is shown"]),
    # Quoted as written (the filters take any case), so that it can be found in the link.
    ("/memories?category=Timinq&status=ACTIV", [
        "the category 'Timinq', none of timing, dependency, behavior, remediation, maintenance: every category is shown",
        "the status 'ACTIV', none of active, inactive, proposed, rejected: every status is shown"]),
    ("/cooldowns?outcome=Maybe", [
        "the outcome 'Maybe', none of pending, success, failure, denied: every outcome is shown"]),
    ("/sessions?page=%3Cscript%3E", ["page='<script>', which is not a number; the page is shown without it"]),
    ("/sessions/1?before=x", ["before='x', which is not a number; the page is shown without it"]),
    ("/sessions/1?before=-5", ["before=-5, which is below every id; the page is shown without it"]),
    ("/sessions/1?before=0", ["before=0, which is below every id; the page is shown without it"]),
    ("/events?before=1&after=1", ["after=1, given with before=1: the page is shown by before"]),
])
def test_a_filter_or_page_the_dashboard_does_not_know_is_said_to_be_ignored(client, path, said):
    """A stale or edited link still shows its page, without the value it
    cannot use, and says so instead of passing the whole list off as filtered."""
    from tests.memory_helpers import add_memory
    add_session(prompt="newest")
    add_memory("Takes 60s to start")
    html = client.get(path).get_data(as_text=True)
    notices = re.findall(r'<p class="flash" role="status" data-ignored>(.*?)</p>', html)
    assert notices == [str(escape(f"Ignored {message}.")) for message in said]
    assert "Takes 60s to start" in client.get("/memories?category=zzz").get_data(as_text=True)
    for good in ("/events?level=warn", "/memories?category=timing&page=1", "/memories?status=ACTIVE",
                 "/cooldowns?action=restart"):
        assert "data-ignored" not in client.get(good).get_data(as_text=True), good


def test_the_sessions_list_past_its_last_page_says_so_and_leads_back(client):
    add_session(prompt="newest")
    for headers in ({}, {"HX-Request": "true"}):   # the page, and its poll
        far = " ".join(client.get("/sessions?page=999", headers=headers).get_data(as_text=True).split())
        assert "No sessions yet" not in far
        assert 'No sessions on this page (there is 1). <a href="/sessions">Go to the first page</a>' in far
    empty = client.get("/sessions?page=1")
    assert empty.status_code == 200 and "No sessions on this page" not in empty.get_data(as_text=True)


def test_past_the_last_page_newer_leads_to_the_last_page(client):
    from tests.memory_helpers import add_memory
    from plugins.memory.views import PAGE_SIZE as MEMORY_PAGE
    from app.web.sessions import PAGE_SIZE as SESSION_PAGE
    for n in range(SESSION_PAGE + 1):
        add_session(prompt=f"request {n}")
    far = client.get("/sessions?page=999").get_data(as_text=True)
    assert re.findall(r'<a href="([^"]+)">← newer</a>', far) == ["/sessions?page=2"]
    assert "page 999 of" not in far and "page 2 of 2" in client.get("/sessions?page=2").get_data(as_text=True)
    for n in range(MEMORY_PAGE + 1):
        add_memory(f"Observation {n}")
    for headers in ({}, {"HX-Request": "true"}):   # the page, and its poll
        far = " ".join(client.get("/memories?page=999", headers=headers).get_data(as_text=True).split())
        assert "No memories yet" not in far and f"No memories on this page (there are {MEMORY_PAGE + 1})." in far
        assert re.findall(r'hx-get="([^"]+)"[^>]*>← newer', far) == ["/memories?page=2"]
        assert "page 999" not in far
    filtered = " ".join(client.get("/memories?page=999&q=Observation").get_data(as_text=True).split())
    assert f"No memories on this page (there are {MEMORY_PAGE + 1} matching these filters)." in filtered

def test_a_memories_refresh_past_the_last_page_shows_the_last_page(client):
    """The table's refresh after a change (memories.js asks with past_end=last)
    shows the last page when its own is past it now (its last rows deleted),
    and puts that page in the address; a poll or a link still shows the page asked for."""
    from tests.memory_helpers import add_memory
    from plugins.memory.views import PAGE_SIZE as MEMORY_PAGE
    for n in range(MEMORY_PAGE + 1):
        add_memory(f"Observation {n}", service="web" if n else "db")
    refresh = client.get("/memories?page=3&past_end=last&service=web", headers=HTMX)
    html = refresh.get_data(as_text=True)
    assert "No memories on this page" not in html and html.count('class="memory-row') == MEMORY_PAGE
    assert 'hx-get="/memories?page=1"' in html   # its polls ask for that page from now on
    assert refresh.headers["HX-Replace-Url"] == "/memories?service=web"
    refresh = client.get("/memories?page=3&past_end=last", headers=HTMX)
    assert refresh.get_data(as_text=True).count('class="memory-row') == 1
    assert refresh.headers["HX-Replace-Url"] == "/memories?page=2"
    # A page that is there stays, and the address with it.
    kept = client.get("/memories?page=2&past_end=last", headers=HTMX)
    assert kept.get_data(as_text=True).count('class="memory-row') == 1 and "HX-Replace-Url" not in kept.headers
    poll = client.get("/memories?page=3", headers=HTMX).get_data(as_text=True)
    assert "No memories on this page" in poll


def test_bulk_takes_only_ascii_digits_as_ids(client):
    """One value that names no memory changes none: the others were deleted without it, without a word."""
    from tests.memory_helpers import add_memory, all_memories
    memory = add_memory("Takes 60s to start")
    for ids in (["²"], ["\u0661"], ["9" * 5000], ["1.0"], [" 1"], [str(memory.id), "abc"],   # \u0661: Arabic-Indic one
                ["99999999999", str(memory.id)], [str(memory.id), ""]):
        response = client.post("/memories/bulk", data={"ids": ids, "action": "delete"})
        assert response.status_code == 200, ids
        bad = next(raw for raw in ids if raw != str(memory.id))
        assert f"Nothing changed: {escape(repr(bad[:40]))} names no memory." in response.get_data(as_text=True), ids
    assert [m.id for m in all_memories()] == [memory.id]
    assert "Select at least one memory first." in client.post("/memories/bulk", data={"action": "delete"}).get_data(
        as_text=True)
    response = client.post("/memories/bulk", data={"ids": [str(memory.id)], "action": "delete"})
    assert response.status_code == 200 and all_memories() == []


@pytest.mark.parametrize("body, where", [
    (b"service=web&category=timing&observation=\xff\xfeabc", "byte 40 of the body is not"),
    (b"service=web&category=timing&observation=%FF%FEabc", "a percent-escaped field is not"),
])
def test_a_form_that_is_not_utf8_is_refused_as_such_and_nothing_is_stored(tmp_path, body, where):
    """Not read as a form without its fields ("category must be one of …")
    nor stored as the escape's own characters; checked before the CSRF
    check, which reads the form's fields first."""
    from tests.memory_helpers import all_memories
    app = make_app(tmp_path, WTF_CSRF_ENABLED=True)
    client = app.test_client()
    page = client.get("/memories").get_data(as_text=True)
    token = re.search(r'"X-CSRFToken": "([^"]+)"', page).group(1)
    in_form = f"csrf_token={token}&".encode()
    for headers, sent in (({}, in_form + body), ({**HTMX, "X-CSRFToken": token}, body)):
        response = client.post("/memories", data=sent, content_type="application/x-www-form-urlencoded",
                               headers={"Origin": "http://localhost", **headers})
        assert response.status_code == 400
        at = where.replace("byte 40", f"byte {40 + len(in_form)}") if not headers else where
        assert f"Nothing was changed: the form was not sent as UTF-8 text ({at})" in response.get_data(as_text=True)
    with app.app_context():
        assert all_memories() == []
    sent = client.post("/memories", data=in_form + b"service=web&category=timing&observation=Caf%C3%A9+opens+late",
                       content_type="application/x-www-form-urlencoded", headers={"Origin": "http://localhost"})
    assert sent.status_code < 400
    with app.app_context():
        assert [m.observation for m in all_memories()] == ["Café opens late"]
    # A page asked for with a body: nothing reads it.
    assert client.get("/memories", data=body, content_type="application/x-www-form-urlencoded").status_code == 200


def test_a_multipart_form_field_that_is_not_utf8_is_refused_as_a_form_sent_plain_is(tmp_path):
    """werkzeug decodes a multipart field with U+FFFD for each byte it
    cannot read: the observation (or a Run now request) would be stored
    changed, without a word. Its files are the views' to read."""
    import io
    from tests.memory_helpers import all_memories
    app = make_app(tmp_path)
    client = app.test_client()
    response = client.post("/memories", content_type="multipart/form-data; boundary=B",
                           input_stream=io.BytesIO(
                               b"--B\r\nContent-Disposition: form-data; name=\"category\"\r\n\r\ntiming\r\n"
                               b"--B\r\nContent-Disposition: form-data; name=\"observation\"\r\n\r\ncaf\xe9 late\r\n"
                               b"--B--\r\n"))
    assert response.status_code == 400
    assert ("Nothing was changed: the form was not sent as UTF-8 text (the field &#39;observation&#39; is not). A "
            "browser sends it so; a script must send each field of a multipart form as UTF-8.") in \
        response.get_data(as_text=True)
    sent = client.post("/memories", data={"category": "timing", "observation": "Café opens late"},
                       content_type="multipart/form-data")
    assert sent.status_code < 400
    with app.app_context():
        assert [m.observation for m in all_memories()] == ["Café opens late"]
    # An upload's body (over 1 MiB) is not read twice: its fields are judged as werkzeug decoded them.
    big = (b"--B\r\nContent-Disposition: form-data; name=\"observation\"\r\n\r\ncaf\xe9 late\r\n"
           b"--B\r\nContent-Disposition: form-data; name=\"file\"; filename=\"x.md\"\r\n\r\n" + b"x" * 1_100_000
           + b"\r\n--B--\r\n")
    response = client.post("/memories/import", content_type="multipart/form-data; boundary=B",
                           input_stream=io.BytesIO(big), headers={"Content-Length": str(len(big))})
    assert response.status_code == 400 and "the field &#39;observation&#39; holds U+FFFD" in \
        response.get_data(as_text=True)
    # A boundary werkzeug reads from RFC 2231's form is no 500.
    odd = client.post("/memories", content_type="multipart/form-data; boundary*=UTF-8''%E2%82%AC",
                      input_stream=io.BytesIO(b"--\xe2\x82\xac\r\n\r\nx\r\n--\xe2\x82\xac--\r\n"))
    assert odd.status_code < 500
    # A file's bytes are not a field's: the import reads (and judges) them itself.
    upload = client.post("/memories/import", data={"file": (io.BytesIO(b"- [timing] caf\xe9"), "old.md")},
                         content_type="multipart/form-data", follow_redirects=True)
    assert "Nothing imported: old.md is not UTF-8 text." in upload.get_data(as_text=True)


def test_session_detail_escapes_everything_the_agent_wrote(client):
    session = add_session(response=SCRIPT, status_reason=SCRIPT, system_prompt=SCRIPT)
    for kind in ("text", "tool_use", "tool_result", "marker", "warning"):
        db.session.add(SessionActivity(session_id=session.id, kind=kind, title=SCRIPT, body=SCRIPT, created_at=utcnow()))
    db.session.commit()
    html = client.get(f"/sessions/{session.id}").get_data(as_text=True)
    assert SCRIPT not in html
    assert html.count("&lt;script&gt;") >= 8


def test_direction_controls_the_agent_wrote_are_shown_as_code_points(client):
    """An override that would show "rm -rf /data" as "rm -rf /atad", or hide where a
    command ends, is spelt out wherever the dashboard shows the agent's text."""
    text = "ran \u202erm -rf /data\u202c \u2067ok\u2069"
    spelt = "ran ⟨U+202E⟩rm -rf /data⟨U+202C⟩ ⟨U+2067⟩ok⟨U+2069⟩"
    session = add_session(response=text, prompt=text)
    db.session.add(SessionActivity(session_id=session.id, kind="tool_use", title="Bash", body=text, created_at=utcnow()))
    db.session.add(Event(level="warning", service="nas", message=text, session_id=session.id, created_at=utcnow()))
    db.session.commit()
    for path in (f"/sessions/{session.id}", "/events", "/sessions"):
        html = client.get(path).get_data(as_text=True)
        assert spelt in html, path
        assert not re.search("[\u202a-\u202e\u2066-\u2069]", html), path


def test_session_detail_shows_activity_kinds_and_badges(client):
    session = add_session(status="running", started_at=utcnow())
    for kind, title, body in (("text", None, "Checking [EVENT:info:web] up"), ("tool_use", "Bash", '{"command": "ls"}'),
                              ("tool_result", None, "file.txt"), ("marker", "event:info:web", "up")):
        db.session.add(SessionActivity(session_id=session.id, kind=kind, title=title, body=body, created_at=utcnow()))
    db.session.commit()
    html = client.get(f"/sessions/{session.id}").get_data(as_text=True)
    assert re.findall(r'class="act act-(\w+)"', html) == ["text", "tool_use", "tool_result", "marker"]
    assert '<span class="badge marker">event:info:web</span>' in html
    assert 'id="live-poller"' in html and 'hx-trigger="every 2s"' in html
    assert 'id="stop-button"' in html
    assert f'data-confirm="Stop session #{session.id}? The agent is ended where it is."' in html
    queued = add_session(status="queued")
    html = client.get(f"/sessions/{queued.id}").get_data(as_text=True)
    assert f'data-confirm="Stop session #{queued.id} before it starts?"' in html


@pytest.mark.parametrize("fragment, page", [
    ("/sessions/{session}/live?after=0", "/sessions/{session}"),
    ("/memories/{memory}/row", "/memories/{memory}"),
    ("/memories/{memory}/edit", "/memories/{memory}"),
    ("/memories/{memory}/review", "/memories/{memory}"),
    ("/memories/{memory}/inbox-row", "/memories/{memory}"),
    ("/memories/inbox", "/memories"),
])
def test_a_fragment_opened_by_hand_sends_to_its_page(client, fragment, page):
    """A new tab or a bookmark gets the page the piece belongs to, with the
    layout, not a bare row or form; htmx still gets the piece."""
    from tests.memory_helpers import add_memory
    session = Session(trigger="manual", tier=1, status="completed", started_at=utcnow(), ended_at=utcnow())
    db.session.add(session)
    memory = add_memory("Takes 60s to start after restart")
    db.session.commit()
    ids = {"session": session.id, "memory": memory.id}
    response = client.get(fragment.format(**ids))
    assert response.status_code == 302 and response.headers["Location"] == page.format(**ids)
    whole = client.get(page.format(**ids))
    assert whole.status_code == 200 and "<nav" in whole.get_data(as_text=True)
    piece = client.get(fragment.format(**ids), headers=HTMX)
    assert piece.status_code == 200 and "<nav" not in piece.get_data(as_text=True)


@pytest.mark.parametrize("after", ["abc", "1_0", "\u0663", " 1", "+1", "1.0", "9" * 5000])
def test_live_fragment_refuses_an_after_that_is_no_plain_number(client, after):
    """Read by int(), "1_0" or other scripts' digits would poll from an id
    the page never showed, and "abc" from the start, appending the whole
    log again; refused, the page keeps what it has."""
    session = add_session(status="running", started_at=utcnow())
    db.session.add(SessionActivity(session_id=session.id, kind="text", body="one", created_at=utcnow()))
    db.session.commit()
    live = client.get(f"/sessions/{session.id}/live", query_string={"after": after}, headers=HTMX)
    assert live.status_code == 400
    body = live.get_data(as_text=True)
    assert "after" in body and "one" not in body
    assert len(body) < 2000   # the value is not echoed whole


def test_live_fragment_appends_only_new_activity_and_stops_polling_when_done(client):
    session = add_session(status="running", started_at=utcnow())
    first = SessionActivity(session_id=session.id, kind="text", body="one", created_at=utcnow())
    db.session.add(first)
    db.session.commit()
    db.session.add(SessionActivity(session_id=session.id, kind="text", body="two", created_at=utcnow()))
    db.session.commit()
    live = client.get(f"/sessions/{session.id}/live?after={first.id}", headers=HTMX).get_data(as_text=True)
    assert "two" in live and ">one<" not in live
    assert 'hx-swap-oob="beforeend:#activity"' in live
    assert f"after={first.id + 1}" in live and 'hx-trigger="every 2s"' in live

    session.status, session.response = "completed", "All done"
    db.session.commit()
    done = client.get(f"/sessions/{session.id}/live?after={first.id + 1}", headers=HTMX).get_data(as_text=True)
    assert "every 2s" not in done and "All done" in done and "Stop" not in done


def test_the_live_poll_shows_an_escalation_as_it_is_queued_and_follows_the_chain(client):
    from datetime import timedelta
    session = add_session(status="running", started_at=utcnow())
    page = client.get(f"/sessions/{session.id}").get_data(as_text=True)
    assert '<div id="chain">' in page and "Escalation chain" not in page   # the place the poll fills
    # It ends and escalates: the poll shows the child, and goes on while the chain runs.
    session.status, session.ended_at = "completed", utcnow()
    child = add_session(status="queued", trigger="escalation", tier=2, parent_id=session.id,
                        escalation_reason="postgres is down")
    live = client.get(f"/sessions/{session.id}/live?after=0", headers=HTMX).get_data(as_text=True)
    chain = live[live.index('<div id="chain" hx-swap-oob="true">'):]
    assert "Escalation chain" in chain and f'href="/sessions/{child.id}">#{child.id}</a>' in chain
    assert "postgres is down" in chain and 'hx-trigger="every 2s"' in live
    # The chain has ended, and the session a while ago: nothing more to follow.
    child.status = "completed"
    session.ended_at = utcnow() - timedelta(minutes=1)
    db.session.commit()
    done = client.get(f"/sessions/{session.id}/live?after=0", headers=HTMX).get_data(as_text=True)
    assert "every 2s" not in done and 'status-completed">completed</span></td>' in done


def test_the_live_poll_waits_a_moment_after_the_end_for_an_escalation(client):
    """The escalation is decided just after the session's end is recorded."""
    session = add_session(status="completed", started_at=utcnow(), ended_at=utcnow())
    live = client.get(f"/sessions/{session.id}/live?after=0", headers=HTMX).get_data(as_text=True)
    assert 'hx-trigger="every 2s"' in live and "Escalation chain" not in live


def add_activity(session: Session, count: int) -> list[int]:
    db.session.execute(SessionActivity.__table__.insert(), [
        dict(session_id=session.id, kind="tool_result", body=f"entry {n}", created_at=utcnow()) for n in range(count)])
    db.session.commit()
    return db.session.scalars(select(SessionActivity.id).where(SessionActivity.session_id == session.id)
                              .order_by(SessionActivity.id)).all()


def shown_ids(html: str) -> list[int]:
    return [int(i) for i in re.findall(r'class="act act-\w+" data-id="(\d+)"', html)]


def test_a_long_activity_log_shows_its_latest_entries_and_pages_back(client):
    """Tens of thousands of entries, each up to 20,000 characters, would be a
    page no browser holds: the latest come first, the earlier a page at a time."""
    from app.web.sessions import ACTIVITY_PAGE
    session = add_session(status="completed", started_at=utcnow())
    ids = add_activity(session, 2 * ACTIVITY_PAGE + 20)
    html = client.get(f"/sessions/{session.id}").get_data(as_text=True)
    assert shown_ids(html) == ids[-ACTIVITY_PAGE:]
    assert f"{ACTIVITY_PAGE + 20} earlier entries are not shown" in html
    assert f'href="/sessions/{session.id}?before={ids[-ACTIVITY_PAGE]}"' in html
    older = client.get(f"/sessions/{session.id}?before={ids[-ACTIVITY_PAGE]}").get_data(as_text=True)
    assert shown_ids(older) == ids[20:ACTIVITY_PAGE + 20]
    assert "20 earlier entries are not shown" in older and 'id="live-poller"' not in older
    assert f'href="/sessions/{session.id}">latest entries' in older
    oldest = client.get(f"/sessions/{session.id}?before={ids[20]}").get_data(as_text=True)
    assert shown_ids(oldest) == ids[:20] and "earlier entr" not in oldest
    for before in ("0", "-3", "abc", str(2**63)):   # not an entry's id: the latest entries
        assert shown_ids(client.get(f"/sessions/{session.id}?before={before}").get_data(as_text=True)) \
            == ids[-ACTIVITY_PAGE:], before


def test_the_live_poll_sends_a_bounded_batch_and_goes_on_until_it_has_caught_up(client):
    from app.web.sessions import ACTIVITY_PAGE
    session = add_session(status="completed", started_at=utcnow(), response="All done")
    ids = add_activity(session, ACTIVITY_PAGE + 5)
    first = client.get(f"/sessions/{session.id}/live?after=0", headers=HTMX).get_data(as_text=True)
    assert shown_ids(first) == ids[:ACTIVITY_PAGE]
    assert f"after={ids[ACTIVITY_PAGE - 1]}" in first and 'hx-trigger="every 2s"' in first   # more to come
    rest = client.get(f"/sessions/{session.id}/live?after={ids[ACTIVITY_PAGE - 1]}", headers=HTMX).get_data(as_text=True)
    assert shown_ids(rest) == ids[ACTIVITY_PAGE:] and "every 2s" not in rest and "All done" in rest


def test_run_now_queues_a_session_with_tier_and_request(client):
    response = client.post("/sessions/run", data={"tier": "3", "prompt": "  Restart jellyfin if it is down  "})
    assert response.status_code == 302
    session = db.session.scalars(select(Session)).one()
    assert (session.tier, session.prompt, session.trigger, session.status) == (3, "Restart jellyfin if it is down",
                                                                               "dashboard", "queued")
    assert response.headers["Location"].endswith(f"/sessions/{session.id}")


def run_now_message(client) -> str:
    html = client.post("/sessions/run", data={"tier": "1"}, follow_redirects=True).get_data(as_text=True)
    return re.search(r"Session #\d+ queued[^<]*", html).group(0)


def scheduler_heartbeat(at):
    from app.models import SchedulerState
    db.session.merge(SchedulerState(id=1, pid=1, heartbeat_at=at))
    db.session.commit()


def test_run_now_says_when_the_session_waits_for_others(client):
    def run_now() -> str:
        return run_now_message(client)

    scheduler_heartbeat(utcnow())
    assert run_now() == "Session #1 queued; it starts within a few seconds."
    db.session.get(Session, 1).status = "running"
    db.session.commit()
    assert run_now() == "Session #2 queued behind the running session #1; it starts when that one has ended."
    assert run_now() == ("Session #3 queued behind the running session #1 and 1 queued session; "
                         "it starts when they have ended.")
    add_session(status="queued", trigger="escalation")   # #4, ahead of every other queued one
    assert run_now() == ("Session #5 queued behind the running session #1 and 3 queued sessions; "
                         "it starts when they have ended.")


def test_run_now_does_not_promise_a_start_when_no_scheduler_runs(client):
    from datetime import timedelta
    assert run_now_message(client) == ("Session #1 queued, but no scheduler is running: it starts when one does "
                                       "(claudeops serve or claudeops scheduler).")
    scheduler_heartbeat(utcnow() - timedelta(minutes=5))   # it stopped writing its heartbeat
    assert run_now_message(client).startswith("Session #2 queued, but no scheduler is running")
    scheduler_heartbeat(utcnow())
    assert run_now_message(client) == "Session #3 queued behind 2 queued sessions; it starts when they have ended."


def test_the_sessions_list_shows_the_start_of_a_long_request(client):
    """The list polls every 3 s: a request of 20,000 characters is shown by
    its first 200 (the session's page has it whole)."""
    request = "".join(f"{n:05d} " for n in range(3300))[:20_000]
    session = add_session(prompt=request)
    rows = client.get("/sessions", headers={"HX-Request": "true"}).get_data(as_text=True)
    assert f'<td class="clip">{request[:199]}…</td>' in rows and request[199:210] not in rows   # 200 with the …
    assert len(rows) < 5_000
    assert request in client.get(f"/sessions/{session.id}").get_data(as_text=True)


def test_run_now_rejects_a_bad_tier_with_a_message(client):
    response = client.post("/sessions/run", data={"tier": "9", "prompt": "Look at the <nas>"})
    assert response.status_code == 400
    html = response.get_data(as_text=True)
    assert "Not queued: tier must be 1, 2 or 3, not &#39;9&#39;" in html
    # The form as it was sent: a request typed at length is not lost to a refusal.
    assert ">\nLook at the &lt;nas&gt;</textarea>" in html
    for tier in ("abc", "1.5", "", "²"):   # not a number: the same message, not Python's own
        html = client.post("/sessions/run", data={"tier": tier}).get_data(as_text=True)
        assert "Not queued: tier must be 1, 2 or 3, not" in html and "invalid literal" not in html, tier
    # No maxlength on the field: the browser would cut a pasted request
    # without a word and queue the cut; the refusal says it, and keeps it all.
    form = client.get("/sessions").get_data(as_text=True)
    assert re.search(r'<textarea name="prompt"[^>]*maxlength', form) is None and "up to 20,000 characters" in form
    long_request = "x" * 20_001
    html = client.post("/sessions/run", data={"tier": "3", "prompt": long_request}).get_data(as_text=True)
    assert "the limit is 20000" in html and f">\n{long_request}</textarea>" in html
    assert '<option value="3" selected>' in html
    # Said below the form, the field it is about marked so (a screen reader reads it with the field).
    assert ('<p class="field-error" id="run-now-problem" role="alert">Not queued: prompt is 20001 characters; the '
            'limit is 20000</p>') in html
    assert re.search(r'<textarea name="prompt"[^>]* aria-invalid="true" aria-describedby="run-now-problem">', html)
    assert 'class="flash' not in html   # said once, where it applies
    html = client.post("/sessions/run", data={"tier": "9"}).get_data(as_text=True)
    assert '<select name="tier" aria-invalid="true" aria-describedby="run-now-problem">' in html
    assert re.search(r'<textarea name="prompt"[^>]*aria-invalid', html) is None
    assert db.session.scalar(select(Session)) is None


# A value of a megabyte, as a script may send in any field, and the start of
# it a refusal repeats, with its length (quoted, as the page escapes it).
LONG = "x" * 1_048_576
CUT = f"&#39;{'x' * 80}…&#39; (1,048,576 characters)"


def test_a_long_form_field_is_refused_naming_it_and_repeating_only_its_start(client):
    response = client.post("/sessions/run", data={"tier": LONG, "prompt": "check disks"})
    html = response.get_data(as_text=True)
    assert response.status_code == 400
    assert ('<p class="field-error" id="run-now-problem" role="alert">Not queued: tier must be 1, 2 or 3, not '
            f"{CUT}</p>") in html
    assert "x" * 81 not in html
    page = client.post("/config", data={"CLAUDEOPS_TIER1_MODEL": LONG})
    assert page.status_code == 400
    # The field keeps what was typed; the problem below it repeats only its start.
    problem = re.search(r'<p class="field-error" id="problem-CLAUDEOPS_TIER1_MODEL">([^<]*)</p>',
                        page.get_data(as_text=True)).group(1)
    assert problem.startswith(f"CLAUDEOPS_TIER1_MODEL={CUT}: must be a model name")
    added = client.post("/memories", data={"category": LONG, "observation": "backups run at 02:00"}, headers=HTMX)
    assert "Memory not added: category must be one of" in added.get_data(as_text=True)
    assert f", not {CUT}</p>" in added.get_data(as_text=True) and len(added.get_data()) < 1_000
    import io
    # A file's name of a megabyte is past the 500,000 bytes werkzeug keeps of a form's part (413).
    upload = client.post("/memories/import", data={"file": (io.BytesIO(b"\xff"), LONG[:100_000])},
                         content_type="multipart/form-data", follow_redirects=True)
    assert f"Nothing imported: {'x' * 80}… (100,000 characters) is not UTF-8 text." in upload.get_data(as_text=True)
    assert "x" * 81 not in upload.get_data(as_text=True)
    assert db.session.scalar(select(Session)) is None


def test_stop_button(client):
    session = add_session(status="queued")
    response = client.post(f"/sessions/{session.id}/stop", follow_redirects=True)
    assert "Stop requested" in response.get_data(as_text=True)
    assert db.session.get(Session, session.id, populate_existing=True).status == "stopped"
    again = client.post(f"/sessions/{session.id}/stop", follow_redirects=True).get_data(as_text=True)
    assert "has already ended" in again
    assert client.post("/sessions/999/stop").status_code == 404
    assert client.get("/sessions/999").status_code == 404


def test_events_page_filters_and_fragment(client):
    for level, service, message in (("info", "web", "up"), ("critical", "nas", SCRIPT), ("warning", "db", "slow")):
        db.session.add(Event(level=level, service=service, message=message, created_at=utcnow()))
    db.session.commit()
    page = client.get("/events").get_data(as_text=True)
    assert 'hx-trigger="every 5s"' in page and SCRIPT not in page and "&lt;script&gt;" in page
    fragment = client.get("/events?level=critical", headers={"HX-Request": "true"}).get_data(as_text=True)
    assert "<html" not in fragment
    assert re.findall(r'class="badge level-(\w+)"', fragment) == ["critical"]
    by_service = client.get("/events?service=web", headers={"HX-Request": "true"}).get_data(as_text=True)
    assert "up" in by_service and "slow" not in by_service
    warn_alias = client.get("/events?level=warn", headers={"HX-Request": "true"}).get_data(as_text=True)
    assert re.findall(r'class="badge level-(\w+)"', warn_alias) == ["warning"]
    # Events about no one service are offered, and found, as "general", once however they were recorded.
    db.session.add_all([Event(level="info", service=None, message="all quiet", created_at=utcnow()),
                        Event(level="info", service="general", message="tagged general", created_at=utcnow())])
    db.session.commit()
    page = client.get("/events").get_data(as_text=True)
    assert re.findall(r'<option value="([^"]*)"', page) == ["", "info", "warning", "critical", "", "general",
                                                            "db", "nas", "web"]
    general = client.get("/events?service=general", headers={"HX-Request": "true"}).get_data(as_text=True)
    assert "all quiet" in general and "tagged general" in general and "slow" not in general
    assert general.count('<span class="card-detail">general</span>') == 1


def _add_numbered_events(count: int) -> None:
    """Events e1..e<count>, odd ones critical, even ones info, all of service web."""
    db.session.add_all([Event(level=("critical" if n % 2 else "info"), service="web", message=f"e{n}",
                              created_at=utcnow()) for n in range(1, count + 1)])
    db.session.commit()


def test_events_page_pages_through_the_log_by_id_and_stays_put_while_events_arrive(client):
    _add_numbered_events(250)
    first = client.get("/events").get_data(as_text=True)
    assert message_cells(first) == [f"e{n}" for n in range(250, 150, -1)]
    assert "250 events" in first
    links = pager_links(first)
    assert list(links) == ["older →"] and links["older →"] == "/events?before=151"

    second = client.get(links["older →"]).get_data(as_text=True)
    assert message_cells(second) == [f"e{n}" for n in range(150, 50, -1)]
    # Its poll keeps its place: new events do not push its rows along.
    assert 'hx-get="/events?before=151"' in second
    db.session.add_all([Event(level="info", service="web", message=f"new{n}", created_at=utcnow()) for n in range(5)])
    db.session.commit()
    polled = client.get("/events?before=151", headers={"HX-Request": "true"}).get_data(as_text=True)
    assert "<html" not in polled and message_cells(polled) == message_cells(second)

    links = pager_links(second)
    assert list(links) == ["← newest", "← newer", "older →"]
    last = client.get(links["older →"]).get_data(as_text=True)
    assert message_cells(last) == [f"e{n}" for n in range(50, 0, -1)] and "older →" not in last
    # Newer, from the oldest page: the 100 just above it, newest first, not the newest 100.
    newer = client.get(pager_links(last)["← newer"]).get_data(as_text=True)
    assert message_cells(newer) == [f"e{n}" for n in range(150, 50, -1)]
    assert 'hx-get="/events?after=50"' in newer
    top = client.get(pager_links(newer)["← newer"]).get_data(as_text=True)
    assert message_cells(top) == [f"e{n}" for n in range(250, 150, -1)]
    newest = client.get(pager_links(top)["← newer"]).get_data(as_text=True)
    assert message_cells(newest) == [f"new{n}" for n in range(4, -1, -1)] and "← newer" not in newest
    # Reached by "newer", the top of the log is the newest page: its poll shows new events.
    assert '<div id="event-rows" hx-get="/events"' in newest and "← newest" not in newest


def test_events_pager_keeps_the_filters_and_forgives_an_edited_link(client):
    _add_numbered_events(250)
    critical = client.get("/events?level=critical").get_data(as_text=True)
    assert message_cells(critical) == [f"e{n}" for n in range(249, 49, -2)]
    older = pager_links(critical)["older →"]
    assert older == "/events?level=critical&before=51"
    rest = client.get(older).get_data(as_text=True)
    assert message_cells(rest) == [f"e{n}" for n in range(49, 0, -2)]
    for edited in ("before=x", "before=-5", "before=99999999999999999999999", "after=abc"):
        html = client.get(f"/events?{edited}")
        assert html.status_code == 200, edited
    # No id is below 1: said to be ignored, and the newest page shown, not an empty one.
    assert message_cells(client.get("/events?before=-5").get_data(as_text=True)) == [f"e{n}" for n in range(250, 150, -1)]
    past_the_end = client.get("/events?after=99999999999999999999999").get_data(as_text=True)
    assert message_cells(past_the_end) == [] and "No events on this page (there are 250)." in past_the_end
    assert pager_links(past_the_end) == {"older →": "/events"}
    nothing = client.get("/events?service=db&before=10").get_data(as_text=True)
    assert "No events match these filters." in nothing and pager_links(nothing) == {}


def test_an_events_page_older_than_every_event_says_so_and_leads_to_the_oldest(client):
    """A page left open on the oldest events, which retention then deletes (or
    an edited link): it says there are events, and "newer" goes to the oldest
    page there is, the one just newer, not to the newest page."""
    _add_numbered_events(250)
    for headers in ({}, {"HX-Request": "true"}):   # the page, and its poll
        gone = " ".join(client.get("/events?before=1", headers=headers).get_data(as_text=True).split())
        assert message_cells(gone) == [] and "No events." not in gone
        assert "No events on this page (there are 250)." in gone
        assert pager_links(gone) == {"← newest": "/events", "← newer": "/events?after=0"}
    oldest = client.get("/events?after=0").get_data(as_text=True)
    assert message_cells(oldest) == [f"e{n}" for n in range(100, 0, -1)]
    critical = client.get("/events?level=critical&before=1").get_data(as_text=True)
    assert pager_links(critical)["← newer"] == "/events?level=critical&after=0"


def test_forms_need_a_csrf_token(tmp_path):
    app = make_app(tmp_path, WTF_CSRF_ENABLED=True)
    client = app.test_client()
    refused = client.post("/sessions/run", data={"tier": "1"}, headers={"Origin": "http://localhost"})
    assert refused.status_code == 400   # the page again, with a message and the form as sent
    # No credential is set: there is no login to have been made again.
    assert "This page is out of date (the service&#39;s key changed): nothing was changed" in refused.get_data(
        as_text=True)
    # Sent from no page of the service's that the browser vouches for: said on the page, the form empty.
    assert client.post("/sessions/run", data={"tier": "1"}).status_code == 303
    page = client.get("/sessions").get_data(as_text=True)
    token = re.search(r'name="csrf_token" value="([^"]+)"', page).group(1)
    assert client.post("/sessions/run", data={"tier": "1", "csrf_token": token}).status_code == 302
    # HTMX requests carry the token in a header, from the layout's hx-headers.
    header_token = re.search(r'"X-CSRFToken": "([^"]+)"', page).group(1)
    with app.app_context():
        session_id = db.session.scalars(select(Session.id)).one()
    assert client.post(f"/sessions/{session_id}/stop", headers={"X-CSRFToken": header_token,
                                                                "HX-Request": "true"}).status_code == 204


def test_overview_tells_whether_the_scheduler_runs_and_when_next(client):
    from datetime import timedelta
    from app.models import SchedulerState
    assert "not running" in client.get("/").get_data(as_text=True)
    db.session.add(SchedulerState(id=1, pid=1, heartbeat_at=utcnow(), next_run_at=utcnow() + timedelta(hours=1)))
    db.session.commit()
    html = client.get("/").get_data(as_text=True)
    assert "Next scheduled run" in html and "not running" not in html


def test_a_scheduler_gone_silent_is_told_apart_from_one_stopped_on_the_overview_and_in_health(client):
    """A scheduler that cannot write (a full disk, a read-only file) beats no
    more, and records no session's end either: the overview says so, and
    health, which probes watch, answers degraded."""
    from datetime import timedelta
    from app.models import SchedulerState
    assert client.get("/api/v1/health").get_json()["scheduler"] == "stopped"
    last_beat = utcnow() - timedelta(minutes=3)
    db.session.add(SchedulerState(id=1, pid=4321, heartbeat_at=last_beat))
    db.session.commit()
    html = client.get("/").get_data(as_text=True)
    assert "silent" in html and f"no heartbeat since {isoformat(last_beat)}" in html
    assert "one shown running may have ended meanwhile" in html
    running = Session(tier=1, trigger="api", status="running", created_at=utcnow(), started_at=utcnow())
    db.session.add(running)
    db.session.commit()
    for page in (f"/sessions/{running.id}", f"/sessions/{running.id}/live"):
        assert "the session may have ended, and its end is recorded once the database takes writes again" in (
            client.get(page, headers={"HX-Request": "true"} if page.endswith("live") else {}).get_data(as_text=True))
    health = client.get("/api/v1/health")
    assert health.status_code == 503
    assert health.get_json() | {"plugins": []} == {"status": "degraded", "database": "ok", "plugins": [],
                                                   "scheduler": f"silent since {isoformat(last_beat)}"}
    # A load balancer asks whether this host can serve: it can, whatever the scheduler.
    host = client.get("/api/v1/health?scope=host")
    assert host.status_code == 200 and host.get_json()["status"] == "ok"
    assert host.get_json()["scheduler"] == f"silent since {isoformat(last_beat)}"
    assert client.get("/api/v1/health?scope=service").status_code == 503
    refused = client.get("/api/v1/health?scope=everything")
    assert refused.status_code == 400 and refused.get_json() == {
        "error": "scope must be service or host, not 'everything'"}
    # One that stopped and said so (its pid cleared) is stopped, not silent: nothing is wrong.
    db.session.get(SchedulerState, 1).pid = None
    db.session.commit()
    assert client.get("/api/v1/health").get_json()["scheduler"] == "stopped"
    assert client.get("/api/v1/health").status_code == 200
    assert "not running" in client.get("/").get_data(as_text=True)
    assert "scheduler-silent" not in client.get(f"/sessions/{running.id}").get_data(as_text=True)


@pytest.mark.skipif(process_identity.own() is None, reason="process identities read /proc")
def test_a_scheduler_killed_on_this_host_is_seen_ended_at_once_not_a_minute_later(client):
    """Its heartbeat is seconds old, but its process has ended: the overview,
    health, Run now and a running session's page say so now."""
    from app.models import SchedulerState
    from app.sessions import control
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    space = process_identity.own().rsplit(" ", 2)[0]
    identity = f"{space} {child.pid} {process_identity._start_ticks(child.pid)}"
    last_beat = utcnow()
    db.session.add(SchedulerState(id=1, pid=child.pid, process=identity, heartbeat_at=last_beat))
    running = add_session(status="running", started_at=utcnow())
    db.session.commit()
    try:
        assert control.scheduler_running()
        html = client.get("/").get_data(as_text=True)
        assert "not running" not in html and "ended without" not in html and "no heartbeat" not in html
        assert client.get("/api/v1/health").status_code == 200
        assert "scheduler-silent" not in client.get(f"/sessions/{running.id}").get_data(as_text=True)
    finally:
        child.kill()
        child.wait()
    assert not control.scheduler_running()
    html = client.get("/").get_data(as_text=True)
    assert f"its process ({child.pid}) ended without saying that it stopped (killed, or it crashed) after its " \
           f"last heartbeat at {isoformat(last_beat)}" in html
    health = client.get("/api/v1/health")
    assert health.status_code == 503
    assert health.get_json()["scheduler"] == f"silent since {isoformat(last_beat)}"
    page = client.get(f"/sessions/{running.id}").get_data(as_text=True)
    assert "the scheduler has ended without saying that it\n      stopped" in page
    assert "the session is marked interrupted when a scheduler\n      starts again" in page
    # Run now says that nothing will run the session it queues.
    assert "queued, but no scheduler is running" in run_now_message(client)
    # A stop would wait for a poll that never comes.
    stop = client.post(f"/api/v1/sessions/{running.id}/stop")
    assert stop.status_code == 409 and "the scheduler that ran it has ended" in stop.get_json()["error"]
    assert "marked interrupted when the service starts again" in stop.get_json()["error"]
    # One of a `claudeops run` chain is that process's, alive while it holds the runner lock.
    foreground = add_session(status="running", started_at=utcnow(), trigger="cli")
    stop = client.post(f"/api/v1/sessions/{foreground.id}/stop")
    assert stop.status_code == 409 and "the `claudeops run` that ran it has ended" in stop.get_json()["error"]
    from app.sessions.runner_lock import RunnerLock
    lock = RunnerLock(client.application.config["CLAUDEOPS_STATE_DIR"],
                      client.application.config["SQLALCHEMY_DATABASE_URI"])
    lock.acquire()
    try:
        assert client.post(f"/api/v1/sessions/{foreground.id}/stop").status_code == 202
    finally:
        lock.release()


def test_a_filter_for_a_service_with_no_rows_stays_selected_for_the_polls(client):
    """The polls send the form's values: a service the link names but no row
    has yet must be in the form, selected, or the next poll shows every row."""
    for path, name in (("/events?service=Web", "web"), ("/cooldowns?service=Web.service", "web"),
                       ("/memories?service=Web", "web")):
        page = client.get(path).get_data(as_text=True)
        assert f'<option value="{name}" selected>{name}</option>' in page, path
    assert client.get("/memories?service=general").get_data(as_text=True).count('value="general"') == 1


def test_a_missing_page_is_a_404_within_the_dashboard_and_json_under_the_api(client):
    """A dashboard address that names nothing shows the layout (the sidebar
    to go on from) and says so; the API answers its JSON error as before; an
    HTMX request gets the words alone (htmx swaps no error response)."""
    for path in ("/sessions/999999", "/no-such-page", "/memories/999999"):
        response = client.get(path)
        assert response.status_code == 404 and response.mimetype == "text/html", path
        html = response.get_data(as_text=True)
        assert '<nav class="sidebar"' in html and "<h1>Not found</h1>" in html, path
        assert f"There is nothing at {path}" in html and 'href="/"' in html
    escaped = client.get("/no-such-<b>page").get_data(as_text=True)
    assert "<b>" not in escaped and "&lt;b&gt;" in escaped

    for path in ("/api/v1/no-such-thing", "/api/v1/sessions/999999"):
        response = client.get(path)
        assert response.status_code == 404 and response.is_json and "error" in response.get_json(), path

    fragment = client.get("/sessions/999999", headers={"HX-Request": "true"})
    assert fragment.status_code == 404 and fragment.mimetype == "text/plain"
    assert fragment.get_data(as_text=True).startswith("There is nothing at /sessions/999999")


def test_a_run_now_form_sent_twice_queues_one_session(client):
    """A double click, or a send retried: each drawing of the form carries a
    key of its own, and the second send shows the session the first queued."""
    page = client.get("/sessions").get_data(as_text=True)
    (key,) = re.findall(r'<input type="hidden" name="request_key" value="([^"]+)">', page)
    assert re.findall(r'name="request_key" value="([^"]+)"', client.get("/sessions").get_data(as_text=True)) != [key]
    form = {"tier": "2", "prompt": "Look at the NAS", "request_key": key}
    first = client.post("/sessions/run", data=form)
    again = client.post("/sessions/run", data=form, follow_redirects=True)
    assert first.status_code == 302 and first.headers["Location"].endswith("/sessions/1")
    assert "This form was sent already: it queued session #1, shown here." in again.get_data(as_text=True)
    assert db.session.scalar(select(func.count()).select_from(Session)) == 1
    # The same form with another request is no repeat: nothing is queued, and the form says why.
    changed = client.post("/sessions/run", data=dict(form, prompt="Look at the router"))
    assert changed.status_code == 400
    assert ("Not queued: this form queued session #1 already, with another tier or request. To queue another, "
            "send the form shown here.") in changed.get_data(as_text=True)
    assert db.session.scalar(select(func.count()).select_from(Session)) == 1
