"""What a session may spend: CLAUDEOPS_SESSION_MAX_COST_USD, and what the
daily limit (CLAUDEOPS_DAILY_MAX_COST_USD) leaves of the last 24 hours.

Read once, as a session starts: the CLI is given the lower of the two as
``--max-budget-usd`` and ends the session once it is reached; a session
that would start with less than a cent left is not run. The day is a
rolling 24 hours of sessions by their end, as ``/api/v1/stats`` counts
``cost_usd_24h``: a session spends up to its end, and only then is its
cost known. By its creation, one queued for long (the scheduler down, or
busy) would count from long before it spent, or never, and every such
session would be given the whole limit again. A session's cost is what
its result line said, so one stopped or timed out before it counts nothing.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Optional

from sqlalchemy import Select, func, select

from app.extensions import db
from app.models import Session
from app.runtime import setting
from app.timeutil import utcnow

SESSION_LIMIT = "CLAUDEOPS_SESSION_MAX_COST_USD"
DAILY_LIMIT = "CLAUDEOPS_DAILY_MAX_COST_USD"
DAY = timedelta(hours=24)
CENT = 0.01


@dataclass(frozen=True)
class Budget:
    """What the next session may spend: ``usd`` (0: no limit) and the
    setting that set it. If the daily limit is reached, ``runs_from`` says
    when the next session may run (and ``usd`` is 0)."""
    usd: float = 0
    set_by: str = SESSION_LIMIT
    runs_from: Optional[datetime] = None
    spent: float = 0      # by the last 24 hours' sessions, if there is a daily limit
    daily: float = 0

    @property
    def refusal(self) -> Optional[str]:
        """Why a session is not run, or None."""
        if self.runs_from is None:
            return None
        return (f"not run: the sessions of the last 24 hours cost ${self.spent:.2f}, and {DAILY_LIMIT} is "
                f"${self.daily:.2f}; the next can run from {self.runs_from:%Y-%m-%d %H:%M:%S} UTC")


def total_cost_query(since: datetime) -> Select:
    """What the sessions that ended after ``since`` cost: after, as the daily
    limit counts the day (``day_of_costs_query``), so that a session ending
    on the edge is in both or in neither."""
    return select(func.coalesce(func.sum(Session.cost_usd), 0.0)).where(Session.ended_at > since)


def day_of_costs_query(now: datetime) -> Select:
    """The costs of the sessions that ended in the 24 hours before ``now``, oldest first."""
    return (select(Session.ended_at, Session.cost_usd)
            .where(Session.ended_at > now - DAY, Session.cost_usd > 0).order_by(Session.ended_at))


def cost_since(since: datetime) -> float:
    """What the sessions that ended after ``since`` cost, together."""
    return db.session.scalar(total_cost_query(since))


def session_budget(now: Optional[datetime] = None) -> Budget:
    """What a session starting ``now`` may spend."""
    per_session = setting(SESSION_LIMIT)
    daily = setting(DAILY_LIMIT)
    if not daily:
        return Budget(per_session)
    now = now or utcnow()
    costs = db.session.execute(day_of_costs_query(now)).all()
    spent = sum(cost for _, cost in costs)
    left = _left(daily, spent)
    if left < CENT:
        return Budget(runs_from=_when_under(costs, daily), spent=spent, daily=daily)
    if per_session and per_session <= left:
        return Budget(per_session, spent=spent, daily=daily)
    return Budget(left, DAILY_LIMIT, spent=spent, daily=daily)


def _left(daily: float, spent: float) -> float:
    """What ``spent`` leaves of ``daily``, down to the cent, as the CLI is
    given it: never a fraction more than is left. A result line's cost may
    be any finite number (1e307 from a broken one), and such costs add up
    to infinity: in cents, one spent past the limit is nothing left, not an
    overflow."""
    if spent >= daily:
        return 0.0
    return math.floor(round((daily - spent) * 100, 6)) / 100


def _when_under(costs: list, daily: float) -> datetime:
    """When enough of ``costs`` (oldest first) has left the 24 hours for a
    cent to be left of ``daily``: the end of the newest cost that, with
    those after it, leaves less. Added from the newest, not taken one by
    one from the whole: infinity less a cost is still infinity."""
    after = 0.0
    for ended_at, cost in reversed(costs):
        after += cost
        if _left(daily, after) < CENT:
            return ended_at + DAY
    return costs[-1][0] + DAY   # not reached: with none of them in the day, all of it is left
