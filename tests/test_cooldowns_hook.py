"""``claudeops cooldowns check-tool``, run as the Claude Code CLI runs it: the
real executable, the PreToolUse call as JSON on stdin, the session's
environment. Also the settings that install it, and ``cooldowns list``."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import select

from app.extensions import db
from app.sessions import control
from app.timeutil import utcnow
from plugins import cooldowns
from plugins.cooldowns import store
from plugins.cooldowns.gate import ADVICE
from plugins.cooldowns.models import CooldownAction
from plugins.events.models import Event
from tests import streamlines as sl
from tests.conftest import make_app
from tests.support.database import database_env, explicit_database_url, postgres_only

CLAUDEOPS = Path(sys.executable).with_name("claudeops")


def pre_tool_use(command: str, tool: str = "Bash", cwd: str = "/srv/ops/work") -> str:
    return json.dumps({"session_id": "5f0c6a43-7d0e-4a53-a8a5-0c2a3c2f9e10", "transcript_path": "/tmp/t.jsonl",
                       "cwd": cwd, "permission_mode": "default", "hook_event_name": "PreToolUse",
                       "tool_name": tool, "tool_input": {"command": command, "description": "x"},
                       "tool_use_id": "toolu_01ABC"})


@pytest.fixture
def state(tmp_path):
    """A migrated state directory with one running tier-3 session; gives a
    function that runs check-tool for that session."""
    app = make_app(tmp_path)
    with app.app_context():
        session_id = control.claim(control.enqueue(tier=3).id).id

    def check(stdin: str, command: list[str] | None = None, **env) -> subprocess.CompletedProcess:
        full_env = {**os.environ, "CLAUDEOPS_STATE_DIR": str(tmp_path / "state"), **database_env(tmp_path / "state"),
                    "CLAUDEOPS_SESSION_ID": str(session_id), "CLAUDEOPS_TIER": "3", **env}
        return subprocess.run(command or [str(CLAUDEOPS), "cooldowns", "check-tool"], input=stdin, env=full_env,
                              capture_output=True, text=True, timeout=60)

    check.app, check.session_id = app, session_id
    return check


def rows(app) -> list[tuple]:
    with app.app_context():
        return [(r.service, r.action, r.outcome, r.command, r.session_id, r.tier)
                for r in db.session.scalars(select(CooldownAction).order_by(CooldownAction.id))]


def seed(app, service: str, count: int, action: str = "restart") -> None:
    with app.app_context():
        for minutes in range(count):
            store.record_attempt(action, service, "pending", f"docker restart {service}", None, 1,
                                 now=utcnow() - timedelta(minutes=30 + minutes))
        db.session.commit()


def test_the_services_own_secrets_are_redacted_in_a_recorded_command_though_the_hook_never_holds_them(state):
    from app.redaction import WITHHELD_ENV, WithheldValues
    withheld = WithheldValues.describe(["Operator-Pass-2024"])
    result = state(pre_tool_use("docker restart jellyfin # Operator-Pass-2024"), **{WITHHELD_ENV: withheld})
    assert (result.returncode, result.stdout) == (0, "")
    assert [row[3] for row in rows(state.app)] == ["docker restart jellyfin # [redacted]"]


def test_a_secret_cut_by_the_end_of_a_long_recorded_command_is_redacted_whole(state):
    """A command is recorded up to its first 2,000 characters; a secret
    running past that end must not be stored half, where it is no longer
    the value the redactor knows."""
    from app.redaction import WITHHELD_ENV, WithheldValues
    from plugins.cooldowns.gate import MAX_COMMAND_CHARS
    secret = "Operator-Pass-2024"
    head = "docker restart jellyfin # "
    command = head + "x" * (MAX_COMMAND_CHARS - len(head) - 10 - 1) + " " + secret
    assert command[:MAX_COMMAND_CHARS].endswith(" " + secret[:10])
    result = state(pre_tool_use(command), **{WITHHELD_ENV: WithheldValues.describe([secret])})
    assert (result.returncode, result.stdout) == (0, "")
    [recorded] = [row[3] for row in rows(state.app)]
    assert recorded.startswith(head) and secret[:4] not in recorded


def test_below_the_limit_the_call_is_allowed_silently_and_recorded(state):
    result = state(pre_tool_use("sudo docker restart jellyfin && docker logs --tail 5 jellyfin"))
    assert (result.returncode, result.stdout) == (0, "")
    assert rows(state.app) == [("jellyfin", "restart", "pending",
                                "sudo docker restart jellyfin && docker logs --tail 5 jellyfin", state.session_id, 3)]


def test_half_a_surrogate_pair_in_a_command_is_recorded_as_u_fffd_not_a_failed_check(state):
    """JSON may carry one ("\\ud800"): the restart below the limit is let
    run and recorded, not denied as a check that failed."""
    sent = pre_tool_use("docker restart jellyfin # \ud800")
    assert "\\ud800" in sent
    result = state(sent)
    assert (result.returncode, result.stdout) == (0, ""), result.stdout
    assert rows(state.app) == [("jellyfin", "restart", "pending", "docker restart jellyfin # \ufffd",
                                state.session_id, 3)]


def test_at_the_limit_the_call_is_denied_with_the_reason_and_the_attempt_kept(state):
    seed(state.app, "jellyfin", 2)
    result = state(pre_tool_use("docker restart jellyfin"))
    assert result.returncode == 0
    output = json.loads(result.stdout)["hookSpecificOutput"]
    assert (output["hookEventName"], output["permissionDecision"]) == ("PreToolUse", "deny")
    reason = output["permissionDecisionReason"]
    assert reason.startswith("Claude Ops cooldown limit reached: restart of jellyfin: 2 of 2 in 4h used, "
                             "next allowed at ")
    assert "The command was not run." in reason
    assert rows(state.app)[-1] == ("jellyfin", "restart", "denied", "docker restart jellyfin", state.session_id, 3)
    with state.app.app_context():
        assert store.usage("jellyfin", "restart").used == 2          # the denial did not count
        (event,) = db.session.scalars(select(Event)).all()            # and the operator's feed says so
        assert (event.level, event.service, event.session_id, event.tier) == ("warning", "jellyfin",
                                                                              state.session_id, 3)


def test_below_the_lowest_tier_that_may_a_restart_is_denied_kept_and_not_counted(state):
    """Tiers 1 and 2 are told to change nothing, and the hook holds them to
    it: whatever the limits, the restart does not run, the agent is told to
    escalate, the operator's feed says so, and the limit counts nothing."""
    result = state(pre_tool_use("docker restart jellyfin"), CLAUDEOPS_TIER="1")
    reason = json.loads(result.stdout)["hookSpecificOutput"]["permissionDecisionReason"]
    assert reason == ("Claude Ops: sessions of tier 1 do not restart or redeploy services "
                      "(CLAUDEOPS_COOLDOWN_MIN_TIER=3); the restart of jellyfin was not run. If it is needed, "
                      "write [ESCALATE] <why> at the start of a line, for a session of tier 3 to do it.")
    assert rows(state.app) == [("jellyfin", "restart", "denied", "docker restart jellyfin", state.session_id, 1)]
    with state.app.app_context():
        assert store.usage("jellyfin", "restart").used == 0
        (event,) = db.session.scalars(select(Event)).all()
        assert (event.level, event.service) == ("warning", "jellyfin")
        assert event.message == ("Cooldown: a restart of jellyfin was denied (a session of tier 1; "
                                 "CLAUDEOPS_COOLDOWN_MIN_TIER=3).")
    # A target it cannot read is refused for the tier too, and nothing is recorded of it.
    unread = state(pre_tool_use("docker restart $name"), CLAUDEOPS_TIER="2")
    assert "sessions of tier 2 do not restart or redeploy services" in unread.stdout
    assert len(rows(state.app)) == 1
    # Anything else runs as before.
    assert state(pre_tool_use("docker ps && systemctl status nginx"), CLAUDEOPS_TIER="1").stdout == ""


