"""The stream's bulk insert stores exactly what the ORM stores: the same
column values, read back the same and, on SQLite, the same text for a
datetime (so that ordering and comparisons by time see no difference), with
NUL characters replaced as in any other statement."""
from __future__ import annotations

from datetime import datetime, timezone

from sqlalchemy import event, func, select, text

from app.bulk_insert import NUMBERED_ROWS, BulkInsert
from app.extensions import db
from plugins.events.models import Event
from plugins.memory import search
from plugins.memory.models import Memory, next_decay_due

COLUMNS = ("session_id", "tier", "level", "service", "message", "created_at")
insert_events = BulkInsert(Event.__table__, COLUMNS)


def stored(ids: list[int]) -> list[tuple]:
    return [tuple(row) for row in db.session.execute(
        select(*(Event.__table__.c[name] for name in COLUMNS)).where(Event.id.in_(ids)).order_by(Event.id))]


def test_rows_are_stored_as_the_orm_stores_them(app):
    moments = [datetime(2026, 11, 22, 10, 0, 0, tzinfo=timezone.utc),        # no microseconds
               datetime(2026, 11, 22, 10, 0, 0, 123456, tzinfo=timezone.utc)]
    rows = [{"session_id": None, "tier": None, "level": "info", "service": None, "message": "plain",
             "created_at": moments[0]},
            {"session_id": None, "tier": 2, "level": "warning", "service": "web", "message": "é \u2028 quote ' \"",
             "created_at": moments[1]},
            {"session_id": None, "tier": 3, "level": "critical", "service": "db", "message": "NUL\x00here",
             "created_at": moments[1]}]
    orm = [Event(**row) for row in rows]
    db.session.add_all(orm)
    db.session.flush()
    before = db.session.scalar(select(func.max(Event.id)))
    insert_events(db.session.connection(), rows)
    db.session.commit()

    bulk_ids = list(db.session.scalars(select(Event.id).where(Event.id > before).order_by(Event.id)))
    assert len(bulk_ids) == 3
    assert stored(bulk_ids) == stored([event.id for event in orm])
    assert stored(bulk_ids)[2][4] == "NUL\ufffdhere"
    if db.engine.dialect.name == "sqlite":   # the text itself, as the ORM wrote it
        raw = "SELECT created_at FROM events WHERE id IN ({}) ORDER BY id"
        assert (db.session.execute(text(raw.format(",".join(map(str, bulk_ids))))).scalars().all()
                == db.session.execute(text(raw.format(",".join(str(e.id) for e in orm)))).scalars().all())


def test_nothing_to_insert_is_no_statement(app):
    statements = []
    event.listen(db.engine, "before_cursor_execute", lambda *args: statements.append(args[2]))
    insert_events(db.session.connection(), [])
    assert not [s for s in statements if s.startswith("INSERT")]


def test_text_columns_are_checked_for_nul_once_and_numbers_and_times_not_at_all(app, caplog):
    """The insert cleans its text columns itself and marks the statement, so
    the cursor event leaves it alone; a NUL in any text column is still
    replaced and logged."""
    assert insert_events._texts == {"level", "service", "message"}
    sent = []
    event.listen(db.engine, "before_cursor_execute", lambda *args: sent.append(args[3]))
    rows = [{"session_id": None, "tier": 1, "level": "info", "service": "we\x00b", "message": "fine",
             "created_at": datetime(2026, 11, 22, tzinfo=timezone.utc)},
            {"session_id": None, "tier": 1, "level": "info", "service": None, "message": "two\x00\x00",
             "created_at": datetime(2026, 11, 22, tzinfo=timezone.utc)}]
    insert_events(db.session.connection(), rows)
    db.session.commit()
    assert "replaced 1 NUL character(s)" in caplog.text and "replaced 2 NUL character(s)" in caplog.text
    inserted = [params for params in sent if isinstance(params, (list, tuple)) and len(params) == 2]
    assert inserted and "\x00" not in repr(inserted)
    assert set(db.session.scalars(select(Event.service).where(Event.tier == 1))) == {"we\ufffdb", None}
    assert db.session.scalar(select(Event.message).where(Event.service.is_(None), Event.tier == 1)) == "two\ufffd\ufffd"


