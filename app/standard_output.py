"""Standard output that says, in a line, when it cannot be written.

A write that fails (``> /dev/full``, a full disk under ``> file``, a
terminal gone) raises an ``OSError`` that names no file, from wherever the
command was printing: a traceback that does not even say it was the output.
A closed pipe (``| head``) is left to click, which ends quietly.
"""
from __future__ import annotations

import errno
import io
import sys

import click


class _NamedOutput:
    """Standard output's bytes, whose write errors are a ``ClickException``
    naming it. After the first, the rest are dropped: Python flushes standard
    output at exit, and that would print the same error again."""

    def __init__(self, buffer):
        self._buffer = buffer
        self._failed = False

    def write(self, data):
        if not data and not self._failed:   # how click tells what a stream takes: nothing is lost if it fails
            return self._buffer.write(data)
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


def name_write_errors() -> None:
    """Make the process's standard output report its write errors in a
    line. Left alone when it is not the process's own (a test runner's
    capture is the caller's to handle) or has been made so already."""
    stdout = sys.stdout
    if stdout is None or stdout is not sys.__stdout__ or not isinstance(stdout, io.TextIOWrapper):
        return
    stdout.flush()
    # Buffered as it was: with PYTHONUNBUFFERED (a service's log), every write goes out at once.
    sys.stdout = io.TextIOWrapper(_NamedOutput(stdout.buffer), encoding=stdout.encoding, errors=stdout.errors,
                                  line_buffering=stdout.line_buffering, write_through=stdout.write_through)
