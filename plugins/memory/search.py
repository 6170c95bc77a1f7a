"""Ranked full-text search over memories (service, category, observation).

Each word of the query must match, as the beginning of a word, in one of
two indexes: a stemmed one ("restarts" finds "restart") or one of the words
as written ("jelly" finds "Jellyfin", which stemming alone misses: the
beginning typed stems to "jelli"). So "restarts jelly" finds "Jellyfin
takes 60s to restart". Matches rank by the stemmed index: those it matches
in every word first, best first.

SQLite uses FTS5: ``memories_fts`` (porter stemming, BM25 rank) and
``memories_words_fts`` (no stemming); PostgreSQL its own text search, the
`claudeops_english` and `claudeops_simple` configurations (``ts_rank``),
over the expressions the GIN indexes were built on. Both fold accents
("cafe" finds "café", and "café" "cafe"); on a PostgreSQL database where
migration 0017 could not create the `unaccent` extension, search uses
`english` and `simple`, as the indexes then do, and does not. An SQLite
built without FTS5 falls back to case-insensitive word matching (LIKE),
unranked.
"""
from __future__ import annotations

import re

from sqlalchemy import Float, Integer, bindparam, column, false, func, literal_column, or_, select, text

from app.extensions import db
from app.web.row_ids import MAX_ROW_ID
from plugins.memory.models import Memory

MAX_WORDS = 10
WORD = re.compile(r"\w+", re.UNICODE)
# A memory as the service names it to the operator (#12: notices, messages,
# the table): a search for it is that memory, not the text "12". ASCII
# digits with no leading zero. (Not m12, as the agent's prompt names it: a
# search for "m2" may well mean the text.)
REFERENCE = re.compile(r"\s*#([1-9][0-9]{0,18})\s*")
# The indexed text on PostgreSQL; each must stay the expression of its index
# (ix_memories_fts, ix_memories_words_fts), with the configurations of pg_configurations.
PG_TEXT = "coalesce(memories.service, '') || ' ' || memories.category || ' ' || memories.observation"
FOLDING = ("claudeops_english", "claudeops_simple")   # migrations/versions/0017_memory_search_accents.py
PLAIN = ("english", "simple")


def words(q: str) -> list[str]:
    return WORD.findall(q or "")[:MAX_WORDS]


def apply(query, q: str):
    """``query`` (a select of Memory) narrowed to memories matching every
    word of ``q``, best match first; later ``order_by`` calls break ties.
    A ``q`` that is a memory's reference (#12) is that memory."""
    if not (q or "").strip():
        return query
    reference = REFERENCE.fullmatch(q)
    if reference:
        memory_id = int(reference.group(1))
        # Past the largest id a column holds, no memory (the driver would refuse the number).
        return query.where(Memory.id == memory_id) if memory_id <= MAX_ROW_ID else query.where(false())
    terms = words(q)
    if not terms:  # only punctuation: nothing can match it
        return query.where(false())
    dialect = db.engine.dialect.name
    if dialect == "sqlite" and _has_fts5_index():
        return _sqlite(query, terms)
    if dialect == "postgresql":
        return _postgresql(query, terms)
    return _like(query, terms)


def _sqlite(query, terms: list[str]):
    prefixes = ['"' + term.replace('"', '""') + '"*' for term in terms]
    params = {}
    for n, prefix in enumerate(prefixes):
        params[f"term{n}"] = prefix
        query = query.where(Memory.id.in_(text(
            f"SELECT rowid FROM memories_fts WHERE memories_fts MATCH :term{n} "
            f"UNION ALL SELECT rowid FROM memories_words_fts WHERE memories_words_fts MATCH :term{n}")
            .columns(column("rowid", Integer))))
    # Ranked by the stemmed index where it matches every word (a query as
    # selective as the search itself); a memory that needs a word as written
    # comes after those, in the caller's order.
    ranked = (select(column("rowid", Integer).label("id"), literal_column("bm25(memories_fts)", Float).label("rank"))
              .select_from(text("memories_fts")).where(text("memories_fts MATCH :every_term"))
              .subquery("search"))
    params["every_term"] = " ".join(prefixes)
    return (query.outerjoin(ranked, ranked.c.id == Memory.id).params(**params)
            .order_by(ranked.c.rank.is_(None), ranked.c.rank))   # bm25: lower is better


def _postgresql(query, terms: list[str]):
    english, simple = pg_configurations()
    stemmed = literal_column(f"to_tsvector('{english}', {PG_TEXT})")
    words = literal_column(f"to_tsvector('{simple}', {PG_TEXT})")
    for term in terms:
        prefix = f"{term}:*"
        query = query.where(or_(stemmed.op("@@")(func.to_tsquery(english, prefix)),
                                words.op("@@")(func.to_tsquery(simple, prefix))))
    every_term = func.to_tsquery(english, " & ".join(f"{term}:*" for term in terms))
    return query.order_by(func.ts_rank(stemmed, every_term).desc())


_pg_configurations: dict[str, tuple[str, str]] = {}


def pg_configurations() -> tuple[str, str]:
    """The stemming and the plain configuration the indexes were built on
    (per database, cached): those that fold accents where they exist."""
    url = str(db.engine.url)
    if url not in _pg_configurations:
        present = db.session.scalar(text("SELECT count(*) FROM pg_ts_config WHERE cfgname IN :names")
                                    .bindparams(bindparam("names", expanding=True)), {"names": list(FOLDING)})
        _pg_configurations[url] = FOLDING if present == len(FOLDING) else PLAIN
    return _pg_configurations[url]


def _like(query, terms: list[str]):
    for term in terms:
        pattern = "%" + term.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        query = query.where(or_(Memory.observation.ilike(pattern, escape="\\"),
                                Memory.service.ilike(pattern, escape="\\"),
                                Memory.category.ilike(pattern, escape="\\")))
    return query


_fts5_index: dict[str, bool] = {}


def _has_fts5_index() -> bool:
    """Whether the migrations created both FTS5 tables (per database, cached)."""
    url = str(db.engine.url)
    if url not in _fts5_index:
        _fts5_index[url] = db.session.scalar(text(
            "SELECT count(*) FROM sqlite_master WHERE type = 'table' "
            "AND name IN ('memories_fts', 'memories_words_fts')")) == 2
    return _fts5_index[url]
