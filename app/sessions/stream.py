"""Claude Code ``stream-json`` output, one NDJSON line at a time, into typed items.

The format, as the real CLI writes it (see tests/fixtures/): one JSON object per
line; ``system``/``init`` first and ``result`` last; every ``assistant`` line
carries one complete content block; tool output arrives in ``user`` lines as
``tool_result`` blocks. Key order differs between CLI versions, so only parsed
JSON is trusted, never the text. Types and subtypes this module does not know
(``stream_event``, ``system``/``status`` …) are returned as ``Ignored`` rather
than rejected, because newer CLIs add them freely.
"""
from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from typing import Any, Optional, Union

import orjson

from app.portable_text import without_lone_surrogates


class StreamError(ValueError):
    """A line that is not a stream-json object."""


# JSON may hold half of a UTF-16 surrogate pair, escaped on its own ("\ud83d"):
# JavaScript's JSON.stringify writes that for a string cut inside an emoji.
# Python decodes it to a string no database driver will store, so it becomes
# U+FFFD.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_SURROGATE_ESCAPE_BYTES = re.compile(_SURROGATE_ESCAPE.pattern.encode())


@dataclass(frozen=True)
class Init:
    cli_session_id: Optional[str]
    model: Optional[str]
    cli_version: Optional[str]


@dataclass(frozen=True)
class AssistantText:
    text: str
    message_id: Optional[str]
    is_api_error: bool = False
    # Written by a subagent (the Task tool) for the agent: the CLI names the
    # tool call it works for. What it says comes back to the agent as that
    # call's result, as tool output does, and it may quote what it read.
    from_subagent: bool = False


@dataclass(frozen=True)
class ToolUse:
    tool_use_id: Optional[str]
    name: str
    input: Any


@dataclass(frozen=True)
class ToolResult:
    tool_use_id: Optional[str]
    content: str
    is_error: bool


@dataclass(frozen=True)
class SystemNotice:
    subtype: str
    summary: str


@dataclass(frozen=True)
class Result:
    is_error: bool
    result: Optional[str]
    cost_usd: Optional[float]
    num_turns: Optional[int]
    duration_ms: Optional[int]
    cli_session_id: Optional[str]
    api_error_status: Optional[int]
    permission_denials: list = field(default_factory=list)
    # An error result but the API's ("error_max_budget_usd", "error_max_turns")
    # has no ``result`` text: what went wrong is in its ``errors``.
    subtype: Optional[str] = None
    errors: tuple[str, ...] = ()


@dataclass(frozen=True)
class Ignored:
    type: str


@dataclass(frozen=True)
class Malformed:
    """Part of an assistant line not shaped as the CLI writes it, so not
    read: the agent's words may be in it, and the operator is told."""
    what: str


Item = Union[Init, AssistantText, ToolUse, ToolResult, SystemNotice, Result, Ignored, Malformed]


def parse_line(line: Union[bytes, str]) -> list[Item]:
    """Parse one line into items (an assistant line may, in principle, hold
    several blocks). Raises ``StreamError`` for anything that is not a JSON
    object with a string ``type``."""
    obj = _loads(line)
    surrogates = _SURROGATE_ESCAPE_BYTES if isinstance(line, bytes) else _SURROGATE_ESCAPE
    if surrogates.search(line):
        try:
            obj = _replace_lone_surrogates(obj)
        except RecursionError:
            raise StreamError("nested too deeply") from None
    if not isinstance(obj, dict) or not isinstance(obj.get("type"), str):
        raise StreamError("not a stream-json object (no string 'type')")
    parser = _PARSERS.get(obj["type"])
    if parser is None:
        return [Ignored(obj["type"])]
    return parser(obj)


def _loads(line: Union[bytes, str]) -> Any:
    """The line's JSON value. orjson reads it first: it is several times as
    fast as the standard library and checks the UTF-8 itself. What it refuses
    is read again by the standard library, which takes more (NaN, lone
    surrogate escapes, numbers beyond a double) and says what is wrong.

    One difference remains: orjson reads an integer beyond 64 bits as a
    float. The CLI is a JavaScript program, whose numbers are all doubles, so
    it never writes one."""
    try:
        return orjson.loads(line)
    except orjson.JSONDecodeError:
        pass
    if isinstance(line, bytes):
        try:
            line = line.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise StreamError(f"not UTF-8 at byte {exc.start}") from None
    try:
        return json.loads(line)
    except (json.JSONDecodeError, RecursionError) as exc:
        raise StreamError(f"not JSON: {exc}") from None


def _replace_lone_surrogates(value: Any) -> Any:
    if isinstance(value, str):
        return without_lone_surrogates(value)
    if isinstance(value, list):
        return [_replace_lone_surrogates(item) for item in value]
    if isinstance(value, dict):
        return {_replace_lone_surrogates(key): _replace_lone_surrogates(item) for key, item in value.items()}
    return value


def _content_blocks(obj: dict) -> list[dict]:
    message = obj.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, list):
        return [block for block in content if isinstance(block, dict)]
    return []


