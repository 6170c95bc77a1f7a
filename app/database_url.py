"""``CLAUDEOPS_DATABASE_URL`` as SQLAlchemy gets it, and how its engine connects.

SQLite needs nothing beyond Python; PostgreSQL needs the driver that the
``postgres`` extra installs (psycopg 3). A URL that names PostgreSQL without
a driver (``postgresql://…``, or Heroku-style ``postgres://…``) means that
one, whatever SQLAlchemy's own default driver is. A URL that cannot work (not
a URL, another database, a driver that is not installed) is refused at start
with a message that names the setting and shows no password.
"""
from __future__ import annotations

from pathlib import Path

from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError, NoSuchModuleError

from app.config import ConfigError

SUPPORTED_BACKENDS = ("sqlite", "postgresql")
POSTGRES_DRIVER = "psycopg"
POSTGRES_EXAMPLE = "postgresql+psycopg://claudeops:password@db.example/claudeops"
HIDDEN = "claudeops-hidden-value"
EXAMPLES = f"use sqlite:////path/to/claudeops.db or {POSTGRES_EXAMPLE}"


def shown_url(url: URL) -> str:
    """``url`` as a message or a page may show it: no password, neither in
    its place nor as a parameter of the query (libpq takes ``password`` and
    a client key's ``sslpassword`` there too)."""
    hidden = {key: HIDDEN for key in url.query if key.lower().endswith("password")}
    # Rendered, the query's "***" would be percent-encoded.
    return url.update_query_dict(hidden).render_as_string(hide_password=True).replace(HIDDEN, "***")


def sqlalchemy_url(raw: str, name: str = "CLAUDEOPS_DATABASE_URL") -> str:
    """``raw`` as SQLAlchemy takes it; ``ConfigError`` if it cannot work.
    ``name``: what the operator gave it as, for the message."""
    try:
        given = url = make_url(raw)
    except ArgumentError:
        raise ConfigError(f"{name} is not a database URL; {EXAMPLES}") from None
    if url.drivername in ("postgresql", "postgres"):
        url = url.set(drivername=f"postgresql+{POSTGRES_DRIVER}")
    _check_driver(url, name)
    if url.drivername == given.drivername:
        return raw   # as the operator wrote it
    return url.render_as_string(hide_password=False)


def _check_driver(url: URL, name: str) -> None:
    """Refuse, at start, a database the service was not built for or a
    driver that is not installed: either would otherwise end the start in a
    traceback from deep inside SQLAlchemy."""
    named = f"{name}={shown_url(url)}"
    if url.get_backend_name() not in SUPPORTED_BACKENDS:
        raise ConfigError(f"{named}: Claude Ops works with SQLite and PostgreSQL only; {EXAMPLES}")
    try:
        dialect = url.get_dialect()
    except NoSuchModuleError:
        raise ConfigError(f"{named}: SQLAlchemy knows no driver {url.get_driver_name()!r} for "
                          f"{url.get_backend_name()}; {EXAMPLES}") from None
    if dialect.is_async:
        raise ConfigError(f"{named}: {url.get_driver_name()} is an asyncio driver, which Claude Ops cannot use; "
                          f"{EXAMPLES}")
    try:
        dialect.import_dbapi()
    except ImportError as exc:
        if url.get_driver_name() == POSTGRES_DRIVER:
            raise ConfigError(f"{named} needs the PostgreSQL driver: install Claude Ops with its postgres extra "
                              "(.venv/bin/pip install -e '.[postgres]' in the checkout; bin/serve does it when "
                              "CLAUDEOPS_DATABASE_URL names PostgreSQL in its environment as it runs)") from None
        raise ConfigError(f"{named} needs the Python module {exc.name}, which is not installed; {EXAMPLES}") from None


def absolute_sqlite_url(raw: str) -> str:
    """``sqlite:///claudeops.db`` names a file in the working directory: the
    same file, for a process that works from elsewhere. Other URLs as given
    (a ``file:`` URI among them: ``?uri=true``)."""
    url = make_url(raw)
    database = url.database
    if (url.get_backend_name() != "sqlite" or in_memory(url) or "uri" in url.query
            or Path(database).is_absolute()):
        return raw
    return url.set(database=str(Path(database).resolve())).render_as_string(hide_password=False)


def in_memory(url: URL) -> bool:
    """A SQLite URL of a database in memory: each connection's own, gone when it closes."""
    return not url.database or url.database == ":memory:" or url.query.get("mode") == "memory"


def left_in_the_instance_folder(raw: str, instance_path: str) -> None:
    """Refuse a relative SQLite path whose database an earlier version kept
    in the checkout's instance folder (Flask-SQLAlchemy's reading of it,
    for some of the service's processes), where there is one: the service
    would start on a new, empty file in the working directory instead."""
    url = make_url(raw)
    if url.get_backend_name() != "sqlite" or in_memory(url) or "uri" in url.query or Path(url.database).is_absolute():
        return
    earlier, now = Path(instance_path) / url.database, Path(url.database).resolve()
    if earlier.is_file() and earlier.resolve() != now:
        there = "; a database is there too: keep the one to go on with" if now.exists() else ""
        raise ConfigError(f"CLAUDEOPS_DATABASE_URL={shown_url(url)} names {now}, taken from the working directory; "
                          f"an earlier version kept that database in {earlier} for some of its processes{there}. "
                          f"Move it to {now}, or name it by its absolute path (sqlite:///{earlier}), then start "
                          "again")


def service_url(raw: str) -> str:
    """``CLAUDEOPS_DATABASE_URL`` as every process of the service opens it:
    a relative SQLite path made absolute from the working directory, so that
    the dashboard's workers, the scheduler, the CLI and the hook (each with
    a working directory, or an instance folder, of its own) open one file.
    A database in memory is refused: each process would have its own."""
    url = sqlalchemy_url(raw)
    if make_url(url).get_backend_name() == "sqlite" and in_memory(make_url(url)):
        raise ConfigError(f"CLAUDEOPS_DATABASE_URL={shown_url(make_url(url))}: names a SQLite database in memory, "
                          f"which each of the service's processes would have on its own, empty, and lose as it "
                          f"ends; name a file (sqlite:////path/to/claudeops.db)")
    return absolute_sqlite_url(url)


# Seconds a new connection may take. libpq itself waits for a server that
# does not answer as long as the network lets it (a host that drops every
# packet: minutes; one that takes the connection and says nothing: forever),
# with nothing said. A connect_timeout in the URL wins.
CONNECT_TIMEOUT_SECONDS = 10


def connect_args(uri: str | URL) -> dict:
    """What every connection to the database is opened with."""
    url = make_url(uri)
    if url.get_backend_name() == "sqlite" or "connect_timeout" in url.query:
        return {}
    return {"connect_timeout": CONNECT_TIMEOUT_SECONDS}


def engine_options(uri: str) -> dict:
    """A database server can end connections that sit in the pool (a
    restart, a proxy's idle timeout); each is tested as it is taken out, so
    a request after that gets a fresh one instead of an error. A SQLite
    file has no server."""
    if make_url(uri).get_backend_name() == "sqlite":
        return {}
    extra = connect_args(uri)
    return {"pool_pre_ping": True, **({"connect_args": extra} if extra else {})}
