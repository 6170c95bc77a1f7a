"""A service is kept in lower case: "Jellyfin" and "jellyfin" are one
service, so that a marker naming it in another case reinforces the memory
already there instead of starting a second one, and the Events page lists
it once (the cooldowns plugin has always folded service names so). The
memories and events kept from before are folded here; the downgrade leaves
them folded (their old case is not kept).

Revision ID: 0019_service_case
Revises: 0018_rate_limit_windows
"""
from alembic import op

revision = '0019_service_case'
down_revision = '0018_rate_limit_windows'
branch_labels = None
depends_on = None


def upgrade():
    # Services are ASCII (the markers' and the API's patterns), which lower() folds alike everywhere.
    op.execute("UPDATE memories SET service = lower(service) WHERE service <> lower(service)")
    op.execute("UPDATE events SET service = lower(service) WHERE service <> lower(service)")


def downgrade():
    pass
