"""Escalation chains (sessions.parent_id, escalation_reason), runtime settings, scheduler state.

Revision ID: 0004_escalation_runtime
Revises: 0003_memories
"""
from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision = '0004_escalation_runtime'
down_revision = '0003_memories'
branch_labels = None
depends_on = None


def upgrade():
    op.create_table('runtime_settings',
    sa.Column('name', sa.String(length=100), nullable=False),
    sa.Column('value', sa.Text(), nullable=False),
    sa.Column('updated_at', sa.DateTime(), nullable=False),
    sa.PrimaryKeyConstraint('name', name=op.f('pk_runtime_settings'))
    )
    op.create_table('scheduler_state',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('pid', sa.Integer(), nullable=True),
    sa.Column('started_at', sa.DateTime(), nullable=True),
    sa.Column('heartbeat_at', sa.DateTime(), nullable=True),
    sa.Column('next_run_at', sa.DateTime(), nullable=True),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_scheduler_state'))
    )
    with op.batch_alter_table('sessions', schema=None) as batch_op:
        batch_op.add_column(sa.Column('parent_id', sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column('escalation_reason', sa.Text(), nullable=True))
        batch_op.create_index(batch_op.f('ix_sessions_parent_id'), ['parent_id'], unique=False)
        batch_op.create_foreign_key(batch_op.f('fk_sessions_parent_id_sessions'), 'sessions', ['parent_id'], ['id'], ondelete='SET NULL')



def downgrade():
    with op.batch_alter_table('sessions', schema=None) as batch_op:
        batch_op.drop_constraint(batch_op.f('fk_sessions_parent_id_sessions'), type_='foreignkey')
        batch_op.drop_index(batch_op.f('ix_sessions_parent_id'))
        batch_op.drop_column('escalation_reason')
        batch_op.drop_column('parent_id')

    op.drop_table('scheduler_state')
    op.drop_table('runtime_settings')
