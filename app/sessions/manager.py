"""Run one claimed session from start to finished status.

Order of a session: ``claudeops_session_starting`` → tier prompt and system
prompt → the CLI in its own process group, its output handled line by line →
final status from how the process ended and its ``result`` line →
``claudeops_session_finished``.
"""
from __future__ import annotations

import json
import logging
import os
import threading
import time
from functools import partial
from pathlib import Path
from typing import Optional

from flask import current_app
from sqlalchemy import inspect
from sqlalchemy.exc import SQLAlchemyError

from app import dbfaults, marker_queue
from app.database_url import absolute_sqlite_url
from app.executable import claudeops_command
from app.extensions import db
from app.mcp import ALLOW_RULE, session_mcp_config
from app.models import COMPLETED, FAILED, STOPPED, TIMED_OUT, Session
from app.plugin_types import RunInfo, SessionResult
from app.plugins import call_each, collect
from app.redaction import WITHHELD_ENV, WithheldValues, head_redacted, redactor
from app.runtime import setting
from app.sessions import control, escalation
from app.sessions.activity import StreamHandler
from app.sessions.collector import earlier_objects_set_apart
from app.sessions.leftover_groups import owner_of
from app.sessions.marker_tags import tags_by_plugin
from app.sessions.prompts import PromptError, system_prompt, tier_prompt
from app.sessions.results_dir import results_dir_id
from app.sessions.run_info import run_info
from app.sessions.runner import CLICommand, ProcessOutcome, run_process
from app.sessions.spending import Budget, session_budget
from app.timeutil import utcnow

log = logging.getLogger(__name__)

STOP_POLL_SECONDS = 1.0
# The most one command-line argument may hold on Linux (MAX_ARG_STRLEN, its
# NUL included): the system prompt is one (--append-system-prompt). A longer
# one would fail the CLI's start with nothing but "Argument list too long".
MAX_ARGUMENT_BYTES = 128 * 1024 - 1
SHUTDOWN_REASON = "the service shut down during the session"
# A stop of the whole service often signals the CLI's process group too
# (systemd's KillMode=control-group): the CLI may end of it (dying of the
# signal, or exiting 143 as the real one does) a moment before the service's
# own handler has said so. How long a CLI that ended without its result line
# waits for that word before it counts as failed.
SHUTDOWN_GRACE_SECONDS = 2.0
OPERATOR_STOP_REASON = "stopped by the operator"
# The result of a session the CLI ended at --max-budget-usd.
OVER_BUDGET = "error_max_budget_usd"
# As much of an error result's ``errors`` as a status reason gives.
MAX_ERRORS_SAID = 500


def build_argv(config: dict, tier: int, model: str, prompt: str, appended_system_prompt: str,
               cli_settings: Optional[dict] = None, mcp_config: Optional[dict] = None,
               max_cost_usd: float = 0) -> list[str]:
    argv = [config["CLAUDEOPS_CLAUDE_BIN"], "-p",
            "--output-format", "stream-json", "--verbose",
            "--model", model,
            "--append-system-prompt", appended_system_prompt]
    if max_cost_usd:
        argv += ["--max-budget-usd", f"{max_cost_usd:.2f}"]
    # No settings files, and no MCP servers but ours: the agent runs as the
    # service's user, with a shell, and could write what the next session
    # would read: Claude Code settings (the project's in the working
    # directory, the user's in its home) with an ``env`` that lifts the
    # cooldown limits or names another database for the hook, or
    # ``disableAllHooks``; CLAUDE.md files, instructions outside the reviewed
    # memory; MCP servers of its own. Only what --settings gives holds.
    argv += ["--setting-sources", ""]
    if cli_settings:
        argv += ["--settings", json.dumps(cli_settings, separators=(",", ":"))]
    if mcp_config:
        argv += ["--mcp-config", json.dumps(mcp_config, separators=(",", ":")), "--strict-mcp-config"]
    # Tool lists go last: the CLI's tool options take every value up to the next option.
    allowed = list(config[f"CLAUDEOPS_TIER{tier}_ALLOWED_TOOLS"])
    if mcp_config:
        allowed.append(ALLOW_RULE)  # read-only tools: no tier needs to be asked
    for flag, tools in (("--allowedTools", allowed),
                        ("--disallowedTools", config[f"CLAUDEOPS_TIER{tier}_DISALLOWED_TOOLS"])):
        if tools:
            argv += [flag, ",".join(tools)]
    # The prompt goes after "--": one that begins with "-" (a prompt file's
    # front matter, "---") would otherwise be read as an unknown option.
    return argv + ["--", prompt]


