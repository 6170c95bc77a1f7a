"""What the fault tests need beyond the fake CLI: waiting for a process group
to end, a small file system that can fill up or turn read-only, a database
connection of our own, and `claudeops scheduler` as a process to kill."""
from __future__ import annotations

import os
import resource
import signal
import sqlite3
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.support.waiting import wait_for

CLAUDEOPS = Path(sys.executable).with_name("claudeops")




def files_of_at_most(size: int):
    """A ``preexec_fn`` for a process whose disk is as good as full: a write
    past ``size`` bytes of any file fails (EFBIG) instead of killing it."""
    def limit() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))
    return limit


def group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def assert_group_ends(pgid: int, within: float = 15.0) -> None:
    """The whole process group is gone: ``os.killpg(pgid, 0)`` finds no member."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if not group_alive(pgid):
            return
        time.sleep(0.05)
    members = [p for p in os.listdir("/proc") if p.isdigit() and _pgid_of(int(p)) == pgid]
    raise AssertionError(f"process group {pgid} still has members {members} after {within}s")


def _pgid_of(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return int(handle.read().rsplit(")", 1)[1].split()[2])
    except (FileNotFoundError, ProcessLookupError, IndexError, ValueError):
        return None


def read_pid(path: Path, timeout: float = 15.0) -> int:
    """The pid in a file the fake CLI writes (FAKE_CLAUDE_ORPHAN_PID)."""
    wait_for(lambda: path.exists() and path.read_text().strip(), timeout, what=f"{path.name} written")
    return int(path.read_text().split()[0])


def read_pid_and_group(path: Path, timeout: float = 15.0) -> tuple[int, int]:
    """The fake CLI's pid and process group (FAKE_CLAUDE_PID)."""
    wait_for(lambda: len(path.read_text().split()) == 2 if path.exists() else False, timeout,
               what=f"{path.name} written")
    pid, pgid = path.read_text().split()
    return int(pid), int(pgid)


@contextmanager
def connect(db_path: Path, timeout: float = 15.0):
    """A connection of our own, as another program (or a person with the
    sqlite3 shell) would open one."""
    connection = sqlite3.connect(db_path, timeout=timeout, isolation_level=None)
    try:
        yield connection
    finally:
        connection.close()


def integrity(db_path: Path) -> str:
    with connect(db_path) as connection:
        return connection.execute("PRAGMA integrity_check").fetchone()[0]


def mount_tmpfs(path: Path, size: str) -> None:
    """Mount a tmpfs of ``size`` at ``path``; skips the test (with the reason)
    if this process may not mount, as when the suite runs unprivileged."""
    path.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        pytest.skip("mounting a small file system needs root (or CAP_SYS_ADMIN)")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"mount is not permitted here: {done.stderr.strip()}")


def bind_read_only(path: Path) -> None:
    """Make ``path`` read-only for everyone, root included (chmod would not stop root)."""
    for argv in (["mount", "--bind", str(path), str(path)],
                 ["mount", "-o", "remount,ro,bind", str(path)]):
        done = subprocess.run(argv, capture_output=True, text=True)
        if done.returncode != 0:
            pytest.skip(f"{' '.join(argv[:3])} is not permitted here: {done.stderr.strip()}")


def unmount(path: Path) -> None:
    while subprocess.run(["mountpoint", "-q", str(path)]).returncode == 0:
        if subprocess.run(["umount", str(path)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(path)], check=True)


class SchedulerProcess:
    """`claudeops scheduler`, the real command, as its own process group."""

    def __init__(self, env: dict[str, str], log_path: Path):
        self.env = dict(os.environ, **env)
        self.log_path = log_path
        self.process: subprocess.Popen | None = None

    def start(self) -> "SchedulerProcess":
        # Several runs may share one log: this run's part starts here.
        self.log_offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen([str(CLAUDEOPS), "scheduler"], env=self.env, stdout=log,
                                            stderr=subprocess.STDOUT, start_new_session=True)
        return self

    def log(self) -> str:
        """What this run has logged."""
        with open(self.log_path, "rb") as handle:
            handle.seek(self.log_offset)
            return handle.read().decode(errors="replace")

    def wait_started(self, timeout: float = 30.0) -> None:
        wait_for(lambda: "scheduler started" in self.log() or self.process.poll() is not None, timeout,
                   what="scheduler start")
        assert self.process.poll() is None, f"the scheduler exited:\n{self.log()}"

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(10)

    def terminate(self, timeout: float = 30.0) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
                raise
        return self.process.returncode
