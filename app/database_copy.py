"""Copy every row of one Claude Ops database into another, new one: how an
operator who has outgrown one SQLite file moves to PostgreSQL (or back),
keeping all the agent learned and all the sessions behind it
(``claudeops copy-to``, app/copy_cli.py).

The target has been migrated by the same revisions as the source and holds
no row. Rows go table by table in the order their foreign keys need (the
metadata's), each table in primary-key order and a chunk at a time (fewer
rows when they are wide: a session keeps its whole response), so the memory
used stays flat however large the tables are. A column that refers to its
own table (an escalated session's parent, the memory a memory contradicts)
is set once its table is whole, read again from the source for it. Ids are
copied as they are, so that every reference (a memory's ``#12`` in a
prompt, a session's page) stays true, and the target's counters are moved
past every id the source ever gave: a deleted memory's history keeps its
id, which no new memory may take.

The whole copy is one transaction of the target's: a copy that fails leaves
the target without a row, ready for another try. The source is read from
one snapshot and never written; anything another process writes to it
meanwhile undoes the copy, which would lack it. What PostgreSQL would refuse and SQLite
kept (a text longer than its column, a number beyond its 32 bits) is found
as it is read, and every such row is named. A NUL character, which no
version writes any more, is replaced as the host replaces it in everything
it writes (app/portable_text.py), and each such row is named too.
"""
from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal

from sqlalchemy import BigInteger, Integer, MetaData, SmallInteger, String, Table, bindparam, func, inspect, select, \
    text, update
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import DBAPIError

from app.dbfaults import first_line
from app.portable_text import NUL, REPLACEMENT

# Rows read and written at a time, or fewer once they hold this many characters.
CHUNK_ROWS = 1_000
CHUNK_CHARS = 8_000_000
# Rows named at the most in a message; the rest are counted.
MOST_NAMED = 20
# Kept by the migrations, not by the models: Alembic's own table, and the
# full-text search tables on SQLite (filled in the target by its triggers).
_NOT_ROWS_OF_MODELS = re.compile(r"^alembic_version$|_fts(_|$)")
_INTEGER_RANGES = ((BigInteger, None), (SmallInteger, 2**15), (Integer, 2**31))


class CopyError(Exception):
    """The copy cannot be made, or was undone; the message says why."""


@dataclass
class Rows:
    """Rows named for a reason: the first ``MOST_NAMED`` of them, and how many."""
    named: list[str] = field(default_factory=list)
    count: int = 0

    def add(self, line: str) -> None:
        self.count += 1
        if len(self.named) < MOST_NAMED:
            self.named.append(line)

    def listed(self) -> str:
        more = self.count - len(self.named)
        return "\n".join(f"  {line}" for line in self.named) + (f"\n  … and {more:,} more" if more > 0 else "")


@dataclass
class Copied:
    tables: list[tuple[str, int]] = field(default_factory=list)   # each table and its rows, in copy order
    left_out: list[str] = field(default_factory=list)   # tables of the source no installed code declares
    changed: Rows = field(default_factory=Rows)         # rows whose NUL characters were replaced

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
    copied, refused, snapshot = Copied(), Rows(), _Snapshot(source)
    with snapshot as reading:
        copied.left_out = foreign_tables(reading, metadata)
        issued = _ids_issued(reading, metadata)
        for table in metadata.sorted_tables:
            count = _TableCopy(reading, target, table, refused, copied.changed).run()
            copied.tables.append((table.name, count))
            on_table(table.name, count)
        contents = _contents(reading, metadata)
    if refused.count:
        raise CopyError(f"{refused.count:,} row(s) cannot go to {target.dialect.name}; change or delete them in "
                        f"the source, then copy again:\n{refused.listed()}")
    _check_source_unchanged(source, metadata, copied, issued, contents, snapshot.written_meanwhile)
    _move_counters_past(target, metadata, issued)
    _check_counts(target, metadata, copied)
    return copied


class _Snapshot:
    """A connection that reads the database as it was when the copy
    began, whatever is committed meanwhile (a dashboard left running); once
    it is closed, ``written_meanwhile`` says whether, on SQLite, any other
    connection committed to the file while it was open (SQLite's PRAGMA
    data_version, which moves with every such commit, but not within a
    transaction; PostgreSQL has no such figure for one database, and its
    tables' contents are compared instead)."""

    def __init__(self, engine: Engine):
        self.engine = engine
        self.written_meanwhile = False

    def __enter__(self) -> Connection:
        self.connection = self.engine.connect()
        self.version = self._data_version()
        if self.engine.dialect.name == "postgresql":
            self.connection.execution_options(isolation_level="REPEATABLE READ")
        else:
            # The driver begins a transaction only before a write; without
            # one, each read would see the latest commit.
            self.connection.exec_driver_sql("BEGIN")
        return self.connection

    def __exit__(self, kind, *exc_info) -> None:
        try:
            self.connection.rollback()
            if kind is None:   # a copy that failed is undone anyway: its own error is the one to tell
                self.written_meanwhile = self._data_version() != self.version
        finally:
            self.connection.close()

    def _data_version(self) -> int | None:
        if self.engine.dialect.name != "sqlite":
            return None
        version = self.connection.exec_driver_sql("PRAGMA data_version").scalar()
        self.connection.commit()   # ends the transaction SQLAlchemy began around it
        return version


