"""Copy every row of one Claude Ops database into another, new one: how an
operator who has outgrown one SQLite file moves to PostgreSQL (or back),
keeping all the agent learned and all the sessions behind it
(``claudeops copy-to``, app/backup_cli.py).

The target has been migrated by the same revisions as the source and holds
no row. Rows go table by table in the order their foreign keys need (the
metadata's), each table in primary-key order and a chunk at a time, so the
memory used stays flat however large the tables are. A column that refers
to its own table (an escalated session's parent, the memory a memory
contradicts) is filled in once its table is whole. Ids are copied as they
are, so that every reference (a memory's ``#12`` in a prompt, a session's
URL) stays true; PostgreSQL's id sequences are then set past the largest.

The whole copy is one transaction of the target's: a copy that fails leaves
the target without a row, ready for another try. The source is read from
one snapshot and never written. What PostgreSQL would refuse and SQLite
kept (a text longer than its column, a NUL character) is found before it is
written, and every such row is named.
"""
from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from sqlalchemy import MetaData, String, Table, bindparam, func, inspect, select, text, update
from sqlalchemy.engine import Connection, Engine

# Rows read and written at a time.
CHUNK_ROWS = 1_000
# Rows PostgreSQL would refuse, named at the most; the rest are counted.
MOST_NAMED = 20
# Kept by the migrations, not by the models: Alembic's own table, and the
# full-text search tables on SQLite (rebuilt in the target by its triggers).
_NOT_ROWS_OF_MODELS = re.compile(r"^alembic_version$|_fts(_|$)")


class CopyError(Exception):
    """The copy cannot be made, or was undone; the message says why."""


@dataclass
class Copied:
    tables: list[tuple[str, int]] = field(default_factory=list)   # each table and its rows, in copy order
    left_out: list[str] = field(default_factory=list)   # tables of the source no installed code declares

    @property
    def rows(self) -> int:
        return sum(count for _, count in self.tables)


def foreign_tables(connection: Connection, metadata: MetaData) -> list[str]:
    """Tables of the database that are not Claude Ops' (nor its plugins'):
    in a target, the sign of another application's database."""
    ours = set(metadata.tables)
    return sorted(name for name in inspect(connection).get_table_names()
                  if name not in ours and not _NOT_ROWS_OF_MODELS.search(name))


def tables_with_rows(connection: Connection, metadata: MetaData) -> list[str]:
    """The tables of ``metadata`` that hold a row in this database."""
    present = set(inspect(connection).get_table_names())
    return [table.name for table in metadata.sorted_tables
            if table.name in present and connection.execute(select(1).select_from(table).limit(1)).first()]


def copy_database(source: Engine, target: Connection, metadata: MetaData,
                  on_table: Callable[[str, int], None] = lambda name, rows: None) -> Copied:
    """Every row of every table of ``metadata`` from ``source`` into
    ``target`` (a connection in the transaction the caller commits), each
    table told to ``on_table`` once copied. ``CopyError`` if a row cannot
    go to the target; the caller then rolls back."""
    copied = Copied()
    refused: list[str] = []
    with _snapshot(source) as reading:
        copied.left_out = foreign_tables(reading, metadata)
        for table in metadata.sorted_tables:
            count = _copy_table(reading, target, table, refused)
            copied.tables.append((table.name, count))
            on_table(table.name, count)
    if refused:
        more = len(refused) - MOST_NAMED
        named = "\n".join(f"  {line}" for line in refused[:MOST_NAMED])
        raise CopyError(f"{len(refused)} row(s) cannot go to {target.dialect.name}; change or delete them in the "
                        f"source, then copy again:\n{named}" + (f"\n  … and {more} more" if more > 0 else ""))
    if target.dialect.name == "postgresql":
        _move_sequences_past_ids(target, metadata)
    _check_counts(target, metadata, copied)
    return copied


