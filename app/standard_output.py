"""Standard output as the command line needs it: errors said in a line, and
nothing the agent wrote acted on by the operator's terminal.

A write that fails (``> /dev/full``, a full disk under ``> file``, a
terminal gone) raises an ``OSError`` that names no file, from wherever the
command was printing: a traceback that does not even say it was the output.
A closed pipe (``| head``) is left to click, which ends quietly.

Agent text (observations, event messages, a session's response) reaches the
terminal through ``memories list``, ``cooldowns list`` and the like, and the
agent may have copied it from anything a tool printed: an escape sequence in
it could retitle the window, hide what follows or rewrite the line. On a
terminal, control characters are shown as ``\\x1b`` (direction controls as
``\\u202e``); into a file or a pipe the bytes go as they are, since an export
must be exact.
"""
from __future__ import annotations

import errno
import io
import re
import sys

import click


# What a terminal acts on rather than shows: the C0 controls but tab and
# newline, DEL, and the C1 controls (as UTF-8 encodes them; none of these
# bytes is ever part of another character's encoding). Also Unicode's
# explicit direction controls, U+202A to U+202E and U+2066 to U+2069, which a
# terminal that lays out bidirectional text obeys, to show a line in another
# order than it is written (app/web/direction_controls.py).
_TERMINAL_CONTROLS = re.compile(rb"[\x00-\x08\x0b-\x1f\x7f]|\xc2[\x80-\x9f]|\xe2\x80[\xaa-\xae]|\xe2\x81[\xa6-\xa9]")


def _shown(match: re.Match) -> bytes:
    code_point = ord(match.group().decode())
    return (f"\\x{code_point:02x}" if code_point < 0x100 else f"\\u{code_point:04x}").encode()


class _CommandOutput:
    """Standard output's bytes, whose write errors are a ``ClickException``
    naming it. After the first, the rest are dropped: Python flushes standard
    output at exit, and that would print the same error again. On a terminal,
    control characters are shown, not sent."""

    def __init__(self, buffer, terminal: bool):
        self._buffer = buffer
        self._terminal = terminal
        self._failed = False

    def write(self, data):
        if not data and not self._failed:   # how click tells what a stream takes: nothing is lost if it fails
            return self._buffer.write(data)
        if self._terminal:
            self._guarded(self._buffer.write, _TERMINAL_CONTROLS.sub(_shown, bytes(data)))
            return len(data)   # what was taken of the caller's bytes, however many were shown for them
        return self._guarded(self._buffer.write, data)

    def flush(self):
        return self._guarded(self._buffer.flush)

    def _guarded(self, operation, *args):
        if self._failed:
            return len(args[0]) if args else None
        try:
            return operation(*args)
        except OSError as exc:
            if exc.errno == errno.EPIPE:
                raise
            self._failed = True
            raise click.ClickException(f"cannot write to standard output: {exc.strerror or exc}") from None

    def __getattr__(self, name):   # fileno, isatty, closed, …: the stream's own
        return getattr(self._buffer, name)


def install() -> None:
    """Make the process's standard output report its write errors in a
    line, and show control characters on a terminal. Left alone when it is
    not the process's own (a test runner's capture is the caller's to
    handle) or has been made so already."""
    stdout = sys.stdout
    if stdout is None or stdout is not sys.__stdout__ or not isinstance(stdout, io.TextIOWrapper):
        return
    stdout.flush()
    # Buffered as it was: with PYTHONUNBUFFERED (a service's log), every write goes out at once.
    sys.stdout = io.TextIOWrapper(_CommandOutput(stdout.buffer, terminal=stdout.isatty()), encoding=stdout.encoding,
                                  errors=stdout.errors, line_buffering=stdout.line_buffering,
                                  write_through=stdout.write_through)


def echo(text: str = "", **kwargs) -> None:
    """``click.echo`` for stored text (an observation, a session's response):
    click would take what looks like a colour code (``\\x1b[2K``) out of it
    on its way to a file or a pipe, and an export would not be exact. On a
    terminal the stream installed here shows every control character."""
    click.echo(text, color=True, **kwargs)
