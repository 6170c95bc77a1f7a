"""Dashboard logins, kept in the database as well as in the cookie.

The session cookie is signed, not stored: without a record here, logging
out would only clear the browser's copy, and a copy taken before (from a
shared machine, a proxy log, a backup of a browser profile) would go on
working for the rest of the login's hours. So a login puts a random token
in the cookie and its hash here, every dashboard request checks that the
hash is still here, and logging out deletes it.
"""
from __future__ import annotations

import hashlib
import secrets
from datetime import timedelta
from typing import Optional

from sqlalchemy import delete, func, select

from app.extensions import db
from app.models import DashboardLogin
from app.timeutil import utcnow


def _hash(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def begin(lifetime: timedelta) -> str:
    """A new login's token, recorded; logins past ``lifetime`` are removed
    on the way, so the table holds only the ones that may still be used."""
    now = utcnow()
    token = secrets.token_urlsafe(32)
    db.session.execute(delete(DashboardLogin).where(DashboardLogin.created_at < now - lifetime))
    db.session.add(DashboardLogin(token_hash=_hash(token), created_at=now))
    db.session.commit()
    return token


def is_current(token: object) -> bool:
    """Whether ``token`` (as read from a cookie: anything) names a login not ended."""
    if not isinstance(token, str) or not token:
        return False
    return db.session.scalar(select(DashboardLogin.token_hash).where(
        DashboardLogin.token_hash == _hash(token))) is not None


def end(token: object) -> None:
    """End the login ``token`` names, if it does."""
    if isinstance(token, str) and token:
        db.session.execute(delete(DashboardLogin).where(DashboardLogin.token_hash == _hash(token)))
        db.session.commit()


def end_all(lifetime: Optional[timedelta] = None) -> int:
    """End every login (a restored database brings back logins ended since
    its backup); returns how many there were that had not run out yet (of
    ``lifetime``; rows past it are only removed at the next login)."""
    live = DashboardLogin.created_at >= utcnow() - lifetime if lifetime is not None else True
    ended = db.session.scalar(select(func.count()).select_from(DashboardLogin).where(live))
    db.session.execute(delete(DashboardLogin))
    db.session.commit()
    return ended
