"""Turn parsed stream items into the session's activity log, and fan the
agent's text blocks out to the plugins' marker hook.

Only ``AssistantText`` reaches ``claudeops_markers``: tool input, tool output
and anything the CLI itself wrote never do, so text a tool printed can never
become an event or a memory. The agent's text is redacted once, before the
plugins see it; every row this module writes is redacted here, since its
batched Core inserts bypass the ORM listener of app/db_redaction.py.

A database server that goes away mid-session (PostgreSQL restarted, the
connection dropped: ``dbfaults.passing``) takes the batch's transaction
with it, not the session: the handler keeps the lines it has read since the
last commit, waits for the server, and reads them again into a new
transaction, plugins and all. Every other database fault ends the session.
"""
from __future__ import annotations

import json
import logging
import threading
import time
from typing import Callable, Optional, TypeVar, Union

import orjson
from sqlalchemy import func, select
from sqlalchemy.exc import SQLAlchemyError

from app import dbfaults, marker_queue
from app.bulk_insert import BulkInsert
from app.extensions import db
from app.models import Session, SessionActivity
from app.plugin_types import MarkerRecord, PendingRecords, RunInfo
from app.redaction import head_redacted, redactor, replace_spans
from app.sessions import stream
from app.sessions.fanout import MarkerFanOut
from app.sessions.repeats import repeats_counted
from app.sessions.response import ResponseTail
from app.timeutil import utcnow

log = logging.getLogger(__name__)

# The run log keeps every byte; the activity log shows enough to follow along.
MAX_ACTIVITY_BODY = 20_000
PREVIEW_CHARS = 200
MAX_RESPONSE_CHARS = 200_000
# What of a body is kept until its batch is redacted: twice what is shown,
# so that no secret that reaches into the shown part is cut before it is found.
UNREDACTED_KEPT = 2 * MAX_ACTIVITY_BODY

# Rows are written in batches, one commit for many lines, but never later
# than this after the previous write: the dashboard's activity log stays live.
COMMIT_INTERVAL_SECONDS = 0.5
# A burst (a long transcript arriving at once) is written sooner: after this
# many lines, or once the batch holds this much text, so what waits in memory
# stays bounded. Not much sooner: each batch costs the plugins' reads of
# what their markers refer to, and a commit.
COMMIT_EVERY_LINES = 2_000
COMMIT_EVERY_CHARS = 4_000_000
# The lines themselves are kept until their batch is committed (to be read
# again if the server goes away): so much of them, and the batch is written.
COMMIT_EVERY_BYTES = 8_000_000

_insert_activity = BulkInsert(SessionActivity.__table__, ("session_id", "kind", "title", "body", "created_at"))

# The table's own columns: reading a length through the mapped attribute
# costs more than the rest of a row.
_TITLE = SessionActivity.__table__.c.title
_CLI_SESSION_ID = Session.__table__.c.cli_session_id

Entry = Union[bytes, int]   # a line as read, or the size of one too long to read
T = TypeVar("T")


