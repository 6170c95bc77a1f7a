"""``CLAUDEOPS_DATABASE_URL`` as SQLAlchemy gets it, and how its engine connects.

SQLite needs nothing beyond Python; PostgreSQL needs the driver that the
``postgres`` extra installs (psycopg 3). A URL that names PostgreSQL without
a driver (``postgresql://…``, or Heroku-style ``postgres://…``) means that
one, whatever SQLAlchemy's own default driver is. A URL that cannot work is
refused at start with a message that names the setting and shows no password.
"""
from __future__ import annotations

import importlib.util

from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from app.config import ConfigError

POSTGRES_DRIVER = "psycopg"
POSTGRES_EXAMPLE = "postgresql+psycopg://claudeops:password@db.example/claudeops"


def sqlalchemy_url(raw: str) -> str:
    try:
        given = url = make_url(raw)
    except ArgumentError:
        raise ConfigError("CLAUDEOPS_DATABASE_URL is not a database URL; use sqlite:////path/to/claudeops.db "
                          f"or {POSTGRES_EXAMPLE}") from None
    if url.drivername in ("postgresql", "postgres"):
        url = url.set(drivername=f"postgresql+{POSTGRES_DRIVER}")
    if url.drivername == f"postgresql+{POSTGRES_DRIVER}" and importlib.util.find_spec(POSTGRES_DRIVER) is None:
        raise ConfigError(f"CLAUDEOPS_DATABASE_URL={url.render_as_string(hide_password=True)} needs the PostgreSQL "
                          "driver: install Claude Ops with its postgres extra (pip install 'claudeops[postgres]')")
    if url.drivername == given.drivername:
        return raw   # as the operator wrote it
    return url.render_as_string(hide_password=False)


def engine_options(uri: str) -> dict:
    """A database server can end connections that sit in the pool (a
    restart, a proxy's idle timeout); each is tested as it is taken out, so
    a request after that gets a fresh one instead of an error. A SQLite
    file has no server."""
    return {} if make_url(uri).get_backend_name() == "sqlite" else {"pool_pre_ping": True}
