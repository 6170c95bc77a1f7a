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
