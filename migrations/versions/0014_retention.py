"""Retention: a session records when its activity log and run log were
removed (the row itself is kept), and the rows retention deletes are found
by index, so that each batch it deletes reads only those rows.

- ``sessions.logs_removed_at``, and an index on (logs_removed_at, ended_at):
  the finished sessions whose logs are still kept, without reading the ones
  already pruned (a session's row carries its system prompt and response).
- ``cooldown_actions.created_at``: its one index leads with the service.
- Events are found by ``ix_events_created_at`` (0006), activity rows by
  ``ix_session_activity_session_id_id`` (0001).

Revision ID: 0014_retention
Revises: 0013_memory_word_prefixes
"""
from alembic import op
import sqlalchemy as sa

revision = '0014_retention'
down_revision = '0013_memory_word_prefixes'
branch_labels = None
depends_on = None

SESSIONS_INDEX = 'ix_sessions_logs_removed_at_ended_at'
COOLDOWNS_INDEX = 'ix_cooldown_actions_created_at'


def upgrade():
    # In place, not in batch mode: an added nullable column needs no rebuild
    # of `sessions`, which every other table points at.
    op.add_column('sessions', sa.Column('logs_removed_at', sa.DateTime(), nullable=True))
    op.create_index(SESSIONS_INDEX, 'sessions', ['logs_removed_at', 'ended_at'])
    op.create_index(COOLDOWNS_INDEX, 'cooldown_actions', ['created_at'])


def downgrade():
    op.drop_index(COOLDOWNS_INDEX, table_name='cooldown_actions')
    op.drop_index(SESSIONS_INDEX, table_name='sessions')
    op.drop_column('sessions', 'logs_removed_at')
