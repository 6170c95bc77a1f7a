"""An index on the sessions' end time and cost: what the sessions that ended
in the last 24 hours cost (the daily spending limit, read before every
session, and `/api/v1/stats`) is read from one range of it, not from a scan
of every session's row, which on SQLite reads past each long response and
system prompt to reach the cost.

Revision ID: 0022_session_cost_index
Revises: 0021_session_request_key
"""
from alembic import op

revision = '0022_session_cost_index'
down_revision = '0021_session_request_key'
branch_labels = None
depends_on = None

INDEX = 'ix_sessions_ended_at_cost_usd'


def upgrade():
    op.create_index(INDEX, 'sessions', ['ended_at', 'cost_usd'])


def downgrade():
    op.drop_index(INDEX, table_name='sessions')