def child_env(session: Session) -> dict[str, str]:
    """The service's environment, passed through (``ANTHROPIC_*`` and all),
    plus what a hook command (a ``claudeops`` subcommand the CLI runs) needs
    to find the same database and know the session. The service's own
    secrets (the operator's password, the API token, the cookie key) are
    left out: the agent has a shell, and no use for them. Only their keyed
    digests are given, for the hook to redact them (app/redaction.py)."""
    config = current_app.config
    secret_names = {s.name for s in current_app.extensions["claudeops.settings"] if s.secret}
    env = {name: value for name, value in os.environ.items() if name not in secret_names}
    # So that the cooldown hook, which records commands, still redacts them.
    env[WITHHELD_ENV] = WithheldValues.describe([config.get(name) for name in secret_names] + [config["SECRET_KEY"]])
    # Absolute: the CLI, and the hook and MCP server it starts, work from CLAUDEOPS_WORKDIR.
    env["CLAUDEOPS_STATE_DIR"] = str(Path(config["CLAUDEOPS_STATE_DIR"]).resolve())
    env["CLAUDEOPS_DATABASE_URL"] = absolute_sqlite_url(config["CLAUDEOPS_DATABASE_URL"])
    env["CLAUDEOPS_SESSION_ID"] = str(session.id)
    env["CLAUDEOPS_TIER"] = str(session.tier)
    # In print mode the CLI would otherwise send its first request before a
    # slow-starting MCP server (ours takes about a second) has connected,
    # and the agent would start without the tools.
    env.setdefault("MCP_CONNECTION_NONBLOCKING", "false")
    # The CLI's auto-memory (a MEMORY.md under ~/.claude/projects/, which it
    # tells the agent to write and loads into the next session as
    # instructions to follow) is off: no setting source turns it off, and the
    # agent's lessons go through the service's memory, which the operator
    # reviews.
    env["CLAUDE_CODE_DISABLE_AUTO_MEMORY"] = "1"
    return env


def merge_settings(fragments: list) -> dict:
    """Plugins' Claude Code settings, merged: dicts key by key, lists appended."""
    merged: dict = {}

    def merge(into: dict, fragment: dict) -> None:
        for key, value in fragment.items():
            if isinstance(value, dict) and isinstance(into.get(key), dict):
                merge(into[key], value)
            elif isinstance(value, list) and isinstance(into.get(key), list):
                into[key] = into[key] + value
            else:
                into[key] = value
    for fragment in fragments:
        if isinstance(fragment, dict):
            merge(merged, fragment)
    return merged


def run_session(session: Session, shutdown: Optional[threading.Event] = None) -> Session:
    """Run a session already marked running (see ``control.claim_next``)."""
    # Its id as kept: reading session.id after a rollback asks the database again, which may be gone.
    session_id = inspect(session).identity[0]
    try:
        return _run_session(session, session_id, shutdown)
    finally:
        # What plugins queued and the session's last commit did not write
        # (the database refused it, or the session ended on an error) never
        # will be: no plugin has to remember to clear it.
        marker_queue.drop_session(session_id)


