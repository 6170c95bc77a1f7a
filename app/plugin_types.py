"""The data that flows through the hooks.

Plugins receive ``RunInfo`` and ``SessionResult`` and return the other types.
They are plain frozen dataclasses so that a plugin depends on nothing but this
module and ``app.hookspecs``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Callable, Iterable, Optional

from flask import Blueprint

# Part of the plugin API: claudeops_settings returns Settings; positive_int,
# retention_days and boolean are ready parsers (a whole number from 1 to
# 2**31 - 1, whose schema is POSITIVE_INT_SCHEMA; days to keep rows, 0 for
# ever, whose schema is RETENTION_DAYS_SCHEMA; true/false, 1/0, yes/no, on/off).
from app.config import (POSITIVE_INT_SCHEMA, RETENTION_DAYS_SCHEMA, Setting, boolean, positive_int,  # noqa: F401
                        retention_days)
# whole_number and decimal_number read a number as every setting does (ASCII
# digits: not "1_0", not other scripts' digits), for a parser with bounds of its own.
from app.plain_numbers import decimal_number, whole_number  # noqa: F401
# Part of the plugin API too: warn_once(log, session_id, kind, message) logs a
# warning the first time a kind comes up in a session, at debug level after;
# named_kind(kind, value) makes a kind of each value the agent wrote.
from app.session_warnings import IN_ACTIVITY_LOG, named_kind, session_warner, warn_once  # noqa: F401
# And marker_text(text, start, run.marker_tags): a marker's text, up to the
# next marker of an installed plugin or the end of its line.
from app.marker_text import BUILT_IN_TAGS, marker_text  # noqa: F401

OVERVIEW_TONES = ("neutral", "good", "warn", "bad")


def _require_types(instance: Any, /, **expected: Any) -> None:
    """Raise ``TypeError`` for the first field of ``instance`` not of its
    expected type (a type, or a tuple of them; ``True`` is not an ``int``
    here). The types a plugin returns check themselves as they are made, so
    a wrong one fails inside the plugin's own hook, where the host logs it
    with the plugin's name, and never later in the host's code, where it
    would cost every plugin the session or the page."""
    for name, kinds in expected.items():
        kinds = kinds if isinstance(kinds, tuple) else (kinds,)
        value = getattr(instance, name)
        if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
            wanted = " or ".join("None" if kind is type(None) else kind.__name__ for kind in kinds)
            raise TypeError(f"{type(instance).__name__}.{name} must be {wanted}, "
                            f"not {type(value).__name__}: {value!r:.80}")


@dataclass(frozen=True)
class RunInfo:
    """The session a hook is called for."""

    session_id: int
    tier: int
    tier_name: str            # "observe", "investigate" or "remediate"
    model: str
    trigger: str              # "schedule", "dashboard", "api", "cli" or "escalation"
    operator_prompt: Optional[str]
    started_at: Optional[datetime]
    parent_session_id: Optional[int] = None   # set for an escalation: the session that asked for it
    escalation_reason: Optional[str] = None
    dry_run: bool = False
    # Every tag the installed plugins' markers begin with (claudeops_marker_tags),
    # in every hook of a session: a marker's text ends at the next of them.
    marker_tags: tuple[str, ...] = BUILT_IN_TAGS


@dataclass(frozen=True)
class SessionResult:
    """How a session ended, passed to ``claudeops_session_finished``."""

    status: str               # completed, failed, stopped, timed_out
    reason: Optional[str]
    response: str
    cost_usd: Optional[float]
    num_turns: Optional[int]
    duration_ms: Optional[int]
    is_error: bool
    cli_session_id: Optional[str]


@dataclass(frozen=True)
class MarkerRecord:
    """One thing a plugin recorded from a text block; shown as a badge in the
    session's activity log, e.g. ``MarkerRecord("event", "warning:postgres", "Slow queries")``.

    ``stored=False`` reports a marker the plugin read but did not store (over
    a per-session limit, too long): the activity log shows it as a warning."""

    kind: str
    label: str
    summary: str = ""
    stored: bool = True

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Raise ``TypeError`` for a field of the wrong type."""
        _require_types(self, kind=str, label=str, summary=str, stored=bool)


