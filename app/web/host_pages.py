"""The host's own pages, Overview cards and API documentation, declared
through the same hooks that plugins use."""
from __future__ import annotations

from datetime import timedelta

from sqlalchemy import func, select

from app.extensions import db
from app.hookspecs import hookimpl
from app.models import COMPLETED, FAILED, QUEUED, RUNNING, TIMED_OUT, SchedulerState, Session
from app.plugin_types import DashboardPage, OverviewCard
from app.runtime import setting
from app.sessions import control
from app.sessions.spending import DAILY_LIMIT, cost_since, session_budget
from app.timeutil import isoformat, utcnow


@hookimpl
def claudeops_dashboard_pages():
    from app.web.overview import overview
    from app.web.sessions import sessions
    return [DashboardPage("Overview", "overview.index", overview, position=0),
            DashboardPage("Sessions", "sessions.index", sessions, position=10)]


@hookimpl
def claudeops_api_blueprints():
    from app.web.config_page import config_api
    return [config_api]


@hookimpl
def claudeops_openapi_paths():
    from app.web.openapi_host import openapi_paths
    return openapi_paths()


@hookimpl
def claudeops_overview_cards():
    counts = dict(db.session.execute(select(Session.status, func.count()).group_by(Session.status)).all())
    since = utcnow() - timedelta(hours=24)
    recent = dict(db.session.execute(
        select(Session.status, func.count()).where(Session.created_at >= since).group_by(Session.status)).all())
    last = db.session.scalar(select(Session).where(Session.ended_at.is_not(None)).order_by(Session.id.desc()).limit(1))
    failed_recent = recent.get(FAILED, 0) + recent.get(TIMED_OUT, 0)
    active = counts.get(RUNNING, 0) + counts.get(QUEUED, 0)
    state = db.session.get(SchedulerState, 1)
    alive = control.scheduler_alive(state)
    silent_since = control.scheduler_silent_since(state)
    if silent_since and control.scheduler_ended(state):
        scheduler = OverviewCard("Scheduler", "ended", f"its process ({state.pid}) ended without saying that it "
                                 f"stopped (killed, or it crashed) after its last heartbeat at "
                                 f"{isoformat(silent_since)}; sessions wait, and one shown running is marked "
                                 "interrupted when a scheduler starts again", position=4, tone="bad")
    elif silent_since:
        scheduler = OverviewCard("Scheduler", "silent", f"no heartbeat since {isoformat(silent_since)}: it was "
                                 "killed, or cannot write to the database (a full disk, a read-only file, a lock); "
                                 "sessions wait, and one shown running may have ended meanwhile",
                                 position=4, tone="bad")
    elif not alive:
        scheduler = OverviewCard("Scheduler", "not running", "sessions wait in the queue until it runs",
                                 position=4, tone="bad")
    elif state.next_run_at:
        scheduler = OverviewCard("Next scheduled run", isoformat(state.next_run_at), "tier 1, observe",
                                 "config.index", position=4, tone="good")
    elif interval := setting("CLAUDEOPS_INTERVAL"):
        # The schedule's next run is armed only when its session has ended
        # (the interval counts from that end): until then none is published.
        scheduler = OverviewCard("Scheduler", "running", f"a scheduled session is under way; the next is due "
                                 f"{interval} s after it ends", "config.index", position=4, tone="good")
    else:
        scheduler = OverviewCard("Scheduler", "running", "no schedule: CLAUDEOPS_INTERVAL is 0",
                                 "config.index", position=4, tone="good")
    return [
        scheduler,
        OverviewCard("Sessions", str(sum(counts.values())), f"{sum(recent.values())} in the last 24 h",
                     "sessions.index", position=0),
        OverviewCard("Running / queued", f"{counts.get(RUNNING, 0)} / {counts.get(QUEUED, 0)}",
                     "a session is running" if counts.get(RUNNING) else "idle", "sessions.index",
                     position=1, tone="good" if active else "neutral"),
        OverviewCard("Last session", last.status if last else "none yet",
                     f"#{last.id}, tier {last.tier}" if last else "", "sessions.index", position=2,
                     tone=("good" if last and last.status == COMPLETED else "bad" if last else "neutral")),
        OverviewCard("Failed in 24 h", str(failed_recent), "failed or timed out", "sessions.index",
                     position=3, tone="bad" if failed_recent else "good"),
        _spending_card(since),
    ]


def _spending_card(since) -> OverviewCard:
    """What the sessions of the last 24 hours cost, against the daily limit."""
    spent = f"${cost_since(since):.2f}"
    budget = session_budget()
    if not budget.daily:
        return OverviewCard("Spent in 24 h", spent, f"no daily limit ({DAILY_LIMIT})", "config.index", position=5)
    if budget.runs_from:
        return OverviewCard("Spent in 24 h", spent, f"the daily limit of ${budget.daily:.2f} is reached: no session "
                            f"runs until {isoformat(budget.runs_from)}", "config.index", position=5, tone="bad")
    return OverviewCard("Spent in 24 h", spent, f"of a daily limit of ${budget.daily:.2f}", "config.index",
                        position=5, tone="good")
