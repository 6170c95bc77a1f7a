"""`claudeops serve` for real: gunicorn with several workers, one scheduler,
a clean stop on SIGTERM."""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request

import pytest

from tests import streamlines as sl
from tests.conftest import FAKE_CLAUDE
from tests.support.faults import assert_group_ends, group_alive, read_pid_and_group
from tests.support.database import database_url, on_postgres
from tests.support.service import CLAUDEOPS, Service
from tests.support.waiting import wait_for

pytestmark = pytest.mark.slow


@pytest.fixture
def service(tmp_path, fake_cli):
    runs = tmp_path / "runs.jsonl"
    started = []

    def start(session_seconds: float, workers: int = 3) -> Service:
        fake_cli(sl.steps(sl.init(), sl.text("[EVENT:info:web] up")) + [{"sleep": session_seconds}]
                 + sl.steps(sl.result("up")))
        svc = Service(tmp_path / "state", {"CLAUDEOPS_INTERVAL": "0", "CLAUDEOPS_CLAUDE_BIN": str(FAKE_CLAUDE),
                                           "FAKE_CLAUDE_RUNS": str(runs),
                                           "FAKE_CLAUDE_PID": str(tmp_path / "cli.pid")}, workers=workers)
        started.append(svc)
        svc.runs_path = runs
        svc.cli_pid_file = tmp_path / "cli.pid"
        return svc.start()
    yield start
    for svc in started:
        svc.terminate()




def test_three_quick_run_now_requests_run_one_after_another_in_one_scheduler(service):
    svc = service(session_seconds=1.0, workers=3)
    ids = []
    for _ in range(3):
        status, body = svc.post("/api/v1/sessions/trigger", {"prompt": "check"})
        assert status == 201, body
        ids.append(body["id"])
    assert len(set(ids)) == 3

    def all_done():
        sessions = [svc.get(f"/api/v1/sessions/{i}")[1] for i in ids]
        return sessions if all(s["status"] == "completed" for s in sessions) else None
    wait_for(all_done, timeout=45)

    runs = [json.loads(line) for line in svc.runs_path.read_text().splitlines()]
    assert [int(r["session"]) for r in runs] == ids
    # Every CLI was started by the same process, `claudeops serve` itself, not by a gunicorn worker
    # (through the guard that leads each session's process group, app/sessions/groupguard.py).
    assert {r["grandparent"] for r in runs} == {svc.process.pid}
    assert len({r["ppid"] for r in runs}) == 3
    for earlier, later in zip(runs, runs[1:]):
        assert later["started"] >= earlier["ended"], "two sessions ran at once"
    status, events = svc.get("/api/v1/events")
    assert events["total"] == 3 and {e["session_id"] for e in events["events"]} == set(ids)


def test_sigterm_during_a_session_records_it_as_stopped_and_exits_cleanly(service, tmp_path):
    svc = service(session_seconds=60, workers=2)
    status, body = svc.post("/api/v1/sessions/trigger", {})
    session_id = body["id"]
    wait_for(lambda: svc.get("/api/v1/events")[1]["total"] == 1, timeout=15)   # the marker, under way
    _, cli_group = read_pid_and_group(svc.cli_pid_file)   # the CLI leads a process group of its own
    assert svc.terminate() == 0
    assert "INFO app.serve: shutting down on SIGTERM\n" in svc.log()   # the init system's stop, as said
    assert not svc.group_alive(), "gunicorn workers outlived the service"
    assert_group_ends(cli_group, within=1)
    if not on_postgres():   # every process closed its connections: the log is in the file, the file whole
        assert not list((tmp_path / "state").glob("claudeops.db-*")), "a write-ahead log was left"

    # Start again on the same state: the session was ended and recorded, not left running.
    svc2 = Service(tmp_path / "state", {"CLAUDEOPS_INTERVAL": "0"}, workers=1).start()
    try:
        session = svc2.get(f"/api/v1/sessions/{session_id}")[1]
        assert session["status"] == "stopped"
        assert "service shut down" in session["status_reason"]
        events = svc2.get("/api/v1/events")[1]["events"]
        assert [(e["message"], e["session_id"]) for e in events] == [("up", session_id)]   # kept
    finally:
        assert svc2.terminate() == 0


