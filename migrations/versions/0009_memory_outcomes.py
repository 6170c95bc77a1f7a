"""Memory outcomes and relevance: each memory's track record of reported
outcomes (memory_track_records), and why a session was given a memory ahead
of more trusted ones (memory_injections.reason).

Neither touches the memories table: rebuilding it on SQLite (batch mode)
would drop the full-text triggers of 0007_memory_search.

Revision ID: 0009_memory_outcomes
Revises: 0008_memory_match_index
"""
from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision = '0009_memory_outcomes'
down_revision = '0008_memory_match_index'
branch_labels = None
depends_on = None

LEVELS = ('worked', 'partial', 'failed', 'unknown')


def upgrade():
    op.create_table(
        'memory_track_records',
        sa.Column('memory_id', sa.Integer(), nullable=False),
        *(sa.Column(level, sa.Integer(), server_default=sa.text('0'), nullable=False) for level in LEVELS),
        sa.ForeignKeyConstraint(['memory_id'], ['memories.id'],
                                name=op.f('fk_memory_track_records_memory_id_memories'), ondelete='CASCADE'),
        sa.PrimaryKeyConstraint('memory_id', name=op.f('pk_memory_track_records')))
    # A plain ADD COLUMN on every database (no table rebuild).
    op.add_column('memory_injections', sa.Column('reason', sa.String(length=200), nullable=True))


def downgrade():
    with op.batch_alter_table('memory_injections', schema=None) as batch_op:
        batch_op.drop_column('reason')
    op.drop_table('memory_track_records')
