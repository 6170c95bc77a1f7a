"""``claudeops cooldowns``: ``list`` for operators, ``check-tool`` for the
Claude Code CLI's PreToolUse hook."""
from __future__ import annotations

import os
import sys

import click
from flask import current_app

from app.config import TIERS
from app.extensions import db
from app.redaction import include_withheld
from app.standard_output import echo
from app.timeutil import isoformat
from app.web.row_ids import MAX_ROW_ID
from plugins.cooldowns import gate, store
from plugins.cooldowns.commands import normalise_service
from plugins.cooldowns.limits import ACTIONS, current_limits, describe, normalise_action
from plugins.cooldowns.models import OUTCOMES


def _int_env(name: str, allowed: range):
    """A number the session manager set, or None when unset or one no
    session manager sets: a session id beyond the id column's range made
    the database refuse the check, and the hook deny the command."""
    try:
        value = int(os.environ[name])
    except (KeyError, ValueError):
        return None
    return value if value in allowed else None


@click.group()
def cooldowns():
    """Restart and redeployment limits per service."""


def _action(ctx, param, value):
    """An action by any of the names the API and the markers take (redeploy, deploy, …)."""
    if value is None:
        return None
    action = normalise_action(value)
    if action is None:
        raise click.BadParameter(f"{value!r} is not one of {', '.join(ACTIONS)} (or redeploy, deploy)")
    return action


@cooldowns.command("list")
@click.option("--service", help="Only this service.")
@click.option("--action", callback=_action, metavar="[restart|redeployment]",
              help="Only this action (redeploy and deploy mean redeployment).")
@click.option("--outcome", type=click.Choice(OUTCOMES, case_sensitive=False), help="Only this outcome.")
@click.option("--limit", default=20, show_default=True, type=click.IntRange(1, 10000),
              help="How many recent actions to show.")
def list_cooldowns(service, action, outcome, limit):
    """Each service's use of its limits, then the most recent actions."""
    limits = current_limits()
    click.echo("limits: " + ", ".join(describe(a, limits[a]) for a in ACTIONS))
    if service:   # one spelling per service, as the records have it
        service = normalise_service(service) or service.strip().lower()
    for row in store.status(service=service):
        parts = []
        for u in row.values():
            state = "AT LIMIT" if u.at_limit else "near" if u.near_limit else "ok"
            free = f", free at {isoformat(u.next_free_at)}" if u.next_free_at else ""
            parts.append(f"{u.action} {u.used}/{u.limit.count} {state}{free}")
        click.echo(f"{next(iter(row.values())).service:<20} " + "; ".join(parts))
    query = store.recent(service, action, outcome)
    rows = db.session.scalars(query.limit(limit)).all()
    if rows:
        click.echo("")
    for r in rows:
        session = f"#{r.session_id}" if r.session_id else "-"
        tier = f"t{r.tier}" if r.tier else "-"
        detail = r.message or r.command or ""
        echo(f"{isoformat(r.created_at)} {r.service:<20} {r.action:<12} {r.outcome:<8} {session:>6} {tier} "
             f"{detail}")
    total = store.count(query)
    click.echo(f"{len(rows)} of {total} action{'' if total == 1 else 's'}", err=True)


@cooldowns.command("check-tool")
def check_tool():
    """Read a Claude Code PreToolUse call (JSON) on stdin; print a deny
    decision if it would restart or redeploy a service beyond its limit.

    Run by the Claude Code CLI before every Bash call of a session (the
    session manager configures it with --settings). CLAUDEOPS_SESSION_ID and
    CLAUDEOPS_TIER name the session the allowed or denied action is recorded
    for. Exits 0 whenever it runs: a denial is the printed decision. If
    claudeops cannot start at all (status 78 for a setting, 1 otherwise),
    the session's hook (plugins/cooldowns/prefilter.py) denies a call with
    a restart's words and lets any other through.
    Not for trying a command out: one it allows is recorded, and counts
    against the service's limit as the agent's own would (`cooldowns list`
    shows what is left)."""
    answer = gate.Answer()   # a denial if the check has not answered in time
    include_withheld(current_app)   # the commands it records may hold the service's own secrets
    caller = gate.Caller(session_id=_int_env("CLAUDEOPS_SESSION_ID", range(1, MAX_ROW_ID + 1)),
                         tier=_int_env("CLAUDEOPS_TIER", range(min(TIERS), max(TIERS) + 1)))
    answer.give(gate.check(sys.stdin.read(), caller))
