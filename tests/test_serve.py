"""`claudeops serve` for real: gunicorn with several workers, one scheduler,
a clean stop on SIGTERM."""
from __future__ import annotations

import json
import time

import pytest

from tests import streamlines as sl
from tests.conftest import FAKE_CLAUDE
from tests.support.service import Service
from tests.support.waiting import wait_for

pytestmark = pytest.mark.slow


@pytest.fixture
def service(tmp_path, fake_cli):
    runs = tmp_path / "runs.jsonl"
    started = []

    def start(session_seconds: float, workers: int = 3) -> Service:
        fake_cli(sl.steps(sl.init(), sl.text("[EVENT:info:web] up")) + [{"sleep": session_seconds}]
                 + sl.steps(sl.result("up")))
        svc = Service(tmp_path / "state", {"CLAUDEOPS_INTERVAL": "0", "CLAUDEOPS_CLAUDE_BIN": str(FAKE_CLAUDE),
                                           "FAKE_CLAUDE_RUNS": str(runs)}, workers=workers)
        started.append(svc)
        svc.runs_path = runs
        return svc.start()
    yield start
    for svc in started:
        svc.terminate()




def test_three_quick_run_now_requests_run_one_after_another_in_one_scheduler(service):
    svc = service(session_seconds=1.0, workers=3)
    ids = []
    for _ in range(3):
        status, body = svc.post("/api/v1/sessions/trigger", {"prompt": "check"})
        assert status == 201, body
        ids.append(body["id"])
    assert len(set(ids)) == 3

    def all_done():
        sessions = [svc.get(f"/api/v1/sessions/{i}")[1] for i in ids]
        return sessions if all(s["status"] == "completed" for s in sessions) else None
    wait_for(all_done, timeout=45)

    runs = [json.loads(line) for line in svc.runs_path.read_text().splitlines()]
    assert [int(r["session"]) for r in runs] == ids
    # Every CLI was started by the same process, `claudeops serve` itself, not by a gunicorn worker
    # (through the guard that leads each session's process group, app/sessions/groupguard.py).
    assert {r["grandparent"] for r in runs} == {svc.process.pid}
    assert len({r["ppid"] for r in runs}) == 3
    for earlier, later in zip(runs, runs[1:]):
        assert later["started"] >= earlier["ended"], "two sessions ran at once"
    status, events = svc.get("/api/v1/events")
    assert events["total"] == 3 and {e["session_id"] for e in events["events"]} == set(ids)


def test_sigterm_during_a_session_records_it_as_stopped_and_exits_cleanly(service, tmp_path):
    svc = service(session_seconds=60, workers=2)
    status, body = svc.post("/api/v1/sessions/trigger", {})
    session_id = body["id"]
    wait_for(lambda: svc.get(f"/api/v1/sessions/{session_id}")[1]["status"] == "running", timeout=15)
    time.sleep(0.5)
    assert svc.terminate() == 0
    assert not svc.group_alive(), "gunicorn workers or the CLI outlived the service"

    # Start again on the same state: the session was ended and recorded, not left running.
    svc2 = Service(tmp_path / "state", {"CLAUDEOPS_INTERVAL": "0"}, workers=1).start()
    try:
        session = svc2.get(f"/api/v1/sessions/{session_id}")[1]
        assert session["status"] == "stopped"
        assert "service shut down" in session["status_reason"]
    finally:
        assert svc2.terminate() == 0


def test_the_dashboard_is_served_by_gunicorn(service):
    svc = service(session_seconds=0, workers=2)
    import urllib.request
    with urllib.request.urlopen(svc.base_url + "/sessions", timeout=10) as response:
        assert response.status == 200
        assert "Run now" in response.read().decode()
    assert "gunicorn" in svc.log().lower() or "Booting worker" in svc.log()
