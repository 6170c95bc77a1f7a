"""The memories a new observation is matched against: the active ones of its
service and category, most trusted first. Without this index the lookup
walked every active memory in confidence order, once for every memory
marker of a stream.

Revision ID: 0008_memory_match_index
Revises: 0007_memory_search
"""
from alembic import op

revision = '0008_memory_match_index'
down_revision = '0007_memory_search'
branch_labels = None
depends_on = None

INDEX = 'ix_memories_service_category_active_confidence'


def upgrade():
    op.create_index(INDEX, 'memories', ['service', 'category', 'active', 'confidence'])


def downgrade():
    op.drop_index(INDEX, table_name='memories')
