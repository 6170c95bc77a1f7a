"""The PreToolUse decision: may this Bash call run, given the cooldowns?

Claude Code runs ``claudeops cooldowns check-tool`` before every Bash call
and hands it the call as JSON on stdin. We answer by printing a ``deny``
decision (with the reason the agent reads as the tool's error) or nothing
(the normal permission rules then apply: we never say ``allow``).

Fail-open or fail-closed:
- input we cannot read, another tool, a command that restarts nothing:
  allowed silently. The hook guards restarts; it must not wedge a session
  because the CLI's input format changed.
- a recognised restart or redeployment whose check fails (database down,
  a bug): denied, with the error as the reason. Better a restart missed
  than a limit silently not enforced.
"""
from __future__ import annotations

import fcntl
import json
import logging
import os
import re
import stat
import sys
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Optional

from flask import current_app
from sqlalchemy import text

from app import dbfaults
from app.extensions import SQLITE_BUSY_TIMEOUT_MS, db
from app.models import Session
from app.plugins import call_each
from app.portable_text import without_lone_surrogates
from app.redaction import head_redacted, redactor
from app.runtime import setting
from app.sessions.run_info import run_info
from app.timeutil import utcnow
from app.write_lock import lock_for_writing
from plugins.cooldowns import store
from plugins.cooldowns.commands import SUSPECT, Recognised, recognise
from plugins.cooldowns.limits import MAX_PER_SESSION, MIN_TIER, current_limits, max_per_session, min_tier
from plugins.cooldowns.models import DENIED, PENDING

log = logging.getLogger(__name__)

MAX_COMMAND_CHARS = 2000
# How far past a cut a secret that the cut would halve is looked for.
SECRET_REACH_CHARS = 2000

# The CLI lets a call run when its hook takes longer than HOOK_TIMEOUT_SECONDS
# (30 s), so every wait of the check ends well before that: starting
# ``claudeops`` (about a second), the lock file, then the database's lock
# (SQLite's busy timeout, or PostgreSQL's lock_timeout set below). A lock
# held for longer (by a stuck check, or by the agent itself: it runs as the
# service's user and can reach the state directory) denies the call.
LOCK_FILE_WAIT_SECONDS = 8.0
DATABASE_LOCK_WAIT_SECONDS = SQLITE_BUSY_TIMEOUT_MS / 1000
# And whatever else it waits on (a plugin's notice hook, a slow disk), the
# check answers by then, counted from when ``check-tool`` begins, after
# claudeops's start-up: if it has not decided, it denies (``Answer``).
CHECK_DEADLINE_SECONDS = 24.0

ADVICE = ("Do not try another way to do it. Report what you found with an [EVENT:…] marker instead, "
          "so that the operator can decide.")


@dataclass(frozen=True)
class Caller:
    """The Claude Ops session the CLI runs for (from the environment the
    session manager gives the CLI), if any."""

    session_id: Optional[int]
    tier: Optional[int]


class Answer:
    """The hook's one answer on standard output: the check's, or, if the
    deadline passes first, a denial. The deadline is kept by a thread of its
    own, so that the check may be stuck anywhere (in C, on a lock, in a
    plugin): it writes the denial and ends the process at once."""

    def __init__(self, deadline_seconds: float = CHECK_DEADLINE_SECONDS):
        self._once = threading.Lock()
        self._deadline_seconds = deadline_seconds
        self._timer = threading.Timer(deadline_seconds, self._too_late)
        self._timer.daemon = True
        self._timer.start()

    def give(self, reason: Optional[str]) -> None:
        """The check's answer (None: let the call be)."""
        if not self._once.acquire(blocking=False):
            threading.Event().wait()   # the deadline's denial is being written; it ends the process
        self._timer.cancel()
        if reason:
            sys.stdout.write(deny_output(reason) + "\n")
            sys.stdout.flush()

    def _too_late(self) -> None:
        if not self._once.acquire(blocking=False):
            return   # the check is answering
        _write_line(deny_output(f"Claude Ops could not finish checking this command against the cooldowns within "
                                f"{self._deadline_seconds:g} s (a lock or the database was held too long), so "
                                f"it was not run. {ADVICE}"))
        os._exit(0)


def _write_line(text: str) -> None:
    """Straight to standard output's file descriptor: nothing is left in a
    buffer that os._exit would not write."""
    data = (text + "\n").encode()
    while data:
        data = data[os.write(1, data):]