def _run_session(session: Session, session_id: int, shutdown: Optional[threading.Event]) -> Session:
    # What ends a wait for a database server that went away, as _finish's:
    # without a shutdown event, only OUTAGE_SECONDS.
    waits = shutdown or threading.Event()
    # Asked once a session, for its RunInfo and its fan-out alike.
    marker_tags = tags_by_plugin()
    # Before the session is given a run log and the plugins are told it
    # starts: one the daily limit refuses never does, so they hear of
    # neither its start nor its end.
    budget = dbfaults.waiting_out(session_budget, f"session {session_id}: reading what the day's sessions spent",
                                  waits)
    if budget.refusal:
        return _not_run(session, session_id, budget.refusal, waits)
    run = dbfaults.waiting_out(partial(_record_start, session, marker_tags),
                               f"session {session_id}: recording its start", waits)
    try:
        call_each("claudeops_session_starting", run=run, commit_each=True, shutdown=waits)
        return _run_started(session, session_id, run, marker_tags, budget, waits, shutdown)
    except Exception as exc:
        # The plugins were told it began (some of them, if a database gone
        # for good broke their starting hooks off): the scheduler, recording
        # its end once the database takes it, tells them it ended (``finish_late``).
        exc.claudeops_run = run
        raise


def _run_started(session: Session, session_id: int, run: RunInfo, marker_tags: dict[str, tuple[str, ...]],
                 budget: Budget, waits: threading.Event, shutdown: Optional[threading.Event]) -> Session:
    config = current_app.config
    try:
        # From ``run``: the starting hooks' commits expired the session's row.
        prompt = tier_prompt(config["CLAUDEOPS_PROMPTS_DIR"], run.tier, run.operator_prompt)
    except PromptError as exc:
        return _finish(session, run, FAILED, str(exc), shutdown=shutdown)
    workdir = config["CLAUDEOPS_WORKDIR"]
    try:   # checked at start too (app/serve.py), but it may have gone or changed since
        Path(workdir).mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        return _finish(session, run, FAILED, f"the working directory {workdir} cannot be made: "
                       f"{exc.strerror or exc} (make it a writable directory or set CLAUDEOPS_WORKDIR)",
                       shutdown=shutdown)
    # Plugins build it from stored records, redacted already; a plugin's own text is redacted here.
    appended = redactor().redact(system_prompt(run, workdir, waits))
    dbfaults.waiting_out(partial(_record_system_prompt, session, appended),
                         f"session {session_id}: recording its system prompt", waits)
    size = len(session.system_prompt.encode("utf-8", "surrogatepass"))
    if size > MAX_ARGUMENT_BYTES:
        return _finish(session, run, FAILED,
                       f"the system prompt is {size:,} bytes, more than the {MAX_ARGUMENT_BYTES:,} one command-line "
                       "argument may hold: lower CLAUDEOPS_MEMORY_BUDGET, or a plugin's prompt section is too long "
                       "(the session's system prompt is kept for you to see which)", shutdown=shutdown)

    cli_settings = merge_settings(collect("claudeops_cli_settings", dict, run=run))
    mcp_config = session_mcp_config(claudeops_command())
    command = CLICommand(argv=build_argv(config, session.tier, session.model, prompt, session.system_prompt,
                                         cli_settings, mcp_config, budget.usd),
                         env=child_env(session), cwd=workdir, log_path=Path(session.log_path),
                         timeout_seconds=config["CLAUDEOPS_SESSION_TIMEOUT"],
                         max_line_bytes=config["CLAUDEOPS_MAX_LINE_BYTES"], redactor=redactor(),
                         owner=owner_of(db.engine.url))
    handler = StreamHandler(session, run, shutdown, marker_tags)
    outcome: Optional[ProcessOutcome] = None
    try:
        with earlier_objects_set_apart():
            outcome = run_process(command, handler.handle_line,
                                  _committing(handler, _stop_poller(session.id, shutdown)), handler.handle_oversized)
            handler.close()   # the rows of the last batch
        if _ended_with_the_service(outcome, handler, shutdown):
            outcome.ended_by = shutdown_reason(shutdown)
    except SQLAlchemyError as exc:
        # The runner has ended the CLI's group; what was committed stays, and
        # the run log holds every byte the CLI wrote up to here, unless it
        # could not be written either (its outcome's log_error).
        session = _after_refused_write(session)
        outcome = outcome or getattr(exc, "claudeops_outcome", None)
        log_kept = ("the run log keeps the CLI's output" if outcome is None or outcome.log_error is None
                    else f"its run log could not be written either: {outcome.log_error}")
        reason = f"the session was ended because the database refused a write: {dbfaults.describe(exc)}; {log_kept}"
        # Its id as kept: reading session.id after the rollback asks the database again.
        log.error("session %s: %s", handler.session_id, reason)
        return _finish(session, run, FAILED, reason, shutdown, handler)
    status, reason = decide_status(outcome, handler, config["CLAUDEOPS_CLAUDE_BIN"], budget)
    return _finish(session, run, status, reason, shutdown, handler, outcome.exit_code)


