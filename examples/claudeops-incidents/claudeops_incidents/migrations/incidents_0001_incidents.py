"""The incidents table (claudeops-incidents plugin).

Revision ID: incidents_0001
Revises:
Depends on: 0001_sessions

The first revision of the plugin's own branch. ``down_revision = None`` starts
a branch beside the host's history instead of inside it, so the host can add
revisions without knowing this plugin exists; ``branch_labels`` names the
branch (``incidents@head``, ``incidents@base``); ``depends_on`` makes Alembic
create ``sessions`` first, because the foreign keys below point at it.
"""
import sqlalchemy as sa
from alembic import op

revision = "incidents_0001"
down_revision = None
branch_labels = ("incidents",)
depends_on = "0001_sessions"


def upgrade():
    op.create_table(
        "incidents",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("service", sa.String(length=100), nullable=False),
        sa.Column("severity", sa.String(length=16), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("summary", sa.Text(), nullable=False),
        sa.Column("resolution", sa.Text(), nullable=True),
        sa.Column("updates", sa.Integer(), nullable=False),
        sa.Column("tier", sa.Integer(), nullable=True),
        sa.Column("opened_at", sa.DateTime(), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
        sa.Column("resolved_at", sa.DateTime(), nullable=True),
        sa.Column("opened_session_id", sa.Integer(), nullable=True),
        sa.Column("resolved_session_id", sa.Integer(), nullable=True),
        sa.ForeignKeyConstraint(["opened_session_id"], ["sessions.id"],
                                name=op.f("fk_incidents_opened_session_id_sessions"), ondelete="SET NULL"),
        sa.ForeignKeyConstraint(["resolved_session_id"], ["sessions.id"],
                                name=op.f("fk_incidents_resolved_session_id_sessions"), ondelete="SET NULL"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_incidents")),
    )
    with op.batch_alter_table("incidents", schema=None) as batch_op:
        batch_op.create_index("ix_incidents_status_service", ["status", "service"], unique=False)
        batch_op.create_index(batch_op.f("ix_incidents_opened_session_id"), ["opened_session_id"], unique=False)


def downgrade():
    with op.batch_alter_table("incidents", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_incidents_opened_session_id"))
        batch_op.drop_index("ix_incidents_status_service")
    op.drop_table("incidents")