def test_sighup_to_the_services_group_stops_it_as_sigterm_does(service, tmp_path):
    """The terminal or SSH connection it was started from closed: every
    process of its group gets SIGHUP, gunicorn's master included."""
    svc = service(session_seconds=60, workers=1)
    session_id = svc.post("/api/v1/sessions/trigger", {})[1]["id"]
    wait_for(lambda: svc.get("/api/v1/events")[1]["total"] == 1, timeout=15)
    _, cli_group = read_pid_and_group(svc.cli_pid_file)
    os.killpg(svc.process.pid, signal.SIGHUP)
    assert svc.process.wait(40) == 0
    assert "INFO app.serve: shutting down on SIGHUP\n" in svc.log()   # a closed terminal, not an init system
    assert not svc.group_alive(), "gunicorn outlived the service"
    assert_group_ends(cli_group, within=1)
    svc2 = Service(tmp_path / "state", {"CLAUDEOPS_INTERVAL": "0"}, workers=1).start()
    try:
        session = svc2.get(f"/api/v1/sessions/{session_id}")[1]
        assert (session["status"], session["status_reason"]) == ("stopped", "the service shut down during the session")
    finally:
        assert svc2.terminate() == 0


def test_the_dashboard_is_served_by_gunicorn(service):
    svc = service(session_seconds=0, workers=2)
    with urllib.request.urlopen(svc.base_url + "/sessions", timeout=10) as response:
        assert response.status == 200
        assert "Run now" in response.read().decode()
    assert "gunicorn" in svc.log().lower() or "Booting worker" in svc.log()


def _ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6) as sock:
            sock.bind(("::1", 0))
        return True
    except OSError:
        return False


@pytest.mark.skipif(not _ipv6_loopback(), reason="this machine has no IPv6 loopback")
@pytest.mark.parametrize("host", ["::1", "[::1]"])
def test_an_ipv6_address_is_listened_on_as_given(tmp_path, host):
    """gunicorn takes an IPv6 address to bind in brackets; without them it
    read "::1:8080" as an address and no port, or bound every interface."""
    from app.serve import address
    assert (address("::1", 8080), address("[::1]", 8080), address("127.0.0.1", 8080)) == (
        "[::1]:8080", "[::1]:8080", "127.0.0.1:8080")
    svc = Service(tmp_path / "state", {"CLAUDEOPS_INTERVAL": "0"}, workers=1, host=host).start()
    try:
        assert svc.get("/api/v1/health")[0] == 200
        assert f"dashboard on http://[::1]:{svc.port} " in svc.log()
        with pytest.raises(OSError):   # not on IPv4's interfaces
            socket.create_connection(("127.0.0.1", svc.port), timeout=2).close()
    finally:
        svc.terminate()


