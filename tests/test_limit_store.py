"""Rate-limit counts in the database (app/limit_store.py): the fixed window
as Flask-Limiter expects it of a storage, shared by whatever shares the
database, and kept in memory while the database refuses to count."""
from __future__ import annotations

import logging
import threading
import time

import pytest
from limits import parse
from limits.strategies import FixedWindowRateLimiter
from sqlalchemy import func, select, text

from app import limit_store
from app.extensions import db, limiter
from app.limit_store import DatabaseStorage
from app.models import RateLimitWindow
from tests.conftest import make_app
from tests.support.database import postgres_only

TEN_A_MINUTE = parse("10 per minute")


class Clock:
    def __init__(self, now: float = 1_800_000_000.0):
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch):
    clock = Clock()
    monkeypatch.setattr(limit_store.time, "time", clock)
    return clock


@pytest.fixture
def storage(app):
    with app.app_context():
        yield DatabaseStorage()


def windows() -> dict[str, tuple[int, float]]:
    return {row.key: (row.hits, row.expires_at)
            for row in db.session.execute(select(RateLimitWindow.key, RateLimitWindow.hits,
                                                 RateLimitWindow.expires_at))}


def test_hits_are_counted_in_a_window_that_ends_where_the_first_hit_put_it(storage, clock):
    assert storage.get("k") == 0
    assert [storage.incr("k", 60) for _ in range(3)] == [1, 2, 3]
    clock.now += 30
    assert storage.incr("k", 60, amount=2) == 5
    assert storage.get("k") == 5
    assert storage.get_expiry("k") == 1_800_000_060.0   # not moved by later hits
    assert windows() == {"k": (5, 1_800_000_060.0)}


def test_a_hit_after_the_window_ended_starts_a_new_one(storage, clock):
    storage.incr("k", 60)
    storage.incr("k", 60)
    clock.now += 60
    assert storage.get("k") == 0 and storage.get_expiry("k") == clock.now
    assert windows()["k"] == (2, clock.now)   # still there: the hit itself starts it again
    assert storage.incr("k", 60) == 1
    assert storage.get_expiry("k") == clock.now + 60


def test_ended_windows_are_deleted_by_the_next_hit_of_anyone(storage, clock):
    for key in ("a", "b", "c"):
        storage.incr(key, 60)
    clock.now += 61
    storage.incr("d", 60)
    assert set(windows()) == {"d"}
    clock.now += 61
    storage.incr("d", 60)
    assert windows() == {"d": (1, clock.now + 60)}


def test_keys_are_kept_apart_and_cleared_one_by_one_or_all(storage, clock):
    storage.incr("a", 60)
    storage.incr("b", 60)
    storage.incr("b", 60)
    storage.clear("a")
    assert storage.get("a") == 0 and storage.get("b") == 2
    assert storage.reset() == 1
    assert windows() == {}


def test_a_key_too_long_for_the_column_is_stored_by_its_hash(storage, clock):
    long_key = "LIMITER/" + "x" * 400
    other = "LIMITER/" + "x" * 399 + "y"
    assert storage.incr(long_key, 60) == 1
    assert storage.incr(other, 60) == 1   # not cut to the same prefix
    assert storage.get(long_key) == 1
    assert all(key.startswith("sha256:") and len(key) <= 255 for key in windows())
    assert len(windows()) == 2


def test_the_fixed_window_limiter_allows_exactly_the_limit(storage, clock):
    strategy = FixedWindowRateLimiter(storage)
    assert [strategy.hit(TEN_A_MINUTE, "bearer", "192.0.2.1") for _ in range(12)] == [True] * 10 + [False] * 2
    assert not strategy.test(TEN_A_MINUTE, "bearer", "192.0.2.1")
    assert strategy.test(TEN_A_MINUTE, "bearer", "192.0.2.2")
    stats = strategy.get_window_stats(TEN_A_MINUTE, "bearer", "192.0.2.1")
    assert stats.remaining == 0 and stats.reset_time == 1_800_000_060.0


def test_two_apps_on_one_database_count_the_same_hits(tmp_path, clock):
    """As two gunicorn workers (or two dashboard hosts on one PostgreSQL) do:
    each app reaches the database through its own engine."""
    first = make_app(tmp_path)
    url = first.config["CLAUDEOPS_DATABASE_URL"]
    second = make_app(tmp_path / "other", CLAUDEOPS_DATABASE_URL=url)
    storage = DatabaseStorage()
    hits = []
    for n in range(6):
        with (first if n % 2 else second).app_context():
            hits.append(storage.incr("k", 60))
    assert hits == [1, 2, 3, 4, 5, 6]
    for app in (first, second):
        with app.app_context():
            db.engine.dispose()


