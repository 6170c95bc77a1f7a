"""Which memories a new observation is compared with: the active memories
of its service and category, the ``MAX_CANDIDATES`` most trusted of them.

The bound keeps a marker's cost flat however many memories a service
gathers over the years: the read is one range of the
(service, category, active, confidence) index, and the matcher, which reads
every candidate's text, compares at most this many. A key rarely holds
more; when it does, an observation that restates a memory outside the most
trusted ones is recorded beside it, and the two are merged by an operator
(or the less trusted one decays).
"""
from __future__ import annotations

from typing import Iterable, Optional

from sqlalchemy import bindparam, select

from app.extensions import db
from plugins.memory.matcher import Candidate
from plugins.memory.models import Memory

MAX_CANDIDATES = 50


def _most_trusted(general: bool):
    # Only ids and texts to match against; the one memory that matched is loaded whole.
    return (select(Memory.id, Memory.observation)
            .where(Memory.active.is_(True), Memory.category == bindparam("category"),
                   Memory.service.is_(None) if general else Memory.service == bindparam("service"))
            .order_by(Memory.confidence.desc(), Memory.id))


# Built once: a stream can hold thousands of memory markers.
MOST_TRUSTED = {general: _most_trusted(general) for general in (True, False)}


def candidates(category: str, service: Optional[str], exclude: Iterable[int] = ()) -> list[Candidate]:
    query = MOST_TRUSTED[service is None]
    exclude = list(exclude)
    if exclude:
        query = query.where(Memory.id.not_in(exclude))
    rows = db.session.execute(query.limit(bindparam("most")),
                              {"category": category, "service": service, "most": MAX_CANDIDATES})
    return [Candidate(memory_id, observation) for memory_id, observation in rows]