def test_the_lowest_tier_that_may_restart_is_a_setting(state):
    assert state(pre_tool_use("docker restart jellyfin"), CLAUDEOPS_TIER="1", CLAUDEOPS_COOLDOWN_MIN_TIER="1"
                 ).stdout == ""
    assert rows(state.app) == [("jellyfin", "restart", "pending", "docker restart jellyfin", state.session_id, 1)]
    # With no tier above to escalate to, the agent is told to report instead.
    reason = json.loads(state(pre_tool_use("systemctl restart nginx"), CLAUDEOPS_TIER="1",
                              CLAUDEOPS_MAX_TIER="1").stdout)["hookSpecificOutput"]["permissionDecisionReason"]
    assert "[ESCALATE]" not in reason and reason.endswith(ADVICE)


def test_one_service_at_its_limit_denies_the_whole_call(state):
    seed(state.app, "sonarr", 1, action="redeployment")
    result = state(pre_tool_use("docker restart jellyfin; cd /opt/sonarr && docker compose up -d --force-recreate"))
    reason = json.loads(result.stdout)["hookSpecificOutput"]["permissionDecisionReason"]
    assert "redeployment of sonarr: 1 of 1 in 24h used" in reason and "jellyfin" not in reason
    assert [(s, a, o) for s, a, o, *_ in rows(state.app)][-2:] == [("jellyfin", "restart", "denied"),
                                                                   ("sonarr", "redeployment", "denied")]


