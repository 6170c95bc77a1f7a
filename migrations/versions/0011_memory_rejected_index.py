"""The rejected memories of a service and category, most trusted first: a
memory marker that may create a memory is matched against them too (saying
again what the operator rejected stores nothing). Without this index the
lookup read every memory of the service and category to find the few
rejected ones, once for every memory marker of a stream, so a marker cost
more the more memories a service had gathered.

Revision ID: 0011_memory_rejected_index
Revises: 0010_memory_review
"""
from alembic import op

revision = '0011_memory_rejected_index'
down_revision = '0010_memory_review'
branch_labels = None
depends_on = None

INDEX = 'ix_memories_service_category_status_confidence'


def upgrade():
    op.create_index(INDEX, 'memories', ['service', 'category', 'status', 'confidence'])


def downgrade():
    op.drop_index(INDEX, table_name='memories')
