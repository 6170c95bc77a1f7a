"""The daily spending limit (CLAUDEOPS_DAILY_MAX_COST_USD): what the last
24 hours' sessions cost, against it, before each session starts."""
from __future__ import annotations

import json
import re
from datetime import timedelta

import pytest
from sqlalchemy import func, select, text

from app.extensions import db
from app.models import COMPLETED, Session
from app.runtime import SettingError, change
from app.sessions import control
from app.sessions.manager import run_session
from app.sessions.spending import DAY, day_of_costs_query, session_budget, total_cost_query
from app.timeutil import isoformat, utcnow
from app.hookspecs import hookimpl
from tests import streamlines as sl
from tests.conftest import make_app


def spent(hours_ago: float, cost: float | None, status: str = COMPLETED) -> Session:
    """A session that ended ``hours_ago``, which cost ``cost``; created and
    started a day before, as one queued while the scheduler was down."""
    ended_at = utcnow() - timedelta(hours=hours_ago)
    session = Session(tier=1, trigger="schedule", status=status, cost_usd=cost, created_at=ended_at - DAY,
                      started_at=ended_at - timedelta(minutes=5), ended_at=ended_at)
    db.session.add(session)
    db.session.commit()
    return session


def budget_given(argv_file) -> str | None:
    argv = json.loads(argv_file.read_text())["argv"]
    return argv[argv.index("--max-budget-usd") + 1] if "--max-budget-usd" in argv else None


def test_a_session_may_spend_what_the_last_24_hours_left_of_the_daily_limit(app, fake_cli, run_session_now):
    spent(30, 50.0)           # more than a day ago: no longer counted
    spent(23, 1.5)
    spent(1, 2.5)
    spent(2, None)            # stopped before its result line: nothing to count
    change({"CLAUDEOPS_DAILY_MAX_COST_USD": "5"})
    argv_file = fake_cli(sl.steps(sl.init(), sl.result(cost=0.25)))
    session = run_session_now()
    assert session.status == COMPLETED, session.status_reason
    assert budget_given(argv_file) == "1.00"
    # The session's own limit, where it is lower, holds; where higher, what is left does.
    change({"CLAUDEOPS_SESSION_MAX_COST_USD": "0.5"})
    run_session_now()
    assert budget_given(argv_file) == "0.50"
    change({"CLAUDEOPS_SESSION_MAX_COST_USD": "2"})
    run_session_now()
    assert budget_given(argv_file) == "0.50"   # 5 - 1.5 - 2.5 - 0.25 - 0.25
    change({"CLAUDEOPS_DAILY_MAX_COST_USD": "0"})
    run_session_now()
    assert budget_given(argv_file) == "2.00"   # no daily limit: the session's own


def test_a_session_is_not_run_once_the_daily_limit_is_spent_and_says_until_when(app, fake_cli, run_session_now):
    oldest = spent(23, 3.0)
    spent(20, 0.5)
    spent(1, 2.5)
    change({"CLAUDEOPS_DAILY_MAX_COST_USD": "5"})
    argv_file = fake_cli(sl.steps(sl.init(), sl.result(cost=0.25)))
    session = run_session_now()
    assert not argv_file.exists()   # the CLI never started
    assert session.status == "stopped" and session.cost_usd is None
    # Once the session of 23 hours ago leaves the day, 3.00 of 5.00 is spent: it may run again.
    runs_from = oldest.ended_at + timedelta(hours=24)
    assert session.status_reason == (f"not run: the sessions of the last 24 hours cost $6.00, and "
                                     f"CLAUDEOPS_DAILY_MAX_COST_USD is $5.00; the next can run from "
                                     f"{runs_from:%Y-%m-%d %H:%M:%S} UTC")
    assert session_budget(now=runs_from - timedelta(seconds=1)).runs_from == runs_from
    after = session_budget(now=runs_from)
    assert (after.runs_from, after.usd, after.set_by) == (None, 2.0, "CLAUDEOPS_DAILY_MAX_COST_USD")
    # Raised by the operator, it lets the next session run at once.
    change({"CLAUDEOPS_DAILY_MAX_COST_USD": "10"})
    assert run_session_now().status == COMPLETED and budget_given(argv_file) == "4.00"


