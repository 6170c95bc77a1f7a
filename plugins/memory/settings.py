"""The memory plugin's settings: the prompt budget and the per-session limits.

All are runtime settings: an operator may change them on /config while the
service runs, and the next marker or edit reads the new value.
"""
from __future__ import annotations

from app.plugin_types import Setting
from app.runtime import setting

BUDGET_SETTING = "CLAUDEOPS_MEMORY_BUDGET"
MAX_PER_SESSION = "CLAUDEOPS_MEMORY_MAX_PER_SESSION"
MAX_OBSERVATION = "CLAUDEOPS_MEMORY_MAX_OBSERVATION_CHARS"


WHOLE_NUMBER_FROM_1 = {"type": "integer", "minimum": 1}


def _positive_int(raw: str) -> int:
    try:
        value = int(raw)
    except ValueError:
        raise ValueError("must be a whole number") from None
    if value <= 0:
        raise ValueError("must be greater than 0")
    return value


def settings() -> list[Setting]:
    return [
        Setting(BUDGET_SETTING, "2000",
                "Most tokens (characters / 4) the memory section of a session's system prompt may take.",
                _positive_int, runtime=True, schema=WHOLE_NUMBER_FROM_1),
        Setting(MAX_PER_SESSION, "20",
                "Most new memories one session may record (reinforcing one is not limited); markers beyond it "
                "are logged and noted in the activity log, not stored.", _positive_int, runtime=True, schema=WHOLE_NUMBER_FROM_1),
        Setting(MAX_OBSERVATION, "2000",
                "Longest observation in characters: a longer marker is logged and noted in the activity log, "
                "not stored; an operator's is refused with an error.", _positive_int, runtime=True, schema=WHOLE_NUMBER_FROM_1),
    ]


def max_observation_chars() -> int:
    return setting(MAX_OBSERVATION)


def max_new_per_session() -> int:
    return setting(MAX_PER_SESSION)
