"""Cooldown reports recorded a batch at a time (``claudeops_markers_flush``)
do what each report would do recorded on its own: the same rows completed
or added, the same records and notices, the same limit."""
from __future__ import annotations

import json
import threading
from datetime import datetime, timedelta, timezone

import pytest
from sqlalchemy import select

from app import runtime
from app.extensions import db
from app.models import SessionActivity
from app.plugin_types import MarkerRecord
from app.timeutil import utcnow
from plugins import cooldowns
from plugins.cooldowns import gate, store
from plugins.cooldowns.markers import parse_cooldown_markers
from plugins.cooldowns.models import CooldownAction
from plugins.events.models import Event
from tests.conftest import make_app
from tests.memory_helpers import new_run, stream_handler, text_line

NOW = datetime(2026, 11, 22, 8, 0, tzinfo=timezone.utc)
BLOCKS = [
    "[COOLDOWN:restart:jellyfin] success — back up",          # completes the hook's pending row
    "[COOLDOWN:restart:jellyfin] failure — still down\n"      # a second one the hook did not see
    "[COOLDOWN:restart:postgres] success",                    # postgres is at its limit already
    "[COOLDOWN:redeploy:web] success — new image\n[COOLDOWN:redeploy:web] success — again",
    "[COOLDOWN:restart:jellyfin] success — a third",          # beyond the limit
    "[COOLDOWN:restart:nas] success",                         # past the session's limit of records at 6
]


def _seed(run) -> None:
    store.record_attempt("restart", "jellyfin", "pending", "docker restart jellyfin", run.session_id, 1,
                         now=NOW - timedelta(minutes=5))
    for hours in (1, 2):
        store.record_attempt("restart", "postgres", "pending", "systemctl restart postgresql", None, 1,
                             now=NOW - timedelta(hours=hours))
    db.session.commit()


def _one_by_one(run) -> list[list[MarkerRecord]]:
    """Each report on its own, as the plugin recorded them before batches:
    the store read afresh for every one (the reference)."""
    limit, blocks = runtime.setting("CLAUDEOPS_COOLDOWN_MAX_PER_SESSION"), []
    for text in BLOCKS:
        records, refused = [], 0
        for marker in parse_cooldown_markers(text):
            rows = store.session_rows(run.session_id)
            row, created = store.record_outcome(marker.action, marker.service, marker.outcome, marker.message,
                                                run.session_id, run.tier, now=NOW, may_create=rows < limit)
            db.session.flush()
            if row is None:
                refused += 1
                continue
            summary = marker.message
            if created:
                over = store.usage(marker.service, marker.action, NOW)
                if over.used > over.limit.count:
                    summary = f"{summary} (beyond the limit: {store.explain([over])})".strip()
                    cooldowns._notice(run, marker.service, "beyond")
            records.append(MarkerRecord("cooldown", f"{marker.action}:{marker.service} {marker.outcome}", summary))
        if refused:
            records.append("refused")
        blocks.append(records)
    return blocks


def _batched(run) -> list[list[MarkerRecord]]:
    pending = [cooldowns.claudeops_markers(text, run)[0] for text in BLOCKS]
    cooldowns.claudeops_markers_flush(run)
    return [[record if record.stored else "refused" for record in block.records] for block in pending]


@pytest.mark.parametrize("limit", [6, 100])
def test_a_batch_of_reports_records_what_each_report_alone_records(tmp_path, monkeypatch, limit):
    monkeypatch.setattr(cooldowns, "utcnow", lambda: NOW)
    results = {}
    for way, record in (("alone", _one_by_one), ("batch", _batched)):
        app = make_app(tmp_path / way)
        with app.app_context():
            runtime.change({"CLAUDEOPS_COOLDOWN_MAX_PER_SESSION": limit})
            run = new_run()
            _seed(run)
            records = record(run)
            db.session.commit()
            rows = db.session.execute(select(
                CooldownAction.service, CooldownAction.action, CooldownAction.outcome, CooldownAction.source,
                CooldownAction.message, CooldownAction.session_id, CooldownAction.created_at,
                CooldownAction.reported_at).order_by(CooldownAction.id)).all()
            notices = db.session.scalars(select(Event.service).order_by(Event.id)).all()
            results[way] = (records, rows, notices)
    assert results["batch"] == results["alone"]
    records, rows, notices = results["batch"]
    summaries = [record.summary for block in records for record in block if record != "refused"]
    assert any("beyond the limit" in summary for summary in summaries)
    assert notices and set(notices) <= {"jellyfin", "postgres", "web"}
    assert (["refused"] in records) == (limit == 6)
    assert [row.outcome for row in rows if row.service == "jellyfin"][0] == "success"   # the hook's row, completed


