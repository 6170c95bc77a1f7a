"""Login and bearer-token limits counted in the database, so that every
gunicorn worker (and every dashboard host on one PostgreSQL) counts the
same attempts.

Revision ID: 0018_rate_limit_windows
Revises: 0017_memory_search_accents
"""
from alembic import op
import sqlalchemy as sa

revision = '0018_rate_limit_windows'
down_revision = '0017_memory_search_accents'
branch_labels = None
depends_on = None


def upgrade():
    op.create_table('rate_limit_windows',
    sa.Column('key', sa.String(length=255), nullable=False),
    sa.Column('hits', sa.Integer(), nullable=False),
    sa.Column('expires_at', sa.Float(), nullable=False),
    sa.PrimaryKeyConstraint('key', name=op.f('pk_rate_limit_windows'))
    )
    op.create_index(op.f('ix_rate_limit_windows_expires_at'), 'rate_limit_windows', ['expires_at'], unique=False)


def downgrade():
    op.drop_index(op.f('ix_rate_limit_windows_expires_at'), table_name='rate_limit_windows')
    op.drop_table('rate_limit_windows')
