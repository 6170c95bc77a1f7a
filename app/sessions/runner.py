"""Run one CLI process: its own process group, stdout read as it arrives.

The runner knows processes and bytes, not stream-json: it hands each complete
stdout line to a callback, copies every byte to the run log (redacted: see
app/sessions/runlog.py), and ends the whole process group on stop, timeout or
when the CLI has exited but a leftover child still holds stdout open. The
group is led by ``groupguard.py``, which ends it if this process dies first.
"""
from __future__ import annotations

import logging
import os
import selectors
import signal
import subprocess
import sys
import tempfile
import time
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator, Optional

from app.redaction import Redactor, tail_redacted
from app.sessions import groupguard
from app.sessions.runlog import OVERLAP_CHARS, RedactedLog, copy_redacted, open_private

log = logging.getLogger(__name__)

READ_CHUNK = 64 * 1024
POLL_SECONDS = 0.25
# After the CLI exits, how long stdout may stay open (held by a child it left
# behind) before the group is ended and reading stops.
ORPHAN_GRACE_SECONDS = 2.0
# Between SIGTERM and SIGKILL when ending a process group.
KILL_GRACE_SECONDS = 5.0
STDERR_TAIL_BYTES = 4000
# How long the rest of stdout is read once the group was ended (a process that
# left the group may hold it open).
DRAIN_SECONDS = 5.0
# Run by path with the standard library only (-I -S): it starts in milliseconds.
GUARD_ARGV = [sys.executable, "-I", "-S", groupguard.__file__]


@dataclass
class ProcessOutcome:
    exit_code: Optional[int] = None
    ended_by: Optional[str] = None       # None, or the reason the group was ended early
    timed_out: bool = False
    spawn_error: Optional[str] = None
    log_error: Optional[str] = None      # the run log could not be written; the session was ended
    stderr_tail: str = ""
    oversized_lines: int = 0


@dataclass
class CLICommand:
    argv: list[str]
    env: dict[str, str]
    cwd: str
    log_path: Path
    timeout_seconds: float
    max_line_bytes: int
    redactor: Redactor = field(default_factory=Redactor)
    # The fingerprint of the database the session is recorded in, shown in
    # its guard's command line (app/sessions/leftover_groups.py).
    owner: str = ""


class LineSplitter:
    """Bytes in, complete lines out; a line longer than ``max_line_bytes`` is
    dropped (reported once through ``on_oversized``) without ever being held
    in memory whole."""

    def __init__(self, max_line_bytes: int, on_line: Callable[[bytes], None],
                 on_oversized: Callable[[int], None]):
        self.max = max_line_bytes
        self.on_line = on_line
        self.on_oversized = on_oversized
        self.buffer = bytearray()
        self.skipping = 0   # > 0: bytes dropped so far of the current oversized line

    def feed(self, data: bytes) -> None:
        start = 0
        while start < len(data):
            newline = data.find(b"\n", start)
            end = len(data) if newline < 0 else newline
            piece = data[start:end]
            if self.skipping:
                self.skipping += len(piece)
            elif self._size_with(piece) > self.max:
                self.skipping = len(self.buffer) + len(piece)
                self.buffer.clear()
            else:
                self.buffer += piece
            if newline < 0:
                return
            self._end_line()
            start = newline + 1

    def _size_with(self, piece: bytes) -> int:
        """The line's size with ``piece`` added, not counting a carriage
        return at its end: a CRLF line of the limit's size is within it."""
        size = len(self.buffer) + len(piece)
        last = piece[-1:] or self.buffer[-1:]
        return size - 1 if last == b"\r" else size

    def close(self) -> None:
        """Flush a last line that had no newline."""
        if self.buffer or self.skipping:
            self._end_line()

    def _end_line(self) -> None:
        if self.skipping:
            size, self.skipping = self.skipping, 0
            self.on_oversized(size)
        elif self.buffer.strip():
            line = bytes(self.buffer)
            self.buffer.clear()
            self.on_line(line)
        else:
            self.buffer.clear()


