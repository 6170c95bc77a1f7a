"""The memory plugin's settings: the prompt budget, the per-session limits
and review of the agent's new memories.

All are runtime settings: an operator may change them on /config while the
service runs, and the next marker or edit reads the new value.
"""
from __future__ import annotations

from app.plugin_types import Setting, boolean, positive_int
from app.runtime import setting

BUDGET_SETTING = "CLAUDEOPS_MEMORY_BUDGET"
MAX_PER_SESSION = "CLAUDEOPS_MEMORY_MAX_PER_SESSION"
MAX_OBSERVATION = "CLAUDEOPS_MEMORY_MAX_OBSERVATION_CHARS"
REVIEW = "CLAUDEOPS_MEMORY_REVIEW"


WHOLE_NUMBER_FROM_1 = {"type": "integer", "minimum": 1}


def settings() -> list[Setting]:
    return [
        Setting(BUDGET_SETTING, "2000",
                "Most tokens (characters / 4) the memory section of a session's system prompt may take.",
                positive_int, runtime=True, schema=WHOLE_NUMBER_FROM_1),
        Setting(MAX_PER_SESSION, "20",
                "Most new memories one session may record (reinforcing one is not limited); markers beyond it "
                "are logged and noted in the activity log, not stored.", positive_int, runtime=True, schema=WHOLE_NUMBER_FROM_1),
        Setting(MAX_OBSERVATION, "2000",
                "Longest observation in characters: a longer marker is logged and noted in the activity log, "
                "not stored; an operator's is refused with an error.", positive_int, runtime=True, schema=WHOLE_NUMBER_FROM_1),
        Setting(REVIEW, "false",
                "true: new memories the agent records start as proposed and are given to no session until an "
                "operator approves them (or a second session confirms one); the operator's own are approved.",
                boolean, runtime=True, schema={"type": "boolean"}),
    ]


def max_observation_chars() -> int:
    return setting(MAX_OBSERVATION)


def max_new_per_session() -> int:
    return setting(MAX_PER_SESSION)


def review_on() -> bool:
    return setting(REVIEW)
