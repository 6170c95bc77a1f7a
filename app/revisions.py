"""Which schema revisions this installation (the host and its plugins) has:
a database at a revision it lacks was migrated by a newer Claude Ops, or by
a plugin no longer installed, and Alembic would only say it cannot locate it."""
from __future__ import annotations

from typing import Callable

from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from alembic.util import CommandError
from flask import Flask

from app.extensions import db


def known_revision(app: Flask) -> Callable[[str], bool]:
    """Whether this installation has a schema revision."""
    script = ScriptDirectory.from_config(app.extensions["migrate"].migrate.get_config())

    def known(revision: str) -> bool:
        try:
            return script.get_revision(revision) is not None
        except CommandError:
            return False
    return known


def newer_schema(shown_url: str, unknown: list[str]) -> str:
    """Why a database at ``unknown`` revisions is not used, and the ways back."""
    return (f"the database {shown_url} is at schema revision {', '.join(unknown)}, which this installation does "
            "not know. Either a newer version of Claude Ops migrated it: install that version again, or restore "
            "the backup taken before the upgrade (`claudeops restore`; PostgreSQL: pg_restore). Or a plugin whose "
            "tables are in it was uninstalled: reinstall it, and run `claudeops db downgrade <branch>@base` (with the "
            "service stopped) before removing it")


def unknown_revisions(app: Flask) -> list[str]:
    """The revisions the database is at that this installation lacks."""
    # Its words on configuring (the dialect, transactional DDL) are dropped
    # below DEBUG (app/migration_log.py): no news before every command.
    with db.engine.connect() as connection:
        current = MigrationContext.configure(connection).get_current_heads()
    known = known_revision(app)
    return sorted(revision for revision in current if not known(revision))
