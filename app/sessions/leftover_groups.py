"""The process groups of sessions whose runner died, still ending.

A runner killed outright (SIGKILL, the OOM killer) leaves its session's
group to the guard that leads it (``groupguard.py``), which gives the CLI
``KILL_GRACE_SECONDS`` after SIGTERM before it kills the group. A service
started again at once would otherwise run its next session beside that CLI,
which may still be acting on the infrastructure: one session at a time is a
promise of the service, across a crash too.

So each guard is started with the fingerprint of the database its runner
records the session in (``--owner=…``, seen in ``/proc/PID/cmdline``), and
the process that takes the database over waits for the guards of that
fingerprint to end before it runs anything. Where there is no ``/proc``,
nothing is waited for.
"""
from __future__ import annotations

import hashlib
import logging
import time
from pathlib import Path

from sqlalchemy.engine import URL

from app.sessions import groupguard
from app.sessions.runner import group_alive

log = logging.getLogger(__name__)

PROC = Path("/proc")
POLL_SECONDS = 0.1
# The guard's grace and a margin for a loaded machine.
WAIT_SECONDS = groupguard.KILL_GRACE_SECONDS + 3.0


def owner_of(database: URL) -> str:
    """The fingerprint of the database a session is recorded in: the same
    for every process of one service, whatever its password."""
    return hashlib.sha256(database.render_as_string(hide_password=True).encode()).hexdigest()[:16]


def guards_of(owner: str) -> list[int]:
    """The pids of the guards started for ``owner`` that still run: each
    leads its session's process group, whose id is its pid."""
    wanted = f"{groupguard.OWNER_OPTION}{owner}".encode()
    found = []
    for entry in PROC.glob("[0-9]*"):
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:   # ended meanwhile, or not ours to read
            continue
        if wanted in argv and any(part.endswith(b"groupguard.py") for part in argv):
            found.append(int(entry.name))
    return found


def wait_for_leftover_groups(owner: str, timeout: float = WAIT_SECONDS) -> None:
    """Return once no process is left in the groups of ``owner``'s guards
    (each leads its own), or after ``timeout``."""
    left = guards_of(owner)
    if not left:
        return
    log.warning("waiting for the process group(s) %s of a session whose runner died to end before running "
                "anything", ", ".join(map(str, left)))
    deadline = time.monotonic() + timeout
    while left and time.monotonic() < deadline:
        time.sleep(POLL_SECONDS)
        left = [group for group in left if group_alive(group)]
    if left:
        log.warning("process group(s) %s still run after %.0f s; going on", ", ".join(map(str, left)), timeout)