def test_sessions_queued_long_before_they_ran_count_what_they_spent_when_they_ended(app, fake_cli):
    """A session spends as it runs, not as it is queued: sessions queued a
    day or more before they ran (the scheduler down meanwhile) share one
    limit, and what they spent holds the next ones back for 24 hours."""
    change({"CLAUDEOPS_DAILY_MAX_COST_USD": "5"})
    argv_file = fake_cli(sl.steps(sl.init(), sl.result(cost=3.0)))
    queued = [control.enqueue(tier=1, trigger="api") for _ in range(3)]
    for session in queued:
        session.created_at = utcnow() - timedelta(hours=25)
    db.session.commit()
    first, second, third = (run_session(control.claim(session.id)) for session in queued)
    assert (first.status, second.status, third.status) == (COMPLETED, COMPLETED, "stopped")
    assert budget_given(argv_file) == "2.00"   # the second's: what the first left
    assert "cost $6.00" in third.status_reason


def test_less_than_a_cent_left_is_spent(app, fake_cli, run_session_now):
    """Costs add up in floating point (0.1 + 0.2 is 0.30000000000000004):
    a limit met to the cent is met, not a fraction of a cent short or over."""
    spent(5, 0.1)
    spent(4, 0.2)
    change({"CLAUDEOPS_DAILY_MAX_COST_USD": "0.3"})
    assert session_budget().refusal is not None
    change({"CLAUDEOPS_DAILY_MAX_COST_USD": "0.31"})
    budget = session_budget()
    assert (budget.refusal, budget.usd) == (None, 0.01)
    argv_file = fake_cli(sl.steps(sl.init(), sl.result(cost=0.004)))
    run_session_now()
    assert budget_given(argv_file) == "0.01"


def test_a_session_the_cli_ended_at_the_daily_limit_names_it(app, fake_cli, run_session_now):
    spent(3, 4.2)
    change({"CLAUDEOPS_DAILY_MAX_COST_USD": "5", "CLAUDEOPS_SESSION_MAX_COST_USD": "1"})
    fake_cli(sl.steps(sl.init(), sl.tool_use("docker ps"), sl.over_budget(0.8, 0.8123)) + [{"exit": 1}])
    session = run_session_now()
    assert session.status == "failed"
    assert session.status_reason == ("the CLI reported an error: Reached maximum budget ($0.8) "
                                     "(CLAUDEOPS_DAILY_MAX_COST_USD; this session cost $0.81)")


def test_a_cost_too_large_to_believe_counts_nothing_and_one_stored_before_holds_sessions_back(
        app, client, fake_cli, run_session_now):
    """A result line's cost of over a million dollars (1e307, from a broken
    line) is unknown, as a negative one is: nothing is spent. One a database
    holds from before (1e308, too large to count in cents) counts as spent:
    the next session is still not run, saying when one can, rather than
    failing every session (and the Overview's cards) for a day."""
    change({"CLAUDEOPS_DAILY_MAX_COST_USD": "5"})
    fake_cli(sl.steps(sl.init(), sl.result(cost=1e307)))
    broken = run_session_now()
    assert (broken.status, broken.cost_usd) == (COMPLETED, None)
    huge = spent(2, 1e308)
    spent(3, 1e300)
    spent(1, 1.0)   # ended since: it is still in the day when the huge one has left it
    session = run_session_now()
    assert session.status == "stopped", session.status_reason
    assert session.status_reason.endswith(f"the next can run from {huge.ended_at + DAY:%Y-%m-%d %H:%M:%S} UTC")
    assert session_budget(now=huge.ended_at + DAY).usd == 4.0
    assert "Spent in 24 h" in client.get("/").get_data(as_text=True)


@pytest.mark.parametrize("raw, problem", [("-1", "must be from 0 (no limit) to 10000"),
                                          ("10000.5", "must be from 0"), ("inf", "must be a number of US dollars"),
                                          ("1_0", "must be a number of US dollars"),
                                          ("ten", "must be a number of US dollars"),
                                          ("0.004", "must be at least 0.01 (a cent)")])
def test_a_daily_limit_that_is_no_amount_is_refused(app, raw, problem):
    with pytest.raises(SettingError, match=re.escape(problem)):
        change({"CLAUDEOPS_DAILY_MAX_COST_USD": raw})


