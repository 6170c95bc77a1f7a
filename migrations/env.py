import logging
import re
from logging.config import fileConfig

from flask import current_app

from alembic import context
from sqlalchemy import event

# this is the Alembic Config object, which provides
# access to the values within the .ini file in use.
config = context.config

# Interpret the config file for Python logging.
# This line sets up loggers basically.
# The service configures logging itself (migrations also run inside
# `claudeops serve`); alembic.ini's logging applies only when nothing has.
if not logging.getLogger().handlers:
    fileConfig(config.config_file_name, disable_existing_loggers=False)
logger = logging.getLogger('alembic.env')


def get_engine():
    return current_app.extensions['migrate'].db.engine


def get_engine_url():
    try:
        return get_engine().url.render_as_string(hide_password=False).replace(
            '%', '%%')
    except AttributeError:
        return str(get_engine().url).replace('%', '%%')


# add your model's MetaData object here
# for 'autogenerate' support
# from myapp import mymodel
# target_metadata = mymodel.Base.metadata
config.set_main_option('sqlalchemy.url', get_engine_url())
target_db = current_app.extensions['migrate'].db

# other values from the config, defined by the needs of env.py,
# can be acquired:
# my_important_option = config.get_main_option("my_important_option")
# ... etc.


def get_metadata():
    if hasattr(target_db, 'metadatas'):
        return target_db.metadatas[None]
    return target_db.metadata


def render_item(type_, obj, autogen_context):
    """Render the app's UTC column type as a plain DateTime, so revisions
    never import application code."""
    from app.timeutil import UTCDateTime
    if type_ == "type" and isinstance(obj, UTCDateTime):
        return "sa.DateTime()"
    return False


SEARCH_INDEX = re.compile(r"_fts(_|$)")


def include_name(name, type_, parent_names):
    """Full-text search tables (SQLite FTS5 ``*_fts`` and its shadow tables)
    and indexes (PostgreSQL's expression index ``ix_*_fts``) are made by
    revisions, not declared as models: autogenerate and the drift check
    leave them alone."""
    return not (type_ in ("table", "index") and SEARCH_INDEX.search(name or ""))


def run_migrations_offline():
    """Run migrations in 'offline' mode.

    This configures the context with just a URL
    and not an Engine, though an Engine is acceptable
    here as well.  By skipping the Engine creation
    we don't even need a DBAPI to be available.

    Calls to context.execute() here emit the given string to the
    script output.

    """
    url = config.get_main_option("sqlalchemy.url")
    context.configure(
        url=url, target_metadata=get_metadata(), literal_binds=True
    )

    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online():
    """Run migrations in 'online' mode.

    In this scenario we need to create an Engine
    and associate a connection with the context.

    """

    # this callback is used to prevent an auto-migration from being generated
    # when there are no changes to the schema
    # reference: http://alembic.zzzcomputing.com/en/latest/cookbook.html
    def process_revision_directives(context, revision, directives):
        if getattr(config.cmd_opts, 'autogenerate', False):
            script = directives[0]
            if script.upgrade_ops.is_empty():
                directives[:] = []
                logger.info('No changes in schema detected.')

    conf_args = current_app.extensions['migrate'].configure_args
    if conf_args.get("process_revision_directives") is None:
        conf_args["process_revision_directives"] = process_revision_directives
    conf_args.setdefault("render_item", render_item)
    conf_args.setdefault("include_name", include_name)

    connectable = get_engine()

    with connectable.connect() as connection:
        sqlite = connection.dialect.name == "sqlite"
        if sqlite:
            # Batch migrations rebuild a table (copy, drop, rename). With
            # foreign keys enforced, dropping `sessions` would cascade into the
            # activity log and null out events' and memories' session links.
            connection.exec_driver_sql("PRAGMA foreign_keys=OFF")
            connection.commit()  # end the transaction the statement began; migrations run in their own
            # SQLite can undo a schema change, but Python's sqlite3 begins a
            # transaction only before INSERT, UPDATE or DELETE: every CREATE,
            # ALTER and DROP was kept at once. An upgrade that failed part way
            # (the disk full while a search index is built) left a revision's
            # tables behind without recording it, and every upgrade after it
            # failed on them. The migrations' transaction is begun here.
            _transactional_sqlite(connection, True)
        context.configure(
            connection=connection,
            target_metadata=get_metadata(),
            **({"transactional_ddl": True} if sqlite else {}),
            **conf_args
        )

        try:
            with context.begin_transaction():
                context.run_migrations()
        finally:
            if sqlite:
                _transactional_sqlite(connection, False)
                connection.exec_driver_sql("PRAGMA foreign_keys=ON")
                connection.commit()


def _begin_sqlite(connection):
    connection.exec_driver_sql("BEGIN")


def _transactional_sqlite(connection, on):
    """While ``on``, every transaction on ``connection`` is SQLite's own
    (BEGIN ... COMMIT), schema changes included; then the driver's again,
    as the pool's other users expect."""
    driver_connection = connection.connection.driver_connection
    if on:
        connection.info["claudeops.isolation_level"] = driver_connection.isolation_level
        driver_connection.isolation_level = None
        event.listen(connection, "begin", _begin_sqlite)
    else:
        event.remove(connection, "begin", _begin_sqlite)
        driver_connection.isolation_level = connection.info.pop("claudeops.isolation_level")


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
