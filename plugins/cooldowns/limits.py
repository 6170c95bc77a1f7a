"""The limits: how many restarts and redeployments of one service a sliding
window allows, declared as settings ("2/4h") and read by everyone the same way."""
from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import timedelta

from app.config import TIER_SCHEMA, tier
from app.plain_numbers import whole_number
from app.plugin_types import POSITIVE_INT_SCHEMA, RETENTION_DAYS_SCHEMA, Setting, positive_int, retention_days
from app.runtime import setting

RESTART = "restart"
REDEPLOYMENT = "redeployment"
ACTIONS = (RESTART, REDEPLOYMENT)

# The words the agent and the operator use for the two actions.
ACTION_ALIASES = {
    "restart": RESTART, "restarts": RESTART, "restarted": RESTART,
    "redeployment": REDEPLOYMENT, "redeployments": REDEPLOYMENT, "redeploy": REDEPLOYMENT,
    "redeployed": REDEPLOYMENT, "deployment": REDEPLOYMENT, "deploy": REDEPLOYMENT,
}

SETTING_NAMES = {RESTART: "CLAUDEOPS_COOLDOWN_RESTART_LIMIT",
                 REDEPLOYMENT: "CLAUDEOPS_COOLDOWN_REDEPLOYMENT_LIMIT"}
MAX_PER_SESSION = "CLAUDEOPS_COOLDOWN_MAX_PER_SESSION"
MIN_TIER = "CLAUDEOPS_COOLDOWN_MIN_TIER"
RETENTION = "CLAUDEOPS_COOLDOWN_RETENTION_DAYS"

UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
# ASCII digits and spaces: Python's \d and \s take any script's ("٣/4h"),
# and the schema's pattern is read as JSON Schema (ECMA) reads it too.
LIMIT_FORMAT = re.compile(r"^[ \t]*([0-9]+)[ \t]*/[ \t]*([0-9]+)[ \t]*([smhd])[ \t]*$")
MAX_COUNT = 2_147_483_647   # as every whole-number setting: beyond it, a count means nothing more
# The value in PUT /api/v1/config (the window's bounds are checked by parse_limit).
LIMIT_SCHEMA = {"type": "string", "pattern": LIMIT_FORMAT.pattern,
                "description": f"The count is 0 to {MAX_COUNT}; the window is 1s to 366d."}
MAX_WINDOW = timedelta(days=366)


@dataclass(frozen=True)
class Limit:
    """At most ``count`` actions in any ``window``; 0 forbids the action."""

    count: int
    window: timedelta

    def __str__(self) -> str:  # what `claudeops config` prints, and what parse() reads back
        return f"{self.count}/{format_window(self.window)}"

    def to_dict(self) -> dict:
        return {"count": self.count, "window": format_window(self.window),
                "window_seconds": int(self.window.total_seconds())}


def parse_limit(raw: str) -> Limit:
    match = LIMIT_FORMAT.match(raw)
    if match is None:
        raise ValueError("must be <count>/<window>, like 2/4h (window in s, m, h or d)")
    count, amount, unit = whole_number(match[1]), whole_number(match[2]), match[3]
    if count > MAX_COUNT:
        raise ValueError(f"the count must be at most {MAX_COUNT} (0 forbids the action)")
    seconds = amount * UNIT_SECONDS[unit]
    if seconds <= 0:
        raise ValueError("the window must be longer than 0")
    # Compared before a timedelta is made: a huge one would overflow it.
    if seconds > MAX_WINDOW.total_seconds():
        raise ValueError("the window must be at most 366d")
    return Limit(count, timedelta(seconds=seconds))


def format_window(window: timedelta) -> str:
    """The largest unit that states the window exactly (4h, 90m, 2d), but
    hours up to a day: "24h" is how operators say it."""
    seconds = int(window.total_seconds())
    for unit in ("d", "h", "m"):
        if seconds % UNIT_SECONDS[unit] == 0 and not (unit == "d" and seconds <= UNIT_SECONDS["d"]):
            return f"{seconds // UNIT_SECONDS[unit]}{unit}"
    return f"{seconds}s"


def describe(action: str, limit: Limit) -> str:
    """'2 restarts per 4h', '1 redeployment per 24h', 'no restarts'."""
    if limit.count == 0:
        return f"no {action}s"
    return f"{limit.count} {action}{'s' if limit.count != 1 else ''} per {format_window(limit.window)}"


def normalise_action(raw: str) -> str | None:
    return ACTION_ALIASES.get(raw.strip().lower())


def settings() -> list[Setting]:
    # Runtime settings: an operator may lift or tighten a limit on /config
    # while the service runs. Everyone reads them through setting(), the hook
    # process included, so the change holds everywhere within a second.
    return [
        Setting(SETTING_NAMES[RESTART], "2/4h",
                "Restarts of one service allowed in a sliding window (`<count>/<window>`: a count up to "
                f"{MAX_COUNT}, a window of 1s to 366d in s, m, h or d; a count of 0, `0/1h`, forbids); "
                "a restart beyond it is denied before it runs.",
                parse_limit, runtime=True, schema=LIMIT_SCHEMA),
        Setting(SETTING_NAMES[REDEPLOYMENT], "1/24h",
                "Redeployments of one service allowed in a sliding window (`<count>/<window>`); "
                "one beyond it is denied before it runs.", parse_limit, runtime=True, schema=LIMIT_SCHEMA),
        # Tiers 1 and 2 are told to change nothing; the tools they are allowed
        # (Bash) could, and of what they could change, this is what the hook
        # can recognise.
        Setting(MIN_TIER, "3",
                "Lowest tier whose sessions may restart or redeploy a service: below it, a recognised restart or "
                "redeployment is denied before it runs, and the agent told to escalate (1 lets every tier).",
                tier, runtime=True, schema=TIER_SCHEMA),
        Setting(MAX_PER_SESSION, "20",
                "Most cooldown records one session may add; a marker or a denial beyond it is logged, not stored "
                "(a restart the hook lets run is always recorded).", positive_int, runtime=True,
                schema=POSITIVE_INT_SCHEMA),
        Setting(RETENTION, "365",
                "Days a cooldown record is kept, and never less than the longest limit's window (a record the "
                "window still counts is kept); older ones are deleted daily. 0 keeps them forever.",
                retention_days, runtime=True, schema=RETENTION_DAYS_SCHEMA),
    ]


def max_per_session() -> int:
    return setting(MAX_PER_SESSION)


def min_tier() -> int:
    return setting(MIN_TIER)


def current_limits() -> dict[str, Limit]:
    return {action: setting(SETTING_NAMES[action]) for action in ACTIONS}