def test_the_limit_setting_is_read_by_the_hook(state):
    seed(state.app, "jellyfin", 1)
    assert state(pre_tool_use("docker restart jellyfin")).stdout == ""
    assert "deny" in state(pre_tool_use("docker restart jellyfin"), CLAUDEOPS_COOLDOWN_RESTART_LIMIT="1/1h").stdout


@pytest.mark.parametrize("stdin", [
    pre_tool_use("ls -la /opt && docker ps"),
    pre_tool_use("docker restart jellyfin", tool="Read"),
    "not json at all",
    json.dumps(["a", "list"]),
    json.dumps({"tool_name": "Bash", "tool_input": "docker restart jellyfin"}),
    "",
])
def test_anything_else_is_allowed_silently_and_not_recorded(state, stdin):
    result = state(stdin)
    assert (result.returncode, result.stdout) == (0, "")
    assert rows(state.app) == []


def test_a_service_that_cannot_be_read_is_denied(state):
    result = state(pre_tool_use("for s in jellyfin sonarr; do docker restart $s; done"))
    reason = json.loads(result.stdout)["hookSpecificOutput"]["permissionDecisionReason"]
    assert "cannot tell which service" in reason and "restart of $s" in reason
    assert rows(state.app) == []


def test_a_shell_fed_what_the_text_does_not_say_is_denied_where_the_line_names_a_restart(state):
    result = state(pre_tool_use("cmd='systemctl restart nginx'; echo \"$cmd\" | bash"))
    reason = json.loads(result.stdout)["hookSpecificOutput"]["permissionDecisionReason"]
    assert "cannot tell which service" in reason and "restart of the commands a shell reads from its input" in reason
    assert state(pre_tool_use('echo "$cmd" | bash')).stdout == ""
    assert rows(state.app) == []


def test_when_the_check_fails_a_restart_is_denied_and_anything_else_allowed(state, tmp_path):
    (tmp_path / "not-migrated").mkdir()
    broken = explicit_database_url(tmp_path / "not-migrated")
    if broken.startswith("sqlite:"):   # an empty database, as PostgreSQL's new one is
        (tmp_path / "not-migrated" / "claudeops.db").touch()
    result = state(pre_tool_use("docker restart jellyfin"), CLAUDEOPS_DATABASE_URL=broken)
    assert result.returncode == 0
    reason = json.loads(result.stdout)["hookSpecificOutput"]["permissionDecisionReason"]
    # SQLite reports a missing table as an OperationalError, PostgreSQL as a ProgrammingError.
    assert re.match(r"Claude Ops could not check the cooldown for restart of jellyfin "
                    r"\((OperationalError|ProgrammingError): ", reason), reason
    assert "the command was not run" in reason
    # Logged in one line, saying what to do: no traceback for a database that is not the service's.
    assert "cooldowns: the check failed (the database is not migrated" in result.stderr, result.stderr
    assert "Traceback" not in result.stderr
    assert state(pre_tool_use("uptime"), CLAUDEOPS_DATABASE_URL=broken).stdout == ""
    missing = tmp_path / "not-there" / "claudeops.db"   # none is made for the check
    result = state(pre_tool_use("docker restart jellyfin"), CLAUDEOPS_DATABASE_URL=f"sqlite:///{missing}")
    reason = json.loads(result.stdout)["hookSpecificOutput"]["permissionDecisionReason"]
    assert f"(NoDatabase: there is no Claude Ops database at sqlite:///{missing}: " in reason, reason
    assert "the command was not run" in reason and not missing.parent.exists()


def test_an_unknown_session_is_recorded_without_one(state):
    state(pre_tool_use("systemctl restart nginx.service"), CLAUDEOPS_SESSION_ID="999")
    assert rows(state.app) == [("nginx", "restart", "pending", "systemctl restart nginx.service", None, 3)]


