"""Lead a session's process group, and end that group if the process running
the session dies.

The runner starts this script (standard library only, run by path, so it is
up in milliseconds) as the leader of a new process group, with the CLI's
command line as its arguments. It starts the CLI in the same group, with the
runner's stdout and stderr, and waits for it.

Its standard input is a pipe the runner never writes to. End of file there
means the runner's process is gone without ending the session (SIGKILL, the
OOM killer, a crash): nothing else would ever end the CLI and what it
started, so the whole group gets SIGTERM and, after a grace period, SIGKILL.

Otherwise it only mirrors the CLI: the same exit status, or death by the same
signal, so the runner sees what it would see without it.
"""
from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time

# Exit status when the CLI cannot be started; stderr then holds one line
# starting with SPAWN_ERROR_PREFIX.
SPAWN_FAILED = 127
SPAWN_ERROR_PREFIX = "claudeops-groupguard: could not start "
POLL_SECONDS = 0.1
KILL_GRACE_SECONDS = 5.0
# Given first, whose database the session is recorded in: only there to be
# seen in /proc by the process that takes that database over after a crash
# (app/sessions/leftover_groups.py).
OWNER_OPTION = "--owner="


def main(argv: list[str]) -> int:
    if argv and argv[0].startswith(OWNER_OPTION):
        argv = argv[1:]
    if not argv:
        sys.stderr.write(f"{SPAWN_ERROR_PREFIX}the CLI: no command given\n")
        return SPAWN_FAILED
    try:
        child = subprocess.Popen(argv, stdin=subprocess.DEVNULL)
    except OSError as exc:
        sys.stderr.write(f"{SPAWN_ERROR_PREFIX}{argv[0]}: {exc.strerror or exc}\n")
        return SPAWN_FAILED
    # Set only now, because an ignored signal stays ignored across exec. The
    # runner's SIGTERM to the group is meant for the CLI: this process ends
    # when the CLI does, with its status.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    lifeline = sys.stdin.fileno()
    while child.poll() is None:
        readable, _, _ = select.select([lifeline], [], [], POLL_SECONDS)
        if readable and not os.read(lifeline, 4096):
            end_group(child)
    return mirror(child.returncode)


def end_group(child: subprocess.Popen) -> None:
    """The runner is gone: SIGTERM the group, give the CLI a grace period,
    then SIGKILL whatever is left, this process included."""
    group = os.getpgrp()
    os.killpg(group, signal.SIGTERM)
    deadline = time.monotonic() + KILL_GRACE_SECONDS
    while child.poll() is None and time.monotonic() < deadline:
        time.sleep(POLL_SECONDS)
    os.killpg(group, signal.SIGKILL)


def mirror(returncode: int) -> int:
    if returncode >= 0:
        return returncode
    signum = -returncode
    if signum not in (signal.SIGKILL, signal.SIGSTOP):   # those two cannot be handled anyway
        signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)
    return 128 + signum   # a signal that does not end a process (none the CLI dies of)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