def deny_output(reason: str) -> str:
    return json.dumps({"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny",
                                              "permissionDecisionReason": reason}})


def bash_command(raw: str) -> tuple[Optional[str], Optional[str]]:
    """The command and working directory of a PreToolUse call of Bash, or
    (None, None) for anything else."""
    try:
        payload = json.loads(raw)
    except ValueError:
        log.warning("cooldowns: PreToolUse input is not JSON; allowing the call")
        return None, None
    if not isinstance(payload, dict) or payload.get("tool_name") != "Bash":
        return None, None
    tool_input = payload.get("tool_input")
    command = tool_input.get("command") if isinstance(tool_input, dict) else None
    cwd = payload.get("cwd")
    # Half of a surrogate pair (JSON may carry one) as U+FFFD: bash is given
    # bytes, and a record of the command must be storable.
    return (without_lone_surrogates(command) if isinstance(command, str) else None), (
        cwd if isinstance(cwd, str) else None)


def check(raw: str, caller: Caller, now: Optional[datetime] = None) -> Optional[str]:
    """The reason to deny the call described by ``raw``, or None to let it be."""
    command, cwd = bash_command(raw)
    if not command:
        return None
    try:
        found = recognise(command, cwd)
    except Exception as exc:   # a bug here must not let a restart through unchecked
        log.exception("cooldowns: could not read the command %r", redacted_start(command, 200))
        if SUSPECT.search(command):   # recognising failed: a restart's words are reason enough to deny
            return f"Claude Ops could not check this command against the cooldowns ({exc}), so it was not run. {ADVICE}"
        return None
    if not found:
        return None
    try:
        with _one_at_a_time():
            # The session's batch records the agent's reports of restarts under
            # the same lock: one it has read the counts for, or has written, is
            # counted here, and it counts what this call lets run.
            _wait_for_the_database_lock_at_most(DATABASE_LOCK_WAIT_SECONDS)
            lock_for_writing()
            reason = _decide(found, command, caller, now or utcnow())
            db.session.commit()
        return reason
    except Exception as exc:
        db.session.rollback()
        # A database that cannot answer (full, locked, not migrated: a state
        # directory not the service's) is one line; a mistake keeps its traceback.
        known = dbfaults.storage_fault(exc) or dbfaults.schema_behind(exc)
        log.error("cooldowns: the check failed (%s)", known or f"{type(exc).__name__}: {_first_line(exc)}",
                  exc_info=known is None)
        what = ", ".join(f"{r.action} of {r.service or r.target}" for r in found)
        return f"Claude Ops could not check the cooldown for {what} ({type(exc).__name__}: {_first_line(exc)}), " \
               f"so the command was not run. {ADVICE}"


def redacted_start(command: str, length: int) -> str:
    """The first ``length`` characters of ``command``, redacted. Found in
    what follows too: a secret the cut runs through would no longer be the
    value the redactor knows, and its first part would be kept."""
    text = command[:length + SECRET_REACH_CHARS]
    return head_redacted(text, redactor().spans(text), length)


def _first_line(exc: Exception) -> str:
    """SQLAlchemy's messages go on with the SQL; the agent needs the gist."""
    lines = str(exc).strip().splitlines()
    return lines[0][:300] if lines else ""


def _decide(found: list[Recognised], command: str, caller: Caller, now: datetime) -> Optional[str]:
    lowest = min_tier()
    if caller.tier is not None and caller.tier < lowest:
        return _below_the_tier(found, command, caller, lowest, now)
    unknown = [r for r in found if r.service is None]
    if unknown:
        targets = ", ".join(f"{r.action} of {r.target}" for r in unknown)
        return (f"Claude Ops cooldowns: cannot tell which service this command touches ({targets}). "
                "Restarts and redeployments are limited per service: name each service literally, "
                "one per command where you can (for example `docker restart jellyfin`).")
    limits = current_limits()
    usages = [store.usage(r.service, r.action, now, limits) for r in found]
    blocked = [u for u in usages if u.at_limit]
    session_id = _existing_session(caller.session_id)
    command = redacted_start(command, MAX_COMMAND_CHARS)
    if not blocked:
        for r in found:
            store.record_attempt(r.action, r.service, PENDING, command, session_id, caller.tier, now=now)
        return None
    reason = f"Claude Ops cooldown limit reached: {store.explain(blocked)}. The command was not run. {ADVICE}"
    if session_id is not None and store.session_rows(session_id) >= max_per_session():
        # Still denied; only the record (and its notice) is left out. The agent
        # reads the reason as the tool's error, which the activity log shows.
        log.warning("cooldowns: session %s reached %s; denial of %s not recorded", session_id, MAX_PER_SESSION,
                    ", ".join(f"{r.action} of {r.service}" for r in found))
        return reason
    for r in found:
        store.record_attempt(r.action, r.service, DENIED, command, session_id, caller.tier, message=reason, now=now)
    _notify([(u.service, f"Cooldown: a {u.action} of {u.service} was denied ({store.explain([u])}).")
             for u in blocked], session_id)
    return reason


