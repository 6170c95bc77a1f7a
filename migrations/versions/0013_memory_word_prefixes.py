"""Search finds a word from any beginning of it: an index of the memories'
words as written, beside the stemmed one of 0007.

A stemmed index alone stems what is typed too, so a beginning that stems
otherwise than the whole word ("jelly" stems to "jelli", "jellyfin" to
itself) found nothing. plugins/memory/search.py matches each word in either
index: stemmed ("restarts" finds "restart") or as written ("jelly" finds
"Jellyfin").

SQLite: ``memories_words_fts``, an external-content FTS5 table like
``memories_fts`` but without stemming, with its own three triggers.
PostgreSQL: an expression index with the `simple` configuration.

Revision ID: 0013_memory_word_prefixes
Revises: 0012_memory_contradicts_index
"""
from alembic import op

revision = '0013_memory_word_prefixes'
down_revision = '0012_memory_contradicts_index'
branch_labels = None
depends_on = None

SQLITE_UP = [
    """CREATE VIRTUAL TABLE memories_words_fts USING fts5(
           service, category, observation, content='memories', content_rowid='id',
           tokenize='unicode61')""",
    """CREATE TRIGGER memories_words_fts_insert AFTER INSERT ON memories BEGIN
           INSERT INTO memories_words_fts(rowid, service, category, observation)
           VALUES (new.id, new.service, new.category, new.observation);
       END""",
    """CREATE TRIGGER memories_words_fts_delete AFTER DELETE ON memories BEGIN
           INSERT INTO memories_words_fts(memories_words_fts, rowid, service, category, observation)
           VALUES ('delete', old.id, old.service, old.category, old.observation);
       END""",
    """CREATE TRIGGER memories_words_fts_update AFTER UPDATE OF service, category, observation ON memories BEGIN
           INSERT INTO memories_words_fts(memories_words_fts, rowid, service, category, observation)
           VALUES ('delete', old.id, old.service, old.category, old.observation);
           INSERT INTO memories_words_fts(rowid, service, category, observation)
           VALUES (new.id, new.service, new.category, new.observation);
       END""",
    "INSERT INTO memories_words_fts(memories_words_fts) VALUES ('rebuild')",
]
SQLITE_DOWN = [
    "DROP TRIGGER IF EXISTS memories_words_fts_update",
    "DROP TRIGGER IF EXISTS memories_words_fts_delete",
    "DROP TRIGGER IF EXISTS memories_words_fts_insert",
    "DROP TABLE IF EXISTS memories_words_fts",
]
POSTGRES_UP = [
    """CREATE INDEX ix_memories_words_fts ON memories USING gin (
           to_tsvector('simple', coalesce(service, '') || ' ' || category || ' ' || observation))""",
]
POSTGRES_DOWN = ["DROP INDEX IF EXISTS ix_memories_words_fts"]


def _run(statements):
    for statement in statements:
        op.execute(statement)


def upgrade():
    dialect = op.get_bind().dialect.name
    if dialect == "sqlite":
        if _has_stemmed_index():   # an SQLite without FTS5 keeps word search (LIKE)
            _run(SQLITE_UP)
    elif dialect == "postgresql":
        _run(POSTGRES_UP)


def downgrade():
    dialect = op.get_bind().dialect.name
    if dialect == "sqlite":
        _run(SQLITE_DOWN)
    elif dialect == "postgresql":
        _run(POSTGRES_DOWN)


def _has_stemmed_index() -> bool:
    return op.get_bind().exec_driver_sql(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'memories_fts'").first() is not None