class StreamHandler:
    """Consumes one session's stdout lines as they arrive.

    Call ``commit_if_due`` between reads as well (a quiet stream's last rows
    must not wait for the next line) and ``close`` at the end. Any other
    read of the database between lines goes through ``unless_gone``."""

    def __init__(self, session: Session, run: RunInfo, shutdown: Optional[threading.Event] = None,
                 marker_tags: Optional[dict[str, tuple[str, ...]]] = None):
        self.session = session
        # Kept apart: every commit expires ``session``, and reading its id
        # again would cost a SELECT for every batch.
        self.session_id = session.id
        self.run = run
        # Once set, a database that went away is no longer waited for.
        self.shutdown = shutdown or threading.Event()
        self.redactor = redactor()
        self.response_tail = ResponseTail(MAX_RESPONSE_CHARS)
        self.markers = MarkerFanOut(run, marker_tags)
        self.result: Optional[stream.Result] = None
        # The CLI's last "API retry" notice while no answer came after it:
        # what a session that times out was waiting for.
        self.retrying_api: Optional[str] = None
        self.line_number = 0
        self.skipped = 0
        self._rows: list[dict] = []          # activity not yet written
        self._pending: list[tuple[dict, PendingRecords]] = []   # rows standing for records to come
        self._unredacted: list[tuple[dict, int]] = []   # rows of it not yet redacted, each with what was cut
        self._batch: list[Entry] = []        # what was read since the last commit
        self._batch_bytes = 0
        # Activity rows written, and of them committed: only this handler
        # writes the session's. And whether a COMMIT is under way.
        self._activity_rows = self._activity_rows_committed = 0
        self._committing = False
        self._chars_since_commit = 0
        self._last_commit = time.monotonic()
        self._committed = self._state()

    @property
    def response(self) -> str:
        return self.response_tail.text()

    def handle_line(self, line: bytes) -> None:
        self._batch.append(line)
        self._batch_bytes += len(line)
        try:   # not through unless_gone: a call less for every line
            self._read(line)
            self._commit_if_due()
        except SQLAlchemyError as exc:
            self._survive(exc)

    def handle_oversized(self, size: int) -> None:
        self._batch.append(size)
        self.unless_gone(self._take, size)

    def commit_if_due(self) -> None:
        self.unless_gone(self._commit_if_due)

    def commit(self) -> None:
        """Write the pending activity and commit it with the plugins' rows."""
        self.unless_gone(self._commit)

    def close(self) -> None:
        """The stream has ended (or the session is being given up): write the rest."""
        self.commit()

    def unless_gone(self, work: Callable[..., T], *args) -> Optional[T]:
        """``work(*args)``; if the database server went away meanwhile, the
        batch read again and written once it is back, and None."""
        try:
            return work(*args)
        except SQLAlchemyError as exc:
            self._survive(exc)
            return None

    def _survive(self, exc: SQLAlchemyError) -> None:
        if not dbfaults.passing(exc):
            raise exc
        self._write_again(exc)

    def _take(self, entry: Entry) -> None:
        self._read(entry)
        self._commit_if_due()

    def _read(self, entry: Entry) -> None:
        self.line_number += 1
        if isinstance(entry, int):
            self.skipped += 1
            log.warning("session %s: skipped stream line %d of %d bytes (over the line limit)",
                        self.session_id, self.line_number, entry)
            self._add("warning", f"skipped line {self.line_number}",
                      f"{entry} bytes, over CLAUDEOPS_MAX_LINE_BYTES; kept in the run log only")
            return
        try:
            items = stream.parse_line(entry)
        except stream.StreamError as exc:
            self.skipped += 1
            log.warning("session %s: skipped stream line %d: %s", self.session_id, self.line_number, exc)
            self._add("warning", f"skipped line {self.line_number}", f"{exc}: {self._preview(entry)}",
                      redacted=True)
        else:
            for item in items:
                self._handle_item(item)

    def _preview(self, line: bytes) -> str:
        """The start of a line the parser refused, redacted before it is
        cut: a secret standing where the cut falls is found whole, not
        stored in part. As much past the cut is read as for any body."""
        text = line[:PREVIEW_CHARS + MAX_ACTIVITY_BODY].decode("utf-8", "replace")
        shown = head_redacted(text, self.redactor.spans(text), PREVIEW_CHARS)
        # Whether it was cut is told by the characters, not by the line's
        # bytes: a line of 150 accented letters is 300 bytes, and whole.
        return shown if len(text) <= PREVIEW_CHARS else shown + "…"

    def _commit_if_due(self) -> None:
        if (len(self._batch) >= COMMIT_EVERY_LINES or self._chars_since_commit >= COMMIT_EVERY_CHARS
                or self._batch_bytes >= COMMIT_EVERY_BYTES
                or time.monotonic() - self._last_commit >= COMMIT_INTERVAL_SECONDS):
            self._commit()

    def _commit(self) -> None:
        self.markers.flush()
        if self._pending:
            self._fill_pending()
        if self._unredacted:
            self._redact_pending()
        if self._rows:
            # The table, not the mapped class: a plain executemany, no ORM bookkeeping.
            _insert_activity(db.session.connection(), self._rows)
            self._activity_rows += len(self._rows)
            self._rows = []
        self._committing = True
        db.session.commit()
        self._batch_written()

    def _batch_written(self) -> None:
        self._committing = False
        self._activity_rows_committed = self._activity_rows
        self.markers.committed()
        self._batch = []
        self._batch_bytes = 0
        self._chars_since_commit = 0
        self._last_commit = time.monotonic()
        self._committed = self._state()

    def _state(self) -> tuple:
        """What reading the batch changes besides rows: kept at each commit,
        to go back to if the batch has to be read again."""
        return self.line_number, self.skipped, self.result, self.retrying_api, self.response_tail.copy()

    def _write_again(self, gone: SQLAlchemyError) -> None:
        """The server went away, and the batch's transaction with it: wait
        for it (dbfaults.wait_out, which rolls the transaction back), then
        read the batch again, from the state of the last commit, and write
        it. Raises the last fault if the server is not back in time, or any
        fault that is not its absence."""
        had_committed = dbfaults.wait_out(
            gone, self._batch_again, f"session {self.session_id}", self.shutdown,
            then=f"the {len(self._batch)} lines read since the last commit are read again")
        log.warning("session %s: the database is back%s", self.session_id,
                    ", and had committed the last batch" if had_committed
                    else "; the lines since the last commit are written")

    def _batch_again(self) -> bool:
        """The batch written, unless the server had committed it after all
        (then True)."""
        if self._written_after_all():
            return True
        self._start_batch_again()
        for entry in self._batch:
            self._read(entry)
        self._commit()
        return False

    def _written_after_all(self) -> bool:
        """Whether the server committed the batch before the connection
        went: a COMMIT the connection's loss interrupted may have been
        carried out. Told by the session's activity rows, written in the
        same transaction as every plugin's rows (a batch without any holds
        none of a plugin's either, and is harmless to write again)."""
        if not self._committing or self._activity_rows == self._activity_rows_committed:
            return False
        stored = db.session.scalar(select(func.count()).select_from(SessionActivity).where(
            SessionActivity.session_id == self.session_id))
        if stored != self._activity_rows:
            return False
        self._batch_written()
        return True

    def _start_batch_again(self) -> None:
        """Back to the last commit (the transaction, rolled back, took the
        plugins' rows and caches with it): what they queued for their flush
        dropped, and the handler's own state as it was then."""
        marker_queue.drop_session(self.session_id)
        self.markers.committed()
        self.line_number, self.skipped, self.result, self.retrying_api, tail = self._committed
        self.response_tail = tail.copy()
        self._rows, self._pending, self._unredacted = [], [], []
        self._activity_rows = self._activity_rows_committed
        self._committing = False
        self._chars_since_commit = 0

    def _handle_item(self, item: stream.Item) -> None:
        if isinstance(item, stream.AssistantText):
            text = self.redactor.redact(item.text)
            if not item.is_api_error:
                self.retrying_api = None
            if item.from_subagent:
                # Logged, never read for markers: to the agent it is a tool's output.
                self._add("text", "subagent", text, redacted=True)
                return
            self.response_tail.append(text)
            self._add("text", "API error" if item.is_api_error else None, text, redacted=True)
            if not item.is_api_error:  # the CLI's own error notice is not the agent speaking
                self._fan_out(text)
        elif isinstance(item, stream.ToolUse):
            self.retrying_api = None
            self._add("tool_use", item.name, _json(item.input))
        elif isinstance(item, stream.ToolResult):
            self._add("tool_result", "error" if item.is_error else None, item.content)
        elif isinstance(item, stream.SystemNotice):
            self._add("system", item.subtype, item.summary)
            if item.subtype == "api_retry":
                self.retrying_api = item.summary
        elif isinstance(item, stream.Malformed):
            log.warning("session %s: stream line %d: %s, not read", self.session_id, self.line_number, item.what)
            self._add("warning", f"line {self.line_number}", f"{item.what}, not read")
        elif isinstance(item, stream.Init):
            if item.cli_session_id:
                self.session.cli_session_id = fit(_CLI_SESSION_ID, item.cli_session_id)
        elif isinstance(item, stream.Result):
            self.result = item
            if item.cli_session_id:
                self.session.cli_session_id = fit(_CLI_SESSION_ID, item.cli_session_id)

    def _fan_out(self, text: str) -> None:
        for record in self.markers(text):
            if isinstance(record, MarkerRecord):
                self._add_record(record)
            elif isinstance(record, PendingRecords):
                # Its place in the log, kept until the plugin has written its batch.
                self._pending.append((self._add("marker", None, None, redacted=True), record))

    def _add_record(self, record: MarkerRecord, row: Optional[dict] = None) -> None:
        # A marker a plugin refused (a per-session limit, say) is a warning, not a record.
        self._add("marker" if record.stored else "warning", f"{record.kind}:{record.label}"[:200],
                  record.summary, row=row)

    def _fill_pending(self) -> None:
        """Each placeholder row becomes the records it stood for (none, one or
        several, in its place)."""
        rows, self._rows = self._rows, []
        places = {id(row): pending for row, pending in self._pending}
        self._pending = []
        for row in rows:
            pending = places.get(id(row))
            if pending is None:
                self._rows.append(row)
                continue
            records = pending.records
            if records is None:
                records = [MarkerRecord("markers", "lost", "a plugin failed to write this block's records; "
                                        "see the service log", stored=False)]
            for record in repeats_counted(records):
                self._add_record(record, row=dict(row))

    def _add(self, kind: str, title: Optional[str], body: Optional[str], redacted: bool = False,
             row: Optional[dict] = None) -> dict:
        """A row written with the next commit, in one statement for many rows
        (``row``: one whose place and time to take)."""
        row = row if row is not None else {"session_id": self.session_id, "created_at": utcnow()}
        row.update(kind=kind, title=title, body=body)
        self._rows.append(row)
        if redacted:
            _shorten(row)
        else:
            # Redacted with the rest of the batch, in one scan (Redactor.redact_many).
            # Meanwhile only so much is kept that a secret reaching into what
            # will be shown is still whole.
            cut = 0
            if body is not None and len(body) > UNREDACTED_KEPT:
                row["body"], cut = body[:UNREDACTED_KEPT], len(body) - UNREDACTED_KEPT
            self._unredacted.append((row, cut))
        if row["body"] is not None:
            self._chars_since_commit += len(row["body"])
        return row

    def _redact_pending(self) -> None:
        texts = [text for row, _ in self._unredacted for text in (row["title"], row["body"])]
        spans = self.redactor.spans_many(texts)
        for (row, cut), title_spans, body_spans in zip(self._unredacted, spans[::2], spans[1::2]):
            if row["title"]:
                row["title"] = replace_spans(row["title"], title_spans)
            _shorten(row, cut, body_spans)
        self._unredacted = []