@pytest.mark.parametrize("host, why", [
    ("127.0.0.1:9000", "has a port in it: give the port with --port (--host 127.0.0.1 --port 9000)"),
    ("[::1]:8080", "has a port in it: give the port with --port (--host ::1 --port 8080)"),
    ("localhost:80", "(--host localhost --port 80)"),
    ("http://example.org", "is neither an IP address nor a host name"),
    ("my host", "is neither an IP address nor a host name"),
    ("1.2.3", "is neither an IP address nor a host name"),
    ("0x7f000001", "is neither an IP address nor a host name"),
    ("0x7f.1", "is neither an IP address nor a host name"),
    ("localhost:99999", "is neither an IP address nor a host name"),
    # str.isdigit() takes these; int() refuses the first and reads the second as 3.
    ("localhost:\u00b2", "is neither an IP address nor a host name"),
    ("localhost:\u0663", "is neither an IP address nor a host name"),
    ("localhost:" + "9" * 5000, "is neither an IP address nor a host name"),
    ("[127.0.0.1]", "is neither an IP address nor a host name"),
])
def test_serve_refuses_a_host_that_is_no_address_before_anything_starts(tmp_path, monkeypatch, host, why):
    """Before, 127.0.0.1:9000 reached gunicorn as [127.0.0.1:9000]:8080, which
    it refused with a message of its own after migrations had run."""
    from click.testing import CliRunner

    from app.cli import main
    monkeypatch.setenv("CLAUDEOPS_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("CLAUDEOPS_PASSWORD", "a password long enough")
    result = CliRunner().invoke(main, ["serve", "--host", host, "--port", "1"])
    assert result.exit_code == 2, result.output
    assert "Invalid value for '--host'" in result.output and why in result.output
    assert not (tmp_path / "state").exists()


@pytest.mark.parametrize("host", ["127.0.0.1", " ::1 ", "[::1]", "0.0.0.0", "localhost", "ops-1.example.org",
                                  "0xcafe.example.org", "fe80::1%eth0", "xn--bcher-kva.example"])
def test_an_address_or_a_host_name_is_taken_as_given(host):
    from app.serve import listen_host
    assert listen_host(host) == host.strip()


def test_gunicorn_reads_a_request_line_of_8_kb_and_refuses_a_longer_one(tmp_path):
    """A long memory search reaches the application (gunicorn's default of
    4 KB refused it with a page of its own); past 8 KB gunicorn refuses it."""
    svc = Service(tmp_path / "state", {"CLAUDEOPS_INTERVAL": "0"}, workers=1).start()
    try:
        status, body = svc.get("/api/v1/memories?q=" + "w" * 7_000)
        assert status == 200 and body["memories"] == []
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(svc.base_url + "/api/v1/memories?q=" + "w" * 9_000, timeout=10)
        assert refused.value.code == 414
    finally:
        svc.terminate()


def test_gunicorn_logs_at_the_service_s_level_and_its_access_log_only_where_info_is_logged(tmp_path):
    """An open dashboard tab polls every 5 s: at WARNING, or with the access
    log off, no request makes a line."""
    from app.serve import gunicorn_command
    command = gunicorn_command("127.0.0.1", 8080, 2)
    assert command[command.index("--log-level") + 1] == "info" and "--access-logfile" in command
    assert "--access-logfile" not in gunicorn_command("127.0.0.1", 8080, 2, "INFO", access_log=False)
    for level in ("WARNING", "ERROR"):
        quiet = gunicorn_command("127.0.0.1", 8080, 2, level)
        assert quiet[quiet.index("--log-level") + 1] == level.lower() and "--access-logfile" not in quiet
    logs = {}
    for level in ("INFO", "WARNING"):
        svc = Service(tmp_path / level, {"CLAUDEOPS_INTERVAL": "0", "CLAUDEOPS_LOG_LEVEL": level}, workers=1).start()
        try:
            for _ in range(3):
                assert svc.get("/api/v1/health")[0] == 200
        finally:
            assert svc.terminate() == 0
        logs[level] = svc.log()
    assert logs["INFO"].count('"GET /api/v1/health HTTP/1.1" 200') >= 3 and "[INFO]" in logs["INFO"]
    assert "GET /api/v1/health" not in logs["WARNING"] and "[INFO]" not in logs["WARNING"], logs["WARNING"]
    assert " INFO " not in logs["WARNING"]


def test_every_gunicorn_worker_counts_the_same_wrong_bearer_tokens(tmp_path):
    """The limit of ten wrong tokens holds for all the workers together
    (app/limit_store.py), not ten for each. Three of the four workers are
    each held by a guess whose headers are not finished (a sync worker
    reads one request at a time), so the fourth takes ten guesses; then the
    three held guesses are finished, each in a worker that has counted none
    of its own."""
    token = "tok-7d0e2b9c4a1f6e83"
    svc = Service(tmp_path / "state", {"CLAUDEOPS_INTERVAL": "0", "CLAUDEOPS_API_TOKEN": token}, workers=4).start()
    held = []
    try:
        for n in range(3):
            connection = socket.create_connection(("127.0.0.1", svc.port), timeout=10)
            connection.sendall(f"GET /api/v1/sessions HTTP/1.1\r\nHost: x\r\n"
                               f"Authorization: Bearer held-{n}\r\n".encode())
            held.append(connection)
        time.sleep(0.5)   # each taken by a worker of its own, which waits for the rest
        statuses = [svc.get("/api/v1/sessions", headers={"Authorization": f"Bearer guess-{n}"})[0]
                    for n in range(11)]
        assert statuses == [401] * 10 + [429]
        for connection in held:
            connection.sendall(b"Connection: close\r\n\r\n")
            assert connection.makefile("rb").readline().split()[1] == b"429"
        status, body = svc.get("/api/v1/sessions", headers={"Authorization": f"Bearer {token}"})
        assert status == 429 and "too many wrong bearer tokens" in body["error"]
    finally:
        for connection in held:
            connection.close()
        assert svc.terminate() == 0


def test_two_schedulers_started_at_once_on_a_new_database_one_is_refused_by_the_lock(tmp_path):
    """The runner lock is taken before the migrations: the second is refused
    as a second scheduler, not by the first one's half-made tables."""
    state = tmp_path / "state"
    env = dict(os.environ, CLAUDEOPS_STATE_DIR=str(state), CLAUDEOPS_DATABASE_URL=database_url(state),
               CLAUDEOPS_INTERVAL="0", CLAUDEOPS_CLAUDE_BIN=str(FAKE_CLAUDE))
    schedulers = [subprocess.Popen([str(CLAUDEOPS), "scheduler"], env=env, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.PIPE, text=True) for _ in range(2)]
    try:
        wait_for(lambda: any(p.poll() is not None for p in schedulers), timeout=60)
        (refused,) = [p for p in schedulers if p.poll() is not None]
        (running,) = [p for p in schedulers if p.poll() is None]
        assert refused.returncode == 1
        assert "is running sessions on" in refused.stderr.read()
        running.terminate()
        assert running.wait(30) == 0, running.stderr.read()
    finally:
        for process in schedulers:
            if process.poll() is None:
                process.kill()
                process.wait()


def test_gunicorn_believes_no_forwarded_header_the_application_was_not_told_to(service):
    """With CLAUDEOPS_TRUSTED_PROXIES at its default 0, a plain-http request
    that claims https (from loopback, which gunicorn would believe by
    default) is still plain http: its session cookie is not marked Secure."""
    svc = service(session_seconds=0, workers=1)
    cookies = {}
    for claim in ({}, {"X-Forwarded-Proto": "https"}):
        request = urllib.request.Request(svc.base_url + "/memories", headers=claim)
        with urllib.request.urlopen(request, timeout=10) as response:
            cookies[bool(claim)] = response.headers["Set-Cookie"]
    assert cookies[False] and "claudeops_session=" in cookies[False]   # the form's CSRF token is kept there
    assert "Secure" not in cookies[False] and "Secure" not in cookies[True]


def test_the_access_log_names_the_path_but_not_the_query_string(service):
    svc = service(session_seconds=0, workers=1)
    request = urllib.request.Request(svc.base_url + "/memories?q=hunter2-typed-in-search",
                                     headers={"Referer": svc.base_url + "/memories?q=referred-search"})
    with urllib.request.urlopen(request, timeout=10) as response:
        assert response.status == 200
    wait_for(lambda: '"GET /memories HTTP/1.1" 200' in svc.log(), timeout=10)
    assert "hunter2-typed-in-search" not in svc.log() and "referred-search" not in svc.log()


def test_gunicorn_started_by_hand_with_the_settings_file_outlives_the_shell_that_started_it(tmp_path):
    """A dashboard-only host runs gunicorn with app/gunicorn_conf.py under
    systemd or from a shell that exits: only `claudeops serve`'s own
    gunicorn ends with its parent."""
    import signal
    import time

    from app.serve import gunicorn_command
    from tests.conftest import make_app
    from tests.support.database import database_env
    from tests.support.service import free_port
    make_app(tmp_path)   # the database, migrated as the scheduler's host would have it
    port = free_port()
    env = {**os.environ, "CLAUDEOPS_STATE_DIR": str(tmp_path / "state"), **database_env(tmp_path / "state")}
    env.pop("CLAUDEOPS_SERVE_PID", None)
    command = " ".join(f"'{part}'" for part in gunicorn_command("127.0.0.1", port, 1))
    # The shell starts gunicorn in the background and exits at once: gunicorn is orphaned before it starts.
    shell = subprocess.run(["sh", "-c", f"{command} > '{tmp_path}/gunicorn.log' 2>&1 & echo $!"],
                           env=env, capture_output=True, text=True, check=True, start_new_session=True)
    master = int(shell.stdout.strip())
    group = os.getpgid(master)   # the shell's, which gunicorn and its workers stay in

    def answers() -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v1/health", timeout=5) as response:
                return response.status == 200
        except OSError:
            return False
    try:
        wait_for(answers, timeout=30, what="gunicorn answering")
        time.sleep(1.5)   # well past on_starting, which once ended a master whose parent had gone
        assert answers(), (tmp_path / "gunicorn.log").read_text()
    finally:
        if group_alive(group):
            os.killpg(group, signal.SIGTERM)
        assert_group_ends(group, within=30)


def test_a_port_already_taken_ends_the_start_before_any_session_runs(tmp_path, fake_cli):
    """The scheduler starts only once gunicorn has bound the port: a service
    that cannot serve its dashboard never runs the agent."""
    fake_cli(sl.steps(sl.init(), sl.text("[EVENT:info:web] up"), sl.result("up")))
    runs = tmp_path / "runs.jsonl"
    svc = Service(tmp_path / "state", {"CLAUDEOPS_CLAUDE_BIN": str(FAKE_CLAUDE), "FAKE_CLAUDE_RUNS": str(runs)},
                  workers=1)
    with socket.socket() as taken:
        taken.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        taken.bind(("127.0.0.1", svc.port))
        taken.listen()
        with pytest.raises(RuntimeError, match="claudeops serve exited early"):
            svc.start(timeout=60)
        assert svc.process.wait(30) == 1
    log = svc.log()
    assert ("before it served 127.0.0.1:%d: the address is in use (another Claude Ops, or another program, listens "
            "there): stop that, or choose another --port; no session was started" % svc.port) in log, log
    assert "Connection in use" in log and "scheduler started" not in log
    assert not runs.exists()
    # With the port free, the same state directory serves, and the first scheduled session runs.
    svc.start()
    try:
        wait_for(runs.exists, timeout=30, what="the first scheduled session")
    finally:
        assert svc.terminate() == 0


def _running(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie no init has reaped yet does not)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_a_gunicorn_master_killed_outright_takes_its_workers_with_it_and_frees_the_port(service):
    """The OOM killer picks gunicorn's master: serve stops with status 1 for
    its init system to restart it, and no orphaned worker goes on serving
    without a scheduler, holding the port that restart needs."""
    svc = service(session_seconds=60, workers=2)
    [master] = [int(pid) for pid in subprocess.run(["pgrep", "-P", str(svc.process.pid), "-f", "gunicorn"],
                                                    capture_output=True, text=True).stdout.split()]
    workers = [int(pid) for pid in subprocess.run(["pgrep", "-P", str(master)], capture_output=True,
                                                  text=True).stdout.split()]
    assert len(workers) == 2
    os.kill(master, signal.SIGKILL)
    assert svc.process.wait(30) == 1
    assert "gunicorn exited with status -9; shutting down" in svc.log()
    wait_for(lambda: not any(_running(pid) for pid in workers), timeout=5, what="the workers ending")
    with socket.socket() as again:
        again.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)   # as gunicorn binds
        again.bind(("127.0.0.1", svc.port))


