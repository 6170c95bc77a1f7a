"""Reads whose cost does not grow with the tables: counts that stop at a cap,
distinct values by index, the memory context read in order and cut short,
decay that reads only the memories due, and the indexes that make them so."""
from __future__ import annotations

from datetime import timedelta

import pytest

import flask_migrate
from sqlalchemy import select, text

from app import listing
from app.extensions import db
from app.listing import Total, count_up_to, distinct_values
from plugins.events.models import Event
from plugins.memory import store
from plugins.memory.context import SHORTEST_LINE, build_memory_context
from plugins.memory.models import Memory, next_decay_due
from app.timeutil import utcnow
from tests.memory_helpers import add_memory, new_run


def add_events(*services):
    for service in services:
        db.session.add(Event(level="info", service=service, message="up", created_at=utcnow()))
    db.session.commit()


def test_counts_stop_at_the_cap(app):
    add_events("a", "b", "c", "d", "e")
    assert count_up_to(select(Event), cap=10) == Total(5, True)
    assert count_up_to(select(Event), cap=5) == Total(5, True)
    assert count_up_to(select(Event), cap=3) == Total(3, False)
    assert count_up_to(select(Event).where(Event.service == "b"), cap=3) == Total(1, True)
    assert str(Total(10000, False)) == "more than 10,000" and str(Total(1234, True)) == "1,234"


def test_distinct_values_in_order_without_nulls(app):
    add_events("web", None, "db", "web", "cache", None, "db")
    assert distinct_values(Event.service) == ["cache", "db", "web"]
    db.session.execute(text("DELETE FROM events"))
    assert distinct_values(Event.service) == []


def test_lists_past_the_cap_say_so(app, client, monkeypatch):
    monkeypatch.setattr(listing, "COUNT_CAP", 3)
    add_events("a", "b", "c", "d")
    for n in range(4):
        add_memory(f"Observation number {n}", service="web")
    body = client.get("/api/v1/events").get_json()
    assert (body["total"], body["total_exact"], len(body["events"])) == (3, False, 4)
    body = client.get("/api/v1/memories?service=web").get_json()
    assert (body["total"], body["total_exact"], len(body["memories"])) == (3, False, 4)
    assert client.get("/api/v1/events?service=a").get_json()["total_exact"] is True
    page = client.get("/memories").get_data(as_text=True)
    assert "more than 3 memories" in page


def test_the_older_button_follows_the_rows_not_the_count(app, client, monkeypatch):
    from plugins.memory import views
    monkeypatch.setattr(views, "PAGE_SIZE", 2)
    for n in range(3):
        add_memory(f"Observation number {n}")
    first, second = (client.get(f"/memories?page={n}").get_data(as_text=True) for n in (1, 2))
    assert "older →" in first and "page 1 of 2" in first
    assert "older →" not in second and "← newer" in second


def test_the_context_header_says_more_than_past_the_cap(app, monkeypatch):
    monkeypatch.setattr(listing, "COUNT_CAP", 2)
    for n in range(3):
        add_memory(f"Memory {n}", confidence=0.9)
    context = build_memory_context(2000)
    assert context.text.startswith("## Operational Memory (3 of more than 2 memories, ~")
    assert (context.eligible, context.eligible_exact) == (2, False)


def test_packing_considers_as_many_memories_as_the_budget_could_ever_hold(app):
    budget = 20                                   # 80 characters: at most 2 of the shortest lines
    assert 80 // SHORTEST_LINE == 2
    add_memory("x" * 60, confidence=0.9, service="a")
    add_memory("y" * 60, confidence=0.8, service="a")
    add_memory("z", confidence=0.7, service="a")  # would fit, but two more trusted ones came first
    assert build_memory_context(budget).text == ""


def test_the_decay_schedule_follows_each_memory(app):
    memory = add_memory("Takes 60s to start", age_days=50)
    assert memory.decay_due_at == next_decay_due(memory.updated_at, 0)
    assert memory.decay_due_at < utcnow()
    store.decay(run=new_run())   # 50 days: two weeks past the grace period
    db.session.commit()
    assert (memory.decayed_weeks, memory.confidence) == (2, 0.5)
    assert memory.decay_due_at == memory.updated_at + timedelta(days=30 + 21) > utcnow()
    before = memory.confidence
    assert store.decay(run=new_run()) == 0 and memory.confidence == before
    store.update(memory, observation="Takes 90s to start")   # an edit restarts the clock
    db.session.commit()
    assert memory.decay_due_at == next_decay_due(memory.updated_at, 0) > utcnow() + timedelta(days=30)


