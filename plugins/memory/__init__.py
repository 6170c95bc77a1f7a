"""Memory: what the agent learned about the infrastructure, kept across
sessions (SPEC-0015). ``[MEMORY:category:service] observation`` markers
create, reinforce or contradict memories (told to the events feed); each
session is given approved memories in its system prompt, those of the
services it is about first, then the most trusted; ``[OUTCOME:level:m<id>]``
markers say how a given memory served; operators review and curate them in
the dashboard, the API and ``claudeops memories``."""
from __future__ import annotations

import logging

from sqlalchemy import func, select

from app.batched_delete import prune_rows
from app.extensions import db
from app.hookspecs import hookimpl
from app.runtime import setting
from app.plugin_types import DashboardPage, MarkerRecord, OverviewCard, PromptSection, SkippedMarkers
from app.session_warnings import warn_once
from app.sessions.log_pruning import LOG_RETENTION, sessions_pruned
from app.write_lock import lock_for_writing
from plugins.memory import batch, feed, hookspecs, matcher, outcomes, review, settings, store
from plugins.memory.context import build_memory_context
from plugins.memory.markers import MARKER_TAGS, OUTCOME_TAG, MemoryMarker, OutcomeMarker, parse_memory_markers
from plugins.memory.models import APPROVED, Memory, MemoryInjection
from plugins.memory.relevance import relevant_services
from plugins.memory.settings import BUDGET_SETTING

log = logging.getLogger(__name__)

# What retention calls the rows of ``MemoryInjection`` it removes.
GIVEN_RECORDS = "records of memories given to sessions"


@hookimpl
def claudeops_add_hookspecs(pluginmanager):
    pluginmanager.add_hookspecs(hookspecs)


@hookimpl
def claudeops_settings():
    return settings.settings()


@hookimpl(trylast=True)
def claudeops_memory_match(category, service, observation, candidates):
    return matcher.match(observation, candidates, service)


@hookimpl
def claudeops_marker_tags():
    return list(MARKER_TAGS)


@hookimpl
def claudeops_markers(text, run):
    """Queue the block's memory and outcome markers, in the text's order,
    for ``claudeops_markers_flush``: an outcome must meet the memory as the
    markers written before it left it (a reinforcement, say, of a memory the
    outcome then scores), whichever text block of the batch they were in."""
    skipped = SkippedMarkers(log, run, "memory")
    recorded, queued = [], []
    longest = settings.max_observation_chars()
    for piece in _outcome_first_pieces(text):
        queued += outcomes.parse(piece, run)   # one that cannot be read is its record, kept in its place
        for marker in parse_memory_markers(piece, skipped, run.marker_tags):
            if len(marker.observation) > longest:
                why = (f"observation of {len(marker.observation)} characters not stored: "
                       f"{settings.MAX_OBSERVATION}={longest}")
                warn_once(log, run.session_id, "observation too long", f"memory marker {_label(marker)}: {why}")
                recorded.append(MarkerRecord("memory", f"{_label(marker)} not stored", why, stored=False))
            else:
                queued.append(marker)
    recorded = skipped.records() + recorded
    if queued:
        recorded.append(batch.QUEUE.add(run, queued))
    return recorded or None


def _outcome_first_pieces(text: str) -> list[str]:
    """``text`` cut before each outcome marker's tag: each piece after the
    first begins with an outcome, and every marker of a piece comes after it.
    (A marker's text ends at the next tag on its line, so no marker spans
    two pieces.)"""
    starts = [0] + [match.start() for match in OUTCOME_TAG.finditer(text)] if "[OUTCOME:" in text else [0]
    return [text[start:end] for start, end in zip(starts, starts[1:] + [len(text)]) if start < end]


@hookimpl
def claudeops_markers_flush(run):
    queued = batch.QUEUE.take(run)
    if not queued:
        return
    results = iter(_record_in_order([item for items, _ in queued for item in items], run))
    for items, pending in queued:
        pending.fill(_records(items, [next(results) for _ in items], run))


def _record_in_order(items: list, run) -> list:
    """What each queued marker did, in stream order: the memory markers
    between two outcomes a run at a time (``batch.record_all``), each
    outcome scored after them (its ``MarkerRecord``; one that could not be
    read was queued as its record). Only an outcome that may be scored (of
    a memory the session was given, not yet scored or refused) ends a run:
    one refused whatever the memories are is noted in its place, so that a
    runaway agent's thousands of them do not cut the batch into as many."""
    results: list = [None] * len(items)
    waiting: list[int] = []   # the places of the memory markers of the run
    settled: dict[int, str] = {}
    given = None

    def record_run() -> None:
        for place, recorded in zip(waiting, batch.record_all([items[place] for place in waiting], run)):
            results[place] = recorded
        waiting.clear()

    for place, item in enumerate(items):
        if isinstance(item, MemoryMarker):
            waiting.append(place)
            continue
        if isinstance(item, OutcomeMarker):
            if given is None:
                given = outcomes.given_ids(run.session_id)
            if waiting and item.memory_id in given and item.memory_id not in settled:
                record_run()
            item = outcomes.score_marker(item, run, settled)
        results[place] = item
    if waiting:
        record_run()
    return results