@contextmanager
def _snapshot(engine: Engine) -> Iterator[Connection]:
    """A connection that reads the database as it was when the copy
    began, whatever is committed meanwhile (a dashboard left running)."""
    with engine.connect() as connection:
        if engine.dialect.name == "postgresql":
            connection = connection.execution_options(isolation_level="REPEATABLE READ")
        else:
            # The driver begins a transaction only before a write; without
            # one, each read would see the latest commit.
            connection.exec_driver_sql("BEGIN")
        try:
            yield connection
        finally:
            connection.rollback()


def _copy_table(reading: Connection, target: Connection, table: Table, refused: list[str]) -> int:
    """The table's rows, chunk by chunk; once a row was refused, the rest
    are only checked (so that every such row is named), not written."""
    own_references = [fk.parent.name for fk in table.foreign_keys if fk.column.table is table]
    deferred: list[dict] = []   # the rows' references to their own table, set once it is whole
    primary_key = [column.name for column in table.primary_key.columns]
    checks = _checks(table) if target.dialect.name == "postgresql" else []
    count = 0
    rows = reading.execution_options(yield_per=CHUNK_ROWS).execute(
        select(table).order_by(*table.primary_key.columns))
    for chunk in rows.partitions():
        values = [dict(row._mapping) for row in chunk]
        count += len(values)
        for row in values:
            for check in checks:
                problem = check(row)
                if problem:
                    refused.append(f"{table.name} {_key(row, primary_key)}: {problem}")
            for name in own_references:
                if row[name] is not None:
                    deferred.append({**{f"key_{key}": row[key] for key in primary_key},
                                     "column": name, "value": row[name]})
                    row[name] = None
        if not refused:
            target.execute(table.insert(), values)
    if deferred and not refused:
        _set_own_references(target, table, primary_key, deferred)
    return count


def _set_own_references(target: Connection, table: Table, primary_key: list[str], deferred: list[dict]) -> None:
    for name in {row["column"] for row in deferred}:
        statement = (update(table).where(*(table.c[key] == bindparam(f"key_{key}") for key in primary_key))
                     .values({name: bindparam("value")}))
        rows = [{key: value for key, value in row.items() if key != "column"}
                for row in deferred if row["column"] == name]
        for start in range(0, len(rows), CHUNK_ROWS):
            target.execute(statement, rows[start:start + CHUNK_ROWS])


def _checks(table: Table) -> list[Callable[[dict], str | None]]:
    """What PostgreSQL refuses in a row that SQLite keeps: a text longer
    than its column (SQLite ignores the length) or holding a NUL character."""
    checks = []
    for column in table.columns:
        if not isinstance(column.type, String):
            continue
        length = column.type.length

        def check(row: dict, name: str = column.name, length: int | None = length) -> str | None:
            value = row[name]
            if not isinstance(value, str):
                return None
            if length and len(value) > length:
                return f"{name} is {len(value):,} characters long, over the column's {length:,}"
            if "\x00" in value:
                return f"{name} holds a NUL character"
            return None
        checks.append(check)
    return checks


def _key(row: dict, primary_key: list[str]) -> str:
    if primary_key == ["id"]:
        return f"#{row['id']}"
    shown = ", ".join(f"{key}={str(row[key])[:40]!r}" for key in primary_key)
    return f"({shown})"


def _move_sequences_past_ids(target: Connection, metadata: MetaData) -> None:
    """The next id PostgreSQL gives is past the largest copied: the rows
    came with their ids, which a sequence does not see."""
    for table in metadata.sorted_tables:
        column = table.autoincrement_column
        if column is None:
            continue
        largest = target.scalar(select(func.max(column)))
        if largest is None:
            continue
        target.execute(text("SELECT setval(pg_get_serial_sequence(:table, :column), :largest)"),
                       {"table": target.dialect.identifier_preparer.format_table(table),
                        "column": column.name, "largest": largest})


def _check_counts(target: Connection, metadata: MetaData, copied: Copied) -> None:
    """Each table of the target holds as many rows as were read."""
    for name, count in copied.tables:
        stored = target.scalar(select(func.count()).select_from(metadata.tables[name]))
        if stored != count:
            raise CopyError(f"{name}: {count:,} rows read, but the target holds {stored:,}")
