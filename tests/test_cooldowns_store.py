"""Limits, the sliding window (with injected times) and the prompt section."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from app.extensions import db
from app.plugin_types import PromptSection, RunInfo
from plugins import cooldowns
from plugins.cooldowns import store
from plugins.cooldowns.limits import Limit, format_window, parse_limit
from plugins.cooldowns.prompt import cooldown_prompt
from tests.conftest import make_app

T0 = datetime(2026, 11, 22, 8, 0, tzinfo=timezone.utc)
H = timedelta(hours=1)


def restart(service: str, at: datetime, outcome: str = "pending"):
    row = store.record_attempt("restart", service, outcome, f"docker restart {service}", None, 2, now=at)
    db.session.commit()
    return row


@pytest.mark.parametrize("raw, count, window", [
    ("2/4h", 2, timedelta(hours=4)), ("1/24h", 1, timedelta(hours=24)), (" 3 / 90m ", 3, timedelta(minutes=90)),
    ("0/1d", 0, timedelta(days=1)), ("10/30s", 10, timedelta(seconds=30)),
    ("2147483647/1h", 2147483647, timedelta(hours=1)),
])
def test_parse_limit(raw, count, window):
    assert parse_limit(raw) == Limit(count, window)


@pytest.mark.parametrize("raw, message", [
    ("2", "must be <count>/<window>, like 2/4h"), ("two/4h", "must be <count>/<window>"),
    ("2/4", "must be <count>/<window>"), ("2/4w", "must be <count>/<window>"), ("-1/4h", "must be <count>/<window>"),
    ("2/0h", "longer than 0"), ("2/400d", "at most 366d"),
    # Too long for a timedelta: refused as too long, not overflowed.
    ("1/99999999999999999999d", "at most 366d"),
    ("99999999999999999999/1h", "the count must be at most 2147483647"),
    # Digits of another script are not a count.
    ("\u0663/4h", "must be <count>/<window>"), ("2/\u0664h", "must be <count>/<window>"),
    ("2/4h\x1c", "must be <count>/<window>"), ("2/4h\ufeff", "must be <count>/<window>"),
])
def test_parse_limit_errors_say_what_is_expected(raw, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        parse_limit(raw)


def test_a_bad_limit_stops_the_service_naming_the_variable(tmp_path, monkeypatch):
    from app.config import ConfigError
    monkeypatch.setenv("CLAUDEOPS_COOLDOWN_RESTART_LIMIT", "often")
    with pytest.raises(ConfigError, match="CLAUDEOPS_COOLDOWN_RESTART_LIMIT='often': must be <count>/<window>"):
        make_app(tmp_path)


def test_limits_come_from_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("CLAUDEOPS_COOLDOWN_REDEPLOYMENT_LIMIT", "3/90m")
    app = make_app(tmp_path)
    assert app.config["CLAUDEOPS_COOLDOWN_REDEPLOYMENT_LIMIT"] == Limit(3, timedelta(minutes=90))
    assert app.config["CLAUDEOPS_COOLDOWN_RESTART_LIMIT"] == Limit(2, timedelta(hours=4))
    assert str(app.config["CLAUDEOPS_COOLDOWN_REDEPLOYMENT_LIMIT"]) == "3/90m"


def test_format_window():
    assert [format_window(timedelta(seconds=s)) for s in (14400, 86400, 5400, 45, 172800, 90000)] == [
        "4h", "24h", "90m", "45s", "2d", "25h"]


def test_sliding_window_counts_and_frees(app):
    restart("jellyfin", T0)
    assert store.usage("jellyfin", "restart", T0 + H).used == 1
    restart("jellyfin", T0 + H)
    at_limit = store.usage("jellyfin", "restart", T0 + 2 * H)
    assert (at_limit.used, at_limit.remaining, at_limit.at_limit) == (2, 0, True)
    # The oldest leaves the window 4 h after it ran: then one more is allowed.
    assert at_limit.next_free_at == T0 + 4 * H
    assert store.usage("jellyfin", "restart", T0 + 4 * H - timedelta(seconds=1)).at_limit
    freed = store.usage("jellyfin", "restart", T0 + 4 * H)
    assert (freed.used, freed.at_limit, freed.next_free_at) == (1, False, None)
    assert store.usage("jellyfin", "restart", T0 + 5 * H).used == 0
    # Other services and the other action have counters of their own.
    assert store.usage("sonarr", "restart", T0 + 2 * H).used == 0
    assert store.usage("jellyfin", "redeployment", T0 + 2 * H).used == 0


def test_denied_attempts_are_kept_but_not_counted_failures_are_counted(app):
    restart("jellyfin", T0, "denied")
    restart("jellyfin", T0, "denied")
    assert store.usage("jellyfin", "restart", T0 + H).used == 0
    row = restart("jellyfin", T0 + H)
    store.record_outcome("restart", "jellyfin", "failure", "still down", None, 2, now=T0 + H)
    db.session.commit()
    assert row.outcome == "failure"
    assert store.usage("jellyfin", "restart", T0 + 2 * H).used == 1


def test_over_the_limit_frees_when_enough_have_aged_out(app):
    for hours in (0, 1, 2):   # three (one reported beyond the limit of two)
        restart("jellyfin", T0 + hours * H)
    usage = store.usage("jellyfin", "restart", T0 + 3 * H)
    assert usage.used == 3 and usage.next_free_at == T0 + 5 * H   # the second must leave too


def test_near_limit_and_constrained(app):
    restart("jellyfin", T0)
    store.record_attempt("redeployment", "sonarr", "pending", "helm upgrade sonarr ./c", None, 3, now=T0)
    db.session.commit()
    jellyfin = store.usage("jellyfin", "restart", T0 + H)
    assert jellyfin.near_limit and not jellyfin.at_limit   # one left
    assert not store.usage("radarr", "restart", T0 + H).near_limit   # unused: not near, however small the limit
    assert [(u.service, u.action, u.at_limit) for u in store.constrained(T0 + H)] == [
        ("sonarr", "redeployment", True), ("jellyfin", "restart", False)]


def test_a_zero_limit_forbids_the_action(tmp_path):
    app = make_app(tmp_path, CLAUDEOPS_COOLDOWN_RESTART_LIMIT=Limit(0, timedelta(hours=1)))
    with app.app_context():
        usage = store.usage("jellyfin", "restart")
        assert usage.at_limit and usage.next_free_at is None
        assert "not allowed at all" in store.explain([usage])


def test_marker_outcome_without_a_pending_row_adds_one(app):
    row, created = store.record_outcome("restart", "jellyfin", "success", "", None, 1, now=T0)
    again, created_again = store.record_outcome("restart", "jellyfin", "success", "twice", None, 1, now=T0)
    db.session.commit()
    assert created and created_again and row.id != again.id and row.source == "marker" and row.message is None
    assert store.usage("jellyfin", "restart", T0 + H).used == 2


# --- the prompt section --------------------------------------------------------

def test_prompt_states_the_rules_and_the_marker_when_nothing_is_near(app):
    text = cooldown_prompt(T0)
    assert text.startswith("## Cooldowns")
    assert "2 restarts per 4h and 1 redeployment per 24h" in text
    assert "[COOLDOWN:restart:<service>] success — " in text and "[COOLDOWN:redeployment:<service>] failure" in text
    assert text.endswith("No service is near its limit now.")


def test_prompt_lists_services_at_or_near_their_limit(app):
    restart("jellyfin", T0)
    restart("jellyfin", T0 + H)
    restart("sonarr", T0 + H)
    restart("radarr", T0 - 10 * H)       # long out of the window
    text = cooldown_prompt(T0 + 2 * H)
    assert "- jellyfin: 2 of 2 restarts in the last 4h — no more restarts until 2026-11-22T12:00:00Z" in text
    assert "- sonarr: 1 of 2 restarts in the last 4h — 1 restart left" in text
    assert "radarr" not in text and "No service is near" not in text


def test_prompt_contribution_is_a_section_at_position_300(app):
    run = RunInfo(session_id=1, tier=1, tier_name="observe", model="haiku", trigger="api", operator_prompt=None,
                  started_at=None)
    section = cooldowns.claudeops_prompt_context(run)
    assert isinstance(section, PromptSection) and (section.name, section.position) == ("cooldowns", 300)
    # A tier-1 session is told that its restarts are refused; a tier-3 one is not.
    assert "This session is of tier 1, which does not restart or redeploy services" in section.text
    assert "This session is of tier" not in cooldown_prompt(T0, tier=3)
    assert "This session is of tier" not in cooldown_prompt(T0)


def test_a_session_below_the_lowest_tier_is_told_to_escalate_only_where_a_chain_can_reach_it(app):
    """As the hook's denial says: with CLAUDEOPS_MAX_TIER below
    CLAUDEOPS_COOLDOWN_MIN_TIER no escalation reaches a tier that may restart."""
    assert "which does not restart or redeploy services: such a command is refused before it runs, whatever " \
           "the limits. If one is needed, escalate." in cooldown_prompt(T0, tier=1)
    app.config["CLAUDEOPS_MAX_TIER"] = 2
    text = cooldown_prompt(T0, tier=1)
    assert "escalate" not in text
    assert "If one is needed, report it with an event marker, so that the operator can decide." in text


def test_the_session_prompt_carries_the_cooldowns_section(app, fake_cli, run_session_now):
    from tests import streamlines as sl
    restart("jellyfin", datetime.now(timezone.utc) - H)
    restart("jellyfin", datetime.now(timezone.utc) - H / 2)
    fake_cli(sl.steps(sl.init(), sl.result()))
    prompt = run_session_now().system_prompt
    assert "## Cooldowns" in prompt and "- jellyfin: 2 of 2 restarts in the last 4h — no more restarts until" in prompt
    assert prompt.index("## Reporting events") < prompt.index("## Cooldowns")