def _records(items: list, results: list, run) -> list[MarkerRecord]:
    """One text block's records, and its new memories told to the feed."""
    recorded, refused = [], 0
    for marker, result in zip(items, results):
        if isinstance(result, MarkerRecord):   # an outcome's
            recorded.append(result)
            continue
        if result.memory is None:
            refused += 1
            continue
        feed.tell(result, run)
        state = "" if result.memory.status == APPROVED else f", {result.memory.status}"
        recorded.append(MarkerRecord("memory", f"{_label(marker)} {result.relation}",
                                     f"#{result.memory.id} ({result.confidence:g}{state}) {marker.observation}"))
    if refused:
        limit = settings.max_new_per_session()
        why = f"{refused} new memory marker(s) not stored: the session reached {settings.MAX_PER_SESSION}={limit}"
        warn_once(log, run.session_id, "memories over the limit", why)
        recorded.append(MarkerRecord("memory", "not stored", why, stored=False))
    return recorded


def _label(marker) -> str:
    return f"{marker.category}:{marker.service or 'general'}"


@hookimpl
def claudeops_session_starting(run):
    store.decay(run=run)


@hookimpl
def claudeops_prompt_context(run):
    services = relevant_services(run)   # other plugins are asked before the lock is taken
    # The memories given are recorded as read: one an operator deleted in
    # between would fail the records' insert, and with it the whole section.
    # Held until the host commits the records, a few milliseconds later.
    lock_for_writing()
    context = build_memory_context(setting(BUDGET_SETTING), services)
    for position, memory in enumerate(context.included):
        db.session.add(MemoryInjection(session_id=run.session_id, memory_id=memory.id,
                                       confidence=memory.confidence, position=position,
                                       reason=context.reasons.get(memory.id)))
    if not context.text:
        return None
    return PromptSection(name="memory", text=context.text, position=200)


@hookimpl
def claudeops_prune(now, dry_run, batch_size):
    """Which memories a session was given (some 30 rows a session, read by a
    memory's page) goes with the session's logs and system prompt, by the
    host's CLAUDEOPS_LOG_RETENTION_DAYS, and stays while another host keeps
    them: the memories, their history and their track records stay."""
    if not setting(LOG_RETENTION):
        return None
    return {GIVEN_RECORDS: prune_rows(MemoryInjection, given_to_pruned_sessions(now, dry_run), dry_run, batch_size)}


def given_to_pruned_sessions(now, dry_run: bool = False):
    """The ``MemoryInjection`` rows of the sessions whose logs were removed
    (or, in a dry run, would be): never a running session's, which may still
    score what it was given."""
    return [MemoryInjection.session_id.in_(sessions_pruned(now, dry_run))]


@hookimpl
def claudeops_dashboard_pages():
    from plugins.memory.views import pages
    return [DashboardPage("Memories", "memory.index", pages, position=30)]


@hookimpl
def claudeops_api_blueprints():
    from plugins.memory.api import api
    return [api]


@hookimpl
def claudeops_openapi_paths():
    from plugins.memory.openapi import openapi_paths
    return openapi_paths()


@hookimpl
def claudeops_cli_commands():
    from plugins.memory.cli import memories
    return [memories]


@hookimpl
def claudeops_mcp_tools():
    from plugins.memory.mcp_tools import TOOLS
    return TOOLS


def _active_count() -> int:
    """Approved and active: the memories sessions may be given."""
    return db.session.scalar(select(func.count()).select_from(Memory).where(
        Memory.status == APPROVED, Memory.active.is_(True)))


@hookimpl
def claudeops_stats():
    return {"active_memories": _active_count(), "proposed_memories": review.proposed_count().count}


@hookimpl
def claudeops_overview_cards():
    total = db.session.scalar(select(func.count()).select_from(Memory))
    waiting = review.proposed_count()
    detail = f"{total} in all, inactive ones kept for audit"
    if waiting.count:
        detail = f"{waiting} awaiting review; {detail}"
    return [OverviewCard("Memories", f"{_active_count()} active", detail, "memory.index", position=30,
                         tone="warn" if waiting.count else "neutral")]
