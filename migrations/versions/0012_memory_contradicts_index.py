"""Deleting a memory sets its contradictions' contradicts_id to NULL, which
without an index on that column read every memory once for each one deleted
(a bulk delete of 500 among 200,000 took over 20 s, holding SQLite's write
lock past other writers' busy timeout).

On SQLite it also repairs the memories' id counter of a database that went
through 0006 before that revision kept it: the counter is raised past every
id a memory's history names, so no id of a deleted memory is handed out again.

Revision ID: 0012_memory_contradicts_index
Revises: 0011_memory_rejected_index
"""
from alembic import op
import sqlalchemy as sa

revision = '0012_memory_contradicts_index'
down_revision = '0011_memory_rejected_index'
branch_labels = None
depends_on = None

INDEX = 'ix_memories_contradicts_id'
HIGHEST_MEMORY_ID = """max(
    coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'memories'), 0),
    coalesce((SELECT max(id) FROM memories), 0),
    coalesce((SELECT max(memory_id) FROM memory_history), 0),
    coalesce((SELECT max(related_memory_id) FROM memory_history), 0))"""


def _raise_memory_id_counter():
    connection = op.get_bind()
    highest = connection.execute(sa.text(f"SELECT {HIGHEST_MEMORY_ID}")).scalar()
    if highest == 0:
        return
    raised = connection.execute(sa.text("UPDATE sqlite_sequence SET seq = :seq WHERE name = 'memories'"),
                                {'seq': highest})
    if raised.rowcount == 0:
        connection.execute(sa.text("INSERT INTO sqlite_sequence (name, seq) VALUES ('memories', :seq)"),
                           {'seq': highest})


def upgrade():
    # In place, not in batch mode: rebuilding `memories` would drop its search triggers.
    op.create_index(INDEX, 'memories', ['contradicts_id'])
    if op.get_bind().dialect.name == 'sqlite':
        _raise_memory_id_counter()


def downgrade():
    op.drop_index(INDEX, table_name='memories')