def test_a_session_or_tier_no_session_manager_sets_is_recorded_as_none(state):
    for session_id, tier in (("99999999999999999999999", "-5"), ("9223372036854775808", "99999999999999999999")):
        result = state(pre_tool_use("systemctl restart nginx.service"), CLAUDEOPS_SESSION_ID=session_id,
                       CLAUDEOPS_TIER=tier)
        assert result.returncode == 0 and result.stdout == "" and "Traceback" not in result.stderr
    assert rows(state.app) == [("nginx", "restart", "pending", "systemctl restart nginx.service", None, None)] * 2


def test_the_command_in_the_cli_settings_runs_the_check(state):
    settings = cooldowns.claudeops_cli_settings(run=None)
    (matcher,) = settings["hooks"]["PreToolUse"]
    (hook,) = matcher["hooks"]
    assert matcher["matcher"] == "Bash" and hook["type"] == "command" and hook["timeout"] == 30
    assert hook["command"] == f"{sys.executable} -S {cooldowns.PREFILTER} {CLAUDEOPS} cooldowns check-tool"
    seed(state.app, "jellyfin", 2)
    result = state(pre_tool_use("docker restart jellyfin"), command=["sh", "-c", hook["command"]])
    assert json.loads(result.stdout)["hookSpecificOutput"]["permissionDecision"] == "deny"


def test_every_session_is_started_with_the_hook_and_its_environment(app, fake_cli, run_session_now):
    argv_file = fake_cli(sl.steps(sl.init(), sl.result()))
    session = run_session_now(tier=3)
    recorded = json.loads(argv_file.read_text())
    settings = json.loads(recorded["argv"][recorded["argv"].index("--settings") + 1])
    commands = [h["command"] for m in settings["hooks"]["PreToolUse"] if m["matcher"] == "Bash" for h in m["hooks"]]
    assert f"{sys.executable} -S {cooldowns.PREFILTER} {CLAUDEOPS} cooldowns check-tool" in commands
    assert recorded["env"]["CLAUDEOPS_SESSION_ID"] == str(session.id) and recorded["env"]["CLAUDEOPS_TIER"] == "3"
    assert recorded["env"]["CLAUDEOPS_STATE_DIR"] == app.config["CLAUDEOPS_STATE_DIR"]
    assert recorded["env"]["CLAUDEOPS_DATABASE_URL"] == app.config["CLAUDEOPS_DATABASE_URL"]


def test_cooldowns_list_shows_usage_and_recent_actions(state):
    seed(state.app, "jellyfin", 2)
    state(pre_tool_use("docker restart jellyfin"))
    result = subprocess.run([str(CLAUDEOPS), "cooldowns", "list"], capture_output=True, text=True, timeout=60,
                            env=dict(os.environ, CLAUDEOPS_STATE_DIR=str(state.app.config["CLAUDEOPS_STATE_DIR"]),
                                     **database_env(state.app.config["CLAUDEOPS_STATE_DIR"])))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "limits: 2 restarts per 4h, 1 redeployment per 24h"
    assert lines[1].startswith("jellyfin") and "restart 2/2 AT LIMIT, free at " in lines[1]
    assert "redeployment 0/1 ok" in lines[1]
    assert " denied " in lines[3] and f"#{state.session_id}" in lines[3]
    assert result.stderr.strip().endswith("3 of 3 actions")


def test_cooldowns_list_takes_the_actions_other_names_as_the_api_does(app):
    from app.cli import main
    seed(app, "jellyfin", 1)
    runner = app.test_cli_runner()
    for name in ("redeploy", "Redeployment", "deploy"):
        result = runner.invoke(main, ["cooldowns", "list", "--action", name])
        assert result.exit_code == 0, result.output
        assert "0 of 0 actions" in result.output   # only redeployments, and the seeded one is a restart
    one = runner.invoke(main, ["cooldowns", "list", "--action", "Restart"])
    assert one.exit_code == 0 and one.output.rstrip().endswith("1 of 1 action"), one.output
    assert runner.invoke(main, ["cooldowns", "list", "--outcome", "Pending"]).output.rstrip().endswith("1 of 1 action")
    refused = runner.invoke(main, ["cooldowns", "list", "--action", "reboot"])
    assert refused.exit_code == 2 and "'reboot' is not one of restart, redeployment" in refused.output


