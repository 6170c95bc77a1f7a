"""Which memories a new observation is compared with: the live memories of
its service and category (active, approved or proposed), the
``MAX_CANDIDATES`` most trusted of them; for a marker that may create a
memory, also as many rejected ones (one that says a rejected memory again
stores nothing: plugins/memory/store.py).

The bound keeps a marker's cost flat however many memories a service
gathers over the years: the read is a range of the
(service, category, active, confidence) index, and the matcher, which reads
every candidate's text, compares at most this many. A key rarely holds
more; when it does, an observation that restates a memory outside the most
trusted ones is recorded beside it, and the two are merged by an operator
(or the less trusted one decays).
"""
from __future__ import annotations

from typing import Iterable, Optional

from sqlalchemy import Integer, bindparam, literal_column, not_, or_, select, union_all

from app.extensions import db
from plugins.memory.matcher import Candidate
from plugins.memory.models import REJECTED, Memory

MAX_CANDIDATES = 50


def _most_trusted(general: bool, rejected: bool, category=None, service=None):
    """The query for one service and category; ``category`` and ``service``:
    other names for their bound values."""
    category = bindparam("category") if category is None else category
    service = bindparam("service") if service is None else service
    key = (Memory.category == category, Memory.service.is_(None) if general else Memory.service == service)
    state = (Memory.status == REJECTED,) if rejected else (Memory.active.is_(True), Memory.status != REJECTED)
    # Only ids and texts to match against; the one memory that matched is loaded whole.
    return (select(Memory.id, Memory.observation, Memory.confidence,
                   literal_column("1" if rejected else "0", Integer).label("rejected"))
            .where(*key, *state).order_by(Memory.confidence.desc(), Memory.id).limit(bindparam("most")))


def _query(general: bool, with_rejected: bool):
    live = _most_trusted(general, False)
    if not with_rejected:
        return live
    # Both in one statement: a marker that may create a memory needs both.
    both = union_all(*(select(part.subquery()) for part in (live, _most_trusted(general, True)))).subquery()
    return select(both).order_by(both.c.rejected, both.c.confidence.desc(), both.c.id)


# Built once: a stream can hold thousands of memory markers.
QUERIES = {(general, rejected): _query(general, rejected) for general in (True, False) for rejected in (True, False)}
MOST_TRUSTED = {general: QUERIES[general, False] for general in (True, False)}


class IdRuns:
    """A set of ids kept as runs of consecutive ones. An import's new
    memories are numbered one after another, so however many there are they
    make one run or a few, and a query that leaves them out carries two
    parameters a run, not one an id (a list that grows with the file makes
    the import quadratic, and passes the database's limit of parameters)."""

    def __init__(self) -> None:
        self.runs: list[list[int]] = []

    def add(self, memory_id: int) -> None:
        if self.runs and self.runs[-1][1] + 1 == memory_id:
            self.runs[-1][1] = memory_id
        else:
            self.runs.append([memory_id, memory_id])

    def __bool__(self) -> bool:
        return bool(self.runs)

    def left_out(self, column):
        """A condition true of every id not in the set."""
        return not_(or_(*(column.between(low, high) for low, high in self.runs)))


def candidates(category: str, service: Optional[str], exclude: Iterable[int] | IdRuns = (),
               rejected: bool = False, within: Optional[Iterable[int]] = None,
               most: Optional[int] = None) -> tuple[list[Candidate], list[Candidate]]:
    """The ``most`` (MAX_CANDIDATES) live candidates, and with ``rejected``
    as many rejected ones (else none), each most trusted first; none in
    ``exclude`` (ids, or runs of them), and with ``within`` only those ids."""
    query = QUERIES[service is None, rejected]
    if isinstance(exclude, IdRuns):
        if exclude:
            query = query.where(exclude.left_out(query.selected_columns.id))
    elif exclude := list(exclude):
        query = query.where(query.selected_columns.id.not_in(exclude))
    if within is not None:
        query = query.where(query.selected_columns.id.in_(list(within)))
    found: dict[bool, list[Candidate]] = {False: [], True: []}
    for memory_id, observation, _, is_rejected in db.session.execute(
            query, {"category": category, "service": service,
                    "most": MAX_CANDIDATES if most is None else most}):
        found[bool(is_rejected)].append(Candidate(memory_id, observation))
    return found[False], found[True]