def _not_run(session: Session, session_id: int, reason: str, shutdown: threading.Event) -> Session:
    """End a session that was never started, as an escalation above
    CLAUDEOPS_MAX_TIER is (escalation.stop_beyond_maximum): ``stopped``, so
    that it counts neither as a failure of the agent (/api/v1/stats' success
    rate, the Overview's failures) nor for escalating, with a warning notice."""
    def record_end() -> int:
        session.status, session.status_reason, session.ended_at = STOPPED, reason, utcnow()
        tier = session.tier
        db.session.commit()
        return tier

    try:
        tier = dbfaults.waiting_out(record_end, f"session {session_id}: recording that it was not run", shutdown)
    except Exception as exc:
        exc.claudeops_session_end = (STOPPED, reason)   # for the scheduler to record later
        raise
    log.warning("session %s %s", session_id, reason)
    escalation.notice("warning", f"Session #{session_id} (tier {tier}) was {reason}", None, shutdown)
    return session


def _record_start(session: Session, marker_tags: dict[str, tuple[str, ...]]) -> RunInfo:
    """The session's model and run log, stored; what the plugins are told of
    it. Sets everything again if run again after a rollback, which takes
    back what was set before it."""
    session.model = setting(f"CLAUDEOPS_TIER{session.tier}_MODEL")
    results_dir = Path(current_app.config["CLAUDEOPS_RESULTS_DIR"])
    session.log_path = str(results_dir / f"session-{session.id:06d}-{session.started_at:%Y%m%dT%H%M%SZ}.ndjson")
    session.results_dir_id = results_dir_id(results_dir)
    db.session.commit()
    return run_info(session, marker_tags)


def _record_system_prompt(session: Session, appended: str) -> None:
    """The system prompt stored, and the session's row read back at once:
    the CLI's command line reads it, and a read then, with the server gone,
    would not be waited for."""
    session.system_prompt = appended
    db.session.commit()
    db.session.refresh(session)


def shutdown_reason(shutdown: threading.Event) -> str:
    """Why the shutdown event was set: the service's stop, unless whoever
    set it said otherwise (``claudeops run``, stopped by a signal of its own)."""
    return getattr(shutdown, "claudeops_reason", None) or SHUTDOWN_REASON


def _ended_with_the_service(outcome: ProcessOutcome, handler: StreamHandler,
                            shutdown: Optional[threading.Event]) -> bool:
    """Whether a CLI that ended before its result line, with nothing asking
    it to stop yet, was stopped with the service (the signal reached both)."""
    if outcome.ended_by or shutdown is None or handler.result is not None:
        return False
    return shutdown.wait(SHUTDOWN_GRACE_SECONDS)


def _after_refused_write(session: Session) -> Session:
    """Roll back what the database refused. SQLite may have ended the
    transaction itself (it does on a full disk), savepoints and all, so that
    rolling back to one fails: then the connection is given up, and the
    session's row read afresh."""
    session_id = inspect(session).identity[0]
    try:
        db.session.rollback()
        return session
    except SQLAlchemyError:
        db.session().invalidate()   # the scoped session proxies no invalidate()
        return db.session.get(Session, session_id) or session


# What the CLI answers when it has no credentials ("Not logged in · Please run
# /login"): /login is its interactive command, of no use to a service.
NOT_LOGGED_IN = "not logged in"
NO_CREDENTIALS = ("give the service ANTHROPIC_API_KEY in its environment, or run `claude` once as the "
                  "service's user and log in")


