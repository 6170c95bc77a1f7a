"""Rate-limit counts kept in the service's own database.

Flask-Limiter's memory storage counts in each gunicorn worker apart: with
four workers a client had four times the login attempts the limit names,
and a dashboard on several hosts (one PostgreSQL) as many again. Here every
worker and host counts the same rows, in the database they already share,
so the limit means what it says and no other server is needed.

Only the fixed window is kept (the strategy Flask-Limiter uses by default
and the one app/auth.py asks for): one row a key, its hits and its end.
A hit is a single upsert that starts a new window when the old one has
ended, so two workers hitting at once cannot both start one.

A database that refuses the write (the disk full, the state directory
read-only, locked past the busy timeout) must not turn a login into an
error: the counts then go on in the worker's memory, as they always did,
with a warning, until the database takes writes again. Meanwhile a limit
is tested against those counts too: such a database often still answers
reads, but its count is the one from before, which no hit raises.
"""
from __future__ import annotations

import hashlib
import logging
import time
from typing import Callable, Optional, TypeVar

from limits.storage import MemoryStorage, Storage
from sqlalchemy import case, delete, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import SQLAlchemyError

from app.extensions import db
from app.models import RateLimitWindow

log = logging.getLogger(__name__)

SCHEME = "claudeops-database"
STORAGE_URI = f"{SCHEME}://"
KEY_LENGTH = RateLimitWindow.__table__.c.key.type.length
_UPSERT = {"sqlite": sqlite.insert, "postgresql": postgresql.insert}
T = TypeVar("T")


class DatabaseStorage(Storage):
    """A ``limits`` storage on the app's database (the one of the request
    being limited: the engine is looked up on every call)."""

    STORAGE_SCHEME = [SCHEME]

    def __init__(self, uri: Optional[str] = None, wrap_exceptions: bool = False, **options) -> None:
        super().__init__(uri, wrap_exceptions=wrap_exceptions, **options)
        self.in_memory = MemoryStorage()
        self.failing = False

    @property
    def base_exceptions(self) -> type[Exception]:
        return SQLAlchemyError

    def incr(self, key: str, expiry: int, amount: int = 1) -> int:
        return self._either(lambda: self._incr(_stored(key), expiry, amount),
                            lambda: self.in_memory.incr(key, expiry, amount))

    def get(self, key: str) -> int:
        if self.failing:   # the hits go to memory: the database's count is the one from before
            return self.in_memory.get(key)
        return self._either(lambda: self._window(_stored(key))[0], lambda: self.in_memory.get(key))

    def get_expiry(self, key: str) -> float:
        if self.failing:
            return self.in_memory.get_expiry(key)
        return self._either(lambda: self._window(_stored(key))[1], lambda: self.in_memory.get_expiry(key))

    def check(self) -> bool:
        try:
            with db.engine.connect() as connection:
                connection.execute(select(1))
            return True
        except SQLAlchemyError:
            return False

    def reset(self) -> int:
        def reset_database() -> int:
            with db.engine.begin() as connection:
                return connection.execute(delete(RateLimitWindow)).rowcount
        self.in_memory.reset()
        return self._either(reset_database, lambda: 0)

    def clear(self, key: str) -> None:
        def clear_database() -> None:
            with db.engine.begin() as connection:
                connection.execute(delete(RateLimitWindow).where(RateLimitWindow.key == _stored(key)))
        self.in_memory.clear(key)
        self._either(clear_database, lambda: None)

    def _incr(self, key: str, expiry: int, amount: int) -> int:
        now = time.time()
        table = RateLimitWindow.__table__
        with db.engine.begin() as connection:
            insert = _UPSERT[connection.dialect.name](table).values(key=key, hits=amount, expires_at=now + expiry)
            # The key's own ended window is started anew in the same statement.
            ended = table.c.expires_at <= now
            upsert = insert.on_conflict_do_update(index_elements=[table.c.key], set_={
                "hits": case((ended, insert.excluded.hits), else_=table.c.hits + insert.excluded.hits),
                "expires_at": case((ended, insert.excluded.expires_at), else_=table.c.expires_at),
            }).returning(table.c.hits)
            hits = connection.execute(upsert).scalar_one()
            # Other clients' ended windows go with this hit: the table holds
            # only the clients counted lately, however many came before. After
            # the count, and only those no other hit holds (PostgreSQL; SQLite
            # has one writer): a hit that waited for one while holding its own
            # key could wait for a hit that waits for it.
            others_ended = (select(table.c.key).where(table.c.expires_at <= now, table.c.key != key)
                            .with_for_update(skip_locked=True))
            connection.execute(delete(table).where(table.c.key.in_(others_ended.scalar_subquery())))
            return hits

    def _window(self, key: str) -> tuple[int, float]:
        """The hits of the key's window and when it ends: none, and now, if it has ended."""
        now = time.time()
        with db.engine.connect() as connection:
            row = connection.execute(select(RateLimitWindow.hits, RateLimitWindow.expires_at).where(
                RateLimitWindow.key == key, RateLimitWindow.expires_at > now)).first()
        return (row.hits, row.expires_at) if row is not None else (0, now)

    def _either(self, in_database: Callable[[], T], in_memory: Callable[[], T]) -> T:
        try:
            result = in_database()
        except SQLAlchemyError as exc:
            if not self.failing:
                log.warning("login and bearer-token limits cannot be counted in the database (%s): "
                            "each worker counts them in its own memory until it can", exc)
                self.failing = True
            return in_memory()
        if self.failing:
            log.warning("login and bearer-token limits are counted in the database again")
            self.failing = False
        return result


def _stored(key: str) -> str:
    """The key as stored: Flask-Limiter's own (prefix, client, endpoint,
    limit) where it fits the column, else its SHA-256."""
    if len(key) <= KEY_LENGTH:
        return key
    return "sha256:" + hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()
