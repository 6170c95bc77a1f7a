"""Which process published the scheduler's heartbeat, told apart from any
other that has had its pid since.

A scheduler killed outright cannot say that it stopped: its heartbeat only
goes stale a minute later. A dashboard in the same process space (the same
host, outside a container of its own) can tell at once that the process has
ended. An identity is the kernel's boot id, the pid namespace, the pid and
the process's start time in clock ticks since boot, so a pid given to
another process meanwhile, a zombie left to reap, or a reboot is not taken
for the scheduler. Linux only (/proc): elsewhere, or where /proc cannot be
read, there is no identity and the heartbeat's age alone decides.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

PROC = Path("/proc")
# A zombie has ended and waits to be reaped; a dead one is being removed.
ENDED_STATES = {"Z", "X", "x"}


def own() -> Optional[str]:
    """This process's identity, or None where it cannot be known."""
    space = _process_space()
    if space is None:
        return None
    try:
        started = _start_ticks(os.getpid())
    except OSError:
        return None
    return None if started is None else f"{space} {os.getpid()} {started}"


def ended(identity: Optional[str]) -> bool:
    """Whether the process ``identity`` names has certainly ended. False when
    it lives, and whenever this process cannot tell: no identity, another
    process space (another host or container, or a boot before this one),
    or a /proc that hides other users' processes (mounted with hidepid)."""
    if not identity:
        return False
    parts = identity.split(" ")   # boot id, pid namespace, pid, start time
    if len(parts) != 4 or not parts[2].isdigit() or f"{parts[0]} {parts[1]}" != _process_space():
        return False
    try:
        return _start_ticks(int(parts[2])) != parts[3]
    except OSError:
        return False


def _process_space() -> Optional[str]:
    """The boot and pid namespace this process sees pids in; None if /proc
    is another namespace's (a process in a pid namespace of its own, whose
    /proc was not mounted again, would read another process as itself)."""
    try:
        boot = (PROC / "sys/kernel/random/boot_id").read_text().strip()
        namespace = os.readlink(PROC / "self/ns/pid")
        if os.readlink(PROC / "self") != str(os.getpid()):
            return None
    except OSError:
        return None
    return f"{boot} {namespace}" if " " not in boot + namespace else None


def _start_ticks(pid: int) -> Optional[str]:
    """When process ``pid`` started (clock ticks since boot), or None if it
    has ended; OSError if this process may not look."""
    try:
        stat = (PROC / str(pid) / "stat").read_text()
    except FileNotFoundError:
        if _exists(pid):   # a /proc mounted with hidepid=2 hides other users' processes
            raise PermissionError(f"process {pid} is hidden from this user") from None
        return None
    # "pid (command) state ppid …": the command may hold spaces and
    # parentheses, so the fields are counted from the last ")". The state
    # is the third field, the start time the 22nd.
    try:
        fields = stat[stat.rindex(")") + 2:].split()
        return None if fields[0] in ENDED_STATES else fields[19]
    except (ValueError, IndexError):   # not the format known: cannot tell
        raise OSError(f"/proc/{pid}/stat is not in the format known") from None


def _exists(pid: int) -> bool:
    """Whether this pid namespace has a process ``pid``, whoever owns it."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:   # another user's: it exists
        return True
    return True