class SkippedMarkers:
    """What a marker parser skipped in one text block (an unknown level or
    category, no message): pass it as the parser's ``warn``, then add
    ``records()`` to what ``claudeops_markers`` returns, so that the
    session's activity log says why the marker was not stored, where the
    agent wrote it. Each is logged too, the first of a kind per session as a
    warning (``warn_once``)."""

    def __init__(self, log, run: RunInfo, kind: str):
        self._warn = session_warner(log, run.session_id, later=IN_ACTIVITY_LOG)
        self.kind = kind
        self.messages: list[str] = []

    def __call__(self, warning: str, message: str) -> None:
        self._warn(warning, message)
        self.messages.append(message)

    def records(self) -> list[MarkerRecord]:
        return [MarkerRecord(self.kind, "not stored", message, stored=False) for message in self.messages]


class PendingRecords:
    """Records a plugin will know only once it has written its batch: return
    one from ``claudeops_markers`` in place of the records, and ``fill`` it
    in ``claudeops_markers_flush``. The activity log shows the records where
    the text block was; one never filled (the flush failed) is shown as a
    warning that the block's records were lost."""

    def __init__(self) -> None:
        self.records: Optional[list[MarkerRecord]] = None

    def fill(self, records: Iterable[MarkerRecord]) -> None:
        self.records = list(records)


@dataclass(frozen=True)
class PromptSection:
    """A plugin's part of ``--append-system-prompt``.

    Sections are joined in ascending ``position``, then ``name``; a plain string
    returned from the hook is treated as ``position=500``.
    """

    name: str
    text: str
    position: int = 500

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Raise ``TypeError`` for a field of the wrong type."""
        _require_types(self, name=str, text=str, position=int)


@dataclass(frozen=True)
class DashboardPage:
    """A page in the sidebar. ``endpoint`` is the view (``"events.index"``)
    the link points to; ``blueprint`` is registered by the host."""

    label: str
    endpoint: str
    blueprint: Optional[Blueprint] = None
    position: int = 500

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Raise ``TypeError`` for a field of the wrong type."""
        _require_types(self, label=str, endpoint=str, blueprint=(Blueprint, type(None)), position=int)


@dataclass(frozen=True)
class OverviewCard:
    """A card on the Overview page."""

    title: str
    value: str
    detail: str = ""
    link_endpoint: Optional[str] = None
    position: int = 500
    tone: str = "neutral"      # one of OVERVIEW_TONES

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Raise ``TypeError`` for a field of the wrong type, ``ValueError`` for an unknown tone."""
        _require_types(self, title=str, value=str, detail=str, link_endpoint=(str, type(None)), position=int,
                       tone=str)
        if self.tone not in OVERVIEW_TONES:
            raise ValueError(f"OverviewCard.tone must be one of {', '.join(OVERVIEW_TONES)}, not {self.tone!r}")


@dataclass(frozen=True)
class OpenApiPaths:
    """A plugin's part of the OpenAPI document (``claudeops_openapi_paths``).

    ``paths`` maps each path under ``/api/v1`` (``"/widgets/{widget_id}"``)
    to its OpenAPI 3.1 path item; ``schemas`` holds the named schemas those
    reference as ``{"$ref": "#/components/schemas/<name>"}``.
    """

    paths: dict
    schemas: dict = field(default_factory=dict)


@dataclass(frozen=True)
class McpTool:
    """A read-only tool the agent may call during a session, served by
    ``claudeops mcp``. ``function``'s parameters (with type hints) become the
    tool's input schema and its docstring the description unless
    ``description`` is given; it returns the text the agent reads. It runs in
    an application context whose database connection refuses writes."""

    name: str
    function: Callable[..., Any]
    description: str = ""