def _contents(connection: Connection, metadata: MetaData) -> dict[str, Decimal]:
    """On PostgreSQL, each table's rows summed up as one number: the sum of
    a 64-bit hash of each row's text, which any change to any row moves
    (all but certainly). Empty on SQLite, where PRAGMA data_version sees
    every commit of another connection instead."""
    if connection.dialect.name != "postgresql":
        return {}
    # ROW(alias.*), not the alias alone: a column of that name would be read instead of the row.
    return {table.name: connection.scalar(text(
        "SELECT coalesce(sum(hashtextextended(ROW(copied_row.*)::text, 0)::numeric), 0) "
        f"FROM {_quoted(connection, table)} AS copied_row")) for table in metadata.sorted_tables}


def _quoted(connection: Connection, table: Table) -> str:
    return connection.dialect.identifier_preparer.format_table(table)


def _check_source_unchanged(source: Engine, metadata: MetaData, copied: Copied, issued: dict[str, int],
                            contents: dict[str, Decimal], written_meanwhile: bool) -> None:
    """``CopyError`` if anything wrote to the source while it was copied (a
    dashboard on another host, a script): what it wrote is not in the
    snapshot, and a service moved to the copy would lose it. Seen as it is
    now against the snapshot: a table's rows counted, the ids its counter
    has given (an insert shows even when its row is gone again) and, on
    PostgreSQL, its rows' contents; on SQLite, any commit at all."""
    with source.connect() as now:
        ids_now = _ids_issued(now, metadata)
        contents_now = _contents(now, metadata)
        tables = [name for name, count in copied.tables
                  if now.scalar(select(func.count()).select_from(metadata.tables[name])) != count
                  or ids_now.get(name) != issued.get(name) or contents_now.get(name) != contents.get(name)]
    if tables or written_meanwhile:
        where = f" (rows added, changed or deleted in {', '.join(tables)})" if tables else ""
        raise CopyError(f"the database was written while it was copied{where}, and the copy would lack what was "
                        "written: stop every process that uses it, a dashboard on another host included, and copy "
                        "again")


class _TableCopy:
    """One table's rows, chunk by chunk. Once any row was refused, the rest
    are only checked (so that every such row is named), not written."""

    def __init__(self, reading: Connection, target: Connection, table: Table, refused: Rows, changed: Rows):
        self.reading, self.target, self.table = reading, target, table
        self.refused, self.changed = refused, changed
        self.key = list(table.primary_key.columns)
        self.own_references = [fk.parent for fk in table.foreign_keys if fk.column.table is table]
        self.limits = _limits(table) if target.dialect.name == "postgresql" else []
        self.texts = [column.name for column in table.columns if isinstance(column.type, String)]

    def run(self) -> int:
        count, chunk, chars = 0, [], 0
        for row in self.reading.execution_options(yield_per=CHUNK_ROWS).execute(
                select(self.table).order_by(*self.key)):
            values = self._checked(dict(row._mapping))
            for column in self.own_references:
                values[column.name] = None
            chunk.append(values)
            chars += sum(len(values[name]) for name in self.texts if values[name] is not None)
            count += 1
            if len(chunk) >= CHUNK_ROWS or chars >= CHUNK_CHARS:
                self._write(chunk)
                chunk, chars = [], 0
        self._write(chunk)
        if not self.refused.count:
            for column in self.own_references:
                self._set_own_references(column)
        return count

    def _checked(self, values: dict) -> dict:
        for limit in self.limits:
            problem = limit(values)
            if problem:
                self.refused.add(f"{self.table.name} {self._shown_key(values)}: {problem}")
        replaced = [name for name in self.texts if values[name] is not None and NUL in values[name]]
        for name in replaced:
            values[name] = values[name].replace(NUL, REPLACEMENT)
        if replaced:
            self.changed.add(f"{self.table.name} {self._shown_key(values)}: {', '.join(replaced)}")
        return values

    def _write(self, chunk: list[dict]) -> None:
        if not chunk or self.refused.count:
            return
        try:
            self.target.execute(self.table.insert(), chunk)
        except DBAPIError as exc:   # what no check foresaw: a row whose reference is gone, say
            raise CopyError(f"{self.table.name}, the rows {self._shown_key(chunk[0])} to "
                            f"{self._shown_key(chunk[-1])}: {first_line(exc)}") from None

    def _set_own_references(self, column) -> None:
        """``column``, left empty as the rows went in, read again (with the
        key of each row that has one) and set now that every row is there."""
        keys = {key.name: bindparam(f"key_{key.name}") for key in self.key}
        statement = (update(self.table).where(*(self.table.c[name] == value for name, value in keys.items()))
                     .values({column.name: bindparam("reference")}))
        rows = self.reading.execution_options(yield_per=CHUNK_ROWS).execute(
            select(*self.key, column.label("reference")).where(column.is_not(None)).order_by(*self.key))
        for chunk in rows.partitions():
            self.target.execute(statement, [{**{f"key_{name}": row._mapping[name] for name in keys},
                                             "reference": row.reference} for row in chunk])

    def _shown_key(self, values: dict) -> str:
        if [column.name for column in self.key] == ["id"]:
            return f"#{values['id']}"
        return "(" + ", ".join(f"{column.name}={str(values[column.name])[:40]!r}" for column in self.key) + ")"