def run_process(command: CLICommand, on_line: Callable[[bytes], None],
                should_stop: Callable[[], Optional[str]],
                on_oversized: Callable[[int], None] = lambda size: None) -> ProcessOutcome:
    """Run ``command`` to its end and return how it ended.

    ``should_stop`` is polled about every quarter second; a non-empty string it
    returns ends the process group and becomes ``ended_by``.
    """
    outcome = ProcessOutcome()
    log_file = None
    try:
        # As the service makes it at start (app/__init__.py): the run logs are for its user only.
        command.log_path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        log_file = open_private(command.log_path)
        # stderr goes to a file with no name while the CLI runs, and is
        # copied, redacted, next to the run log afterwards.
        stderr_file = tempfile.TemporaryFile(dir=command.log_path.parent)
    except OSError as exc:   # nothing is started without somewhere to keep its output
        outcome.log_error = _log_error(exc.filename or command.log_path, exc)
        if log_file is not None:
            _close(RedactedLog(log_file, command.redactor), command.log_path, outcome)
        return outcome
    run_log = RedactedLog(log_file, command.redactor)
    try:
        with stderr_file:
            try:
                _run(command, on_line, should_stop, on_oversized, run_log, stderr_file, outcome)
            except Exception as exc:
                # The caller's failure (the database refused a line's rows):
                # the CLI's stderr is kept all the same, and its own error told;
                # what the run came to goes with it (the run log's failure, once closed).
                exc.claudeops_outcome = outcome
                try:
                    _keep_stderr(stderr_file, command, outcome)
                except Exception:
                    log.exception("the CLI's stderr could not be kept beside %s", command.log_path)
                raise
            _keep_stderr(stderr_file, command, outcome)
    finally:
        _close(run_log, command.log_path, outcome)
    return outcome


def _run(command, on_line, should_stop, on_oversized, run_log, stderr_file, outcome) -> None:
    try:
        # The guard's stdin is its lifeline: a pipe only this process holds.
        proc = subprocess.Popen(
            GUARD_ARGV + ([groupguard.OWNER_OPTION + command.owner] if command.owner else []) + command.argv,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr_file,
            cwd=command.cwd, env=command.env, start_new_session=True,
        )
    except OSError as exc:
        outcome.spawn_error = f"{command.argv[0]}: {exc.strerror or exc}"
        return

    def oversized(size: int) -> None:
        outcome.oversized_lines += 1
        on_oversized(size)

    splitter = LineSplitter(command.max_line_bytes, on_line, oversized)
    try:
        _pump(proc, command, splitter, run_log, should_stop, outcome)
        # However the reading ended (a stop, the timeout, a leftover child
        # holding stdout, or its end), what the CLI wrote before its group
        # was ended is read too, into the run log and the session, markers
        # and all: the pipe's buffer, what it wrote while a line or the
        # stop's check waited on the database, its last lines as it exited.
        _end_group(proc)
        _drain(proc, command, run_log, outcome, splitter)
    except Exception:
        # ``on_line`` failed and the session ends with it. What the CLI wrote
        # until its group is ended (the pipe's buffer, and what it wrote while
        # a line waited on a locked database) still goes to the run log.
        _end_group(proc)
        _drain(proc, command, run_log, outcome)
        raise
    finally:
        _end_group(proc)
        proc.stdout.close()
        proc.stdin.close()
    if not outcome.log_error:
        splitter.close()
    outcome.exit_code = proc.returncode


def _keep_stderr(stderr_file, command: CLICommand, outcome: ProcessOutcome) -> None:
    """The CLI's stderr, redacted, beside the run log; its tail (redacted
    too) goes into the outcome, and tells whether the guard could start the CLI."""
    stderr_path = command.log_path.with_suffix(".stderr.log")
    try:
        copy_redacted(stderr_file, stderr_path, command.redactor)
    except OSError as exc:
        outcome.log_error = outcome.log_error or _log_error(stderr_path, exc)
    # The tail's secrets are found in what came before it too: cut first, a
    # secret it begins inside would no longer be whole, nor found.
    stderr_file.seek(max(0, stderr_file.seek(0, os.SEEK_END) - STDERR_TAIL_BYTES - OVERLAP_CHARS))
    text = stderr_file.read().decode("utf-8", "replace")
    outcome.stderr_tail = tail_redacted(text, command.redactor.spans(text), STDERR_TAIL_BYTES).strip()
    if outcome.exit_code == groupguard.SPAWN_FAILED:
        for line in outcome.stderr_tail.splitlines():
            if line.startswith(groupguard.SPAWN_ERROR_PREFIX):
                outcome.spawn_error = line[len(groupguard.SPAWN_ERROR_PREFIX):]


def _log_error(path, exc: OSError) -> str:
    return f"the run log {path} could not be written: {exc.strerror or exc}"


def _close(run_log: RedactedLog, path: Path, outcome: ProcessOutcome) -> None:
    """Write what the redacted log still holds and close it; on a full disk
    the last bytes may still fail."""
    try:
        try:
            run_log.close()
        finally:
            run_log.file.close()
    except OSError as exc:
        outcome.log_error = outcome.log_error or _log_error(path, exc)


