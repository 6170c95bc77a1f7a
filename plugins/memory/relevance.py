"""Which services a session is about, so that their memories are packed
first in its memory section (plugins/memory/context.py), ahead of more
trusted memories of services it has no business with today.

Two sources, in this order:

1. The session's own words: the services named in the operator's request
   (an escalated session carries its chain's request too) and in the
   escalation reason. Both are ``RunInfo`` fields every plugin is given, and
   finding names in them needs only the names memories use, so the memory
   plugin does it itself.
2. What other plugins know, through ``claudeops_memory_relevant_services``:
   the events plugin answers with the services that had a warning or critical
   event in the last ``CLAUDEOPS_MEMORY_RELEVANT_HOURS``, and those the
   earlier tiers of an escalation reported trouble with. A hook rather than a
   query of the events table: plugins build only on public hooks (the host's
   rule), the events plugin may be absent, and a third-party plugin (an
   incident tracker, a monitoring bridge) can name services the same way.

A name counts when it is a whole word (letters, digits, ``_`` and ``-``, what
a service name is made of: "postgres" is not found in "postgres-replica"),
in any case; one with ``.`` or ``@`` (a host db.lan, a unit getty@tty1, as
events and cooldowns name them) also as its memories name it, db-lan. Every
answer is matched against the services memories name, read one index step
per service (``app.listing.distinct_values``): the cost grows with the
number of services, never with the number of memories.
"""
from __future__ import annotations

import logging
import re
from datetime import timedelta
from typing import Optional

from app.listing import distinct_values
from app.plugin_fault_log import log_fault
from app.plugin_types import RunInfo
from app.plugins import results_by_plugin
from app.runtime import setting
from app.sessions.marker_tags import installed_tags
from app.timeutil import utcnow
from plugins.memory.models import Memory, memory_spelling
from plugins.memory.settings import relevant_hours

log = logging.getLogger(__name__)

HOOK = "claudeops_memory_relevant_services"
# Services put first, at most: a session about more than this is about nothing in particular.
MAX_RELEVANT = 50
MAX_REASON_CHARS = 200
# Of a request or a reason, the part searched for names (the API takes longer requests).
MAX_TEXT_CHARS = 20_000
WORD = re.compile(r"[A-Za-z0-9_-]+")
# A name with characters a memory's service may not hold (db.lan, getty@tty1),
# whose memories are under its memory_spelling (db-lan, getty-tty1).
DOTTED = re.compile(r"[A-Za-z0-9_-]+(?:[.@][A-Za-z0-9_-]+)+")

NAMED_IN_REQUEST = "named in the operator's request"
NAMED_IN_ESCALATION = "named in the escalation reason"


def relevant_services(run: RunInfo) -> dict[str, str]:
    """Services memories name that this session is about, each with why,
    in order of precedence (the session's own words first)."""
    wanted: dict[str, str] = {}   # lower-case name → why; the first reason given stays
    for text, why in ((run.operator_prompt, NAMED_IN_REQUEST), (run.escalation_reason, NAMED_IN_ESCALATION)):
        text = (text or "")[:MAX_TEXT_CHARS]
        for word in WORD.findall(text):
            wanted.setdefault(word.lower(), why)
        for name in DOTTED.findall(text):
            _want(wanted, memory_spelling(name), why)
    since = utcnow() - timedelta(hours=relevant_hours())
    for plugin, answer in results_by_plugin(HOOK, run=run, since=since):
        if not isinstance(answer, dict):
            log_fault(log, plugin, HOOK, "wrong type",
                      "plugin %s returned %s from %s, not a dict of service to reason; ignored",
                      plugin, type(answer).__name__, HOOK)
            continue
        for name, why in answer.items():
            if isinstance(name, str):
                why = " ".join(str(why).split())[:MAX_REASON_CHARS] or "named by a plugin"
                wanted.setdefault(name.lower(), why)
                _want(wanted, memory_spelling(name), why)   # an event's getty@tty1: the memories' getty-tty1
    if not wanted:
        return {}
    found = [(service, wanted[service.lower()]) for service in distinct_values(Memory.service)
             if service.lower() in wanted]
    # Precedence follows the order the reasons were given in, not the alphabet.
    rank = {name: position for position, name in enumerate(wanted)}
    found.sort(key=lambda pair: rank[pair[0].lower()])
    return dict(found[:MAX_RELEVANT])


def _want(wanted: dict[str, str], name: Optional[str], why: str) -> None:
    if name is not None:
        wanted.setdefault(name, why)


def scheduled_run() -> RunInfo:
    """What the next scheduled session looks like to the hook, for previews:
    tier 1, no request, no escalation, starting now."""
    return RunInfo(session_id=0, tier=1, tier_name="observe", model=setting("CLAUDEOPS_TIER1_MODEL"),
                   trigger="schedule", operator_prompt=None, started_at=utcnow(), marker_tags=installed_tags())
