"""Restarts and redeployments per service, allowed or denied (cooldowns plugin).

Revision ID: 0005_cooldowns
Revises: 0004_escalation_runtime
"""
from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision = '0005_cooldowns'
down_revision = '0004_escalation_runtime'
branch_labels = None
depends_on = None


def upgrade():
    op.create_table('cooldown_actions',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('service', sa.String(length=100), nullable=False),
    sa.Column('action', sa.String(length=20), nullable=False),
    sa.Column('outcome', sa.String(length=16), nullable=False),
    sa.Column('source', sa.String(length=10), nullable=False),
    sa.Column('command', sa.Text(), nullable=True),
    sa.Column('message', sa.Text(), nullable=True),
    sa.Column('session_id', sa.Integer(), nullable=True),
    sa.Column('tier', sa.Integer(), nullable=True),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.Column('reported_at', sa.DateTime(), nullable=True),
    sa.ForeignKeyConstraint(['session_id'], ['sessions.id'], name=op.f('fk_cooldown_actions_session_id_sessions'), ondelete='SET NULL'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_cooldown_actions'))
    )
    with op.batch_alter_table('cooldown_actions', schema=None) as batch_op:
        batch_op.create_index('ix_cooldown_actions_service_action_created_at', ['service', 'action', 'created_at'], unique=False)
        batch_op.create_index(batch_op.f('ix_cooldown_actions_session_id'), ['session_id'], unique=False)



def downgrade():
    with op.batch_alter_table('cooldown_actions', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_cooldown_actions_session_id'))
        batch_op.drop_index('ix_cooldown_actions_service_action_created_at')

    op.drop_table('cooldown_actions')
