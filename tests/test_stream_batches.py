"""The stream handler writes in batches, stays live, keeps one plugin's
failure to that plugin, and holds a bounded response however long the
session runs."""
from __future__ import annotations

import json
import threading
import time

import pytest
from sqlalchemy import create_engine, event, func, select, text
from sqlalchemy.orm import Session as OrmSession

from app.extensions import db
from app.hookspecs import hookimpl
from app.models import SessionActivity
from app.sessions import activity, control
from app.sessions.activity import StreamHandler, _json
from app.sessions.manager import run_info
from app.sessions.response import ResponseTail
from plugins.cooldowns.models import CooldownAction
from plugins.events.models import Event
from plugins.memory.models import Memory
from tests import streamlines as sl
from tests.conftest import make_app


def line(obj: dict) -> bytes:
    return json.dumps(obj).encode()


def new_handler() -> StreamHandler:
    session = control.claim(control.enqueue(tier=1, trigger="api").id)
    return StreamHandler(session, run_info(session))


# The memory plugin's notice in the events feed for the memory these tests record.
NOTICE = "New memory #1 [timing:web]: Takes 40s to start after a restart"


def count(model, *where) -> int:
    return db.session.scalar(select(func.count()).select_from(model).where(*where))


def test_rows_reach_the_database_while_the_cli_is_quiet(tmp_path, fake_cli):
    """Written within a second, not at the end: the dashboard follows along."""
    app = make_app(tmp_path)
    fake_cli(sl.steps(sl.init(), sl.text("Checking.\n[EVENT:warning:nas] Disk at 91%"))
             + [{"sleep": 4}] + sl.steps(sl.result()))
    # Another connection, as a dashboard worker would have, on either backend.
    observer = create_engine(app.config["SQLALCHEMY_DATABASE_URI"])

    def run():
        with app.app_context():
            from app.sessions.manager import run_session
            run_session(control.claim(control.enqueue().id))
    runner = threading.Thread(target=run)
    runner.start()
    try:
        seen = None
        deadline = time.monotonic() + 3.5
        while time.monotonic() < deadline and seen is None:
            with observer.connect() as conn:
                rows = conn.execute(text("SELECT s.status, (SELECT count(*) FROM session_activity WHERE kind = "
                                         "'marker'), (SELECT count(*) FROM events) FROM sessions s")).fetchall()
            if rows and rows[0][1] and rows[0][2]:
                seen = rows[0]
            time.sleep(0.1)
    finally:
        runner.join()
        observer.dispose()
    assert tuple(seen) == ("running", 1, 1), "the marker and its event were not visible while the CLI was quiet"


def commits_for(lines: list[bytes]) -> int:
    handler = new_handler()
    commits = []
    listener = lambda session: commits.append(1)   # noqa: E731
    event.listen(OrmSession, "after_commit", listener)
    try:
        for data in lines:
            handler.handle_line(data)
        handler.close()
    finally:
        event.remove(OrmSession, "after_commit", listener)
    return len(commits)


def test_a_burst_of_lines_is_committed_in_batches(app):
    lines = 3 * activity.COMMIT_EVERY_LINES
    commits = commits_for([line(sl.tool_result(f"output {n}")) for n in range(lines)])
    assert count(SessionActivity, SessionActivity.kind == "tool_result") == lines
    # At least every COMMIT_EVERY_LINES lines, and at most every half second: never a commit per line.
    assert 3 <= commits <= lines // 20, f"{commits} commits for {lines} lines"


def test_a_burst_of_large_outputs_is_committed_before_it_holds_too_much_text(app, monkeypatch):
    monkeypatch.setattr(activity, "COMMIT_INTERVAL_SECONDS", 3600)   # the text held decides, not the clock
    monkeypatch.setattr(activity, "COMMIT_EVERY_BYTES", 10**12)     # and not the lines' own bytes
    # Of each, what is kept until its batch is redacted: twice what is shown.
    size, kept = 100_000, activity.UNREDACTED_KEPT
    lines = 2 * activity.COMMIT_EVERY_CHARS // kept
    commits = commits_for([line(sl.tool_result(f"{n} " + "x" * size)) for n in range(lines)])
    assert count(SessionActivity, SessionActivity.kind == "tool_result") == lines < activity.COMMIT_EVERY_LINES
    assert commits in (2, 3), f"{commits} commits for {lines} lines of {size} characters"   # the last at close


