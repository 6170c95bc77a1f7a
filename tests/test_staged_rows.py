"""Rows staged for the commit (app/staged_rows.py): written in order when the
transaction commits, one statement for each kind of row; gone with a
transaction that ends without one; taken back to a mark; kept through a
rollback they predate."""
from __future__ import annotations

from datetime import datetime, timezone

from sqlalchemy import event, select

from app import staged_rows
from app.bulk_insert import BulkInsert
from app.extensions import db
from app.models import Session
from plugins.events.models import Event

MOMENT = datetime(2026, 11, 22, 12, 0, tzinfo=timezone.utc)
insert_events = BulkInsert(Event.__table__, ("level", "message", "created_at"))
insert_sessions = BulkInsert(Session.__table__, ("tier", "trigger", "status", "stop_requested", "is_error", "created_at"))


def events(*messages: str) -> list[dict]:
    return [{"level": "info", "message": message, "created_at": MOMENT} for message in messages]


def stored_messages() -> list[str]:
    return db.session.scalars(select(Event.message).order_by(Event.id)).all()


def test_staged_rows_are_written_at_the_commit_in_order_one_statement_for_each_kind(app):
    statements = []
    event.listen(db.engine, "before_cursor_execute", lambda *args: statements.append(args[2]))
    staged_rows.stage(insert_events, events("one", "two"))
    staged_rows.stage(insert_sessions, [{"tier": 2, "trigger": "api", "status": "queued", "stop_requested": False,
                                          "is_error": False, "created_at": MOMENT}])
    staged_rows.stage(insert_events, events("three"))
    assert stored_messages() == []   # not before the commit
    assert [row["message"] for row in staged_rows.staged_for(insert_events)] == ["one", "two", "three"]
    db.session.commit()
    assert stored_messages() == ["one", "two", "three"]
    assert db.session.scalar(select(Session.trigger).where(Session.tier == 2)) == "api"
    inserts = [s for s in statements if s.startswith("INSERT")]
    assert len(inserts) == 2
    assert staged_rows.mark() == 0


def test_a_transaction_ended_without_a_commit_takes_its_staged_rows_and_what_was_worked_out_of_them(app):
    staged_rows.derived("test.derived")
    db.session.info["test.derived"] = 3
    staged_rows.stage(insert_events, events("lost"))
    db.session.rollback()
    assert "test.derived" not in db.session.info
    db.session.commit()
    assert stored_messages() == []


def test_a_savepoints_end_keeps_them(app):
    staged_rows.stage(insert_events, events("before"))
    db.session.flush()
    savepoint = db.session.begin_nested()
    staged_rows.stage(insert_events, events("inside"))
    savepoint.rollback()
    db.session.commit()
    assert stored_messages() == ["before", "inside"]


def test_undo_takes_back_what_was_staged_since_the_mark(app):
    staged_rows.derived("test.derived")
    staged_rows.stage(insert_events, events("kept"))
    mark = staged_rows.mark()
    db.session.info["test.derived"] = 1
    staged_rows.stage(insert_events, events("taken back", "this too"))
    staged_rows.undo(mark)
    assert "test.derived" not in db.session.info
    staged_rows.undo(mark)   # nothing more to take back
    db.session.commit()
    assert stored_messages() == ["kept"]


def test_rows_staged_before_the_mark_outlive_a_rollback_of_the_whole_transaction(app):
    staged_rows.stage(insert_events, events("first", "second"))
    mark = staged_rows.mark()
    staged_rows.stage(insert_events, events("after the mark"))
    db.session.add(Event(level="info", message="written, then rolled back", created_at=MOMENT))
    db.session.flush()
    with staged_rows.kept_through_rollback(mark):
        db.session.rollback()
    staged_rows.stage(insert_events, events("next"))
    db.session.commit()
    assert stored_messages() == ["first", "second", "next"]


def test_rows_kept_through_a_rollback_still_go_with_the_next_one(app):
    staged_rows.stage(insert_events, events("kept, then rolled back"))
    with staged_rows.kept_through_rollback(staged_rows.mark()):
        db.session.rollback()
    db.session.rollback()   # nothing read or written in between
    db.session.commit()
    assert stored_messages() == []


def test_rows_written_before_the_commit_take_what_was_worked_out_of_them_if_it_never_comes(app):
    """Written early (a plugin's flush writes its batch before the commit),
    then lost with a transaction that ends without its commit (the server
    went away at the COMMIT): a count of them kept would count rows the
    database does not hold."""
    staged_rows.derived("test.derived")
    staged_rows.stage(insert_events, events("written, then lost"))
    staged_rows.write(db.session())
    db.session.info["test.derived"] = 1
    db.session.begin_nested().commit()   # a savepoint released: not yet for good
    assert db.session.info["test.derived"] == 1
    db.session.rollback()
    assert "test.derived" not in db.session.info and stored_messages() == []


def test_what_was_worked_out_of_rows_committed_is_kept(app):
    staged_rows.derived("test.derived")
    staged_rows.stage(insert_events, events("committed"))
    staged_rows.write(db.session())
    db.session.info["test.derived"] = 1
    db.session.commit()
    db.session.rollback()   # the next transaction's end takes nothing of the last one's
    assert db.session.info["test.derived"] == 1 and stored_messages() == ["committed"]


def test_events_are_numbered_in_the_order_they_are_committed(app, monkeypatch):
    """A client follows the events with ?after=<the last id it saw>: an
    event numbered lower but committed later would never reach it. The
    second writer waits for the first's commit before it numbers its rows
    (on SQLite, the database's one writer; on PostgreSQL, the write lock
    taken as staged rows are written)."""
    import threading
    from app.plugins import call_each
    from plugins.events import staging
    inserted, go = threading.Event(), threading.Event()
    original = staging._insert_events

    class PausingAfterTheInsert:
        def __call__(self, connection, rows):
            original(connection, rows)
            if rows[0]["message"] == "first":
                inserted.set()
                go.wait(timeout=30)

    monkeypatch.setattr(staging, "_insert_events", PausingAfterTheInsert())

    def send(message):
        with app.app_context():
            call_each("claudeops_notice", level="warning", message=message, service="nas", run=None)
            db.session.commit()
    first, second = threading.Thread(target=send, args=("first",)), threading.Thread(target=send, args=("second",))
    first.start()
    assert inserted.wait(timeout=30)
    second.start()
    second.join(timeout=1)
    seen_meanwhile = app.test_client().get("/api/v1/events?after=0").get_json()["events"]
    go.set()
    first.join(timeout=30)
    second.join(timeout=30)
    assert seen_meanwhile == []   # neither: the second waits for the first's commit
    events = app.test_client().get("/api/v1/events?after=0").get_json()["events"]
    assert [event["message"] for event in sorted(events, key=lambda event: event["id"])] == ["first", "second"]