def _pre_tool_use(command: str) -> str:
    return json.dumps({"hook_event_name": "PreToolUse", "tool_name": "Bash", "cwd": "/srv/ops/work",
                       "tool_input": {"command": command}})


def _one_restart_an_hour_ago() -> None:
    """Of jellyfin: one of the two the default limit allows in 4 hours."""
    store.record_attempt("restart", "jellyfin", "pending", "docker restart jellyfin", None, 1,
                         now=utcnow() - timedelta(hours=1))
    db.session.commit()


def test_a_restart_the_hook_checks_while_a_batch_records_one_it_did_not_see_is_denied(tmp_path, monkeypatch):
    """The hook's check (another process: here a thread with its own
    connection) between the batch's read of the counted restarts and its
    commit: the agent's report of a restart done by hand is one of the two
    allowed, and the hook must count it, not let a third one run."""
    app = make_app(tmp_path)
    with app.app_context():
        run = new_run(tier=3)   # a tier that may restart
        _one_restart_an_hour_ago()
        handler = stream_handler(run)
        decisions = []

        def the_hook():
            with app.app_context():
                decisions.append(gate.check(_pre_tool_use("docker restart jellyfin"),
                                            gate.Caller(run.session_id, run.tier)))

        hook = threading.Thread(target=the_hook)
        read = store.counted_times

        def read_then_the_hook(*args, **kwargs):
            found = read(*args, **kwargs)
            hook.start()
            hook.join(timeout=1)   # done at once, unless the batch holds the lock: then after its commit
            return found

        monkeypatch.setattr(store, "counted_times", read_then_the_hook)
        handler.handle_line(text_line("[COOLDOWN:restart:jellyfin] success — restarted by hand"))
        handler.commit()
        hook.join(timeout=30)
        (decision,) = decisions
        db.session.expire_all()
        counted = db.session.scalars(select(CooldownAction.outcome).where(
            CooldownAction.outcome.in_(("pending", "success", "failure")))).all()
    assert decision is not None and "cooldown limit reached" in decision
    assert len(counted) == 2


def test_a_batch_recording_a_restart_the_hook_did_not_see_while_the_hook_allows_one_says_it_is_beyond(
        tmp_path, monkeypatch):
    """The other way round: the batch's report between the hook's read of
    the counted restarts and its commit. The restart reported was done
    already; once the hook's is counted, the report is beyond the limit,
    and the operator is told so."""
    app = make_app(tmp_path)
    with app.app_context():
        run = new_run()
        _one_restart_an_hour_ago()

        def the_batch():
            with app.app_context():
                handler = stream_handler(run)
                handler.handle_line(text_line("[COOLDOWN:restart:jellyfin] success — restarted by hand"))
                handler.commit()

        batch = threading.Thread(target=the_batch)
        read = store.usage

        def read_then_the_batch(*args, **kwargs):
            found = read(*args, **kwargs)
            if kwargs.get("counted") is None and not batch.is_alive() and batch.ident is None:
                batch.start()
                batch.join(timeout=1)
            return found

        monkeypatch.setattr(store, "usage", read_then_the_batch)
        # An interactive Claude Code on the same host, guarded by the same hook:
        # its restart is no session's, and the session's report cannot complete it.
        decision = gate.check(_pre_tool_use("docker restart jellyfin"), gate.Caller(None, None))
        batch.join(timeout=30)
        db.session.expire_all()
        counted = db.session.scalars(select(CooldownAction.outcome).where(
            CooldownAction.outcome.in_(("pending", "success", "failure")))).all()
        warnings = db.session.scalars(select(Event.message).where(Event.level == "warning")).all()
        logged = db.session.scalars(select(SessionActivity.body).where(SessionActivity.kind == "marker")).all()
    assert decision is None   # the hook went first: the report is the third restart
    assert len(counted) == 3
    assert any("beyond the limit" in message for message in warnings)
    assert any("beyond the limit" in (body or "") for body in logged)