@pytest.mark.parametrize("command, denied", [("docker restart jellyfin", True), ("uptime", False)])
def test_if_recognising_fails_only_restart_like_commands_are_denied(app, monkeypatch, command, denied):
    from plugins.cooldowns import gate

    def broken(line, cwd=None):
        raise RuntimeError("recogniser bug")
    monkeypatch.setattr(gate, "recognise", broken)
    reason = gate.check(pre_tool_use(command), gate.Caller(None, None))
    assert (reason is not None) == denied
    if denied:
        assert "could not check this command against the cooldowns (recogniser bug)" in reason


def test_a_limit_changed_at_run_time_holds_for_the_hook_at_once(state):
    from app.runtime import change
    seed(state.app, "jellyfin", 1)
    with state.app.app_context():
        change({"CLAUDEOPS_COOLDOWN_RESTART_LIMIT": "1/2h"})
        assert store.usage("jellyfin", "restart").at_limit
    reason = json.loads(state(pre_tool_use("docker restart jellyfin")).stdout)["hookSpecificOutput"][
        "permissionDecisionReason"]
    assert "restart of jellyfin: 1 of 1 in 2h used" in reason
    with state.app.app_context():
        change({"CLAUDEOPS_COOLDOWN_RESTART_LIMIT": None})
    assert state(pre_tool_use("docker restart jellyfin")).stdout == ""


def test_a_held_lock_file_denies_a_restart_before_the_clis_hook_timeout_would_let_it_run(app, monkeypatch):
    """The agent runs as the service's user and can take the lock file
    itself (``flock ~/.claudeops/cooldowns.lock sleep 600 &``). Waiting for
    it without end would let the CLI's 30 s hook timeout run the restart
    unchecked; the check gives up first and denies."""
    import fcntl
    import time

    from plugins.cooldowns import gate
    monkeypatch.setattr(gate, "LOCK_FILE_WAIT_SECONDS", 0.3)
    lock_path = Path(app.config["CLAUDEOPS_STATE_DIR"]) / "cooldowns.lock"
    with open(lock_path, "a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        started = time.monotonic()
        reason = gate.check(pre_tool_use("docker restart jellyfin"), gate.Caller(None, None))
        waited = time.monotonic() - started
        assert gate.check(pre_tool_use("uptime"), gate.Caller(None, None)) is None   # nothing to check
    assert 0.3 <= waited < 5
    assert reason.startswith("Claude Ops could not check the cooldown for restart of jellyfin (LockBusy: ")
    assert f"{lock_path} has been held by another process for over 0.3 s" in reason
    assert "so the command was not run" in reason
    assert rows(app) == []
    assert gate.check(pre_tool_use("docker restart jellyfin"), gate.Caller(None, None)) is None   # let go: allowed
    assert [row[:3] for row in rows(app)] == [("jellyfin", "restart", "pending")]


@postgres_only("SQLite's busy timeout bounds the wait for its write lock; PostgreSQL's advisory lock waits for ever")
def test_on_postgres_a_held_write_lock_denies_a_restart_within_the_wait(app, monkeypatch):
    from sqlalchemy import text

    from app.write_lock import ADVISORY_KEY
    from plugins.cooldowns import gate
    monkeypatch.setattr(gate, "DATABASE_LOCK_WAIT_SECONDS", 0.5)
    with db.engine.connect() as other:
        other.execute(text("SELECT pg_advisory_lock(:key)"), {"key": ADVISORY_KEY})
        try:
            reason = gate.check(pre_tool_use("docker restart jellyfin"), gate.Caller(None, None))
        finally:
            other.execute(text("SELECT pg_advisory_unlock(:key)"), {"key": ADVISORY_KEY})
            other.commit()
    assert reason.startswith("Claude Ops could not check the cooldown for restart of jellyfin (OperationalError: ")
    assert "lock timeout" in reason and "so the command was not run" in reason
    assert rows(app) == []
    assert gate.check(pre_tool_use("docker restart jellyfin"), gate.Caller(None, None)) is None


def test_a_fifo_put_where_the_lock_file_is_denies_at_once(state):
    """Opening a FIFO waits for a reader for ever: the agent could swap one
    in (`rm cooldowns.lock; mkfifo cooldowns.lock`) and have the CLI's hook
    timeout run every restart unchecked."""
    import time
    lock_path = Path(state.app.config["CLAUDEOPS_STATE_DIR"]) / "cooldowns.lock"
    lock_path.unlink(missing_ok=True)
    os.mkfifo(lock_path)
    started = time.monotonic()
    result = state(pre_tool_use("docker restart jellyfin"))
    assert time.monotonic() - started < 20
    reason = json.loads(result.stdout)["hookSpecificOutput"]["permissionDecisionReason"]
    assert f"(NotALockFile: {lock_path} is not a plain file)" in reason and "so the command was not run" in reason
    assert rows(state.app) == []


def test_a_check_that_has_not_answered_by_its_deadline_denies_and_ends():
    """Whatever the check is stuck on (here, a sleep in C standing for a
    lock, the database or a plugin's hook), the answer comes in time."""
    import time
    script = ("import time\n"
              "from plugins.cooldowns import gate\n"
              "answer = gate.Answer(0.5)\n"
              "time.sleep(30)\n"
              "answer.give(None)\n")
    started = time.monotonic()
    stuck = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
                           cwd=Path(__file__).resolve().parents[1])
    assert time.monotonic() - started < 10
    assert stuck.returncode == 0, stuck.stderr
    output = json.loads(stuck.stdout)["hookSpecificOutput"]
    assert output["permissionDecision"] == "deny"
    assert output["permissionDecisionReason"].startswith(
        "Claude Ops could not finish checking this command against the cooldowns within 0.5 s")
    quick = subprocess.run([sys.executable, "-c", script.replace("time.sleep(30)", "time.sleep(0)").replace(
        "answer.give(None)", "answer.give('over the limit'); time.sleep(1)")], capture_output=True, text=True,
        timeout=60, cwd=Path(__file__).resolve().parents[1])
    assert [json.loads(line)["hookSpecificOutput"]["permissionDecisionReason"]
            for line in quick.stdout.splitlines()] == ["over the limit"]   # once, the check's: not the deadline's too