def test_the_overview_shows_what_the_day_cost_against_the_limit(app, client):
    spent(2, 1.234)

    def card() -> str:
        page = client.get("/").get_data(as_text=True)
        found = re.search(r'<article class="card tone-(\w+)">\s*<h2><a [^>]*>Spent in 24 h</a></h2>\s*'
                          r'<p class="card-value">([^<]*)</p>\s*<p class="card-detail">([^<]*)</p>', page)
        assert found, page
        return " | ".join(found.groups())
    assert card() == "neutral | $1.23 | no daily limit (CLAUDEOPS_DAILY_MAX_COST_USD)"
    change({"CLAUDEOPS_DAILY_MAX_COST_USD": "2"})
    assert card() == "good | $1.23 | of a daily limit of $2.00"
    newest = spent(1, 0.9)
    assert client.get("/api/v1/stats").get_json()["cost_usd_24h"] == 2.134
    newest.ended_at -= timedelta(hours=1, minutes=30)   # older than the other: it leaves the day first
    db.session.commit()
    assert card() == (f"bad | $2.13 | the daily limit of $2.00 is reached: no session runs until "
                      f"{isoformat(newest.ended_at + timedelta(hours=24))}")


def test_the_days_cost_is_read_from_an_index_not_from_every_session(app):
    """On SQLite, reading a session's cost from its row reads past its
    response and system prompt (up to some 300,000 characters): before
    every session, that would be every session of the last day."""
    if db.engine.dialect.name != "sqlite":
        pytest.skip("reads SQLite's EXPLAIN QUERY PLAN; PostgreSQL's planner chooses by statistics")
    for statement in (day_of_costs_query(utcnow()), total_cost_query(utcnow())):
        compiled = statement.compile(dialect=db.engine.dialect, compile_kwargs={"literal_binds": True})
        plan = " ".join(row[3] for row in db.session.execute(text(f"EXPLAIN QUERY PLAN {compiled}")))
        assert "COVERING INDEX ix_sessions_ended_at_cost_usd (ended_at>" in plan, plan
        assert "TEMP B-TREE" not in plan, plan


def test_a_session_not_run_is_no_session_to_the_plugins_nor_a_failure(tmp_path, fake_cli):
    """Refused before it starts, as an escalation above CLAUDEOPS_MAX_TIER
    is: the plugins hear of neither its start nor its end, it is not asked
    to escalate, and the success rate and the Overview's failures leave it
    out. One warning notice says why."""
    told, notices = [], []

    class Watcher:
        @hookimpl
        def claudeops_session_starting(self, run):
            told.append("starting")

        @hookimpl
        def claudeops_session_finished(self, run, result):
            told.append("finished")

        @hookimpl
        def claudeops_escalation(self, run, result):
            told.append("escalation")
            return "go on"

        @hookimpl
        def claudeops_notice(self, level, message, service, run):
            notices.append((level, message))

    app = make_app(tmp_path, plugins=[Watcher()])
    with app.app_context():
        spent(1, 5.0)
        change({"CLAUDEOPS_DAILY_MAX_COST_USD": "5"})
        argv_file = fake_cli(sl.steps(sl.init(), sl.result(cost=0.25)))
        session = run_session(control.claim(control.enqueue(tier=1, trigger="schedule").id))
        assert not argv_file.exists() and told == []
        assert (session.status, session.ended_at is not None) == ("stopped", True)
        assert session.log_path is None   # no run log to look for: it never ran
        assert notices == [("warning", f"Session #{session.id} (tier 1) was {session.status_reason}")]
        assert session.status_reason.startswith("not run: the sessions of the last 24 hours cost $5.00")
        assert db.session.scalar(select(func.count()).where(Session.parent_id == session.id)) == 0
        stats = app.test_client().get("/api/v1/stats").get_json()
        assert stats["success_rate"] == 1.0


def test_the_stats_and_the_daily_limit_count_a_session_ending_on_the_days_edge_alike(app):
    """A session that ended exactly 24 hours before ``now`` has left the day
    for the limit, and so for ``cost_usd_24h``; one a microsecond later is in both."""
    now = utcnow()
    edge = spent(24, 3.0)
    edge.ended_at = now - DAY
    inside = spent(24, 0.5)
    inside.ended_at = now - DAY + timedelta(microseconds=1)
    db.session.commit()
    limit_counts = [cost for _, cost in db.session.execute(day_of_costs_query(now))]
    stats_count = db.session.scalar(total_cost_query(now - DAY))
    assert limit_counts == [0.5]
    assert stats_count == 0.5