def _shorten(row: dict, cut: int = 0, spans: Optional[list[tuple[int, int]]] = None) -> None:
    """The row's body cut to what the activity log shows (``cut``: what
    was cut from it already), its secrets (``spans``, if it is not
    redacted yet) replaced; its title cut to the column's length."""
    body = row["body"]
    if body is not None and len(body) > MAX_ACTIVITY_BODY:
        more = len(body) - MAX_ACTIVITY_BODY + cut
        shown = head_redacted(body, spans or [], MAX_ACTIVITY_BODY)
        row["body"] = f"{shown}\n… ({more} more characters in the run log)"
    elif body and spans:
        row["body"] = replace_spans(body, spans)
    row["title"] = fit(_TITLE, row["title"])


def fit(column, value: Optional[str]) -> Optional[str]:
    """``value`` cut to the column's length: the CLI names things (tools,
    its session id) with no limit, and PostgreSQL refuses a longer string
    where SQLite would keep it."""
    length = column.type.length
    return value[:length] if value is not None and length else value


def _json(value) -> str:
    """A tool's input as the activity log shows it: JSON indented by two.
    orjson writes what ``json.dumps(value, indent=2, ensure_ascii=False)``
    writes, at a fraction of the cost, but for floats: some are spelt
    otherwise (1e16, not 1e+16), and NaN and infinity are written null, as
    JavaScript writes them (the CLI never sends them). What it refuses (an
    integer beyond 64 bits, a lone surrogate, nesting deeper than 255) the
    standard library writes; nesting too deep for that too is not shown."""
    try:
        return orjson.dumps(value, option=orjson.OPT_INDENT_2).decode()
    except TypeError:
        pass
    try:
        return json.dumps(value, indent=2, ensure_ascii=False)
    except RecursionError:
        return "(nested too deeply to show here; the run log has it)"
    except (TypeError, ValueError):
        return repr(value)


