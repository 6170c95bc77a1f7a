"""Cooldowns: at most so many restarts and redeployments of a service in a
sliding window (by default 2 restarts per 4 hours, 1 redeployment per 24
hours), enforced before the command runs.

Every session's CLI gets a PreToolUse hook that runs ``claudeops cooldowns
check-tool`` before each Bash call: it recognises restarts and
redeployments, records them, and denies one beyond the limit. The agent
reports outcomes with ``[COOLDOWN:<action>:<service>] success|failure —
<message>`` and is told, in its prompt, which services are at or near their
limits. Page, API, CLI and prompt read the same table. See docs/cooldowns.md.
"""
from __future__ import annotations

import logging
import shlex
import sys
from datetime import timedelta
from pathlib import Path

from app.executable import claudeops_command
from app.hookspecs import hookimpl
from app.marker_queue import MarkerQueue
from app.plugin_types import DashboardPage, MarkerRecord, OverviewCard, PromptSection, SkippedMarkers
from app.plugins import call_each
from app.session_warnings import warn_of_cut_messages, warn_once
from app.timeutil import utcnow
from app.write_lock import lock_for_writing
from plugins.cooldowns import limits, retention, store
from plugins.cooldowns.markers import MARKER_TAGS, parse_cooldown_markers
from plugins.cooldowns.models import DENIED
from plugins.cooldowns.prompt import cooldown_prompt

log = logging.getLogger(__name__)
QUEUE = MarkerQueue("cooldowns")

# Seconds Claude Code waits for the check; past it, the CLI lets the call run.
HOOK_TIMEOUT_SECONDS = 30


@hookimpl
def claudeops_settings():
    return limits.settings()


PREFILTER = Path(__file__).resolve().parent / "prefilter.py"


@hookimpl
def claudeops_cli_settings(run):
    # The prefilter answers most calls in milliseconds and runs the full
    # check (`claudeops cooldowns check-tool`) only for possible restarts.
    full_check = claudeops_command() + ["cooldowns", "check-tool"]
    command = shlex.join([sys.executable, "-S", str(PREFILTER)] + full_check)
    return {"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [
        {"type": "command", "command": command, "timeout": HOOK_TIMEOUT_SECONDS}]}]}}


@hookimpl
def claudeops_marker_tags():
    return list(MARKER_TAGS)


@hookimpl
def claudeops_markers(text, run):
    skipped = SkippedMarkers(log, run, "cooldown")
    markers = parse_cooldown_markers(text, skipped, run.marker_tags)
    if not markers:
        return skipped.records() or None
    warn_of_cut_messages(log, run.session_id, markers, "cooldown")
    # Recorded with the rest of the stream's batch, in claudeops_markers_flush.
    return [QUEUE.add(run, markers)] + skipped.records()


@hookimpl
def claudeops_markers_flush(run):
    """The batch's reports, in stream order: the session's pending rows and
    the counted rows of the services reported read once for all of them."""
    queued = QUEUE.take(run)
    if not queued:
        return
    # The hook (another process) checks and records under the same lock: a
    # restart it lets run is either counted here or counts what is written here.
    lock_for_writing()
    now, current = utcnow(), limits.current_limits()
    pending, denied = store.pending_rows(run.session_id), store.unreported_denials(run.session_id)
    counted = store.counted_times({(m.service, m.action) for markers, _ in queued for m in markers}, now, current)
    for markers, records in queued:
        records.fill(_record(markers, run, now, current, pending, denied, counted))


def _record(markers, run, now, current, pending, denied, counted) -> list[MarkerRecord]:
    """One text block's reports."""
    limit = limits.max_per_session()
    rows = store.session_rows(run.session_id)
    recorded, refused = [], 0
    for marker in markers:
        row, created = store.record_outcome(marker.action, marker.service, marker.outcome, marker.message,
                                            run.session_id, run.tier, now=now, may_create=rows < limit,
                                            pending=pending, denied=denied)
        if row is None:
            refused += 1
            continue
        rows += created
        summary = marker.message
        if row.outcome == DENIED:
            summary = f"{summary} (the {marker.action} the cooldown denied: not counted)".strip()
        if created:
            # A restart the hook did not see (an unrecognised command): count
            # it now, and tell the operator when it went past the limit.
            counted[marker.service, marker.action].append(now)
            over = store.usage(marker.service, marker.action, now, current,
                               counted=counted[marker.service, marker.action])
            if over.used > over.limit.count:
                summary = f"{summary} (beyond the limit: {store.explain([over])})".strip()
                _notice(run, marker.service,
                        f"Cooldown: the agent reported a {marker.action} of {marker.service} beyond the limit "
                        f"({store.explain([over])}); it was not done through a recognised command.")
        recorded.append(MarkerRecord("cooldown", f"{marker.action}:{marker.service} {marker.outcome}", summary))
    if refused:
        why = (f"{refused} cooldown marker(s) not stored: the session reached "
               f"{limits.MAX_PER_SESSION}={limit}")
        warn_once(log, run.session_id, "cooldowns over the limit", why)
        recorded.append(MarkerRecord("cooldown", "not stored", why, stored=False))
    return recorded


def _notice(run, service: str, message: str) -> None:
    try:
        call_each("claudeops_notice", level="warning", message=message, service=service, run=run)
    except Exception:   # the feed is a courtesy; the record above is what counts
        log.exception("cooldowns: could not send a notice")


@hookimpl
def claudeops_prompt_context(run):
    return PromptSection(name="cooldowns", text=cooldown_prompt(tier=run.tier), position=300)


@hookimpl
def claudeops_dashboard_pages():
    from plugins.cooldowns.views import pages
    return [DashboardPage("Cooldowns", "cooldowns.index", pages, position=40)]


@hookimpl
def claudeops_api_blueprints():
    from plugins.cooldowns.views import api
    return [api]


@hookimpl
def claudeops_openapi_paths():
    from plugins.cooldowns.openapi import openapi_paths
    return openapi_paths()


@hookimpl
def claudeops_cli_commands():
    from plugins.cooldowns.cli import cooldowns
    return [cooldowns]


@hookimpl
def claudeops_overview_cards():
    at_limit = sorted({u.service for u in store.constrained() if u.at_limit})
    detail = ("at the limit: " + ", ".join(at_limit[:5]) + ("…" if len(at_limit) > 5 else "")) if at_limit \
        else "no service is at its restart or redeployment limit"
    return [OverviewCard("Cooldowns", f"{len(at_limit)} at limit", detail, "cooldowns.index", position=40,
                         tone="warn" if at_limit else "good")]


@hookimpl
def claudeops_prune(now, dry_run, batch_size):
    return retention.prune(now, dry_run, batch_size)


@hookimpl
def claudeops_stats():
    return {"cooldown_services_at_limit": len({u.service for u in store.constrained() if u.at_limit}),
            "cooldown_denials_24h": store.denials_since(utcnow() - timedelta(hours=24))}
