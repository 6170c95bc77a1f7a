"""The scheduler's process identity: a dashboard on its host tells at once
that a scheduler killed outright has ended, and never takes a live one, or
one it cannot see, for ended."""
import os
import subprocess
import sys

import pytest

from app import process_identity
from tests.support.waiting import wait_for

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="process identities read /proc")


def identity_of(process: subprocess.Popen) -> str:
    space = process_identity.own().rsplit(" ", 2)[0]
    return f"{space} {process.pid} {process_identity._start_ticks(process.pid)}"


@pytest.fixture
def child():
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    yield process
    process.kill()
    process.wait()


def test_own_names_this_process_in_this_boot_and_pid_namespace():
    boot, namespace, pid, started = process_identity.own().split(" ")
    assert boot == open("/proc/sys/kernel/random/boot_id").read().strip()
    assert namespace == os.readlink("/proc/self/ns/pid") and namespace.startswith("pid:[")
    assert int(pid) == os.getpid() and started.isdigit()
    assert not process_identity.ended(process_identity.own())


def test_a_process_killed_has_ended_whether_reaped_yet_or_not(child):
    identity = identity_of(child)
    assert not process_identity.ended(identity)
    child.kill()
    # Killed but not yet reaped by its parent: a zombie has ended all the same.
    wait_for(lambda: open(f"/proc/{child.pid}/stat").read().rsplit(")", 1)[1].split()[0] == "Z", timeout=10,
             what="the killed child a zombie")
    assert process_identity.ended(identity)
    child.wait()
    assert process_identity.ended(identity)


def test_a_pid_given_to_another_process_is_not_taken_for_the_one_that_ended(child):
    boot, namespace, pid, started = identity_of(child).split(" ")
    earlier = f"{boot} {namespace} {pid} {int(started) - 1}"   # the pid's earlier holder
    assert process_identity.ended(earlier)


@pytest.mark.parametrize("identity", [
    None, "", "garbage", "a b c d e",
    "00000000-0000-0000-0000-000000000000 pid:[1] 1 1",   # another boot, or another namespace: cannot tell
    "{space} notapid 5",
])
def test_what_it_cannot_tell_is_not_taken_for_ended(identity):
    if identity and "{space}" in identity:
        identity = identity.format(space=process_identity.own().rsplit(" ", 2)[0])
    assert not process_identity.ended(identity)


def test_another_pid_namespace_is_not_judged(child):
    boot, _, pid, started = identity_of(child).split(" ")
    child.kill()
    child.wait()
    assert not process_identity.ended(f"{boot} pid:[1] {pid} {started}")


def test_without_proc_there_is_no_identity_and_nothing_is_ended(tmp_path, monkeypatch, child):
    identity = identity_of(child)
    monkeypatch.setattr(process_identity, "PROC", tmp_path)
    assert process_identity.own() is None
    child.kill()
    child.wait()
    assert not process_identity.ended(identity)


def test_a_proc_that_hides_other_processes_is_not_taken_for_their_end(monkeypatch, child):
    identity = identity_of(child)

    def refused(pid):
        raise PermissionError(13, "Permission denied")
    monkeypatch.setattr(process_identity, "_start_ticks", refused)
    assert not process_identity.ended(identity)


def test_a_process_hidden_by_hidepid_is_not_taken_for_ended(tmp_path, monkeypatch, child):
    """With /proc mounted hidepid=2, another user's process has no /proc
    entry at all: whether its pid is still taken decides."""
    identity = identity_of(child)
    # No /proc/<pid> for any process but this one.
    monkeypatch.setattr(process_identity, "PROC", fake_proc(tmp_path, os.getpid()))
    assert not process_identity.ended(identity)
    child.kill()
    child.wait()
    assert process_identity.ended(identity)


def fake_proc(tmp_path, self_pid: int):
    """A /proc with this boot and namespace, whose "self" is ``self_pid``."""
    (tmp_path / "sys/kernel/random").mkdir(parents=True)
    (tmp_path / "sys/kernel/random/boot_id").write_text(open("/proc/sys/kernel/random/boot_id").read())
    (tmp_path / "self/ns").mkdir(parents=True)
    (tmp_path / "self/ns/pid").symlink_to(os.readlink("/proc/self/ns/pid"))
    (tmp_path / "self").rename(tmp_path / str(self_pid))
    (tmp_path / "self").symlink_to(str(self_pid))
    return tmp_path


def test_a_proc_of_another_pid_namespace_gives_no_identity(tmp_path, monkeypatch):
    """In a pid namespace of its own with the host's /proc, "self" is
    another process: nothing is said, rather than something wrong."""
    monkeypatch.setattr(process_identity, "PROC", fake_proc(tmp_path, os.getpid() + 1))
    assert process_identity.own() is None


def test_a_stat_not_in_the_format_known_is_not_taken_for_an_end(tmp_path, monkeypatch, child):
    identity = identity_of(child)
    proc = fake_proc(tmp_path, os.getpid())
    (proc / str(child.pid)).mkdir()
    (proc / str(child.pid) / "stat").write_text("")
    monkeypatch.setattr(process_identity, "PROC", proc)
    assert not process_identity.ended(identity)
