"""Full-text search over memories: an FTS5 index on SQLite, a GIN index on
PostgreSQL (memory plugin).

SQLite: ``memories_fts`` is an external-content FTS5 table over the
memories' service, category and observation (porter stemming), kept in step
by three triggers. A later revision that rebuilds ``memories`` (SQLite batch
mode copies, drops and renames it) drops these triggers with it and must
create them again; adding a column does not rebuild.

PostgreSQL: an expression index over the same text with the `english`
configuration; the query in plugins/memory/search.py uses the same
expression, so it uses the index.

Revision ID: 0007_memory_search
Revises: 0006_read_indexes
"""
from alembic import op

revision = '0007_memory_search'
down_revision = '0006_read_indexes'
branch_labels = None
depends_on = None

SQLITE_UP = [
    """CREATE VIRTUAL TABLE memories_fts USING fts5(
           service, category, observation, content='memories', content_rowid='id',
           tokenize='porter unicode61')""",
    """CREATE TRIGGER memories_fts_insert AFTER INSERT ON memories BEGIN
           INSERT INTO memories_fts(rowid, service, category, observation)
           VALUES (new.id, new.service, new.category, new.observation);
       END""",
    """CREATE TRIGGER memories_fts_delete AFTER DELETE ON memories BEGIN
           INSERT INTO memories_fts(memories_fts, rowid, service, category, observation)
           VALUES ('delete', old.id, old.service, old.category, old.observation);
       END""",
    """CREATE TRIGGER memories_fts_update AFTER UPDATE OF service, category, observation ON memories BEGIN
           INSERT INTO memories_fts(memories_fts, rowid, service, category, observation)
           VALUES ('delete', old.id, old.service, old.category, old.observation);
           INSERT INTO memories_fts(rowid, service, category, observation)
           VALUES (new.id, new.service, new.category, new.observation);
       END""",
    # Memories recorded before this revision.
    "INSERT INTO memories_fts(memories_fts) VALUES ('rebuild')",
]
SQLITE_DOWN = [
    "DROP TRIGGER IF EXISTS memories_fts_update",
    "DROP TRIGGER IF EXISTS memories_fts_delete",
    "DROP TRIGGER IF EXISTS memories_fts_insert",
    "DROP TABLE IF EXISTS memories_fts",
]
POSTGRES_UP = [
    """CREATE INDEX ix_memories_fts ON memories USING gin (
           to_tsvector('english', coalesce(service, '') || ' ' || category || ' ' || observation))""",
]
POSTGRES_DOWN = ["DROP INDEX IF EXISTS ix_memories_fts"]


def _run(statements):
    for statement in statements:
        op.execute(statement)


def upgrade():
    dialect = op.get_bind().dialect.name
    if dialect == "sqlite":
        if _fts5_available():
            _run(SQLITE_UP)
    elif dialect == "postgresql":
        _run(POSTGRES_UP)


def downgrade():
    dialect = op.get_bind().dialect.name
    if dialect == "sqlite":
        _run(SQLITE_DOWN)
    elif dialect == "postgresql":
        _run(POSTGRES_DOWN)


def _fts5_available() -> bool:
    """An SQLite built without FTS5 keeps word search (LIKE) instead."""
    rows = op.get_bind().exec_driver_sql("PRAGMA compile_options").fetchall()
    return any(row[0] == "ENABLE_FTS5" for row in rows)