# --- numbered: the new ids back, in the order of the rows ------------------

MEMORY_COLUMNS = ("service", "category", "observation", "confidence", "active", "created_at", "updated_at",
                  "session_id", "tier", "status", "pinned", "decayed_weeks", "decay_due_at")
insert_memories = BulkInsert(Memory.__table__, MEMORY_COLUMNS)


def memory_rows(count: int, text: str = "observation {}") -> list[dict]:
    moment = datetime(2026, 11, 22, 10, 0, 0, 123456, tzinfo=timezone.utc)
    return [{"service": f"svc{n % 7}", "category": "timing", "observation": text.format(n), "confidence": 0.7,
             "active": True, "created_at": moment, "updated_at": moment, "session_id": None, "tier": 1,
             "status": "approved", "pinned": False, "decayed_weeks": 0, "decay_due_at": next_decay_due(moment, 0)}
            for n in range(count)]


def test_numbered_gives_each_rows_id_in_the_order_of_the_rows(app):
    rows = memory_rows(NUMBERED_ROWS * 2 + 50)   # more than one statement's worth
    statements = []
    event.listen(db.engine, "before_cursor_execute", lambda *args: statements.append(args[2]))
    ids = insert_memories.numbered(db.session.connection(), rows)
    db.session.commit()

    assert len(ids) == len(set(ids)) == len(rows)
    assert ids == sorted(ids)   # ids follow the order of the rows
    stored = dict(db.session.execute(select(Memory.id, Memory.observation).where(Memory.id.in_(ids))).all())
    assert [stored[memory_id] for memory_id in ids] == [row["observation"] for row in rows]
    if db.engine.dialect.name == "sqlite":   # a statement for many rows, not one for each
        assert len([s for s in statements if s.startswith("INSERT INTO memories")]) == 3


def test_numbered_stores_every_column_as_the_orm_stores_it(app):
    [row] = memory_rows(1, "the ORM's twin {}")
    orm = Memory(**row)
    db.session.add(orm)
    db.session.flush()
    [memory_id] = insert_memories.numbered(db.session.connection(), [row])
    db.session.commit()
    columns = [Memory.__table__.c[name] for name in MEMORY_COLUMNS + ("contradicts_id",)]
    both = {found[0]: tuple(found[1:]) for found in db.session.execute(
        select(Memory.id, *columns).where(Memory.id.in_([orm.id, memory_id])))}
    assert both[memory_id] == both[orm.id]


def test_numbered_never_gives_a_deleted_memorys_id_again(app):
    last = Memory(**memory_rows(1, "deleted soon {}")[0])
    db.session.add(last)
    db.session.commit()
    deleted = last.id
    db.session.delete(last)
    db.session.commit()
    ids = insert_memories.numbered(db.session.connection(), memory_rows(3))
    db.session.commit()
    assert min(ids) > deleted
    assert db.session.scalar(select(func.count()).select_from(Memory).where(Memory.id == deleted)) == 0


def test_numbered_rows_are_found_by_search_and_nul_is_replaced(app):
    ids = insert_memories.numbered(db.session.connection(),
                                   memory_rows(2, "jellyfin transcoder {} stalls\x00after upgrades"))
    db.session.commit()
    found = db.session.scalars(search.apply(select(Memory.id), "jellyfin stalls")).all()
    assert sorted(found) == ids
    assert db.session.get(Memory, ids[0]).observation == "jellyfin transcoder 0 stalls\ufffdafter upgrades"


def test_numbered_nothing_is_no_statement(app):
    statements = []
    event.listen(db.engine, "before_cursor_execute", lambda *args: statements.append(args[2]))
    assert insert_memories.numbered(db.session.connection(), []) == []
    assert not [s for s in statements if s.startswith("INSERT")]