# Two queries a pair, and SQLite takes at most 500 in one compound statement.
PAIRS_PER_STATEMENT = 100
Pair = tuple[str, Optional[str]]   # category, service (None: general)


def candidates_of_pairs(pairs: Iterable[Pair]) -> dict[Pair, tuple[list[Candidate], list[Candidate]]]:
    """``candidates(category, service, rejected=True)`` for many pairs at once:
    one statement (a UNION ALL of each pair's two index ranges) instead of
    one for every marker of a batch."""
    found = {pair: ([], []) for pair in pairs}
    # General pairs first: the statement's shape is then how many of each.
    ordered = sorted(found, key=lambda pair: (pair[1] is not None, pair))
    db.session.flush()   # the statement goes to the connection, past the session's autoflush
    connection = db.session.connection()
    for start in range(0, len(ordered), PAIRS_PER_STATEMENT):
        chunk = ordered[start:start + PAIRS_PER_STATEMENT]
        general = sum(1 for _, service in chunk if service is None)
        shape = (_padded(general), _padded(len(chunk) - general))
        # Padding: no memory has an empty category, so those ranges are empty.
        padded = (chunk[:general] + [("", None)] * (shape[0] - general) + chunk[general:]
                  + [("", "")] * (shape[1] - len(chunk) + general))
        values = {"most": MAX_CANDIDATES}
        for index, (category, service) in enumerate(padded):
            values[f"category_{index}"], values[f"service_{index}"] = category, service
        sql, order, constants = _pairs_query(*shape, connection.dialect)
        values.update(constants)
        parameters = tuple(values[name] for name in order) if order is not None else values
        for memory_id, observation, is_rejected, index in connection.exec_driver_sql(sql, parameters):
            found[padded[index]][1 if is_rejected else 0].append(Candidate(memory_id, observation))
    return found


def _padded(count: int) -> int:
    """``count`` rounded up to a power of two: a handful of statement shapes, each compiled once."""
    return 0 if count == 0 else min(PAIRS_PER_STATEMENT, 1 << (count - 1).bit_length())


_COMPILED: dict[tuple, tuple[str, Optional[tuple[str, ...]], dict]] = {}


def _pairs_query(general: int, specific: int, dialect) -> tuple[str, Optional[tuple[str, ...]], dict]:
    key = (general, specific, dialect.name, dialect.driver, dialect.paramstyle)
    if key not in _COMPILED:
        _COMPILED[key] = _compile_pairs_query(general, specific, dialect)
    return _COMPILED[key]


def _compile_pairs_query(general: int, specific: int, dialect) -> tuple[str, Optional[tuple[str, ...]], dict]:
    """The SQL for ``general`` general pairs, then ``specific`` others, its
    parameters' order (for a positional paramstyle) and the values of its
    constant ones, compiled once for each shape: a statement this size costs
    more to look up in SQLAlchemy's cache on every execution than the
    database takes to run it."""
    parts = []
    for index in range(general + specific):
        for rejected in (False, True):
            one = _most_trusted(index < general, rejected, bindparam(f"category_{index}"),
                                bindparam(f"service_{index}"))
            parts.append(select(one.add_columns(literal_column(str(index)).label("pair")).subquery()))
    both = union_all(*parts).subquery()
    compiled = select(both.c.id, both.c.observation, both.c.rejected, both.c.pair).order_by(
        both.c.pair, both.c.rejected, both.c.confidence.desc(), both.c.id).compile(dialect=dialect)
    constants = {name: value for name, value in compiled.params.items()
                 if name != "most" and not name.startswith(("category_", "service_"))}
    return compiled.string, (tuple(compiled.positiontup) if compiled.positional else None), constants
