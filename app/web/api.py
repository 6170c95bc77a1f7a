"""The host's JSON API under /api/v1: health and sessions."""
from __future__ import annotations

from flask import Blueprint, current_app
from sqlalchemy import func, select, text

from app.extensions import db
from app.models import Session
from app.sessions import control
from app.web.apiutil import ApiError, json_body, page, pagination

api = Blueprint("api", __name__)


@api.get("/health")
def health():
    try:
        db.session.execute(text("SELECT 1"))
        database = "ok"
    except Exception as exc:  # health must answer even when the database does not
        database = f"error: {type(exc).__name__}"
    ok = database == "ok"
    return {"status": "ok" if ok else "degraded", "database": database,
            "plugins": sorted(name for name, _ in current_app.extensions["claudeops.plugins"].list_name_plugin())}, (200 if ok else 503)


@api.get("/sessions")
def list_sessions():
    limit, offset = pagination()
    total = db.session.scalar(select(func.count()).select_from(Session))
    rows = db.session.scalars(select(Session).order_by(Session.id.desc()).limit(limit).offset(offset)).all()
    return page([s.to_dict() for s in rows], total, limit, offset, key="sessions")


@api.get("/sessions/<int:session_id>")
def get_session(session_id: int):
    session = db.session.get(Session, session_id)
    if session is None:
        raise ApiError(f"session {session_id} not found", 404)
    return session.to_dict(detail=True)


@api.post("/sessions/trigger")
def trigger():
    body = json_body()
    unknown = sorted(set(body) - {"prompt", "start_tier"})
    if unknown:
        raise ApiError(f"unknown field(s): {', '.join(unknown)}")
    prompt = body.get("prompt")
    if prompt is not None and not isinstance(prompt, str):
        raise ApiError("prompt must be a string")
    tier = body.get("start_tier", 1)
    if isinstance(tier, bool) or not isinstance(tier, int):
        raise ApiError("start_tier must be an integer (1, 2 or 3)")
    try:
        session = control.enqueue(tier=tier, prompt=prompt, trigger="api")
    except control.ControlError as exc:
        raise ApiError(str(exc), exc.status) from None
    return session.to_dict(), 201


@api.post("/sessions/<int:session_id>/stop")
def stop_session(session_id: int):
    try:
        session = control.request_stop(session_id)
    except control.ControlError as exc:
        raise ApiError(str(exc), exc.status) from None
    return session.to_dict(), 202
