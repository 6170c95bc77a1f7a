"""Dashboard logins kept server-side, so that logging out ends a login for
every copy of its cookie.

Revision ID: 0015_dashboard_logins
Revises: 0014_retention
"""
from alembic import op
import sqlalchemy as sa

revision = '0015_dashboard_logins'
down_revision = '0014_retention'
branch_labels = None
depends_on = None


def upgrade():
    op.create_table('dashboard_logins',
    sa.Column('token_hash', sa.String(length=64), nullable=False),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.PrimaryKeyConstraint('token_hash', name=op.f('pk_dashboard_logins'))
    )
    op.create_index(op.f('ix_dashboard_logins_created_at'), 'dashboard_logins', ['created_at'], unique=False)


def downgrade():
    op.drop_index(op.f('ix_dashboard_logins_created_at'), table_name='dashboard_logins')
    op.drop_table('dashboard_logins')