@postgres_only("row locks: SQLite has one writer at a time")
def test_hits_of_two_clients_at_once_never_wait_for_each_other_in_a_circle(app, storage, clock, caplog):
    """Each hit deletes the ended windows of others. Two hits at once, each
    deleting (so locking) the other's ended window before counting its own,
    waited for each other until PostgreSQL ended one as a deadlock, whose
    hit then went uncounted in the database. Here a third connection holds
    an ended window, so that the first hit is still at it when the second
    begins."""
    for key in ("a", "b", "c"):
        storage.incr(key, 60)
    clock.now += 61
    hits = {}

    def hit(key: str) -> None:
        with app.app_context():
            hits[key] = storage.incr(key, 60)

    with caplog.at_level(logging.WARNING, logger="app.limit_store"), db.engine.connect() as holder:
        holder.execute(select(RateLimitWindow.key).where(RateLimitWindow.key == "c").with_for_update())
        threads = [threading.Thread(target=hit, args=(key,)) for key in ("a", "b")]
        for thread in threads:
            thread.start()
            time.sleep(0.5)
        holder.rollback()
        for thread in threads:
            thread.join(30)
    assert hits == {"a": 1, "b": 1}
    assert [record.getMessage() for record in caplog.records] == []
    assert {key: hits for key, (hits, _) in windows().items() if key != "c"} == {"a": 1, "b": 1}


def test_a_database_that_refuses_to_count_leaves_the_counts_in_memory_until_it_takes_them_again(
        storage, clock, caplog):
    db.session.execute(text("ALTER TABLE rate_limit_windows RENAME TO rate_limit_windows_away"))
    db.session.commit()
    with caplog.at_level(logging.WARNING, logger="app.limit_store"):
        assert [storage.incr("k", 60) for _ in range(3)] == [1, 2, 3]
        assert storage.get("k") == 3
        assert storage.get_expiry("k") > 0
        assert storage.check()   # the database itself answers: only the count is refused
        db.session.execute(text("ALTER TABLE rate_limit_windows_away RENAME TO rate_limit_windows"))
        db.session.commit()
        assert storage.incr("k", 60) == 1   # counted in the database again, from its own count
    messages = [record.getMessage() for record in caplog.records]
    assert len([m for m in messages if "cannot be counted in the database" in m]) == 1   # once, not per hit
    assert len([m for m in messages if "in the database again" in m]) == 1
    assert windows() == {"k": (1, clock.now + 60)}


REFUSE_WRITES = {
    "sqlite": ["CREATE TRIGGER refuse_counts BEFORE INSERT ON rate_limit_windows "
               "BEGIN SELECT RAISE(ABORT, 'database or disk is full'); END"],
    "postgresql": ["CREATE FUNCTION refuse_counts() RETURNS trigger LANGUAGE plpgsql AS "
                   "$$ BEGIN RAISE EXCEPTION 'could not extend file: No space left on device'; END $$",
                   "CREATE TRIGGER refuse_counts BEFORE INSERT OR UPDATE ON rate_limit_windows "
                   "FOR EACH ROW EXECUTE FUNCTION refuse_counts()"],
}


def test_while_the_database_reads_but_refuses_to_count_the_counts_in_memory_are_the_ones_tested(
        storage, clock, caplog):
    """A full disk, a read-only file or server: the database still answers
    reads. A limit is then tested against the count the hits went to (the
    worker's memory), not against the database's count from before, which
    no hit raises: the address over the limit stays held back."""
    strategy = FixedWindowRateLimiter(storage)
    for statement in REFUSE_WRITES[db.engine.dialect.name]:
        db.session.execute(text(statement))
    db.session.commit()
    with caplog.at_level(logging.WARNING, logger="app.limit_store"):
        for _ in range(10):
            assert strategy.test(TEN_A_MINUTE, "bearer", "192.0.2.1")
            assert strategy.hit(TEN_A_MINUTE, "bearer", "192.0.2.1")
        assert not strategy.hit(TEN_A_MINUTE, "bearer", "192.0.2.1")
        assert not strategy.test(TEN_A_MINUTE, "bearer", "192.0.2.1")
        stats = strategy.get_window_stats(TEN_A_MINUTE, "bearer", "192.0.2.1")
        assert stats.remaining == 0 and stats.reset_time == clock.now + 60
    messages = [record.getMessage() for record in caplog.records]
    assert len([m for m in messages if "cannot be counted in the database" in m]) == 1   # once, not per hit
    assert not [m for m in messages if "in the database again" in m]
    assert windows() == {}


def test_the_login_limit_is_counted_in_the_table(tmp_path):
    app = make_app(tmp_path, CLAUDEOPS_PASSWORD="right password here")
    with app.app_context():
        assert isinstance(limiter.storage, DatabaseStorage)
        client = app.test_client()
        for n in range(3):
            assert client.post("/login", data={"password": f"guess {n}"}).status_code == 401
        [(key, (hits, _))] = windows().items()
        assert hits == 3 and "127.0.0.1" in key and "login" in key
        assert db.session.scalar(select(func.count()).select_from(RateLimitWindow)) == 1
