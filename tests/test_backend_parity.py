"""Behaviour that does not depend on the backend. What the CLI may send
that SQLite stores and PostgreSQL refuses is made the same for both, so a
session never fails because of the backend: NUL characters in text, strings
longer than their column, numbers beyond a 32-bit INTEGER column. Lists of
names are in one order whatever the database's collation."""
from __future__ import annotations

import logging
import re

from sqlalchemy import select

from app.extensions import db
from app.models import SessionActivity
from app.portable_text import without_nul
from app.timeutil import utcnow
from plugins.cooldowns import store as cooldowns
from plugins.events.models import Event
from plugins.memory.models import Memory
from tests import streamlines as sl
from tests.conftest import HTMX

NUL = "\x00"


def test_nul_characters_from_the_cli_are_stored_as_replacement_characters(app, fake_cli, run_session_now, caplog):
    fake_cli(sl.steps(sl.init(), sl.tool_use("cat /bin/true"), sl.tool_result(f"ELF{NUL}{NUL}binary"),
                      sl.text(f"Read it{NUL}. [EVENT:warning:web] odd{NUL}bytes"), sl.result(f"Done{NUL}")))
    with caplog.at_level(logging.WARNING):
        session = run_session_now()
    assert session.status == "completed", session.status_reason
    bodies = [a.body for a in db.session.scalars(select(SessionActivity).order_by(SessionActivity.id))]
    assert "ELF\ufffd\ufffdbinary" in bodies and "Read it\ufffd. [EVENT:warning:web] odd\ufffdbytes" in bodies
    assert db.session.scalars(select(Event.message)).all() == ["odd\ufffdbytes"]
    assert session.response == "Read it\ufffd. [EVENT:warning:web] odd\ufffdbytes"
    assert "NUL character" in caplog.text


def test_over_long_names_from_the_cli_are_cut_to_their_column(app, fake_cli, run_session_now):
    long_tool = "mcp__" + "x" * 300
    use = sl.tool_use("uptime")
    use["message"]["content"][0]["name"] = long_tool
    start, end = sl.init(), sl.result()
    start["session_id"] = end["session_id"] = "s" * 100
    fake_cli(sl.steps(start, use, sl.tool_result("up"), end))
    session = run_session_now()
    assert session.status == "completed", session.status_reason
    titles = db.session.scalars(select(SessionActivity.title).where(SessionActivity.kind == "tool_use")).all()
    assert titles == [long_tool[:200]]
    assert session.cli_session_id == "s" * 64


def test_numbers_no_integer_column_holds_are_not_stored(app, fake_cli, run_session_now):
    fake_cli(sl.steps(sl.init(), sl.result(turns=2**31, duration_ms=2**40)))
    session = run_session_now()
    assert session.status == "completed", session.status_reason
    assert (session.num_turns, session.duration_ms) == (None, None)


def test_nul_is_replaced_in_the_parameters_of_one_statement_or_many_and_bytes_are_left_alone():
    assert without_nul({"a": "x\x00y", "n": 1, "raw": b"\x00"}) == ({"a": "x\ufffdy", "n": 1, "raw": b"\x00"}, 1)
    assert without_nul([("ok", None), ("\x00\x00",)]) == ([("ok", None), ("\ufffd\ufffd",)], 2)
    clean = {"a": "plain"}
    assert without_nul(clean)[0] is clean      # nothing copied when there is nothing to replace


def test_text_stored_with_a_nul_character_is_found_and_a_filter_with_one_refused(app, fake_cli, run_session_now):
    fake_cli(sl.steps(sl.init(), sl.text("[MEMORY:behavior:web] logs \x00 markers"), sl.result()))
    run_session_now()
    client = app.test_client()
    # Stored with the NUL replaced, and found by its words.
    assert "logs \ufffd markers" in client.get("/memories?q=logs").get_data(as_text=True)
    # No filter can match a NUL (none is stored), and PostgreSQL refuses one in a query:
    # a page's address holding one is refused on every backend, as the API's is.
    for path in ("/memories?q=%00", "/events?service=a%00b", "/cooldowns?service=a%00b"):
        response = client.get(path)
        assert response.status_code == 400, path
        assert "must not contain NUL characters" in response.get_data(as_text=True), path


def test_service_lists_are_in_code_point_order_on_every_backend(app):
    names = ["web", "Jellyfin", "adguard", "a-b", "ab", "B"]
    expected = ["B", "Jellyfin", "a-b", "ab", "adguard", "web"]     # SQLite's BINARY order, and Python's
    for name in names:
        db.session.add(Event(level="info", service=name, message="up", created_at=utcnow()))
        db.session.add(Memory(category="behavior", service=name, observation="up", created_at=utcnow(),
                              updated_at=utcnow()))
        cooldowns.record_attempt("restart", name.lower(), "pending", f"docker restart {name}", None, 1)
    db.session.commit()
    client = app.test_client()

    def options(path: str) -> list[str]:
        select_box = re.search(r'<select name="service".*?</select>', client.get(path).get_data(as_text=True), re.S)
        return [o for o in re.findall(r'<option value="([^"]*)"', select_box.group(0)) if o not in ("", "general")]
    assert options("/events") == expected
    assert options("/memories") == expected
    assert options("/cooldowns") == sorted(n.lower() for n in names)


BEYOND_32_BITS = 2**31


def test_ids_beyond_32_bits_are_not_found_on_every_backend(app, fake_cli, run_session_now):
    fake_cli(sl.steps(sl.init(), sl.text("hello"), sl.result()))
    session = run_session_now()
    client = app.test_client()
    for path in (f"/sessions/{BEYOND_32_BITS}", f"/api/v1/sessions/{BEYOND_32_BITS}",
                 f"/api/v1/memories/{BEYOND_32_BITS}", f"/api/v1/memories/{BEYOND_32_BITS}/history",
                 f"/api/v1/sessions/{2**63}"):
        assert client.get(path).status_code == 404, path
    assert client.post(f"/api/v1/sessions/{BEYOND_32_BITS}/stop").status_code == 404
    response = client.post("/api/v1/memories/bulk-delete", json={"ids": [BEYOND_32_BITS]})
    assert (response.status_code, response.get_json()) == (404, {"error": f"memory {BEYOND_32_BITS} not found"})
    live = client.get(f"/sessions/{session.id}/live?after={BEYOND_32_BITS}", headers=HTMX)
    assert live.status_code == 200 and 'beforeend:#activity' not in live.get_data(as_text=True)  # nothing after it
    assert 'beforeend:#activity' in client.get(f"/sessions/{session.id}/live?after=0", headers=HTMX).get_data(as_text=True)
    for below in (-1, -(2**31) - 1, -(2**63) - 1):   # before the first row: every row, on every backend
        live = client.get(f"/sessions/{session.id}/live?after={below}", headers=HTMX)
        assert live.status_code == 200 and 'beforeend:#activity' in live.get_data(as_text=True), below


def test_the_memory_cli_says_not_found_for_an_id_beyond_32_bits(app):
    from plugins.memory.cli import memories
    result = app.test_cli_runner().invoke(memories, ["edit", str(BEYOND_32_BITS), "--observation", "x"])
    assert result.exit_code == 1 and f"memory {BEYOND_32_BITS} not found" in result.output
