"""``[COOLDOWN:<action>:<service>] success|failure — <message>``: parsing, and
recording while a session runs (with its session and tier)."""
from __future__ import annotations

import logging

import pytest
from sqlalchemy import select

from app.extensions import db
from app.models import SessionActivity
from plugins.cooldowns import store
from plugins.cooldowns.markers import MAX_MESSAGE_CHARS, CooldownMarker, parse_cooldown_markers
from plugins.cooldowns.models import CooldownAction
from plugins.events.models import Event
from tests import streamlines as sl


@pytest.mark.parametrize("text, expected", [
    ("[COOLDOWN:restart:jellyfin] success — Back up, healthy after 60s",
     CooldownMarker("restart", "jellyfin", "success", "Back up, healthy after 60s")),
    ("[COOLDOWN:restart:jellyfin] success -- healthy", CooldownMarker("restart", "jellyfin", "success", "healthy")),
    ("[COOLDOWN:restart:jellyfin] failure - still crashing",
     CooldownMarker("restart", "jellyfin", "failure", "still crashing")),
    ("[COOLDOWN:redeployment:sonarr] failure: image pull failed",
     CooldownMarker("redeployment", "sonarr", "failure", "image pull failed")),
    ("[COOLDOWN:redeployment:sonarr] success – en dash", CooldownMarker("redeployment", "sonarr", "success", "en dash")),
    ("[COOLDOWN:redeploy:Sonarr.service] succeeded — alias, case and unit suffix",
     CooldownMarker("redeployment", "sonarr", "success", "alias, case and unit suffix")),
    ("[COOLDOWN:restart:jellyfin] failed", CooldownMarker("restart", "jellyfin", "failure", "")),
    ("Done. [COOLDOWN:restart:jellyfin] SUCCESS — up [EVENT:info:jellyfin] healthy",
     CooldownMarker("restart", "jellyfin", "success", "up")),
])
def test_parses_a_marker(text, expected):
    assert parse_cooldown_markers(text) == [expected]


def test_several_markers_in_one_block_in_order():
    text = ("[COOLDOWN:restart:a] success — one\nsome prose\n"
            "[COOLDOWN:redeployment:b] failure — two [COOLDOWN:restart:c] success — three")
    assert [(m.action, m.service, m.message) for m in parse_cooldown_markers(text)] == [
        ("restart", "a", "one"), ("redeployment", "b", "two"), ("restart", "c", "three")]


def test_a_message_over_the_limit_is_kept_to_its_beginning_with_the_length_written():
    long_message = "restarted after the OOM kill " + "x" * 2500
    [marker] = parse_cooldown_markers(f"[COOLDOWN:restart:Jellyfin] success — {long_message}")
    assert marker.message == long_message[:MAX_MESSAGE_CHARS] and marker.cut_from == 2529
    assert parse_cooldown_markers("[COOLDOWN:restart:web] success — back")[0].cut_from is None


@pytest.mark.parametrize("text, warning", [
    ("[COOLDOWN:reboot:jellyfin] success — rebooted", "unknown action 'reboot'"),
    ("[COOLDOWN:restart:jellyfin] restarted it", "without success or failure"),
    ("[COOLDOWN:restart:jellyfin]", "without success or failure"),
    ("[COOLDOWN:restart] success — no service", "malformed cooldown marker"),
    ("[COOLDOWN:restart:$name] success", "malformed cooldown marker"),
])
def test_bad_markers_are_skipped_with_a_warning(text, warning, caplog):
    with caplog.at_level(logging.WARNING, logger="plugins.cooldowns.markers"):
        assert parse_cooldown_markers(text) == []
    assert warning in caplog.text


def test_markers_are_recorded_while_the_session_runs_with_session_and_tier(app, fake_cli, run_session_now):
    fake_cli(sl.steps(
        sl.init(),
        sl.tool_use("docker restart jellyfin"),
        sl.tool_result("jellyfin\n[COOLDOWN:restart:evil] success — from tool output"),
        sl.text("Restarted. [COOLDOWN:restart:jellyfin] success — healthy after 60s"),
        sl.text("[COOLDOWN:redeployment:sonarr] failure — image pull failed"),
        sl.result()))
    session = run_session_now(tier=3)
    rows = db.session.scalars(select(CooldownAction).order_by(CooldownAction.id)).all()
    # Tool output never becomes a record; the agent's own text does.
    assert [(r.service, r.action, r.outcome, r.message, r.source, r.session_id, r.tier) for r in rows] == [
        ("jellyfin", "restart", "success", "healthy after 60s", "marker", session.id, 3),
        ("sonarr", "redeployment", "failure", "image pull failed", "marker", session.id, 3)]
    badges = db.session.scalars(select(SessionActivity.title).where(SessionActivity.kind == "marker")).all()
    assert "cooldown:restart:jellyfin success" in badges and "cooldown:redeployment:sonarr failure" in badges


