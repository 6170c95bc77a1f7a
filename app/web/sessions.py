"""Session pages: the list (polling), a session's detail with its live
activity log, Run now and Stop."""
from __future__ import annotations

import secrets
from datetime import timedelta
from pathlib import Path
from typing import Optional

from flask import Blueprint, abort, current_app, flash, redirect, render_template, request, url_for
from sqlalchemy import func, select

from app.config import TIERS
from app.extensions import db
from app.models import CLI_TRIGGER, RUNNING, SchedulerState, Session, SessionActivity
from app.sessions import control, escalation
from app.sessions.results_dir import held_elsewhere
from app.timeutil import utcnow
from app.web.apiutil import ApiError, int_arg
from app.web.htmx import fragment_of, is_htmx, render_page
from app.web.ignored_args import id_arg
from app.web.paging import page_number
from app.web.refused_forms import keeps_typed_text
from app.web.row_ids import bounded_row_id

sessions = Blueprint("sessions", __name__)

PAGE_SIZE = 50
# A session's activity log is shown this many entries at a time, the latest
# first: a long session's whole log (thousands of tool calls and results, each
# up to 20,000 characters) would be a page of hundreds of megabytes. A poll
# sends at most as many new ones, and polls again until it has caught up.
ACTIVITY_PAGE = 500
# How long after a session's end its page still polls for the escalation it
# may have asked for (queued a moment after the end is recorded).
ESCALATION_WAIT = timedelta(seconds=3)


@sessions.get("/sessions")
def index():
    return _list_page()


def _list_page(draft: Optional[dict] = None):
    """The list; ``draft``: what a refused Run now form sent, to show in it again."""
    page = page_number(PAGE_SIZE)
    total = db.session.scalar(select(func.count()).select_from(Session))
    rows = db.session.scalars(select(Session).order_by(Session.id.desc())
                              .limit(PAGE_SIZE).offset((page - 1) * PAGE_SIZE)).all()
    return render_page("sessions/list.html", "sessions/_rows.html", sessions=rows, page=page,
                       total=total, page_size=PAGE_SIZE, tiers=TIERS, draft=draft or {},
                       max_prompt_chars=control.MAX_PROMPT_CHARS,
                       # Each drawing of the form queues at most one session, however often it is sent.
                       request_key=secrets.token_urlsafe(16))


@sessions.get("/sessions/<int:session_id>")
def detail(session_id: int):
    session = db.session.get(Session, session_id) or abort(404)
    # ?before=<id>: the entries before that one, a page back from the latest
    # (and not followed live: the poll appends to the latest).
    before = id_arg("before", lowest=1)   # before the first entry there is none
    before = None if before is None else bounded_row_id(before)
    activity = _activity_before(session_id, before)
    earlier = _count_before(session_id, activity[0].id) if activity else 0
    return render_template("sessions/detail.html", session=session, activity=activity,
                           last_id=activity[-1].id if activity else 0, before=before, earlier=earlier,
                           **_chain_context(session))


@sessions.get("/sessions/<int:session_id>/live")
@fragment_of("sessions.detail")
def live(session_id: int):
    """New activity since ``after`` plus the current header; polled while the session runs."""
    session = db.session.get(Session, session_id) or abort(404)
    after = bounded_row_id(_after_arg())
    activity = _activity_after(session_id, after)
    return render_template("sessions/_live.html", session=session, activity=activity,
                           last_id=activity[-1].id if activity else after,
                           more=len(activity) == ACTIVITY_PAGE, **_chain_context(session))


def _after_arg() -> int:
    """The poll's ``after``, read as the API reads a number: ASCII digits
    only. Read by ``int()``, "1_0" or another script's digits would poll from
    an id the page never showed, and a value that is no number from the
    start, appending the whole log again. A 400 leaves the page as it is."""
    try:
        return int_arg("after", default=0)
    except ApiError as exc:
        abort(400, exc.message)


def _chain_context(session: Session) -> dict:
    """The escalation chain the page shows (none for a session alone), its
    cost, and whether the page's live part should keep polling."""
    members = escalation.chain(session)
    return {"chain": members if len(members) > 1 else [], "chain_cost": sum(m.cost_usd or 0 for m in members),
            "following": _following(session, members),
            # Shown "running" by a scheduler that cannot record its end (a full disk, say): the page says so.
            **_scheduler_gone(session),
            # Written on the scheduler's host: with PostgreSQL, maybe not this one.
            "log_elsewhere": bool(session.log_path) and held_elsewhere(
                session.results_dir_id, Path(current_app.config["CLAUDEOPS_RESULTS_DIR"]))}


