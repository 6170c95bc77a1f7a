"""Many plain rows into one table, in one executemany, for the stream's hot
paths (activity rows, event rows from markers).

``session.execute(insert(table), rows)`` builds the parameters of every row
through SQLAlchemy's compiled-statement machinery, which for a stream of
50,000 lines costs as much as SQLite takes to store them. Here the INSERT is
compiled once per dialect and its column types' bind processors (SQLite's
datetime to text, say) are looked up once; each row is then one tuple or
dict handed to the driver. NUL characters are replaced as in any statement
(app/portable_text.py), but a text column at a time, and the statement is
marked as checked so that the cursor event does not scan every value again.

Only for rows of plain values a column takes as they are or through its
type's bind processor: no SQL expressions, no Python-side defaults (every
column not given is left to the database).
"""
from __future__ import annotations

from typing import Callable, Optional

from sqlalchemy import Boolean, DateTime, Integer, Numeric, Table, insert
from sqlalchemy.engine import Connection, Dialect

from app.portable_text import CHECKED, texts_without_nul
from app.timeutil import UTCDateTime


_NEVER_TEXT = (Integer, Numeric, Boolean, DateTime, UTCDateTime)


class BulkInsert:
    def __init__(self, table: Table, columns: tuple[str, ...]):
        self.table = table
        self.columns = columns
        # What may hold text, and so a NUL character: all but numbers, flags
        # and timestamps (whose bind processors write no NUL).
        self._texts = frozenset(name for name in columns
                                if not isinstance(table.c[name].type, _NEVER_TEXT))
        # Per kind of dialect: the SQL, the parameters' order (positional
        # paramstyles) and the bind processors by column.
        self._compiled: dict[tuple, tuple[str, Optional[tuple[str, ...]], dict[str, Callable]]] = {}

    def __call__(self, connection: Connection, rows: list[dict]) -> None:
        if not rows:
            return
        sql, order, processors = self._for(connection.dialect)
        names = order if order is not None else self.columns
        # Column by column: one pass of C-level loops each, not a Python loop per value.
        columns = []
        for name in names:
            values = [row[name] for row in rows]
            process = processors.get(name)
            if process is not None:
                values = list(map(process, values))
            columns.append(texts_without_nul(values) if name in self._texts else values)
        if order is not None:   # a positional paramstyle (SQLite's "?")
            params = list(zip(*columns))
        else:                   # a named one (psycopg's "%(name)s")
            params = [dict(zip(names, values)) for values in zip(*columns)]
        connection.exec_driver_sql(sql, params, execution_options={CHECKED: True})

    def _for(self, dialect: Dialect):
        key = (dialect.name, dialect.driver, dialect.paramstyle)
        if key not in self._compiled:
            # inline(): no RETURNING of the new ids, which nothing here reads.
            compiled = insert(self.table).inline().compile(dialect=dialect, column_keys=list(self.columns))
            processors = {name: process for name in self.columns
                          if (process := _bind_processor(self.table.c[name].type, dialect)) is not None}
            order = tuple(compiled.positiontup) if compiled.positional else None
            self._compiled[key] = (compiled.string, order, processors)
        return self._compiled[key]


def _bind_processor(column_type, dialect: Dialect) -> Optional[Callable]:
    """What SQLAlchemy does to a value of ``column_type`` before the driver
    sees it: the dialect's own type (SQLite's DATETIME) within any
    TypeDecorator; for a timestamp on SQLite, the same in one step."""
    if isinstance(column_type, UTCDateTime) and dialect.name == "sqlite":
        return UTCDateTime.sqlite_text
    return column_type.dialect_impl(dialect).bind_processor(dialect)