def _pump(proc, command, splitter, run_log, should_stop, outcome) -> None:
    deadline = time.monotonic() + command.timeout_seconds
    exited_at: Optional[float] = None
    with closing(_stdout_chunks(proc)) as chunks:
        for data in chunks:
            if data is not None:
                try:
                    run_log.write(data)
                    run_log.flush()
                except OSError as exc:
                    # A session whose every byte cannot be kept is ended, not run blind.
                    outcome.log_error = _log_error(command.log_path, exc)
                    log.error("%s; ending the CLI's process group", outcome.log_error)
                    return
                splitter.feed(data)
                continue
            reason = should_stop()
            if reason:
                # A CLI that has exited (a leftover child holding its stdout) finished
                # before the stop: it keeps the status its own end gives it. What it
                # wrote before exiting is read after the group is ended (``_drain``).
                if exited_at is None and proc.poll() is None:
                    outcome.ended_by = reason
                return
            now = time.monotonic()
            if now >= deadline:
                if exited_at is None and proc.poll() is None:   # as for a stop
                    outcome.timed_out = True
                    outcome.ended_by = f"exceeded the session timeout of {command.timeout_seconds:g} s"
                return
            if exited_at is None and proc.poll() is not None:
                exited_at = now
            if exited_at is not None and now - exited_at > ORPHAN_GRACE_SECONDS:
                log.warning("CLI exited but a leftover process kept stdout open; ending its group")
                return
    proc.wait()   # stdout ended: the CLI has exited, or is about to


def _drain(proc, command: CLICommand, run_log: RedactedLog, outcome: ProcessOutcome,
           splitter: Optional[LineSplitter] = None) -> None:
    """Copy what is left on stdout to the run log (and to ``splitter``'s
    lines, if given), up to its end (the group is ended, so no writer is
    left to hold it), a wait that brings nothing (what the group wrote is
    all read: a process that left the group may hold it still) or, for one
    that goes on writing, ``DRAIN_SECONDS``."""
    if outcome.log_error:
        return
    deadline = time.monotonic() + DRAIN_SECONDS
    quiet = True   # nothing came since the last wait
    with closing(_stdout_chunks(proc)) as chunks:
        for data in chunks:
            if data is not None:
                quiet = False
                try:
                    run_log.write(data)
                except OSError as exc:
                    outcome.log_error = _log_error(command.log_path, exc)
                    return
                if splitter is not None:
                    splitter.feed(data)
            elif quiet:
                return
            else:
                quiet = True
            if time.monotonic() >= deadline:
                return


def _stdout_chunks(proc) -> Iterator[Optional[bytes]]:
    """The CLI's stdout as it arrives, a chunk at a time, with None after
    every wait of up to ``POLL_SECONDS`` (so that the reader looks at its
    clocks even while nothing comes); ends where stdout ends."""
    fd = proc.stdout.fileno()
    os.set_blocking(fd, False)
    with selectors.DefaultSelector() as selector:
        selector.register(fd, selectors.EVENT_READ)
        while True:
            for _ in selector.select(POLL_SECONDS):
                data = _read(fd)
                if data == b"":
                    return
                if data:
                    yield data
            yield None


def _read(fd: int) -> Optional[bytes]:
    try:
        return os.read(fd, READ_CHUNK)
    except BlockingIOError:
        return None


def _end_group(proc: subprocess.Popen) -> None:
    """SIGTERM the whole group; SIGKILL whatever is left after a grace period.

    Called at every end, so nothing a session started outlives it: nothing
    but what runs as another user (a setuid helper, sudo), which the kernel
    does not let this service signal. That is left, with a warning."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        except PermissionError:
            # Refused only if no member could be signalled (kill(2)): all
            # that is left is another user's, and no grace period ends it.
            _warn_left_to_another_user(proc)
            break
        deadline = time.monotonic() + KILL_GRACE_SECONDS
        while time.monotonic() < deadline:
            # Reap the CLI first: a zombie still counts as a member of its group.
            if proc.poll() is not None and not group_alive(proc.pid):
                break
            time.sleep(0.05)
        else:
            continue
        break
    proc.wait()


def _warn_left_to_another_user(proc: subprocess.Popen) -> None:
    """Once a session: every way out of ``_run`` ends the group again, and
    meets the same refusal."""
    if getattr(proc, "claudeops_left_to_another_user", False):
        return
    proc.claudeops_left_to_another_user = True
    log.warning("process group %d of the session's CLI could not be ended: what is left of it runs as another user "
                "(a setuid helper, or sudo), whom this service may not signal. It is left running, and the session "
                "ends without it: end it as root or that user (kill -TERM -- -%d)", proc.pid, proc.pid)


def group_alive(pgid: int) -> bool:
    """Whether any process is left in the group (one of another user's is
    none of this service's)."""
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    return True
