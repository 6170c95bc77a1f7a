"""Turn parsed stream items into the session's activity log, and fan the
agent's text blocks out to the plugins' marker hook.

Only ``AssistantText`` reaches ``claudeops_markers``: tool input, tool output
and anything the CLI itself wrote never do, so text a tool printed can never
become an event or a memory.
"""
from __future__ import annotations

import json
import logging
from typing import Optional

from app.extensions import db
from app.models import Session, SessionActivity
from app.plugin_types import MarkerRecord, RunInfo
from app.plugins import call_each, flatten
from app.sessions import stream
from app.timeutil import utcnow

log = logging.getLogger(__name__)

# The run log keeps every byte; the activity log shows enough to follow along.
MAX_ACTIVITY_BODY = 20_000
PREVIEW_CHARS = 200


class StreamHandler:
    """Consumes one session's stdout lines as they arrive."""

    def __init__(self, session: Session, run: RunInfo):
        self.session = session
        self.run = run
        self.texts: list[str] = []
        self.result: Optional[stream.Result] = None
        self.line_number = 0
        self.skipped = 0

    @property
    def response(self) -> str:
        return "\n\n".join(self.texts)

    def handle_line(self, line: bytes) -> None:
        self.line_number += 1
        try:
            items = stream.parse_line(line)
        except stream.StreamError as exc:
            self.skipped += 1
            log.warning("session %s: skipped stream line %d: %s", self.session.id, self.line_number, exc)
            self._add("warning", f"skipped line {self.line_number}", f"{exc}: {_preview(line)}")
            db.session.commit()
            return
        for item in items:
            self._handle_item(item)
        db.session.commit()

    def handle_oversized(self, size: int) -> None:
        self.line_number += 1
        self.skipped += 1
        log.warning("session %s: skipped stream line %d of %d bytes (over the line limit)",
                    self.session.id, self.line_number, size)
        self._add("warning", f"skipped line {self.line_number}",
                  f"{size} bytes, over CLAUDEOPS_MAX_LINE_BYTES; kept in the run log only")
        db.session.commit()

    def _handle_item(self, item: stream.Item) -> None:
        if isinstance(item, stream.AssistantText):
            self.texts.append(item.text)
            self._add("text", "API error" if item.is_api_error else None, item.text)
            if not item.is_api_error:  # the CLI's own error notice is not the agent speaking
                db.session.commit()
                self._fan_out(item.text)
        elif isinstance(item, stream.ToolUse):
            self._add("tool_use", item.name, _json(item.input))
        elif isinstance(item, stream.ToolResult):
            self._add("tool_result", "error" if item.is_error else None, item.content)
        elif isinstance(item, stream.SystemNotice):
            self._add("system", item.subtype, item.summary)
        elif isinstance(item, stream.Init):
            if item.cli_session_id:
                self.session.cli_session_id = fit(Session.cli_session_id, item.cli_session_id)
        elif isinstance(item, stream.Result):
            self.result = item
            if item.cli_session_id:
                self.session.cli_session_id = fit(Session.cli_session_id, item.cli_session_id)

    def _fan_out(self, text: str) -> None:
        records = flatten(call_each("claudeops_markers", text=text, run=self.run, commit_each=True))
        for record in records:
            if isinstance(record, MarkerRecord):
                self._add("marker", f"{record.kind}:{record.label}", record.summary)

    def _add(self, kind: str, title: Optional[str], body: Optional[str]) -> None:
        if body is not None and len(body) > MAX_ACTIVITY_BODY:
            body = body[:MAX_ACTIVITY_BODY] + f"\n… ({len(body) - MAX_ACTIVITY_BODY} more characters in the run log)"
        db.session.add(SessionActivity(session_id=self.session.id, kind=kind,
                                       title=fit(SessionActivity.title, title), body=body, created_at=utcnow()))


def fit(column, value: Optional[str]) -> Optional[str]:
    """``value`` cut to the column's length: the CLI names things (tools,
    its session id) with no limit, and PostgreSQL refuses a longer string
    where SQLite would keep it."""
    length = column.type.length
    return value[:length] if value is not None and length else value


def _json(value) -> str:
    try:
        return json.dumps(value, indent=2, ensure_ascii=False)
    except (TypeError, ValueError):
        return repr(value)


def _preview(line: bytes) -> str:
    text = line[:PREVIEW_CHARS].decode("utf-8", "replace")
    return text + ("…" if len(line) > PREVIEW_CHARS else "")