def _below_the_tier(found: list[Recognised], command: str, caller: Caller, lowest: int,
                    now: datetime) -> Optional[str]:
    """A restart or redeployment asked for by a session of a tier that is to
    change nothing: denied, whatever the limits, and kept (with a notice) as
    a denial of each service it names, counted by none."""
    what = ", ".join(f"{r.action} of {r.service or r.target}" for r in found)
    then = (f"If it is needed, write [ESCALATE] <why> at the start of a line, for a session of tier {lowest} "
            "to do it." if setting("CLAUDEOPS_MAX_TIER") >= lowest else ADVICE)
    reason = (f"Claude Ops: sessions of tier {caller.tier} do not restart or redeploy services ({MIN_TIER}="
              f"{lowest}); the {what} was not run. {then}")
    session_id = _existing_session(caller.session_id)
    named = [r for r in found if r.service is not None]
    if session_id is not None and store.session_rows(session_id) >= max_per_session():
        log.warning("cooldowns: session %s reached %s; denial of %s not recorded", session_id, MAX_PER_SESSION, what)
        return reason
    command = redacted_start(command, MAX_COMMAND_CHARS)
    for r in named:
        store.record_attempt(r.action, r.service, DENIED, command, session_id, caller.tier, message=reason, now=now)
    _notify([(r.service, f"Cooldown: a {r.action} of {r.service} was denied (a session of tier {caller.tier}; "
                         f"{MIN_TIER}={lowest}).") for r in named], session_id)
    return reason


def _existing_session(session_id: Optional[int]) -> Optional[int]:
    if session_id is None:
        return None
    return session_id if db.session.get(Session, session_id) is not None else None


def _notify(denials: list[tuple[str, str]], session_id: Optional[int]) -> None:
    """A denial (its service and what to say) is news for the operator's
    feed (the events plugin records it)."""
    session = db.session.get(Session, session_id) if session_id else None
    run = run_info(session) if session is not None else None
    for service, message in denials:
        try:
            call_each("claudeops_notice", level="warning", service=service, run=run, message=message)
        except Exception:
            log.exception("cooldowns: could not send the denial notice")


class LockBusy(RuntimeError):
    """The cooldowns lock file stayed held past LOCK_FILE_WAIT_SECONDS."""


class NotALockFile(RuntimeError):
    """Something other than a plain file is where the lock file should be."""


@contextmanager
def _one_at_a_time():
    """Check and record under one lock, so two parallel calls cannot both
    take the last restart. Sessions and their hooks run on one host (the
    scheduler's), so a lock file in the state directory is enough. Waits
    at most LOCK_FILE_WAIT_SECONDS: waiting for ever would let the CLI's
    hook timeout run the command unchecked."""
    path = Path(current_app.config["CLAUDEOPS_STATE_DIR"]) / "cooldowns.lock"
    with _lock_file(path) as handle:
        _lock_within(handle, LOCK_FILE_WAIT_SECONDS, path)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@contextmanager
def _lock_file(path: Path):
    """The lock file, opened without waiting and only if it is a plain file:
    opening a FIFO put in its place would wait for a reader for ever, and a
    symbolic link could point anywhere."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise NotALockFile(f"{path} is not a plain file")
        yield fd
    finally:
        os.close(fd)


def _lock_within(handle, seconds: float, path: Path) -> None:
    deadline = time.monotonic() + seconds
    while True:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() >= deadline:
                raise LockBusy(f"{path} has been held by another process for over {seconds:g} s") from None
            time.sleep(0.05)


def _wait_for_the_database_lock_at_most(seconds: float) -> None:
    """SQLite's busy timeout already bounds the wait; PostgreSQL waits for
    an advisory lock for ever unless told otherwise (for this transaction
    only)."""
    if db.session.connection().dialect.name == "postgresql":
        db.session.execute(text(f"SET LOCAL lock_timeout = '{int(seconds * 1000)}ms'"))
