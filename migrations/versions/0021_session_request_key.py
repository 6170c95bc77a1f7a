"""A session queued by a request records the request's key (its SHA-256),
unique: the Run now form's (one for each time the page is drawn) or an API
client's Idempotency-Key. A form sent twice (a double click, a retry) or an API call
retried after a lost answer queues one session, not two.

Revision ID: 0021_session_request_key
Revises: 0020_scheduler_process
"""
from alembic import op
import sqlalchemy as sa

revision = '0021_session_request_key'
down_revision = '0020_scheduler_process'
branch_labels = None
depends_on = None


def upgrade():
    # In place: an added nullable column needs no rebuild of `sessions`; a
    # unique index holds any number of NULLs, on SQLite as on PostgreSQL.
    op.add_column('sessions', sa.Column('request_key', sa.String(length=100), nullable=True))
    op.create_index('ix_sessions_request_key', 'sessions', ['request_key'], unique=True)


def downgrade():
    op.drop_index('ix_sessions_request_key', table_name='sessions')
    op.drop_column('sessions', 'request_key')
