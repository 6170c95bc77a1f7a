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

``numbered`` also gives back the new rows' ids, in the order of the rows,
for a caller that builds on them (plugins/memory/batch.py). SQLAlchemy's own
ordered RETURNING inserts one row per statement on SQLite, which cannot tie
the ids it generates to the order of a multi-row VALUES; and on SQLite a
statement that writes to a full-text index (the memories' trigger) makes
that index write out what it holds, so one row per statement costs several
times what the row does. Here, on SQLite, one statement takes many rows and
numbers them itself: each row's id is the table's last id (the AUTOINCREMENT
sequence's, so none is ever reused) plus its place in the statement. Other
databases tie the ids to the rows in SQLAlchemy's batched RETURNING.
"""
from __future__ import annotations

from typing import Callable, Optional

from sqlalchemy import Boolean, DateTime, Integer, Numeric, Table, insert
from sqlalchemy.engine import Connection, Dialect

from app.portable_text import CHECKED, texts_without_nul
from app.timeutil import UTCDateTime


_NEVER_TEXT = (Integer, Numeric, Boolean, DateTime, UTCDateTime)
# Rows per numbered statement on SQLite: few statements, each well within
# the bound parameters SQLite takes.
NUMBERED_ROWS = 200


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
        columns = self._columns(rows, names, processors)
        if order is not None:   # a positional paramstyle (SQLite's "?")
            params = list(zip(*columns))
        else:                   # a named one (psycopg's "%(name)s")
            params = [dict(zip(names, values)) for values in zip(*columns)]
        connection.exec_driver_sql(sql, params, execution_options={CHECKED: True})

    def numbered(self, connection: Connection, rows: list[dict]) -> list[int]:
        """Insert ``rows``; their new ids, in the same order."""
        if not rows:
            return []
        if connection.dialect.name != "sqlite":
            (key,) = self.table.primary_key.columns
            statement = insert(self.table).returning(key, sort_by_parameter_order=True)
            return list(connection.execute(statement, [{name: row[name] for name in self.columns} for row in rows])
                        .scalars())
        _, _, processors = self._for(connection.dialect)
        ids: list[int] = []
        for start in range(0, len(rows), NUMBERED_ROWS):
            chunk = rows[start:start + NUMBERED_ROWS]
            columns = self._columns(chunk, self.columns, processors)
            params = [value for place, values in enumerate(zip(*columns), 1) for value in (place, *values)]
            # RETURNING gives the ids in no set order; they are the last id plus 1, 2, ...
            ids.extend(sorted(connection.exec_driver_sql(
                self._numbered_sql(connection.dialect, len(chunk)), tuple(params),
                execution_options={CHECKED: True}).scalars()))
        return ids

    def _numbered_sql(self, dialect: Dialect, count: int) -> str:
        quote = dialect.identifier_preparer.quote
        (key,) = self.table.primary_key.columns
        table, key = quote(self.table.name), quote(key.name)
        last = f"(SELECT max({key}) FROM {table})"
        if self.table.dialect_options["sqlite"]["autoincrement"]:
            # The sequence remembers deleted ids, which must not come back.
            name = self.table.name.replace("'", "''")
            last = f"max(coalesce((SELECT seq FROM sqlite_sequence WHERE name = '{name}'), 0), coalesce({last}, 0))"
        values = ", ".join(["(" + ", ".join(["?"] * (len(self.columns) + 1)) + ")"] * count)
        # A VALUES list's columns are column1, column2, ...: the place, then the row's values.
        picked = ", ".join(f"numbered.column{index}" for index in range(2, len(self.columns) + 2))
        # SQLite runs a SELECT that reads the table an INSERT writes before it
        # writes: the last id is read once, before the first row goes in.
        return (f"INSERT INTO {table} ({key}, {', '.join(map(quote, self.columns))}) "
                f"SELECT coalesce(last.id, 0) + numbered.column1, {picked} "
                f"FROM (SELECT {last} AS id) AS last, (VALUES {values}) AS numbered RETURNING {key}")

    def _columns(self, rows: list[dict], names: tuple[str, ...], processors: dict[str, Callable]) -> list[list]:
        """Each column's values, ready for the driver: column by column, one
        pass of C-level loops each, not a Python loop per value."""
        columns = []
        for name in names:
            values = [row[name] for row in rows]
            process = processors.get(name)
            if process is not None:
                values = list(map(process, values))
            columns.append(texts_without_nul(values) if name in self._texts else values)
        return columns

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
