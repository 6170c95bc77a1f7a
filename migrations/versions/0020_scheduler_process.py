"""The scheduler's heartbeat names the process that wrote it (boot, pid
namespace, pid and start time; app/process_identity.py), so that a
dashboard on its host sees at once that a scheduler killed outright has
ended, instead of a minute later when its heartbeat goes stale.

Revision ID: 0020_scheduler_process
Revises: 0019_service_case
"""
from alembic import op
import sqlalchemy as sa

revision = '0020_scheduler_process'
down_revision = '0019_service_case'
branch_labels = None
depends_on = None


def upgrade():
    # In place: an added nullable column needs no rebuild of `scheduler_state`.
    op.add_column('scheduler_state', sa.Column('process', sa.String(length=120), nullable=True))


def downgrade():
    op.drop_column('scheduler_state', 'process')
