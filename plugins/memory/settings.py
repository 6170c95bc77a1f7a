"""The memory plugin's settings: the prompt budget, the per-session limits,
how far back trouble makes a service's memories come first, what each
reported outcome does to a memory's confidence, and review of the agent's
new memories.

All are runtime settings: an operator may change them on /config while the
service runs, and the next marker or edit reads the new value.
"""
from __future__ import annotations

import math

from app.plugin_types import POSITIVE_INT_SCHEMA, Setting, boolean, decimal_number, positive_int, whole_number
from app.runtime import setting

BUDGET_SETTING = "CLAUDEOPS_MEMORY_BUDGET"
MAX_PER_SESSION = "CLAUDEOPS_MEMORY_MAX_PER_SESSION"
MAX_OBSERVATION = "CLAUDEOPS_MEMORY_MAX_OBSERVATION_CHARS"
RELEVANT_HOURS = "CLAUDEOPS_MEMORY_RELEVANT_HOURS"
REVIEW = "CLAUDEOPS_MEMORY_REVIEW"

# An outcome level and the setting holding its change to confidence, with its default.
OUTCOME_DELTAS = {"worked": ("CLAUDEOPS_MEMORY_OUTCOME_WORKED", "0.1"),
                  "partial": ("CLAUDEOPS_MEMORY_OUTCOME_PARTIAL", "0.05"),
                  "failed": ("CLAUDEOPS_MEMORY_OUTCOME_FAILED", "-0.2"),
                  "unknown": ("CLAUDEOPS_MEMORY_OUTCOME_UNKNOWN", "0")}
OUTCOME_MEANING = {"worked": "it held and helped", "partial": "it helped, but not all of it held",
                   "failed": "it was wrong or misled", "unknown": "it was used and the result cannot be told"}

MAX_RELEVANT_HOURS = 24 * 366
# The system prompt is one command-line argument of at most 128 KiB: a
# memory section of more tokens (4 characters each) would leave no room for
# the rest, and every session would fail until the budget was lowered.
MAX_BUDGET = 24_000


def budget(raw: str) -> int:
    value = positive_int(raw)
    if value > MAX_BUDGET:
        raise ValueError(f"must be at most {MAX_BUDGET:,} (the system prompt is one command-line argument of at "
                         "most 128 KiB)")
    return value


def hours(raw: str) -> int:
    value = whole_number(raw.strip())
    if not 0 <= value <= MAX_RELEVANT_HOURS:
        raise ValueError(f"must be from 0 to {MAX_RELEVANT_HOURS} (366 days)")
    return value


def confidence_delta(raw: str) -> float:
    value = decimal_number(raw.strip())
    if not math.isfinite(value) or not -1 <= value <= 1:
        raise ValueError("must be a number from -1 to 1")
    return round(value, 3)


def settings() -> list[Setting]:
    return [
        Setting(BUDGET_SETTING, "2000",
                "Most tokens (characters / 4) the memory section of a session's system prompt may take; at "
                "most 24000.", budget, runtime=True, schema={"type": "integer", "minimum": 1, "maximum": MAX_BUDGET}),
        Setting(MAX_PER_SESSION, "20",
                "Most new memories one session may record (reinforcing one is not limited); markers beyond it "
                "are logged and noted in the activity log, not stored.", positive_int, runtime=True, schema=POSITIVE_INT_SCHEMA),
        Setting(MAX_OBSERVATION, "2000",
                "Longest observation in characters: a longer marker is logged and noted in the activity log, "
                "not stored; an operator's is refused with an error. Lowered, it holds for new text only: "
                "a longer memory kept from before can still be edited otherwise.", positive_int, runtime=True, schema=POSITIVE_INT_SCHEMA),
        Setting(RELEVANT_HOURS, "24",
                "Hours a warning or critical event keeps its service's memories first in a session's memory "
                "section; 0: recent events do not count (a request or escalation naming a service still does).",
                hours, runtime=True, schema={"type": "integer", "minimum": 0, "maximum": MAX_RELEVANT_HOURS}),
        *(Setting(name, default,
                  f"Change to a memory's confidence when a session reports `[OUTCOME:{level}:m<id>]` "
                  f"({OUTCOME_MEANING[level]}); -1 to 1, the result kept within 0 to 1.",
                  confidence_delta, runtime=True, schema={"type": "number", "minimum": -1, "maximum": 1})
          for level, (name, default) in OUTCOME_DELTAS.items()),
        Setting(REVIEW, "false",
                "true: new memories the agent records start as proposed and are given to no session until an "
                "operator approves them (or a second session confirms one); the operator's own are approved.",
                boolean, runtime=True, schema={"type": "boolean"}),
    ]


def max_observation_chars() -> int:
    return setting(MAX_OBSERVATION)


def max_new_per_session() -> int:
    return setting(MAX_PER_SESSION)


def relevant_hours() -> int:
    return setting(RELEVANT_HOURS)


def outcome_delta(level: str) -> float:
    return setting(OUTCOME_DELTAS[level][0])


def review_on() -> bool:
    return setting(REVIEW)
