"""Retention: what the service keeps is bounded in time, so a year of hourly
sessions does not fill the disk.

The host removes old sessions' activity logs and run logs
(app/sessions/log_pruning.py); each plugin prunes its own tables in
``claudeops_prune`` (events, cooldown records, which memories each session
was given), by settings of its own or the host's. Memories and their
history are never pruned: the operator curates them.
The scheduler runs this at start and daily; ``claudeops prune`` runs it by hand.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime

from app.batched_delete import stopping
from app.config import retention_days
from app.plugin_fault_log import log_fault
from app.plugins import results_by_plugin
from app.runtime import declared, setting
from app.sessions.log_pruning import prune_session_logs
from app.timeutil import utcnow

log = logging.getLogger(__name__)

# Rows per transaction: a batch of activity rows (up to 20,000 characters
# each) deletes in well under a second, far within other writers' busy timeout.
BATCH_SIZE = 5000
RUN_LOG_FILES = "run log files"


@dataclass
class PruneReport:
    dry_run: bool
    # What was removed (or would be), by what it is ("activity entries"), in order.
    counts: dict[str, int] = field(default_factory=dict)
    bytes_freed: int = 0
    # Sessions past retention whose run logs another host's results directory holds.
    left_to_their_host: int = 0

    @property
    def anything(self) -> bool:
        return any(self.counts.values())

    def lines(self) -> list[str]:
        return [f"{count} {what}" + (f" ({human_size(self.bytes_freed)})" if what == RUN_LOG_FILES else "")
                for what, count in self.counts.items()]


def prune(dry_run: bool = False, batch_size: int = BATCH_SIZE, now: datetime | None = None) -> PruneReport:
    """Remove (or, in a dry run, count) everything past its retention."""
    now = now or utcnow()
    report = PruneReport(dry_run)
    logs = prune_session_logs(now, dry_run, batch_size)
    if logs is not None:   # None: session logs are kept forever
        report.counts.update({"sessions' logs": logs.sessions, "activity entries": logs.activity_entries,
                              RUN_LOG_FILES: logs.files})
        report.bytes_freed = logs.bytes
        report.left_to_their_host = logs.left_to_their_host
    if stopping():   # the service is shutting down: the plugins prune next time
        return report
    for plugin, counts in results_by_plugin("claudeops_prune", commit_each=True, now=now, dry_run=dry_run,
                                            batch_size=batch_size):
        if not isinstance(counts, dict) or not all(isinstance(v, int) for v in counts.values()):
            log_fault(log, plugin, "claudeops_prune", "wrong type",
                      "plugin %s returned %r from claudeops_prune, not a dict of counts; left out", plugin, counts,
                      level=logging.ERROR)
            continue
        for what, count in counts.items():
            report.counts[str(what)] = report.counts.get(str(what), 0) + count
    return report


def periods_in_force() -> list[tuple[str, int]]:
    """Every retention setting (the host's and plugins': those parsed by
    ``retention_days``) and its value now, runtime changes included."""
    return [(spec.name, setting(spec.name)) for spec in declared() if spec.parse is retention_days]


def human_size(size: float) -> str:
    if size < 1024:
        return f"{int(size)} bytes"
    for unit in ("KB", "MB", "GB"):
        size /= 1024
        if size < 1024 or unit == "GB":
            break
    return f"{size:.1f} {unit}"