def test_a_report_whose_message_was_cut_is_recorded_and_said_so(app, fake_cli, run_session_now, caplog):
    said = "restarted after the OOM kill " + "x" * 2500
    fake_cli(sl.steps(sl.init(), sl.text(f"[COOLDOWN:restart:jellyfin] success — {said}"), sl.result()))
    with caplog.at_level(logging.WARNING, logger="plugins.cooldowns"):
        run_session_now()
    assert "a cooldown marker's message of 2,529 characters is kept to its first 2,000" in caplog.text
    (row,) = db.session.scalars(select(CooldownAction)).all()
    assert row.message == said[:MAX_MESSAGE_CHARS]


def test_a_marker_completes_the_pending_row_the_hook_wrote(app, fake_cli, run_session_now):
    from app.sessions import control
    fake_cli(sl.steps(sl.init(), sl.text("[COOLDOWN:restart:jellyfin] failure — still crash-looping"),
                      sl.result()))
    # What the hook writes for this session's `docker restart jellyfin`, before the agent reports it.
    queued = control.enqueue(tier=2)
    hook_row = store.record_attempt("restart", "jellyfin", "pending", "docker restart jellyfin", queued.id, 2)
    other_session = store.record_attempt("restart", "jellyfin", "pending", "docker restart jellyfin", None, 1)
    db.session.commit()
    from app.sessions.manager import run_session
    run_session(control.claim(queued.id))
    assert db.session.scalar(select(CooldownAction.id).order_by(CooldownAction.id.desc())) == other_session.id
    db.session.refresh(hook_row)
    db.session.refresh(other_session)
    assert (hook_row.outcome, hook_row.message, hook_row.source) == ("failure", "still crash-looping", "hook")
    assert hook_row.reported_at is not None
    assert other_session.outcome == "pending"


def test_a_reported_restart_beyond_the_limit_is_counted_and_noticed(app, fake_cli, run_session_now):
    fake_cli(sl.steps(sl.init(), sl.text("[COOLDOWN:redeployment:sonarr] success — first"),
                      sl.text("[COOLDOWN:redeployment:sonarr] success — second, done some other way"),
                      sl.result()))
    session = run_session_now()
    assert store.usage("sonarr", "redeployment").used == 2
    (event,) = db.session.scalars(select(Event).where(Event.service == "sonarr")).all()
    assert event.level == "warning" and "beyond the limit" in event.message
    assert (event.session_id, event.tier) == (session.id, 1)


def test_a_failure_reported_for_a_restart_the_cooldown_denied_answers_the_denial_and_counts_nothing(
        app, fake_cli, run_session_now):
    """The agent says the refused restart did not happen: counting it would
    make 3 of 2, move when the next one is allowed, and warn that a restart
    was done beyond the limit some other way. A success reported after a
    denial is still counted and warned of: it was done some other way."""
    from app.sessions import control
    from app.sessions.manager import run_session
    from app.timeutil import utcnow
    from datetime import timedelta
    fake_cli(sl.steps(sl.init(), sl.text("[COOLDOWN:restart:pgx] failure — the restart was refused by the cooldown"),
                      sl.text("[COOLDOWN:restart:web] success — restarted it through the API instead"),
                      sl.result()))
    queued = control.enqueue(tier=1)
    for service in ("pgx", "web"):
        for minutes in (30, 20):
            store.record_attempt("restart", service, "pending", f"systemctl restart {service}", None, 1,
                                 now=utcnow() - timedelta(minutes=minutes))
        store.record_attempt("restart", service, "denied", f"systemctl restart {service}", queued.id, 1,
                             message="at the limit (2 per 4h)")
    db.session.commit()
    before = store.usage("pgx", "restart")
    session = run_session(control.claim(queued.id))
    db.session.expire_all()
    denied = db.session.scalars(select(CooldownAction).where(CooldownAction.outcome == "denied")
                                .order_by(CooldownAction.service)).all()
    assert [(row.service, row.message, row.reported_at is not None) for row in denied] == [
        ("pgx", "at the limit (2 per 4h); the agent reported: the restart was refused by the cooldown", True),
        ("web", "at the limit (2 per 4h)", False)]
    after = store.usage("pgx", "restart")
    assert (after.used, after.next_free_at) == (before.used, before.next_free_at) == (2, before.next_free_at)
    assert store.usage("web", "restart").used == 3
    warnings = db.session.scalars(select(Event.service).where(Event.level == "warning")).all()
    assert warnings == ["web"]
    logged = db.session.scalars(select(SessionActivity.body).where(SessionActivity.session_id == session.id,
                                                                   SessionActivity.kind == "marker")).all()
    assert logged[0] == "the restart was refused by the cooldown (the restart the cooldown denied: not counted)"


def test_a_marker_left_without_its_bracket_does_not_take_the_next_one_with_it():
    """Read up to the first "]", a marker the agent did not close would run
    into the next one and drop it, a restart that counts included."""
    text = "[COOLDOWN:restart:db on port 5432 [COOLDOWN:restart:web] success — back up"
    assert parse_cooldown_markers(text) == [CooldownMarker("restart", "web", "success", "back up")]