def decide_status(outcome: ProcessOutcome, handler: StreamHandler, claude_bin: str,
                  budget: Budget = Budget()) -> tuple[str, Optional[str]]:
    result = handler.result
    if outcome.log_error:
        return FAILED, f"the session was ended because {outcome.log_error}"
    if outcome.spawn_error:
        return FAILED, f"could not start the Claude CLI ({outcome.spawn_error}); check CLAUDEOPS_CLAUDE_BIN={claude_bin!r}"
    if outcome.timed_out:
        if handler.retrying_api:   # the whole wait may have been the CLI's retries of an unreachable API
            return TIMED_OUT, f"{outcome.ended_by}; the CLI was retrying the API ({handler.retrying_api})"
        return TIMED_OUT, outcome.ended_by
    if outcome.ended_by:
        return STOPPED, outcome.ended_by
    if result is not None and result.is_error:
        what = f"API error {result.api_error_status}" if result.api_error_status else "the CLI reported an error"
        said = result.result or _errors_said(result.errors) or "no message"
        if result.subtype == OVER_BUDGET:
            said += f" ({budget.set_by}; this session cost ${result.cost_usd or 0:.2f})"
        if NOT_LOGGED_IN in said.lower():
            said += f" ({NO_CREDENTIALS})"
        return FAILED, f"{what}: {said}"
    if outcome.exit_code:
        how = (f"was killed by signal {-outcome.exit_code}" if outcome.exit_code < 0
               else f"exited with status {outcome.exit_code}")
        return FAILED, _with_stderr(f"the Claude CLI {how}", outcome.stderr_tail)
    if result is None:
        skipped = (f" it read ({outcome.oversized_lines} line(s) over CLAUDEOPS_MAX_LINE_BYTES were skipped)"
                   if outcome.oversized_lines else "")
        return FAILED, _with_stderr(f"the Claude CLI ended without a result line{skipped}", outcome.stderr_tail)
    return COMPLETED, None


def _errors_said(errors: tuple[str, ...]) -> str:
    """An error result's first three errors, cut to ``MAX_ERRORS_SAID``
    where the text as written would be, its secrets found first: cut
    first, a secret the cut runs through would be kept by its first part,
    which the redactor no longer knows."""
    text = "; ".join(errors[:3])
    return head_redacted(text, redactor().spans(text), MAX_ERRORS_SAID)


def _with_stderr(reason: str, stderr_tail: str) -> str:
    last = stderr_tail.strip().splitlines()[-3:] if stderr_tail.strip() else []
    return reason + (": " + " | ".join(last) if last else "")


def _stop_poller(session_id: int, shutdown: Optional[threading.Event]):
    """A ``should_stop`` for the runner that reads the database at most once a second."""
    last_check = 0.0

    def should_stop() -> Optional[str]:
        nonlocal last_check
        if shutdown is not None and shutdown.is_set():
            return shutdown_reason(shutdown)
        now = time.monotonic()
        if now - last_check < STOP_POLL_SECONDS:
            return None
        last_check = now
        return OPERATOR_STOP_REASON if control.stop_requested(session_id) else None

    return should_stop


def _committing(handler: StreamHandler, should_stop):
    """The runner asks ``should_stop`` between reads, a few times a second
    even while the CLI is quiet: the moment to write what the handler holds,
    so the last lines before a pause reach the dashboard without waiting.
    Its read of a stop request, in the handler's transaction, meets a
    database server that went away as the handler's writes would."""
    def check() -> Optional[str]:
        handler.commit_if_due()
        return handler.unless_gone(should_stop)

    return check


