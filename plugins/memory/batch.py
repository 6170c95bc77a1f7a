"""Memory markers, recorded a batch at a time.

A busy stream holds thousands of memory markers. Recorded one by one, each
costs a candidates query, an INSERT and its own flush of the history, and a
savepoint in the fan-out: several times what the rest of the pipeline costs
for a line. So ``claudeops_markers`` only queues a block's markers, and
``claudeops_markers_flush`` records all the queued ones just before the
stream's batch is committed: the candidates of every service and category
of the batch in one statement, the decisions one marker after another, in
stream order, by the rules of plugins/memory/store.py, the new memories
inserted together (app/bulk_insert.py, which gives their ids back in order;
the ORM's own ordered insert takes a statement per row on SQLite) and their
history, like every history row of the batch, written in one statement at
its end. Both inserts skip the ORM's flush and so its redaction listener:
their rows are redacted here (app/db_redaction.py).

Each marker sees what the markers before it did, as if they had been
recorded one by one: once a marker has changed a service and category (a
new memory, a reinforcement, a contradiction), the next marker of that pair
reads its candidates again, after the pair's new memories (and so every new
memory before them: ids follow the stream) have their ids and history, and
the pair's markers after it use what it read until one changes the pair
again (a memory said again and again reads nothing more). A
contradiction is completed at once: it takes trust from another memory,
which a proposal confirmed later in the batch may contradict too. A marker
that confirms a proposal (which may take trust from a memory it
contradicts, of any pair) makes every pair read again.
"""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import replace
from typing import Iterator

from sqlalchemy import insert, select
from sqlalchemy.orm import make_transient_to_detached

from app.bulk_insert import BulkInsert
from app.db_redaction import redacted_values
from app.extensions import db
from app.marker_queue import MarkerQueue
from app.plugin_types import RunInfo
from app.write_lock import lock_for_writing
from plugins.memory import settings, store
from plugins.memory.candidates import candidates_of_pairs
from plugins.memory.markers import MemoryMarker
from plugins.memory.matcher import Match
from plugins.memory.models import Memory, MemoryHistory, next_decay_due

QUEUE = MarkerQueue("memory")
CHANGES_CANDIDATES = (store.CREATED, store.CONTRADICTED, store.REINFORCED)
MEMORY_COLUMNS = ("service", "category", "observation", "confidence", "active", "created_at", "updated_at",
                  "session_id", "tier", "status")
# Every column but the id (given back) and contradicts_id (set later, by store.complete).
_insert_memories = BulkInsert(Memory.__table__, MEMORY_COLUMNS + ("pinned", "decayed_weeks", "decay_due_at"))


def record_all(markers: list[MemoryMarker], run: RunInfo) -> list[store.Recorded]:
    """What each marker did, in order, as ``store.record_observation`` would
    have recorded it alone, within the session's limit of new memories."""
    limit = settings.max_new_per_session()
    # What the batch reads stays as read until its commit: an operator's
    # change meanwhile waits for it (app/write_lock.py).
    lock_for_writing()
    # Read before anything is added: the tally counts what is flushed from here on.
    created = store.created_by_session(run.session_id)
    prefetched = candidates_of_pairs({(marker.category, marker.service) for marker in markers})
    # ``loaded`` is held to the end: the identity map keeps only what is referenced.
    answers, loaded = _ask_matcher(markers, prefetched)
    # A changed pair's candidates as read again, kept while nothing changes
    # them: a marker said again and again (refused, repeated) reads nothing.
    # The matcher is asked afresh against them, its first answers being stale.
    reread: dict = {}
    incomplete: list[int] = []   # results whose new memory is not inserted yet
    incomplete_pairs: set = set()  # and their services and categories
    results: list[store.Recorded] = []
    with _history_gathered() as history:
        for marker, answer in zip(markers, answers):
            pair = (marker.category, marker.service)
            candidates = prefetched.get(pair)
            if candidates is None:   # changed by an earlier marker of the batch: read again, ask again
                candidates, answer = reread.get(pair), None
            if candidates is None:
                if pair in incomplete_pairs:
                    _complete(incomplete, results, run)
                    incomplete_pairs.clear()
                # The statement compiled once, as for the batch's first read.
                candidates = reread[pair] = candidates_of_pairs([pair])[pair]
            recorded = store.decide(marker.category, marker.service, marker.observation, run,
                                    may_create=created < limit, candidates=candidates, match=answer,
                                    add_new=False)
            if recorded.relation in (store.CREATED, store.CONTRADICTED):
                created += 1
                incomplete.append(len(results))
                incomplete_pairs.add(pair)
            results.append(recorded)
            if recorded.relation == store.CONTRADICTED:
                _complete(incomplete, results, run)
                incomplete_pairs.clear()
            if recorded.approved:
                prefetched.clear()
                reread.clear()
            elif recorded.relation in CHANGES_CANDIDATES:
                prefetched.pop(pair, None)
                reread.pop(pair, None)
        _complete(incomplete, results, run)
        if history:
            db.session.execute(insert(MemoryHistory), [redacted_values(MemoryHistory, row) for row in history])
    del loaded
    return results


@contextmanager
def _history_gathered() -> Iterator[list[dict]]:
    """While the batch records, ``store`` gathers history rows here (and
    reads the ones it gathered as if written)."""
    gathered: list[dict] = []
    db.session.info[store.HISTORY_ROWS] = gathered
    try:
        yield gathered
    finally:
        db.session.info.pop(store.HISTORY_ROWS, None)


def _ask_matcher(markers: list[MemoryMarker], prefetched: dict) -> tuple[list[Match], list[Memory]]:
    """The matcher's answer for each marker against its pair's candidates as
    read (used only while the pair is unchanged), and every memory named,
    loaded in one statement rather than one by one: the caller holds them,
    so the identity map keeps them for the batch."""
    answers, named = [], set()
    for marker in markers:
        live = prefetched[marker.category, marker.service][0]
        answer = store.ask_matcher(marker.category, marker.service, marker.observation, live)
        answers.append(answer)
        if answer.memory_id is not None and any(c.memory_id == answer.memory_id for c in live):
            named.add(answer.memory_id)
    memories = db.session.scalars(select(Memory).where(Memory.id.in_(named))).all() if named else []
    return answers, memories


def _complete(incomplete: list[int], results: list[store.Recorded], run: RunInfo) -> None:
    """The new memories so far (of ``results``, at the places ``incomplete``
    names) inserted in one statement, each result then holding the stored
    memory, and given their history."""
    if not incomplete:
        return
    rows = []
    for place in incomplete:
        memory = results[place].memory
        row = {column: getattr(memory, column) for column in MEMORY_COLUMNS}
        # What the ORM's flush would have added (models.py's decay_schedule and column defaults).
        row.update(pinned=False, decayed_weeks=0, decay_due_at=next_decay_due(memory.updated_at, 0))
        rows.append(redacted_values(Memory, row))
    db.session.flush()   # the insert goes to the connection, past the session's autoflush
    ids = _insert_memories.numbered(db.session.connection(), rows)
    for place, memory_id, row in zip(incomplete, ids, rows):
        results[place] = replace(results[place], memory=_as_loaded(Memory(id=memory_id, contradicts_id=None, **row)))
        store.complete(results[place], run)
    incomplete.clear()


def _as_loaded(memory: Memory) -> Memory:
    """A memory just inserted, with every column as stored, in the session
    as if read from the database (no INSERT of its own)."""
    make_transient_to_detached(memory)
    db.session.add(memory)
    return memory