def test_a_burst_of_long_lines_is_committed_before_the_lines_kept_hold_too_much(app, monkeypatch):
    """The lines of a batch are kept until it is committed (to be read again
    if the database server goes away): their bytes bound the batch too, here
    where the text they add to the activity log does not."""
    monkeypatch.setattr(activity, "COMMIT_INTERVAL_SECONDS", 3600)
    lines = [line(sl.tool_result(f"{n} " + "x" * 1_000_000)) for n in range(20)]
    total = sum(map(len, lines))
    assert total > 2 * activity.COMMIT_EVERY_BYTES and 20 * activity.UNREDACTED_KEPT < activity.COMMIT_EVERY_CHARS
    commits = commits_for(lines)
    assert count(SessionActivity, SessionActivity.kind == "tool_result") == 20
    # One each time the lines kept reach the bound, and the last at close.
    assert commits == -(-total // activity.COMMIT_EVERY_BYTES), f"{commits} commits for {total} bytes"


class WritesThenFails:
    """Flushes a row of its own, then raises: the row must go, nothing else."""

    @hookimpl
    def claudeops_markers(self, text, run):
        db.session.add(Event(level="info", message="half-written by a broken plugin"))
        db.session.flush()
        raise RuntimeError("plugin bug")


class FailsFirst:
    @hookimpl(tryfirst=True)
    def claudeops_markers(self, text, run):
        if "[FAIL]" in text:
            db.session.add(Memory(category="timing", observation="written by a broken plugin", confidence=0.9))
            db.session.flush()
            raise RuntimeError("plugin bug")


@pytest.mark.parametrize("plugin", [WritesThenFails(), FailsFirst()])
def test_a_failing_plugin_loses_only_its_own_rows(tmp_path, plugin, caplog):
    app = make_app(tmp_path, plugins=[plugin])
    with app.app_context():
        handler = new_handler()
        # The cooldowns plugin writes (and flushes) its row before the failure in the
        # same batch; the memory plugin's marker is written at the commit.
        handler.handle_line(line(sl.text("[MEMORY:timing:web] Takes 40s to start after a restart\n"
                                         "[COOLDOWN:restart:web] success")))
        handler.handle_line(line(sl.text("[FAIL] [EVENT:critical:nas] disk gone")))
        handler.handle_line(line(sl.tool_use("df -h")))
        handler.close()
        db.session.expire_all()
        (memory,) = db.session.scalars(select(Memory)).all()
        assert memory.observation == "Takes 40s to start after a restart"
        # On PostgreSQL the failed plugin's memory took id 1 from the sequence.
        # The notice is sent when the batch is written: the order of the two is not the stream's.
        assert sorted(db.session.scalars(select(Event.message))) == sorted([NOTICE.replace("#1", f"#{memory.id}"),
                                                                            "disk gone"])
        assert db.session.scalars(select(CooldownAction.service)).all() == ["web"]
        kinds = db.session.scalars(select(SessionActivity.kind).order_by(SessionActivity.id)).all()
        assert [kind for kind in kinds if kind != "warning"] == ["text", "marker", "marker", "text", "marker",
                                                                 "tool_use"]
        # The failed plugin's loss is said where each block it failed on was (both, or the second).
        lost = db.session.scalars(select(SessionActivity.body).where(SessionActivity.kind == "warning")).all()
        assert len(lost) == (2 if isinstance(plugin, WritesThenFails) else 1)
        assert all("failed on this text block (RuntimeError); nothing it read in it was stored" in body
                   for body in lost)
    assert "plugin bug" in caplog.text


def test_a_plugin_failing_first_after_a_commit_loses_nothing_else(tmp_path):
    app = make_app(tmp_path, plugins=[FailsFirst()])
    with app.app_context():
        handler = new_handler()
        handler.handle_line(line(sl.text("[MEMORY:timing:web] Takes 40s to start after a restart")))
        handler.commit()
        handler.handle_line(line(sl.tool_use("uptime")))       # waiting activity, not yet written
        handler.handle_line(line(sl.text("[FAIL] [EVENT:info:web] up")))
        handler.close()
        db.session.expire_all()
        assert db.session.scalars(select(Memory.observation)).all() == ["Takes 40s to start after a restart"]
        assert sorted(db.session.scalars(select(Event.message))) == sorted([NOTICE, "up"])
        assert count(SessionActivity, SessionActivity.kind == "tool_use") == 1


def test_the_response_keeps_its_end_within_the_limit(app, monkeypatch):
    monkeypatch.setattr(activity, "MAX_RESPONSE_CHARS", 50)
    handler = new_handler()
    blocks = [f"block {n} " + "x" * 10 for n in range(10)]
    for block in blocks:
        handler.handle_line(line(sl.text(block)))
    handler.close()
    kept = "\n\n".join(blocks[-2:])   # 18-character blocks: two and a separator fit in 50, three do not
    omitted = len("\n\n".join(blocks)) - len(kept)
    assert handler.response == f"… ({omitted:,} earlier characters are in the run log)\n\n{kept}"


def test_long_output_is_redacted_whole_then_cut_to_what_the_activity_log_shows(app):
    """A batch's tool output is redacted at its commit, in one scan: a
    secret across the cut is still found whole, and replaced whole; the cut
    falls where it does in the output as written, and the note counts every
    character of it left to the run log, of bodies cut before and after the
    scan."""
    shown = activity.MAX_ACTIVITY_BODY
    token = "Authorization: Bearer abcDEF123456789xyz"
    across = "x" * (shown - 25) + token + " " + "y" * 10     # the token starts inside what is shown, ends past it
    huge = "z" * (activity.UNREDACTED_KEPT + 5000)    # cut before the scan too
    handler = new_handler()
    for output in (across, huge, "token=s3cr3tvalue42 short"):
        handler.handle_line(line(sl.tool_result(output)))
    handler.close()
    bodies = db.session.scalars(select(SessionActivity.body).where(SessionActivity.kind == "tool_result")
                                .order_by(SessionActivity.id)).all()
    assert bodies[0] == ("x" * (shown - 25) + "Authorization: Bearer [redacted]"
                         + f"\n… ({len(across) - shown} more characters in the run log)")
    assert "abcDEF" not in bodies[0]
    assert bodies[1] == "z" * shown + f"\n… ({len(huge) - shown} more characters in the run log)"
    assert bodies[2] == "token=[redacted] short"


def test_response_tail():
    tail = ResponseTail(10)
    assert tail.text() == ""
    tail.append("abc")
    tail.append("de")
    assert tail.text() == "abc\n\nde"
    tail.append("fghij")
    assert tail.text() == "… (5 earlier characters are in the run log)\n\nde\n\nfghij"
    tail.append("y" * 30)
    assert tail.text() == "… (36 earlier characters are in the run log)\n\n" + "y" * 10


@pytest.mark.parametrize("value", [{"command": "ls -la", "description": "List"}, {}, {"a": [1, {"b": 2}]},
                                   {"n": 1, "f": 2.5, "none": None, "yes": True, "é": "ü\n\"q\""}, [1, 2], "text",
                                   {1: "x"}, {True: 1}])
def test_tool_input_is_shown_as_indented_json(value):
    assert _json(value) == json.dumps(value, indent=2, ensure_ascii=False)


class AddsABadRow:
    """Returns normally, but leaves a row the database refuses (no level)."""

    @hookimpl
    def claudeops_markers(self, text, run):
        db.session.add(Event(level=None, message="refused"))


def test_a_row_the_database_refuses_is_its_plugins_failure_alone(tmp_path, caplog):
    app = make_app(tmp_path, plugins=[AddsABadRow()])
    with app.app_context():
        handler = new_handler()
        handler.handle_line(line(sl.text("[MEMORY:timing:web] Takes 40s to start after a restart")))
        handler.handle_line(line(sl.text("[EVENT:critical:nas] disk gone")))
        handler.close()
        db.session.expire_all()
        assert sorted(db.session.scalars(select(Event.message))) == sorted([NOTICE, "disk gone"])
        assert db.session.scalars(select(Memory.observation)).all() == ["Takes 40s to start after a restart"]
        assert count(SessionActivity, SessionActivity.kind == "marker") == 2
    assert "IntegrityError" in caplog.text