def test_decay_and_listings_use_their_indexes(app):
    if db.engine.dialect.name != "sqlite":
        pytest.skip("reads SQLite's EXPLAIN QUERY PLAN; PostgreSQL's planner chooses by statistics (bench/ measures both)")
    def plan(statement):
        compiled = statement.compile(dialect=db.engine.dialect, compile_kwargs={"literal_binds": True})
        return " ".join(row[3] for row in db.session.execute(text(f"EXPLAIN QUERY PLAN {compiled}")))

    due = plan(select(Memory).where(Memory.active.is_(True), Memory.pinned.is_(False),
                                    Memory.decay_due_at <= utcnow()))
    assert "ix_memories_active_pinned_decay_due_at" in due
    from plugins.memory import queries
    for args, index in [((None, None, None, None), "ix_memories_updated_at_id"),
                        (("web", None, None, None), "ix_memories_service_updated_at_id"),
                        (("web", None, True, None), "ix_memories_service_active_updated_at_id"),
                        ((None, None, False, None), "ix_memories_active_updated_at_id"),
                        ((None, "timing", None, None), "ix_memories_category_updated_at_id")]:
        listed = plan(queries.newest_first(queries.memory_query(*args)).limit(100))
        assert index in listed and "TEMP B-TREE" not in listed, (args, listed)
    # The services in trouble, which go first in a session's memory section: the window only.
    from plugins.events.relevance import trouble_in_window
    window = plan(trouble_in_window(utcnow() - timedelta(hours=24)))
    assert "ix_events_created_at (created_at>?)" in window and "TEMP B-TREE" not in window, window
    # What a session has vouched for, read once per session: its chain's own history rows only.
    from plugins.memory.tally import vouched_query
    assert "ix_memory_history_session_id_action" in plan(vouched_query([7, 5]))
    # A memory marker's candidates: its service and category, not every active memory.
    from plugins.memory.candidates import MOST_TRUSTED, QUERIES
    for general in (True, False):
        matched = plan(MOST_TRUSTED[general].limit(50).params(category="timing", service="web"))
        assert "ix_memories_service_category_active_confidence (service=? AND category=? AND active=?)" \
            in matched, matched
        # With the rejected ones: their own range, not every memory of the service and category.
        compiled = QUERIES[general, True].compile(dialect=db.engine.dialect)
        values = compiled.construct_params({"category": "timing", "service": "web", "most": 50})
        both = " ".join(row[3] for row in db.session.connection().exec_driver_sql(
            f"EXPLAIN QUERY PLAN {compiled}", tuple(values[name] for name in compiled.positiontup)))
        assert "ix_memories_service_category_status_confidence (service=? AND category=? AND status=?)" \
            in both, both
    # Each session's context (approved, active, confident enough; most trusted
    # first) and its count, and the review inbox.
    from plugins.memory import context, review
    trusted = plan(select(Memory).where(*context._eligible())
                   .order_by(Memory.confidence.desc(), Memory.updated_at.desc(), Memory.id).limit(10))
    # The id only breaks ties ("RIGHT PART"): no sort of every eligible memory.
    assert "ix_memories_status_active_confidence_updated_at" in trusted, trusted
    assert "TEMP B-TREE FOR ORDER BY" not in trusted, trusted
    assert "ix_memories_status_active_confidence_updated_at" in plan(select(Memory.id).where(*context._eligible()))
    inbox = plan(review.proposed_query().limit(50))
    assert "ix_memories_status_updated_at_id" in inbox and "TEMP B-TREE" not in inbox, inbox


def test_the_migration_schedules_the_decay_of_existing_memories(app):
    flask_migrate.downgrade(revision="0005_cooldowns")
    db.session.execute(text(
        "INSERT INTO memories (service, category, observation, confidence, active, created_at, updated_at, tier, "
        "decayed_weeks) VALUES ('web', 'timing', 'slow', 0.7, true, '2026-01-01 10:00:00', '2026-01-01 10:00:00', 1, 2)"))
    db.session.commit()
    flask_migrate.upgrade(revision="heads")
    db.session.expire_all()
    memory = db.session.scalar(select(Memory))
    assert memory.decay_due_at == memory.updated_at + timedelta(days=30 + 21)


def test_the_context_reads_a_bounded_number_of_memories(app, monkeypatch):
    """However many are eligible, at most budget × 4 // SHORTEST_LINE are read."""
    from plugins.memory import context as context_module
    most = 2000 * 4 // SHORTEST_LINE
    now = utcnow()
    db.session.add_all(Memory(category="timing", service="web", observation=f"Observation {n} " + "w " * 20,
                              confidence=0.9, created_at=now, updated_at=now) for n in range(most + 50))
    db.session.commit()
    asked = []
    original = context_module.most_trusted_first
    monkeypatch.setattr(context_module, "most_trusted_first", lambda limit: (asked.append(limit), original(limit))[1])
    context = build_memory_context(2000)
    assert asked == [most] and 0 < len(context.included) < most
    assert context.eligible == most + 50
