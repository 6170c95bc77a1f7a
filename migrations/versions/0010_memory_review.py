"""Review of the agent's memories (memory plugin): memories.status, one of
approved (every memory so far), proposed or rejected, and the indexes that
keep the context and the review inbox bounded with it.

The column is added in place (ALTER TABLE ... ADD COLUMN with a default),
never by SQLite's batch mode: rebuilding ``memories`` would drop the
full-text triggers of 0007_memory_search. The indexes are created and
dropped in place as well.

Revision ID: 0010_memory_review
Revises: 0009_memory_outcomes
"""
from alembic import op
import sqlalchemy as sa

revision = '0010_memory_review'
down_revision = '0009_memory_outcomes'
branch_labels = None
depends_on = None

# The context's order (most trusted first) gains the status in front; the
# index it replaces served that query alone.
OLD_CONTEXT_INDEX = ('ix_memories_active_confidence_updated_at', ['active', 'confidence', 'updated_at'])
NEW_INDEXES = (
    ('ix_memories_status_active_confidence_updated_at', ['status', 'active', 'confidence', 'updated_at']),
    ('ix_memories_status_updated_at_id', ['status', 'updated_at', 'id']),
)


def upgrade():
    op.add_column('memories', sa.Column('status', sa.Text(), nullable=False, server_default='approved'))
    for name, columns in NEW_INDEXES:
        op.create_index(name, 'memories', columns, unique=False)
    op.drop_index(OLD_CONTEXT_INDEX[0], table_name='memories')


def downgrade():
    # Without a status every memory is approved: the ones nobody approved are
    # kept, but made inactive, so that no session is given them.
    memories = sa.table('memories', sa.column('active', sa.Boolean()), sa.column('status', sa.Text()))
    op.execute(memories.update().where(memories.c.status != 'approved').values(active=False))
    name, columns = OLD_CONTEXT_INDEX
    op.create_index(name, 'memories', columns, unique=False)
    for name, _ in NEW_INDEXES:
        op.drop_index(name, table_name='memories')
    # SQLite (3.35 and newer) drops a column in place; it may not be indexed, hence the order.
    op.drop_column('memories', 'status')
