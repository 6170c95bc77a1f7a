"""Memories, their history, and which memories each session was given (memory plugin, SPEC-0015).

Revision ID: 0003_memories
Revises: 0002_events
"""
from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision = '0003_memories'
down_revision = '0002_events'
branch_labels = None
depends_on = None


def upgrade():
    op.create_table('memories',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('service', sa.Text(), nullable=True),
    sa.Column('category', sa.Text(), nullable=False),
    sa.Column('observation', sa.Text(), nullable=False),
    sa.Column('confidence', sa.Float(), server_default=sa.text('0.7'), nullable=False),
    sa.Column('active', sa.Boolean(), server_default=sa.true(), nullable=False),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.Column('updated_at', sa.DateTime(), nullable=False),
    sa.Column('session_id', sa.Integer(), nullable=True),
    sa.Column('tier', sa.Integer(), server_default=sa.text('1'), nullable=False),
    sa.Column('pinned', sa.Boolean(), server_default=sa.false(), nullable=False),
    sa.Column('decayed_weeks', sa.Integer(), server_default=sa.text('0'), nullable=False),
    sa.Column('contradicts_id', sa.Integer(), nullable=True),
    sa.ForeignKeyConstraint(['contradicts_id'], ['memories.id'], name=op.f('fk_memories_contradicts_id_memories'), ondelete='SET NULL'),
    sa.ForeignKeyConstraint(['session_id'], ['sessions.id'], name=op.f('fk_memories_session_id_sessions'), ondelete='SET NULL'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_memories')),
    sqlite_autoincrement=True
    )
    with op.batch_alter_table('memories', schema=None) as batch_op:
        batch_op.create_index('idx_memories_category', ['category'], unique=False)
        batch_op.create_index('idx_memories_confidence', ['confidence', 'active'], unique=False)
        batch_op.create_index('idx_memories_service', ['service', 'active'], unique=False)

    op.create_table('memory_history',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('memory_id', sa.Integer(), nullable=False),
    sa.Column('action', sa.String(length=20), nullable=False),
    sa.Column('confidence_before', sa.Float(), nullable=True),
    sa.Column('confidence_after', sa.Float(), nullable=True),
    sa.Column('session_id', sa.Integer(), nullable=True),
    sa.Column('actor', sa.String(length=20), nullable=False),
    sa.Column('detail', sa.Text(), nullable=True),
    sa.Column('related_memory_id', sa.Integer(), nullable=True),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.ForeignKeyConstraint(['session_id'], ['sessions.id'], name=op.f('fk_memory_history_session_id_sessions'), ondelete='SET NULL'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_memory_history'))
    )
    with op.batch_alter_table('memory_history', schema=None) as batch_op:
        batch_op.create_index('ix_memory_history_memory_id_id', ['memory_id', 'id'], unique=False)

    op.create_table('memory_injections',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('session_id', sa.Integer(), nullable=False),
    sa.Column('memory_id', sa.Integer(), nullable=True),
    sa.Column('confidence', sa.Float(), nullable=False),
    sa.Column('position', sa.Integer(), nullable=False),
    sa.ForeignKeyConstraint(['memory_id'], ['memories.id'], name=op.f('fk_memory_injections_memory_id_memories'), ondelete='SET NULL'),
    sa.ForeignKeyConstraint(['session_id'], ['sessions.id'], name=op.f('fk_memory_injections_session_id_sessions'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_memory_injections'))
    )
    with op.batch_alter_table('memory_injections', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_memory_injections_memory_id'), ['memory_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_memory_injections_session_id'), ['session_id'], unique=False)



def downgrade():
    with op.batch_alter_table('memory_injections', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_memory_injections_session_id'))
        batch_op.drop_index(batch_op.f('ix_memory_injections_memory_id'))

    op.drop_table('memory_injections')
    with op.batch_alter_table('memory_history', schema=None) as batch_op:
        batch_op.drop_index('ix_memory_history_memory_id_id')

    op.drop_table('memory_history')
    with op.batch_alter_table('memories', schema=None) as batch_op:
        batch_op.drop_index('idx_memories_service')
        batch_op.drop_index('idx_memories_confidence')
        batch_op.drop_index('idx_memories_category')

    op.drop_table('memories')