def _hand_started_gunicorn(tmp_path, state, **settings) -> subprocess.CompletedProcess:
    """gunicorn as a dashboard-only host runs it, until it exits by itself."""
    from app.serve import gunicorn_command
    from tests.support.database import database_env
    from tests.support.service import free_port
    env = {**os.environ, "CLAUDEOPS_STATE_DIR": str(state), **database_env(state), **settings}
    env.pop("CLAUDEOPS_SERVE_PID", None)
    return subprocess.run(gunicorn_command("127.0.0.1", free_port(), 1), env=env, capture_output=True, text=True,
                          timeout=60)


def test_a_dashboard_host_refuses_a_database_not_at_its_schema(tmp_path):
    """Its pages would fail on tables not there yet, or write rows a newer
    version means otherwise: gunicorn's worker says why, and gunicorn exits."""
    import flask_migrate
    from sqlalchemy import text

    from app.extensions import db
    from tests.conftest import make_app
    app = make_app(tmp_path)
    with app.app_context():
        flask_migrate.downgrade(revision="base")   # not migrated yet: the scheduler's host has not started
        db.engine.dispose()
    empty = _hand_started_gunicorn(tmp_path, tmp_path / "state")
    assert empty.returncode != 0
    assert "not serving: the database" in empty.stderr and "is not at this version's schema yet (at none; " \
        "this version needs" in empty.stderr and "`claudeops db upgrade heads`" in empty.stderr, empty.stderr
    with app.app_context():
        flask_migrate.upgrade(revision="heads")
        # Migrated by a newer version: its revision past this one's head.
        db.session.execute(text("UPDATE alembic_version SET version_num = '0099_from_a_newer_version'"))
        db.session.commit()
        assert db.session.execute(text("SELECT version_num FROM alembic_version")).scalars().all() == \
            ["0099_from_a_newer_version"]
        db.engine.dispose()
    newer = _hand_started_gunicorn(tmp_path, tmp_path / "state")
    assert newer.returncode != 0
    assert "is at schema revision 0099_from_a_newer_version, which this installation does not know" in newer.stderr


