"""The run log (and the CLI's stderr log) written redacted.

The CLI's output arrives in chunks that may end anywhere, even inside a
secret. ``RedactedLog`` writes complete lines, redacted as a whole; it holds
back a line that has not ended yet, and anything a secret may still be
running through (a private key block whose end has not arrived). A line
longer than ``HOLD_CHARS`` is written in pieces, each cut before the last
``OVERLAP_CHARS`` and never inside a match, so a secret is never split
between two pieces; only a single match longer than ``HOLD_CHARS`` (no real
credential is) could be. A cut may fall between a value and what names it
(``passw|ord=…``, ``mysql … | -p…``), so the next piece is searched with
the end of the written one before it, ``CONTEXT_CHARS``, which is not
written again.
"""
from __future__ import annotations

import os
from typing import BinaryIO

from app.redaction import Redactor, replace_spans

HOLD_CHARS = 1024 * 1024
OVERLAP_CHARS = 64 * 1024
COPY_CHUNK = 64 * 1024
# More than any credential shape reaches back from its value to what names
# it (a client's name before its password flag: 400 characters).
CONTEXT_CHARS = 4096


class RedactedLog:
    """A binary file that is written redacted; ``close()`` writes the rest."""

    def __init__(self, file: BinaryIO, redactor: Redactor):
        self.file = file
        self.redactor = redactor
        self.pending = bytearray()
        # The end of a line written in part: what the rest of it is searched with.
        self.context = ""

    def write(self, data: bytes) -> None:
        self.pending += data
        if b"\n" in data or len(self.pending) > HOLD_CHARS:
            self._write_settled()

    def flush(self) -> None:
        self.file.flush()

    def close(self) -> None:
        """The last line, ended or not (the CLI has exited)."""
        if self.pending:
            text = self.pending.decode("utf-8", "surrogateescape")
            self.file.write(replace_spans(text, self._spans(text)).encode("utf-8", "surrogateescape"))
            self.pending.clear()
            self.context = ""
        self.file.flush()

    def _write_settled(self) -> None:
        text = self.pending.decode("utf-8", "surrogateescape")
        spans = self._spans(text)
        cut = text.rfind("\n") + 1
        if len(text) - cut > HOLD_CHARS:
            cut = len(text) - OVERLAP_CHARS
        # A match still open at the cut may grow with what comes next: hold it back.
        for start, end in reversed(spans):
            if start < cut <= end:
                cut = start
        if cut <= 0:
            if len(text) <= HOLD_CHARS:
                return
            cut = len(text)   # one match longer than the hold: write it rather than grow without end
        self.file.write(replace_spans(text[:cut], [(s, min(e, cut)) for s, e in spans if s < cut])
                        .encode("utf-8", "surrogateescape"))
        self.pending = bytearray(text[cut:].encode("utf-8", "surrogateescape"))
        written = self.context + text[:cut]
        self.context = "" if written.endswith("\n") else written[written.rfind("\n") + 1:][-CONTEXT_CHARS:]

    def _spans(self, text: str) -> list[tuple[int, int]]:
        """The secrets in ``text``, searched with the context before it."""
        if not self.context:
            return self.redactor.spans(text)
        offset = len(self.context)
        return [(max(start - offset, 0), end - offset)
                for start, end in self.redactor.spans(self.context + text) if end > offset]


def open_private(path: os.PathLike) -> BinaryIO:
    """``path``, new or emptied, for writing, readable by the service's user
    only: what the agent ran and read stays private even in a results
    directory that others may read."""
    return os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "wb")


def copy_redacted(source: BinaryIO, path: os.PathLike, redactor: Redactor) -> None:
    """Write ``source`` (from its start) to ``path``, redacted."""
    source.seek(0)
    with open_private(path) as target:
        log = RedactedLog(target, redactor)
        while chunk := source.read(COPY_CHUNK):
            log.write(chunk)
        log.close()
