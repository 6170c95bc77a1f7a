"""Alembic's words at every start, cut to what an operator reads: one line
for each revision applied (its docstring's first paragraph, not the whole
docstring over many lines), and none for how it configured itself (the
dialect's name, transactional DDL, each autogenerate plugin it set up for
``db check``, each PostgreSQL sequence it took for a SERIAL column's), which
it says at INFO whenever the schema is checked."""
from __future__ import annotations

import logging

LOGGER = "alembic.runtime.migration"
# Where Alembic says how it set itself up for ``db check``.
SET_UP_LOGGERS = ("alembic.runtime.plugins", "alembic.ddl.postgresql")
CHATTER = ("Context impl ", "Will assume ", "setting up autogenerate plugin ", "Detected sequence named ")


class MigrationLineFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno > logging.INFO or logging.getLogger(record.name).isEnabledFor(logging.DEBUG):
            return True
        message = record.getMessage()
        if message.startswith(CHATTER):
            return False
        if "\n" in message:
            record.msg, record.args = " ".join(message.split("\n\n", 1)[0].split()), ()
        return True


def install() -> None:
    """Once per process, however many applications it makes."""
    for name in (LOGGER, *SET_UP_LOGGERS):
        logger = logging.getLogger(name)
        if not any(isinstance(f, MigrationLineFilter) for f in logger.filters):
            logger.addFilter(MigrationLineFilter())
