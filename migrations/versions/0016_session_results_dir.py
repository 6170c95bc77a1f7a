"""A session records which results directory holds its run logs (the id kept
in that directory), so that retention on a host that does not hold them
leaves them to the one that does (app/sessions/results_dir.py).

Revision ID: 0016_session_results_dir
Revises: 0015_dashboard_logins
"""
from alembic import op
import sqlalchemy as sa

revision = '0016_session_results_dir'
down_revision = '0015_dashboard_logins'
branch_labels = None
depends_on = None


def upgrade():
    # In place: an added nullable column needs no rebuild of `sessions`.
    op.add_column('sessions', sa.Column('results_dir_id', sa.String(length=32), nullable=True))


def downgrade():
    op.drop_column('sessions', 'results_dir_id')