def _finish(session: Session, run: RunInfo, status: str, reason: Optional[str],
            shutdown: Optional[threading.Event], handler: Optional[StreamHandler] = None,
            exit_code: Optional[int] = None) -> Session:
    """Record how the session ended, then tell the plugins and ask whether
    to escalate. The CLI's work is done by now: a database server that goes
    away meanwhile (``dbfaults.passing``) is waited for, as the stream
    handler waits for it, rather than let the session be recorded failed."""
    shutdown = shutdown or threading.Event()   # without one, the wait ends only with OUTAGE_SECONDS
    result = handler.result if handler else None
    reason = redactor().redact(reason)   # it may quote the CLI's stderr or an API error; it is logged below
    # All of it set again on each attempt: a rollback takes back what was set before.
    ended = {"status": status, "status_reason": reason, "ended_at": utcnow()}
    if exit_code is not None:
        ended["exit_code"] = exit_code
    if handler is not None:
        ended["response"] = handler.response
    if result is not None:
        ended.update(cost_usd=result.cost_usd, num_turns=result.num_turns, duration_ms=result.duration_ms,
                     is_error=result.is_error)

    def record_end() -> None:
        for name, value in ended.items():
            setattr(session, name, value)
        db.session.commit()

    try:
        dbfaults.waiting_out(record_end, f"session {run.session_id}: recording its end", shutdown)
    except Exception as exc:
        # What it ended with, for the scheduler to record once the database takes it.
        exc.claudeops_session_end = (status, reason)
        raise
    log.log(logging.WARNING if status in (FAILED, TIMED_OUT) else logging.INFO,
            "session %s %s%s", run.session_id, status, f": {reason}" if reason else "")
    _tell_the_end(session, run, shutdown)
    return session


def finish_late(session_id: int, run: Optional[RunInfo], shutdown: threading.Event) -> None:
    """What ``_finish`` does once a session's end is stored, for one whose
    end the database refused and the scheduler recorded later
    (``control.end_running``): the notice, and, if the plugins were told it
    began (``run``), its end and the question of escalation."""
    session = db.session.get(Session, session_id)
    if run is None:   # the notice still names the session it is about
        escalation.notice("warning", f"Session #{session_id} (tier {session.tier}) {_status_words(session)}",
                          run_info(session), shutdown)
        return
    _tell_the_end(session, run, shutdown, late=True)


def _tell_the_end(session: Session, run: RunInfo, shutdown: threading.Event, late: bool = False) -> None:
    # A session that failed or timed out is what an operator watching at
    # WARNING wants to see, in the feed too, where nothing the agent reported
    # says so; and so is one whose end the database refused for a while.
    if late or session.status in (FAILED, TIMED_OUT):
        escalation.notice("warning", f"Session #{run.session_id} (tier {run.tier}) {_status_words(session)}", run,
                          shutdown)
    result = SessionResult(
        status=session.status, reason=session.status_reason, response=session.response or "",
        cost_usd=session.cost_usd, num_turns=session.num_turns, duration_ms=session.duration_ms,
        is_error=session.is_error, cli_session_id=session.cli_session_id)
    _tell_the_plugins_it_ended(run, result, shutdown)
    reason = escalation.requested(run, result)
    try:
        dbfaults.waiting_out(partial(escalation.consider, session, run, result, reason, shutdown),
                             f"session {run.session_id}: considering its escalation", shutdown)
    except Exception as exc:
        if reason is not None:   # asked once only: kept for the scheduler to decide once the database takes it
            exc.claudeops_undecided = escalation.Undecided(run.session_id, run, result, reason)
        raise


def _tell_the_plugins_it_ended(run: RunInfo, result: SessionResult, shutdown: threading.Event) -> None:
    """``claudeops_session_finished``, each plugin's rows committed after it,
    a server gone away meanwhile waited for (``call_each``). A database that
    still refuses a plugin's write costs the plugins their word of the end,
    not the session what follows it: its end is recorded already, and the
    escalation it asked for is decided, its own write waited for, as ever."""
    try:
        call_each("claudeops_session_finished", run=run, commit_each=True, shutdown=shutdown, result=result)
    except SQLAlchemyError as exc:
        dbfaults.roll_back()   # the plugin's rows are rolled back already; a failed commit before any is not
        plugin = getattr(exc, "claudeops_plugin", None)
        said = (f"plugin {plugin} failed in claudeops_session_finished ({dbfaults.describe(exc)}): what it wrote "
                "is rolled back, and the plugins after it are not told of the end" if plugin
                else f"the plugins could not be told of its end ({dbfaults.describe(exc)})")
        log.error("session %s: %s; its end stays as recorded, and the escalation it asked for is still decided",
                  run.session_id, said, exc_info=dbfaults.storage_fault(exc) is None)


def _status_words(session: Session) -> str:
    status = session.status.replace("_", " ")
    return f"{status}: {session.status_reason}" if session.status_reason else status
