"""Which memories a new observation is compared with: the live memories of
its service and category (active, approved or proposed), the
``MAX_CANDIDATES`` most trusted of them; for a marker that may create a
memory, also as many rejected ones (one that says a rejected memory again
stores nothing: plugins/memory/store.py).

The bound keeps a marker's cost flat however many memories a service
gathers over the years: the read is a range of the
(service, category, active, confidence) index, and the matcher, which reads
every candidate's text, compares at most this many. A key rarely holds
more; when it does, an observation that restates a memory outside the most
trusted ones is recorded beside it, and the two are merged by an operator
(or the less trusted one decays).
"""
from __future__ import annotations

from typing import Iterable, Optional

from sqlalchemy import bindparam, literal, select, union_all

from app.extensions import db
from plugins.memory.matcher import Candidate
from plugins.memory.models import REJECTED, Memory

MAX_CANDIDATES = 50


def _most_trusted(general: bool, rejected: bool):
    key = (Memory.category == bindparam("category"),
           Memory.service.is_(None) if general else Memory.service == bindparam("service"))
    state = (Memory.status == REJECTED,) if rejected else (Memory.active.is_(True), Memory.status != REJECTED)
    # Only ids and texts to match against; the one memory that matched is loaded whole.
    return (select(Memory.id, Memory.observation, Memory.confidence, literal(rejected).label("rejected"))
            .where(*key, *state).order_by(Memory.confidence.desc(), Memory.id).limit(bindparam("most")))


def _query(general: bool, with_rejected: bool):
    live = _most_trusted(general, False)
    if not with_rejected:
        return live
    # Both in one statement: a marker that may create a memory needs both.
    both = union_all(*(select(part.subquery()) for part in (live, _most_trusted(general, True)))).subquery()
    return select(both).order_by(both.c.rejected, both.c.confidence.desc(), both.c.id)


# Built once: a stream can hold thousands of memory markers.
QUERIES = {(general, rejected): _query(general, rejected) for general in (True, False) for rejected in (True, False)}
MOST_TRUSTED = {general: QUERIES[general, False] for general in (True, False)}


def candidates(category: str, service: Optional[str], exclude: Iterable[int] = (),
               rejected: bool = False) -> tuple[list[Candidate], list[Candidate]]:
    """The live candidates, and with ``rejected`` the rejected ones (else
    none), each most trusted first."""
    query = QUERIES[service is None, rejected]
    exclude = list(exclude)
    if exclude:
        query = query.where(query.selected_columns.id.not_in(exclude))
    found: dict[bool, list[Candidate]] = {False: [], True: []}
    for memory_id, observation, _, is_rejected in db.session.execute(
            query, {"category": category, "service": service, "most": MAX_CANDIDATES}):
        found[bool(is_rejected)].append(Candidate(memory_id, observation))
    return found[False], found[True]