def test_every_wait_of_the_check_is_within_its_deadline_and_that_before_the_clis_hook_timeout():
    from plugins.cooldowns import HOOK_TIMEOUT_SECONDS, gate
    starting_claudeops = 2   # about a second measured; twice that for a loaded host
    assert gate.LOCK_FILE_WAIT_SECONDS + gate.DATABASE_LOCK_WAIT_SECONDS < gate.CHECK_DEADLINE_SECONDS
    assert gate.CHECK_DEADLINE_SECONDS + starting_claudeops < HOOK_TIMEOUT_SECONDS


def test_a_check_the_agent_made_fail_denies_the_restart_through_the_clis_hook_command(state):
    """The agent runs as the service's user: it can spoil the state
    directory's cookie key, which every claudeops command reads as it
    starts. The hook command the CLI runs then still denies the restart."""
    settings = cooldowns.claudeops_cli_settings(run=None)
    command = settings["hooks"]["PreToolUse"][0]["hooks"][0]["command"]
    key = Path(state.app.config["CLAUDEOPS_STATE_DIR"]) / "secret_key"
    key.write_bytes(b"\xff")
    result = state(pre_tool_use("docker restart jellyfin"), command=["sh", "-c", command],
                   CLAUDEOPS_SECRET_KEY="")
    assert result.returncode == 0, result.stderr
    reason = json.loads(result.stdout)["hookSpecificOutput"]["permissionDecisionReason"]
    assert reason.startswith("Claude Ops could not check this command against the cooldowns (it exited with status 78")
    assert state(pre_tool_use("docker ps"), command=["sh", "-c", command], CLAUDEOPS_SECRET_KEY="").stdout == ""


def test_the_denial_notice_tells_the_plugins_of_the_session_as_the_session_does(tmp_path, monkeypatch):
    """Escalation reason, dry run and every installed tag included: a
    plugin's notice hook sees the same RunInfo from the check as in the session."""
    from app.hookspecs import hookimpl
    from app.sessions.run_info import run_info
    from plugins.cooldowns.gate import _notify

    told = []

    class Notices:
        @hookimpl
        def claudeops_marker_tags(self):
            return ["[TICKET:"]

        @hookimpl
        def claudeops_notice(self, level, service, message, run):
            told.append(run)

    monkeypatch.setenv("CLAUDEOPS_DRY_RUN", "true")
    app = make_app(tmp_path, plugins=[Notices()])
    with app.app_context():
        parent_id = control.claim(control.enqueue(tier=1).id).id
        child = control.enqueue(tier=2, trigger="escalation", parent_id=parent_id, escalation_reason="disk full")
        _notify([("jellyfin", "Cooldown: a restart of jellyfin was denied.")], child.id)
        expected = run_info(db.session.get(type(child), child.id))
    assert told == [expected]
    assert (expected.escalation_reason, expected.dry_run, expected.parent_session_id) == ("disk full", True, parent_id)
    assert "[TICKET:" in expected.marker_tags
