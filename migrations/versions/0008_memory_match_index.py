"""The memories a new observation is matched against: the active ones of its
service and category, most trusted first. Without this index the lookup
walked every active memory in confidence order, once for every memory
marker of a stream. And what a session has already created or reinforced,
read from the history once per session instead of once per marker.

Revision ID: 0008_memory_match_index
Revises: 0007_memory_search
"""
from alembic import op

revision = '0008_memory_match_index'
down_revision = '0007_memory_search'
branch_labels = None
depends_on = None

INDEX = 'ix_memories_service_category_active_confidence'
HISTORY_INDEX = 'ix_memory_history_session_id_action'


def upgrade():
    op.create_index(INDEX, 'memories', ['service', 'category', 'active', 'confidence'])
    op.create_index(HISTORY_INDEX, 'memory_history', ['session_id', 'action'])


def downgrade():
    op.drop_index(HISTORY_INDEX, table_name='memory_history')
    op.drop_index(INDEX, table_name='memories')
