"""The index of 0022 on the sessions' end time and cost, not their creation
time: the daily spending limit counts a session's cost when it ended, as it
spent up to then, where one queued long before it ran would have counted
from long before, or not at all.

Revision ID: 0023_session_cost_by_end
Revises: 0022_session_cost_index
"""
from alembic import op

revision = '0023_session_cost_by_end'
down_revision = '0022_session_cost_index'
branch_labels = None
depends_on = None

BY_CREATION = 'ix_sessions_created_at_cost_usd'
BY_END = 'ix_sessions_ended_at_cost_usd'


def upgrade():
    op.drop_index(BY_CREATION, table_name='sessions')
    op.create_index(BY_END, 'sessions', ['ended_at', 'cost_usd'])


def downgrade():
    op.drop_index(BY_END, table_name='sessions')
    op.create_index(BY_CREATION, 'sessions', ['created_at', 'cost_usd'])