def _limits(table: Table) -> list[Callable[[dict], str | None]]:
    """What PostgreSQL refuses in a row that SQLite keeps: a text longer
    than its column (SQLite ignores the length), an integer beyond the
    column's bits (SQLite's are all 64)."""
    limits = []
    for column in table.columns:
        if isinstance(column.type, String) and column.type.length:
            def too_long(row: dict, name: str = column.name, length: int = column.type.length) -> str | None:
                value = row[name]
                if isinstance(value, str) and len(value) > length:
                    return f"{name} is {len(value):,} characters long, over the column's {length:,}"
                return None
            limits.append(too_long)
        bound = next((bound for kind, bound in _INTEGER_RANGES if isinstance(column.type, kind)), None)
        if bound:
            def too_large(row: dict, name: str = column.name, bound: int = bound) -> str | None:
                value = row[name]
                if isinstance(value, int) and not -bound <= value < bound:
                    return f"{name} is {value:,}, beyond the column's range ({-bound:,} to {bound - 1:,})"
                return None
            limits.append(too_large)
    return limits


def _ids_issued(reading: Connection, metadata: MetaData) -> dict[str, int]:
    """The largest id the source ever gave in each table, a deleted row's
    included, where it keeps one: SQLite's sqlite_sequence (its
    AUTOINCREMENT tables), PostgreSQL's sequences."""
    if reading.dialect.name == "sqlite":
        if not inspect(reading).has_table("sqlite_sequence"):
            return {}
        return dict(reading.execute(text("SELECT name, seq FROM sqlite_sequence")).all())
    issued = {}
    for table in metadata.sorted_tables:
        if table.autoincrement_column is not None:
            value = reading.scalar(text("SELECT pg_sequence_last_value(pg_get_serial_sequence(:table, :column))"),
                                   _sequence_of(reading, table))
            if value is not None:
                issued[table.name] = value
    return issued


def _move_counters_past(target: Connection, metadata: MetaData, issued: dict[str, int]) -> None:
    """The next id the target gives is past the largest copied and past
    every id the source gave: the rows came with their ids, which the
    target's counters did not see."""
    for table in metadata.sorted_tables:
        column = table.autoincrement_column
        if column is None:
            continue
        largest = max(target.scalar(select(func.max(column))) or 0, issued.get(table.name) or 0)
        if not largest:
            continue
        if target.dialect.name == "postgresql":
            target.execute(text("SELECT setval(pg_get_serial_sequence(:table, :column), :largest)"),
                           {**_sequence_of(target, table), "largest": largest})
        elif table.dialect_options["sqlite"].get("autoincrement"):
            # SQLite raised it to the largest id inserted; the source's deleted ones are past that.
            target.execute(text("UPDATE sqlite_sequence SET seq = max(seq, :largest) WHERE name = :name"),
                           {"largest": largest, "name": table.name})
            target.execute(text("INSERT INTO sqlite_sequence (name, seq) SELECT :name, :largest "
                                "WHERE NOT EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = :name)"),
                           {"largest": largest, "name": table.name})


def _sequence_of(connection: Connection, table: Table) -> dict:
    return {"table": connection.dialect.identifier_preparer.format_table(table),
            "column": table.autoincrement_column.name}


def _check_counts(target: Connection, metadata: MetaData, copied: Copied) -> None:
    """Each table of the target holds as many rows as were read."""
    for name, count in copied.tables:
        stored = target.scalar(select(func.count()).select_from(metadata.tables[name]))
        if stored != count:
            raise CopyError(f"{name}: {count:,} rows read, but the target holds {stored:,}")
