"""What a session is told about cooldowns: the rules, the marker, and which
services are at or near their limit right now (from the same rows the hook
counts, so the prompt and the enforcement never disagree)."""
from __future__ import annotations

from datetime import datetime
from typing import Optional

from app.runtime import setting
from app.timeutil import isoformat, utcnow
from plugins.cooldowns import store
from plugins.cooldowns.limits import ACTIONS, current_limits, describe, format_window, min_tier

RULES = """## Cooldowns

Restarts and redeployments are limited per service: {limits}, counted over a sliding window. \
A restart or redeployment beyond its limit is refused before it runs (the command fails with the reason); \
do not look for another way to do it: report the problem with an event marker so the operator can decide. \
Name the service literally in the command (`docker restart jellyfin`, not `docker restart $name` or a \
container id).

After each restart or redeployment, report how it went, on its own line, naming the service as the \
command did:

    [COOLDOWN:restart:<service>] success — <what you did and what you saw>
    [COOLDOWN:redeployment:<service>] failure — <what went wrong>
"""


BELOW_THE_TIER = """
This session is of tier {tier}, which does not restart or redeploy services: such a command is \
refused before it runs, whatever the limits. {then}
"""
# What the session is to do instead, as the hook's denial says it: escalate
# only where CLAUDEOPS_MAX_TIER lets a chain reach a tier that may restart.
ESCALATE = "If one is needed, escalate."
REPORT = "If one is needed, report it with an event marker, so that the operator can decide."


def cooldown_prompt(now: Optional[datetime] = None, tier: Optional[int] = None) -> str:
    """The section for a session of ``tier`` (None: of any)."""
    now = now or utcnow()
    limits = current_limits()
    text = RULES.format(limits=" and ".join(describe(action, limits[action]) for action in ACTIONS))
    lowest = min_tier()
    if tier is not None and tier < lowest:
        text += BELOW_THE_TIER.format(tier=tier, then=ESCALATE if setting("CLAUDEOPS_MAX_TIER") >= lowest else REPORT)
    constrained = store.constrained(now)
    if not constrained:
        return text + "\nNo service is near its limit now."
    lines = ["", "Services at or near their limit now:"]
    for u in constrained:
        window = format_window(u.limit.window)
        if u.at_limit:
            until = f"until {isoformat(u.next_free_at)}" if u.next_free_at else "for now"
            lines.append(f"- {u.service}: {u.used} of {u.limit.count} {u.action}s in the last {window} — "
                         f"no more {u.action}s {until}")
        else:
            lines.append(f"- {u.service}: {u.used} of {u.limit.count} {u.action}s in the last {window} — "
                         f"{u.remaining} {u.action} left")
    return text + "\n".join(lines)
