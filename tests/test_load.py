"""Concurrency under load: the real `claudeops serve --workers 4` answers a
sustained mix of dashboard pages, HTMX polls, API listings and operator
writes from wrk (a second process) while the scheduler stores a session that
streams 2,000 markers. Nothing may fail: no socket error, no response outside
2xx/3xx, no "database is locked" in the service log, no marker lost.

`bin/test tests/test_load.py -s` prints wrk's figures.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from tests import streamlines as sl
from tests.conftest import FAKE_CLAUDE
from tests.support.database import database_url, on_postgres
from tests.support.faults import integrity, wait_for
from tests.support.service import Service

# serial: bin/test runs it alone. wrk and four workers take every core, and a
# test beside it would take its share from the service under load.
pytestmark = [pytest.mark.slow, pytest.mark.serial]

MARKERS = 2000               # half events, half memories, one per text block
WORKERS = 4
WRK_THREADS = 2
WRK_CONNECTIONS = 8
# wrk runs until the session has stored its last marker, or this long. The
# load saturates both cores, so on a busy machine the session may outlast it:
# the figures then say how many markers were stored under load.
WRK_MAX_SECONDS = 25
LOAD_MIX = Path(__file__).parent / "support" / "load_mix.lua"


def wrk_binary() -> str:
    path = os.environ.get("CLAUDEOPS_TEST_WRK") or shutil.which("wrk")
    if not path:
        pytest.skip("wrk is not installed (bin/test installs Debian's wrk)")
    return path


def marker_stream(count: int) -> list[dict]:
    """A session that reports ``count`` markers, each service its own, so no
    memory reinforces or contradicts another and every marker is a new row."""
    steps = sl.steps(sl.init())
    for number in range(1, count + 1):
        service = f"svc-{number:04d}"
        if number % 2:
            text = f"Checked {service}.\n[EVENT:info:{service}] Health check {number} passed"
        else:
            text = f"[MEMORY:timing:{service}] Takes {number} seconds to start after a restart"
        steps.append({"line": sl.text(text)})
        if number % 100 == 0:   # some tool traffic, and a pause, as a real session has
            tool_id = f"toolu_load_{number}"
            steps += sl.steps(sl.tool_use(f"docker ps --filter name={service}", tool_id),
                              sl.tool_result(f"{service} Up 2 days", tool_id))
            steps.append({"sleep": 0.1})
    return steps + sl.steps(sl.result("All services checked."))


def observer(state_dir: Path):
    """A connection of the test's own to the service's database, SQLite file or server."""
    return create_engine(database_url(state_dir) or f"sqlite:///{state_dir / 'claudeops.db'}")


def session_row(database, session_id: int) -> dict:
    with database.connect() as connection:
        status, reason = connection.execute(text("SELECT status, status_reason FROM sessions WHERE id = :id"),
                                            {"id": session_id}).one()
        return {"status": status, "reason": reason}


def stored_markers(database, session_id: int) -> dict:
    with database.connect() as connection:
        def count(sql: str) -> int:
            return connection.execute(text(sql.replace("?", ":id")), {"id": session_id}).scalar()
        return {
            "events": count("SELECT count(*) FROM events WHERE session_id = ?"),
            "memories": count("SELECT count(*) FROM memories WHERE session_id = ?"),
            "activity": count("SELECT count(*) FROM session_activity WHERE session_id = ? AND kind = 'marker'"),
            "distinct_services": count("SELECT count(DISTINCT service) FROM events WHERE session_id = ?")
            + count("SELECT count(DISTINCT service) FROM memories WHERE session_id = ?"),
        }


def test_four_workers_under_sustained_load_while_a_session_streams_2000_markers(tmp_path):
    wrk = wrk_binary()
    script = tmp_path / "script.json"
    script.write_text(json.dumps(marker_stream(MARKERS)))
    # The per-session limits raised: every one of the markers is to be stored.
    service = Service(tmp_path / "state", {"CLAUDEOPS_INTERVAL": "0", "CLAUDEOPS_CLAUDE_BIN": str(FAKE_CLAUDE),
                                           "FAKE_CLAUDE_SCRIPT": str(script),
                                           "CLAUDEOPS_EVENTS_MAX_PER_SESSION": str(MARKERS),
                                           "CLAUDEOPS_MEMORY_MAX_PER_SESSION": str(MARKERS)},
                      workers=WORKERS).start()
    db_path = tmp_path / "state" / "claudeops.db"
    database = observer(tmp_path / "state")
    try:
        status, body = service.post("/api/v1/sessions/trigger", {"prompt": "check every service"})
        assert status == 201, body
        session_id = body["id"]
        wait_for(lambda: session_row(database, session_id)["status"] != "queued", timeout=15,
                   what="the session started")

        load_started = time.monotonic()
        stored_before_load = stored_markers(database, session_id)["activity"]
        load = subprocess.Popen(
            [wrk, f"-t{WRK_THREADS}", f"-c{WRK_CONNECTIONS}", f"-d{WRK_MAX_SECONDS}s", "--timeout", "10s",
             "--latency", "-s", str(LOAD_MIX), service.base_url, "--", str(session_id)],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

        def ended() -> bool:
            return session_row(database, session_id)["status"] not in ("queued", "running")
        try:
            deadline = load_started + WRK_MAX_SECONDS
            while not ended() and time.monotonic() < deadline and load.poll() is None:
                time.sleep(0.2)
            streamed_under_load = time.monotonic() - load_started
            ended_under_load = ended()
        finally:
            load.send_signal(signal.SIGINT)   # wrk stops and reports
            output, _ = load.communicate(timeout=30)
        stored_under_load = stored_markers(database, session_id)["activity"] - stored_before_load
        # On a machine busier than usual the stream may outlast the load: the
        # rest is still checked, only the figures say so.
        wait_for(ended, timeout=60, interval=0.2, what="the session finished")
        match = re.search(r"^WRK_RESULT (\{.*\})$", output, re.MULTILINE)
        assert match, f"wrk gave no result:\n{output}"
        result = json.loads(match.group(1))
        seconds = result["duration_us"] / 1e6
        print(f"\nwrk: {result['requests']} requests in {seconds:.1f} s = {result['requests'] / seconds:.0f} "
              f"requests/s ({WRK_THREADS} threads, {WRK_CONNECTIONS} connections, {WORKERS} gunicorn workers); "
              f"latency p50 {result['latency_p50_ms']:.0f} ms, p99 {result['latency_p99_ms']:.0f} ms, "
              f"max {result['latency_max_ms']:.0f} ms; {stored_under_load} of the {MARKERS} markers were stored "
              f"during the {streamed_under_load:.1f} s of load"
              + ("" if ended_under_load else " (the session finished after it)"))
        print(output)

        errors = {key: result[key] for key in ("connect", "read", "write", "timeout")}
        assert errors == {"connect": 0, "read": 0, "write": 0, "timeout": 0}, output
        assert result["status"] == 0, f"{result['status']} responses outside 2xx/3xx:\n{output}"
        assert result["requests"] > 0
        assert stored_under_load > 0, "the load and the session did not overlap"

        session = session_row(database, session_id)
        assert session["status"] == "completed", session["reason"]
        log = service.log()
        assert "database is locked" not in log
        assert "Traceback" not in log
        # Every marker stored, each new memory with its notice in the events
        # feed (under the memory's service): events and services count those too.
        assert stored_markers(database, session_id) == {"events": MARKERS, "memories": MARKERS // 2,
                                                       "activity": MARKERS,
                                                       "distinct_services": MARKERS + MARKERS // 2}
        with database.connect() as connection:   # the operator's writes under load were stored too
            assert connection.execute(text("SELECT count(*) FROM memories WHERE service = 'loadtest'")).scalar() > 0
    finally:
        assert service.terminate() == 0
    database.dispose()
    if not on_postgres():   # the SQLite file checks itself; a server keeps its own pages whole
        assert integrity(db_path) == "ok"