def _scheduler_gone(session: Session) -> dict:
    """For a session shown running: since when a scheduler that never said it
    stopped has not beaten (it cannot record the session's end: a full disk,
    say), and whether its process is known to have ended (killed)."""
    state = db.session.get(SchedulerState, 1) if session.status == RUNNING else None
    # A `claudeops run`'s chain: the scheduler's state says nothing of it.
    cli_run = session.status == RUNNING and escalation.root(session).trigger == CLI_TRIGGER
    return {"scheduler_silent_since": None if cli_run else control.scheduler_silent_since(state),
            "scheduler_ended": not cli_run and control.scheduler_ended(state),
            "cli_run_ended": cli_run and control.runner_ended(session) is not None}


def _following(session: Session, members: list[Session]) -> bool:
    """While the session runs, while its chain has a session yet to end, and
    for a moment after its end: the escalation is decided just after the end
    is recorded (the plugins' finishing hooks run between)."""
    if not all(m.finished for m in members):
        return True
    return session.ended_at is not None and utcnow() - session.ended_at < ESCALATION_WAIT


@sessions.post("/sessions/run")
def run_now():
    # The form's own values; anything else is passed on as it came, for
    # enqueue to refuse in the words it uses for any tier it does not know.
    tier = request.form.get("tier", "1")
    tier = {str(number): number for number in TIERS}.get(tier.strip(), tier)
    prompt, key = request.form.get("prompt"), request.form.get("request_key")
    try:
        if key is None:   # a script's POST, or a page from an earlier version
            session, new = control.enqueue(tier=tier, prompt=prompt, trigger="dashboard"), True
        else:
            session, new = control.enqueue_once(key, "the form's key", tier=tier, prompt=prompt, trigger="dashboard")
    except control.KeyUsedBefore as exc:
        return _run_now_refused(f"Not queued: this form queued session #{exc.session_id} already, with another "
                                "tier or request. To queue another, send the form shown here.")
    except control.ControlError as exc:
        return _run_now_refused(f"Not queued: {exc}", exc.field)
    if new:
        flash(_queued_message(session), "info")
    else:
        flash(f"This form was sent already: it queued session #{session.id}, shown here. To queue another, "
              "use the form on the Sessions page again.", "info")
    return redirect(url_for("sessions.detail", session_id=session.id))


def _run_now_refused(message: str, field: Optional[str] = None):
    """The list again, not a redirect to it: the form keeps the request
    typed. ``message`` goes below the field it is about (tier, prompt), which
    is marked so and takes the focus; one about the whole form, at the top."""
    if field is None:
        flash(message, "error")
    response = _list_page(draft={"tier": request.form.get("tier", ""), "prompt": request.form.get("prompt", ""),
                                 "problem": message if field else None, "field": field})
    response.status_code = 400
    return response


keeps_typed_text("sessions.run_now", _run_now_refused)


def _queued_message(session: Session) -> str:
    """One session runs at a time: a new one waits for those ahead of it,
    and for a scheduler to claim it."""
    if not control.scheduler_running():
        return (f"Session #{session.id} queued, but no scheduler is running: it starts when one does "
                "(claudeops serve or claudeops scheduler).")
    running, queued = control.ahead_of(session)
    ahead = []
    if running:
        ahead.append(f"the running session #{running}")
    if queued:
        ahead.append(f"{queued} queued session{'s' if queued > 1 else ''}")
    if not ahead:
        return f"Session #{session.id} queued; it starts within a few seconds."
    those = "that one has" if bool(running) + queued == 1 else "they have"
    return f"Session #{session.id} queued behind {' and '.join(ahead)}; it starts when {those} ended."


@sessions.post("/sessions/<int:session_id>/stop")
def stop(session_id: int):
    try:
        session = control.request_stop(session_id)
        flash(f"Stop requested for session #{session.id}.", "info")
    except control.ControlError as exc:
        if exc.status == 404:
            abort(404)
        flash(str(exc), "error")
    target = url_for("sessions.detail", session_id=session_id)
    if is_htmx():
        return "", 204, {"HX-Redirect": target}
    return redirect(target)


def _activity_after(session_id: int, after: int) -> list[SessionActivity]:
    return db.session.scalars(select(SessionActivity)
                              .where(SessionActivity.session_id == session_id, SessionActivity.id > after)
                              .order_by(SessionActivity.id).limit(ACTIVITY_PAGE)).all()


def _activity_before(session_id: int, before: int | None) -> list[SessionActivity]:
    """The last page of entries before ``before`` (or of all), oldest first."""
    query = select(SessionActivity).where(SessionActivity.session_id == session_id)
    if before is not None:
        query = query.where(SessionActivity.id < before)
    return db.session.scalars(query.order_by(SessionActivity.id.desc()).limit(ACTIVITY_PAGE)).all()[::-1]


def _count_before(session_id: int, before: int) -> int:
    return db.session.scalar(select(func.count()).select_from(SessionActivity).where(
        SessionActivity.session_id == session_id, SessionActivity.id < before))
