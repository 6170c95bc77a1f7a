"""Memory search folds accents on PostgreSQL too: "cafe" finds "café" and
"café" finds "cafe", as it always has on SQLite (FTS5's unicode61 tokenizer).

Two text search configurations, ``claudeops_english`` and
``claudeops_simple``: copies of `english` and `simple` whose words lose
their accents before they are stemmed or kept (the `unaccent` dictionary).
The GIN indexes of 0007 and 0013 are built again on them, and
plugins/memory/search.py searches with them where they exist.

`unaccent` is an extension shipped with PostgreSQL (its contrib modules, in
Debian's server package) and trusted since PostgreSQL 13: the database's
owner may create it. Where it cannot be created (not installed, not
allowed), this revision changes nothing but says so, and search goes on
without folding accents; running the upgrade again once it can be created
does not help (the revision is recorded as done), so the warning says how
to add it by hand.

Revision ID: 0017_memory_search_accents
Revises: 0016_session_results_dir
"""
import logging

from alembic import op
from sqlalchemy.exc import DBAPIError

revision = '0017_memory_search_accents'
down_revision = '0016_session_results_dir'
branch_labels = None
depends_on = None

log = logging.getLogger("alembic.runtime.migration")

TEXT = "coalesce(service, '') || ' ' || category || ' ' || observation"
# The word token types: what holds letters (numbers, URLs and the like keep their mapping).
WORDS = "asciiword, asciihword, hword_asciipart, word, hword, hword_part"
UP = [
    "CREATE TEXT SEARCH CONFIGURATION claudeops_english (COPY = pg_catalog.english)",
    f"ALTER TEXT SEARCH CONFIGURATION claudeops_english ALTER MAPPING FOR {WORDS} WITH unaccent, english_stem",
    "CREATE TEXT SEARCH CONFIGURATION claudeops_simple (COPY = pg_catalog.simple)",
    f"ALTER TEXT SEARCH CONFIGURATION claudeops_simple ALTER MAPPING FOR {WORDS} WITH unaccent, simple",
    "DROP INDEX IF EXISTS ix_memories_fts",
    f"CREATE INDEX ix_memories_fts ON memories USING gin (to_tsvector('claudeops_english', {TEXT}))",
    "DROP INDEX IF EXISTS ix_memories_words_fts",
    f"CREATE INDEX ix_memories_words_fts ON memories USING gin (to_tsvector('claudeops_simple', {TEXT}))",
]
DOWN = [
    "DROP INDEX IF EXISTS ix_memories_fts",
    f"CREATE INDEX ix_memories_fts ON memories USING gin (to_tsvector('english', {TEXT}))",
    "DROP INDEX IF EXISTS ix_memories_words_fts",
    f"CREATE INDEX ix_memories_words_fts ON memories USING gin (to_tsvector('simple', {TEXT}))",
    "DROP TEXT SEARCH CONFIGURATION IF EXISTS claudeops_english",
    "DROP TEXT SEARCH CONFIGURATION IF EXISTS claudeops_simple",
]


def upgrade():
    connection = op.get_bind()
    if connection.dialect.name != "postgresql":
        return
    try:
        with connection.begin_nested():   # a refusal must not abort the whole upgrade
            connection.exec_driver_sql("CREATE EXTENSION IF NOT EXISTS unaccent")
    except DBAPIError as exc:
        log.warning("memory search will not fold accents (\"cafe\" will not find \"café\"): the unaccent "
                    "extension could not be created (%s). To add it later, have a superuser run "
                    "CREATE EXTENSION unaccent in this database, then `claudeops db downgrade "
                    "0016_session_results_dir` and `claudeops db upgrade heads`.", str(exc.orig).strip())
        return
    for statement in UP:
        op.execute(statement)


def downgrade():
    connection = op.get_bind()
    if connection.dialect.name != "postgresql":
        return
    has_configurations = connection.exec_driver_sql(
        "SELECT count(*) FROM pg_ts_config WHERE cfgname IN ('claudeops_english', 'claudeops_simple')").scalar()
    if has_configurations:
        for statement in DOWN:
            op.execute(statement)
