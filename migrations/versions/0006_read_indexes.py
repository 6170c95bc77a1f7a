"""Reads that do not grow with the tables: memories newest first (unfiltered,
by service, status or category, or by service and either), most trusted
first, and due for decay (the new memories.decay_due_at); events of the last
24 hours.

Revision ID: 0006_read_indexes
Revises: 0005_cooldowns
"""
from datetime import timedelta

from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision = '0006_read_indexes'
down_revision = '0005_cooldowns'
branch_labels = None
depends_on = None

# As plugins/memory/models.py has it; a revision keeps its own copy.
GRACE_PERIOD = timedelta(days=30)
BACKFILL_BATCH = 5000
# A table SQLite rebuilds keeps its AUTOINCREMENT (ids of deleted memories
# are never reused), and its counter is carried over (_keep_memory_ids).
MEMORIES_TABLE = {'sqlite_autoincrement': True}

# Beside SPEC-0015's three (service, active), (confidence, active), (category).
NEW_MEMORY_INDEXES = (
    ('ix_memories_updated_at_id', ['updated_at', 'id']),
    ('ix_memories_service_updated_at_id', ['service', 'updated_at', 'id']),
    ('ix_memories_active_updated_at_id', ['active', 'updated_at', 'id']),
    ('ix_memories_service_active_updated_at_id', ['service', 'active', 'updated_at', 'id']),
    ('ix_memories_category_updated_at_id', ['category', 'updated_at', 'id']),
    ('ix_memories_service_category_updated_at_id', ['service', 'category', 'updated_at', 'id']),
    ('ix_memories_active_confidence_updated_at', ['active', 'confidence', 'updated_at']),
    ('ix_memories_active_pinned_decay_due_at', ['active', 'pinned', 'decay_due_at']),
)


def _backfill_decay_due_at():
    """Each memory's next week of decay: 30 days after its last reinforcement
    or edit, plus a week for each week it has already taken, plus one."""
    connection = op.get_bind()
    memories = sa.table('memories', sa.column('id', sa.Integer()), sa.column('updated_at', sa.DateTime()),
                        sa.column('decayed_weeks', sa.Integer()), sa.column('decay_due_at', sa.DateTime()))
    last_id = 0
    while True:
        rows = connection.execute(
            sa.select(memories.c.id, memories.c.updated_at, memories.c.decayed_weeks)
            .where(memories.c.id > last_id).order_by(memories.c.id).limit(BACKFILL_BATCH)).all()
        if not rows:
            return
        connection.execute(
            memories.update().where(memories.c.id == sa.bindparam('row_id'))
            .values(decay_due_at=sa.bindparam('due')),
            [{'row_id': row.id,
              'due': row.updated_at + GRACE_PERIOD + timedelta(weeks=(row.decayed_weeks or 0) + 1)}
             for row in rows])
        last_id = rows[-1].id


def _memory_id_counter():
    """The memories' AUTOINCREMENT counter on SQLite: None elsewhere, or before any memory."""
    connection = op.get_bind()
    if connection.dialect.name != 'sqlite':
        return None
    return connection.execute(sa.text("SELECT seq FROM sqlite_sequence WHERE name = 'memories'")).scalar()


def _keep_memory_ids(counter):
    """SQLite starts a rebuilt table's counter at its highest surviving id,
    which would hand the ids of deleted memories out again while their
    history still names them: the counter from before the rebuild is put back."""
    if counter is None:
        return
    connection = op.get_bind()
    raised = connection.execute(sa.text("UPDATE sqlite_sequence SET seq = max(seq, :seq) WHERE name = 'memories'"),
                                {'seq': counter})
    if raised.rowcount == 0:   # every memory was deleted: the copy wrote no counter
        connection.execute(sa.text("INSERT INTO sqlite_sequence (name, seq) VALUES ('memories', :seq)"),
                           {'seq': counter})


def upgrade():
    counter = _memory_id_counter()
    with op.batch_alter_table('memories', schema=None) as batch_op:
        batch_op.add_column(sa.Column('decay_due_at', sa.DateTime(), nullable=True))
    _backfill_decay_due_at()
    with op.batch_alter_table('memories', schema=None, table_kwargs=MEMORIES_TABLE) as batch_op:
        batch_op.alter_column('decay_due_at', existing_type=sa.DateTime(), nullable=False)
        for name, columns in NEW_MEMORY_INDEXES:
            batch_op.create_index(name, columns, unique=False)
    _keep_memory_ids(counter)

    with op.batch_alter_table('events', schema=None) as batch_op:
        batch_op.create_index('ix_events_created_at', ['created_at'], unique=False)


def downgrade():
    with op.batch_alter_table('events', schema=None) as batch_op:
        batch_op.drop_index('ix_events_created_at')

    counter = _memory_id_counter()
    with op.batch_alter_table('memories', schema=None, table_kwargs=MEMORIES_TABLE) as batch_op:
        for name, _ in NEW_MEMORY_INDEXES:
            batch_op.drop_index(name)
        batch_op.drop_column('decay_due_at')
    _keep_memory_ids(counter)
