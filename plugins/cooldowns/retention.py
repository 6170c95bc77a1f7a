"""Retention of cooldown records (CLAUDEOPS_COOLDOWN_RETENTION_DAYS).

A record the sliding window still counts is never deleted, whatever the
retention says: the cutoff is at least the longest configured window back,
else a short retention would hand restarts back and let the agent past its
limit. (A window lengthened later cannot count records deleted before.)
"""
from __future__ import annotations

from datetime import datetime, timedelta

from app.batched_delete import prune_rows
from app.runtime import setting
from plugins.cooldowns.limits import RETENTION, current_limits
from plugins.cooldowns.models import CooldownAction


def prune(now: datetime, dry_run: bool, batch_size: int) -> dict[str, int] | None:
    days = setting(RETENTION)
    if not days:
        return None
    longest_window = max(limit.window for limit in current_limits().values())
    cutoff = now - max(timedelta(days=days), longest_window)
    old = [CooldownAction.created_at < cutoff]   # ix_cooldown_actions_created_at
    return {"cooldown records": prune_rows(CooldownAction, old, dry_run, batch_size)}