def test_a_dashboard_host_with_a_bad_setting_says_so_in_a_line_not_a_traceback(tmp_path):
    from tests.conftest import make_app
    make_app(tmp_path)
    refused = _hand_started_gunicorn(tmp_path, tmp_path / "state", CLAUDEOPS_INTERVAL="soon")
    assert refused.returncode != 0
    assert ("claudeops dashboard: not serving: invalid configuration: CLAUDEOPS_INTERVAL='soon': must be a whole "
            "number") in refused.stderr, refused.stderr
    assert "Traceback" not in refused.stderr and "Worker failed to boot" in refused.stderr
    not_a_directory = tmp_path / "a-file"
    not_a_directory.write_text("")
    refused = _hand_started_gunicorn(tmp_path, tmp_path / "state", CLAUDEOPS_RESULTS_DIR=str(not_a_directory))
    assert f"not serving: the results directory {not_a_directory} is not a directory" in refused.stderr, \
        refused.stderr
    assert "Traceback" not in refused.stderr
    key = tmp_path / "state" / "secret_key"
    key.write_bytes(b"\xff\xfe not text")
    refused = _hand_started_gunicorn(tmp_path, tmp_path / "state")
    assert f"not serving: cannot read the cookie key {key}: it is not UTF-8 text" in refused.stderr, refused.stderr
    assert "Traceback" not in refused.stderr


def test_a_worker_forked_as_its_master_dies_ends_though_it_has_the_masters_signal_handlers(tmp_path):
    """gunicorn calls post_fork before the worker sets its own handlers: the
    master's, which only queue a signal for the master's loop, would swallow
    the SIGTERM, and the worker go on serving without its master."""
    import sys
    import textwrap
    script = textwrap.dedent("""
        import os, signal, sys, time, types
        sys.path.insert(0, "app")
        import gunicorn_conf
        queued = []
        signal.signal(signal.SIGTERM, lambda signum, frame: queued.append(signum))   # the master's, as inherited
        server = types.SimpleNamespace(log=types.SimpleNamespace(warning=print))
        gunicorn_conf.post_fork(server, types.SimpleNamespace(pid=os.getpid(), ppid=os.getppid() + 1))
        time.sleep(0.5)
        print("went on serving", queued)
    """)
    ended = subprocess.run([sys.executable, "-c", script], cwd=os.path.dirname(os.path.dirname(__file__)),
                           capture_output=True, text=True, timeout=30)
    assert ended.returncode == -signal.SIGTERM, (ended.returncode, ended.stdout, ended.stderr)
    assert "went on serving" not in ended.stdout
