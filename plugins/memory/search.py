"""Ranked full-text search over memories (service, category, observation).

SQLite uses the FTS5 index ``memories_fts`` (porter stemming, BM25 rank);
PostgreSQL its own text search (`english` configuration, ``ts_rank``) over
the expression the GIN index was built on. Both match every word of the
query, each as a prefix and stemmed, so "restarts jelly" finds "Jellyfin
takes 60s to restart" on either. An SQLite built without FTS5 falls back to
case-insensitive word matching (LIKE), unranked.
"""
from __future__ import annotations

import re

from sqlalchemy import Float, Integer, column, false, func, literal_column, or_, select, text

from app.extensions import db
from plugins.memory.models import Memory

MAX_WORDS = 10
WORD = re.compile(r"\w+", re.UNICODE)
# The indexed text on PostgreSQL; must stay the expression of ix_memories_fts.
PG_DOCUMENT = "to_tsvector('english', coalesce(memories.service, '') || ' ' || memories.category || ' ' || memories.observation)"


def words(q: str) -> list[str]:
    return WORD.findall(q or "")[:MAX_WORDS]


def apply(query, q: str):
    """``query`` (a select of Memory) narrowed to memories matching every
    word of ``q``, best match first; later ``order_by`` calls break ties."""
    if not (q or "").strip():
        return query
    terms = words(q)
    if not terms:  # only punctuation: nothing can match it
        return query.where(false())
    dialect = db.engine.dialect.name
    if dialect == "sqlite" and _has_fts5_index():
        match = " ".join('"' + term.replace('"', '""') + '"*' for term in terms)
        ranked = (select(column("rowid", Integer).label("id"), literal_column("bm25(memories_fts)", Float).label("rank"))
                  .select_from(text("memories_fts")).where(text("memories_fts MATCH :match"))
                  .subquery("search"))
        return (query.join(ranked, ranked.c.id == Memory.id).params(match=match)
                .order_by(ranked.c.rank))            # bm25: lower is better
    if dialect == "postgresql":
        tsquery = func.to_tsquery("english", " & ".join(f"{term}:*" for term in terms))
        document = literal_column(PG_DOCUMENT)
        return query.where(document.op("@@")(tsquery)).order_by(func.ts_rank(document, tsquery).desc())
    return _like(query, terms)


def _like(query, terms: list[str]):
    for term in terms:
        pattern = "%" + term.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        query = query.where(or_(Memory.observation.ilike(pattern, escape="\\"),
                                Memory.service.ilike(pattern, escape="\\"),
                                Memory.category.ilike(pattern, escape="\\")))
    return query


_fts5_index: dict[str, bool] = {}


def _has_fts5_index() -> bool:
    """Whether the migration created the FTS5 table (per database, cached)."""
    url = str(db.engine.url)
    if url not in _fts5_index:
        _fts5_index[url] = db.session.scalar(text(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'memories_fts'")) is not None
    return _fts5_index[url]
