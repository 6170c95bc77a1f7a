"""The host's JSON API under /api/v1: health and sessions."""
from __future__ import annotations

import json
import logging
from datetime import timedelta

from flask import Blueprint, current_app, request
from sqlalchemy import func, select, text

from app.auth import credentials_configured
from app.config import TIERS
from app.extensions import db
from app.models import COMPLETED, FAILED, TIMED_OUT, SchedulerState, Session
from app.plugin_fault_log import log_fault
from app.plugins import of_type, results_by_plugin
from app.timeutil import isoformat, utcnow
from app.sessions import control
from app.sessions.spending import cost_since
from app.web.apiutil import ApiError, json_body, page, pagination, unknown_fields

log = logging.getLogger(__name__)

api = Blueprint("api", __name__)


# What a health check asks about: the whole service (its scheduler too), or
# whether this host can serve, for a load balancer in front of several
# dashboard hosts, which a silent scheduler would otherwise take all out.
HEALTH_SCOPES = ("service", "host")


@api.get("/health")
def health():
    scope = request.args.get("scope") or "service"
    if scope not in HEALTH_SCOPES:
        raise ApiError(f"scope must be {' or '.join(HEALTH_SCOPES)}, not {scope[:40]!r}")
    scheduler, silent_since = "unknown", None
    try:
        db.session.execute(text("SELECT 1"))
        database = "ok"
        state = db.session.get(SchedulerState, 1)
        silent_since = control.scheduler_silent_since(state)
        scheduler = ("running" if control.scheduler_alive(state)
                     else f"silent since {isoformat(silent_since)}" if silent_since else "stopped")
    except Exception as exc:  # health must answer even when the database does not
        database = f"error: {type(exc).__name__}"
    # A scheduler gone silent runs nothing, and records nothing: sessions wait.
    ok = database == "ok" and (silent_since is None or scope == "host")
    answer = {"status": "ok" if ok else "degraded", "database": database, "scheduler": scheduler}
    # Anyone may ask, with a credential set: which plugins run (and so what
    # they may be open to) is told to those who log in (GET /stats).
    if not credentials_configured(current_app.config):
        answer["plugins"] = loaded_plugins()
    return answer, (200 if ok else 503)


def loaded_plugins() -> list[str]:
    return sorted(name for name, _ in current_app.extensions["claudeops.plugins"].list_name_plugin())


@api.get("/stats")
def stats():
    """Runs, escalations, success rate, cost and the next scheduled run, plus
    what plugins add (claudeops_stats)."""
    since = utcnow() - timedelta(hours=24)
    by_status = dict(db.session.execute(select(Session.status, func.count()).group_by(Session.status)).all())
    # How the agent does: of the sessions that ended by themselves. One stopped
    # (by the operator, by a shutdown, maybe before it began) or interrupted
    # (by a crash of the service) says nothing of it.
    ended = sum(by_status.get(status, 0) for status in (COMPLETED, FAILED, TIMED_OUT))
    state = db.session.get(SchedulerState, 1)
    alive = control.scheduler_alive(state)
    figures = {
        "runs": sum(by_status.values()),
        "runs_24h": db.session.scalar(select(func.count()).select_from(Session).where(Session.created_at >= since)),
        "runs_by_status": by_status,
        "escalations": db.session.scalar(select(func.count()).select_from(Session)
                                         .where(Session.trigger == "escalation")),
        "success_rate": round(by_status.get(COMPLETED, 0) / ended, 4) if ended else None,
        "cost_usd": round(db.session.scalar(select(func.coalesce(func.sum(Session.cost_usd), 0.0))), 6),
        "cost_usd_24h": round(cost_since(since), 6),
        "next_scheduled_run": isoformat(state.next_run_at) if alive and state.next_run_at else None,
        "scheduler": {"running": alive, "pid": state.pid if alive else None,
                      "heartbeat_at": isoformat(state.heartbeat_at) if state else None},
        "plugins": loaded_plugins(),
    }
    given_by = dict.fromkeys(figures, "the host")
    for plugin, result in results_by_plugin("claudeops_stats"):
        for contribution in of_type(plugin, "claudeops_stats", result, dict):
            for name, value in contribution.items():
                if name in given_by:   # a plugin's figure never takes another's place
                    log_fault(log, plugin, "claudeops_stats", f"figure {name}",
                              "plugin %s: its claudeops_stats figure %r is %s's already; ignored",
                              plugin, name, given_by[name])
                    continue
                figures[name], given_by[name] = value, f"plugin {plugin}"
    return figures


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


TRIGGER_FIELDS = {"prompt", "start_tier"}
# A client's name for one trigger: sent again (a retry after a lost answer),
# it queues no second session.
IDEMPOTENCY_KEY = "Idempotency-Key"


@api.post("/sessions/trigger")
def trigger():
    body = json_body()
    unknown = unknown_fields(body, TRIGGER_FIELDS)
    if unknown:
        # "tier" is the Run now form's name for start_tier: the list says which to send.
        raise ApiError(unknown)
    prompt = body.get("prompt")
    if prompt is not None and not isinstance(prompt, str):
        raise ApiError("prompt must be a string")
    tier = body.get("start_tier", 1)
    if isinstance(tier, bool) or not isinstance(tier, int) or tier not in TIERS:
        raise ApiError(f"start_tier must be 1, 2 or 3, not {json.dumps(tier)[:40]}")
    key = request.headers.get(IDEMPOTENCY_KEY)
    try:
        if key is None:
            session, new = control.enqueue(tier=tier, prompt=prompt, trigger="api"), True
        else:
            session, new = control.enqueue_once(key, IDEMPOTENCY_KEY, tier=tier, prompt=prompt, trigger="api")
    except control.KeyUsedBefore as exc:
        raise ApiError(f"{IDEMPOTENCY_KEY} {key!r} queued session #{exc.session_id} with another start_tier or "
                       "prompt; send a new key for a new session", exc.status) from None
    except control.ControlError as exc:
        raise ApiError(str(exc), exc.status) from None
    # A repeat answers with the session the first call queued, as it is now.
    return session.to_dict(), 201 if new else 200


@api.post("/sessions/<int:session_id>/stop")
def stop_session(session_id: int):
    try:
        session = control.request_stop(session_id)
    except control.ControlError as exc:
        raise ApiError(str(exc), exc.status) from None
    return session.to_dict(), 202