def _parse_system(obj: dict) -> list[Item]:
    subtype = obj.get("subtype")
    if subtype == "init":
        return [Init(_str(obj.get("session_id")), _str(obj.get("model")), _str(obj.get("claude_code_version")))]
    if subtype == "api_retry":
        summary = (f"API retry {obj.get('attempt')}/{obj.get('max_retries')} after "
                   f"{obj.get('error_status') or obj.get('error')}")
        return [SystemNotice("api_retry", summary)]
    if subtype == "permission_denied":
        return [SystemNotice("permission_denied", f"{obj.get('tool_name')}: {obj.get('message', '')}")]
    return [Ignored(f"system/{subtype}")]


def _parse_assistant(obj: dict) -> list[Item]:
    message = obj.get("message")
    if not isinstance(message, dict):
        return [Malformed(f"an assistant line whose message is {_kind(message)}, not an object")]
    if not isinstance(message.get("content"), list):
        return [Malformed(f"an assistant line whose message content is {_kind(message.get('content'))}, "
                          "not a list of blocks")]
    message_id = _str(message.get("id"))
    api_error = bool(obj.get("is_api_error_message")) or message.get("model") == "<synthetic>"
    from_subagent = bool(obj.get("parent_tool_use_id"))
    items: list[Item] = []
    first_unread, unread = 0, 0   # told once for the line, where its first is: a line may hold a million
    for block in message["content"]:
        why = _unreadable(block)
        if why is not None:
            if not unread:
                first_unread = len(items)
                items.append(Malformed(why))
            unread += 1
        elif block.get("type") == "text":
            items.append(AssistantText(block["text"], message_id, api_error, from_subagent))
        elif block.get("type") == "tool_use":
            items.append(ToolUse(_str(block.get("id")), str(block.get("name") or "?"), block.get("input")))
        else:
            items.append(Ignored(f"assistant/{block.get('type')}"))
    if unread > 1:
        items[first_unread] = Malformed(f"{items[first_unread].what} (and {unread - 1} more blocks not read)")
    return items


def _unreadable(block: Any) -> Optional[str]:
    """Why an assistant content block cannot be read, or None."""
    if not isinstance(block, dict):
        return f"an assistant content block that is {_kind(block)}, not an object"
    if block.get("type") == "text" and not isinstance(block.get("text"), str):
        return f"an assistant text block whose text is {_kind(block.get('text'))}"
    return None


def _parse_user(obj: dict) -> list[Item]:
    items: list[Item] = []
    for block in _content_blocks(obj):
        if block.get("type") == "tool_result":
            items.append(ToolResult(_str(block.get("tool_use_id")), _flatten_content(block.get("content")),
                                    bool(block.get("is_error"))))
        else:
            items.append(Ignored(f"user/{block.get('type')}"))
    return items or [Ignored("user")]


def _parse_result(obj: dict) -> list[Item]:
    denials, errors = obj.get("permission_denials"), obj.get("errors")
    return [Result(
        is_error=bool(obj.get("is_error")),
        result=_str(obj.get("result")),
        cost_usd=_number(obj.get("total_cost_usd"), float, least=0, most=MAX_COST_USD),
        num_turns=_number(obj.get("num_turns"), int, least=0),
        duration_ms=_number(obj.get("duration_ms"), int, least=0),
        cli_session_id=_str(obj.get("session_id")),
        api_error_status=_number(obj.get("api_error_status"), int),
        permission_denials=denials if isinstance(denials, list) else [],
        subtype=_str(obj.get("subtype")),
        errors=tuple(e for e in errors if isinstance(e, str)) if isinstance(errors, list) else (),
    )]


def _flatten_content(content: Any) -> str:
    """Tool output is a string or a list of ``{"type": "text", ...}`` parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                parts.append(part["text"])
            elif isinstance(part, dict):
                parts.append(f"[{part.get('type', 'content')}]")
        return "\n".join(parts)
    return "" if content is None else json.dumps(content)


def _kind(value: Any) -> str:
    """A JSON value's kind, as a message names it."""
    if value is None:
        return "null (or missing)"
    if isinstance(value, bool):
        return "a boolean"
    return {str: "a string", list: "a list", dict: "an object"}.get(type(value), "a number")


def _str(value: Any) -> Optional[str]:
    return value if isinstance(value, str) else None


# A count or duration beyond a 32-bit INTEGER column is not believable (2**31
# milliseconds are 24 days); dropped like a non-number rather than refused by
# the database (PostgreSQL) or stored (SQLite).
MAX_INTEGER = 2**31 - 1
# Nor is a session that cost more than a million dollars: a broken line's
# 1e307 would make the sessions' costs add up to no number (infinity on
# SQLite, an error on PostgreSQL) in /api/v1/stats and the daily limit.
MAX_COST_USD = 1_000_000.0


def _number(value: Any, kind: type, least: Optional[float] = None, most: Optional[float] = None) -> Any:
    """``value`` as ``kind`` if it is a finite JSON number that fits the
    column (and is from ``least`` to ``most``), else None: what it stands
    for is unknown, not what a broken line says (a negative cost, a turn
    count of -5, a duration of 1e400, a cost of 1e307)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        number = kind(value)
    except (OverflowError, ValueError):
        return None
    if kind is int and not -MAX_INTEGER - 1 <= number <= MAX_INTEGER:
        return None
    if not math.isfinite(number) or (least is not None and number < least) or (most is not None and number > most):
        return None
    return number


_PARSERS = {
    "system": _parse_system,
    "assistant": _parse_assistant,
    "user": _parse_user,
    "result": _parse_result,
}
