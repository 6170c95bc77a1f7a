"""The README's backup and restore on PostgreSQL: ``pg_dump -Fc`` (one
snapshot, so the service may run meanwhile), ``pg_restore --no-owner``
into a new, empty database, the service started on it, and ``claudeops
logout-all`` for the logins the dump brought back."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from sqlalchemy import select
from sqlalchemy.engine import make_url

from app.cli import main
from app.extensions import db
from plugins.memory.models import Memory
from tests import streamlines as sl
from tests.conftest import make_app
from tests.memory_helpers import add_memory
from tests.support.database import database_url, postgres_only

pytestmark = postgres_only("pg_dump and pg_restore back up a PostgreSQL database")

PASSWORD = "a long enough password"
TOKEN = "an API token of 32 characters.."


def libpq_url(url: str) -> str:
    """What pg_dump and pg_restore take: the service's URL without its driver."""
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


def rows_of(app) -> dict[str, list[tuple]]:
    with app.app_context(), db.engine.connect() as connection:
        return {table.name: [tuple(row) for row in connection.execute(
                    select(table).order_by(*table.primary_key.columns))]
                for table in db.metadata.sorted_tables}


def run(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, timeout=120)


@pytest.fixture
def pg_tools():
    """The client programs of the newest PostgreSQL installed (the server's,
    as bin/test --postgres installs Debian's postgresql), else those on PATH."""
    versions = sorted(Path("/usr/lib/postgresql").glob("*/bin"), key=lambda path: int(path.parent.name))
    tools = {}
    for name in ("pg_dump", "pg_restore"):
        beside_the_server = versions[-1] / name if versions else None
        tools[name] = str(beside_the_server) if beside_the_server and beside_the_server.exists() else shutil.which(name)
    missing = [name for name, path in tools.items() if path is None]
    assert not missing, f"{missing} not found: Debian's postgresql package has them"
    return tools


def test_a_dump_restored_into_a_new_database_is_the_service_whole(tmp_path, app, fake_cli, run_session_now,
                                                                   pg_tools):
    fake_cli(sl.steps(sl.init(), sl.tool_use("systemctl status postgres"), sl.tool_result("active (running)"),
                      sl.text("[EVENT:warning:postgres] replication lag 40 s\n"
                              "[MEMORY:timing:postgres] vacuum runs at 03:00 and lags the replicas\n"
                              "[COOLDOWN:restart:nginx] success — restarted after 502s"),
                      sl.result("Checked.")))
    add_memory("Jellyfin transcodes stall when the cache disk is full", service="jellyfin")
    run_session_now()
    # A login made before the dump, with the password the restored service keeps.
    app.config["CLAUDEOPS_PASSWORD"] = PASSWORD
    browser = app.test_client()
    assert browser.post("/login", data={"password": PASSWORD}).status_code == 302
    assert browser.get("/").status_code == 200
    before = rows_of(app)
    for table in ("sessions", "session_activity", "events", "memories", "cooldown_actions", "dashboard_logins"):
        assert before[table], f"the source holds no {table}: the test backs up too little"

    dump = tmp_path / "claudeops.dump"
    source_url = libpq_url(app.config["CLAUDEOPS_DATABASE_URL"])
    dumped = run(pg_tools["pg_dump"], "-Fc", "-f", str(dump), f"--dbname={source_url}")
    assert dumped.returncode == 0, dumped.stderr

    new_state = tmp_path / "restored"
    new_url = database_url(new_state)   # a new, empty database on the same server
    restored = run(pg_tools["pg_restore"], "--no-owner", "--exit-on-error", f"--dbname={libpq_url(new_url)}",
                   str(dump))
    assert restored.returncode == 0, restored.stderr

    service = make_app(tmp_path, CLAUDEOPS_STATE_DIR=str(new_state), CLAUDEOPS_DATABASE_URL=new_url,
                       CLAUDEOPS_PASSWORD=PASSWORD, CLAUDEOPS_API_TOKEN=TOKEN)   # migrated as it starts: nothing to do
    assert rows_of(service) == before
    with service.app_context():
        # The login the dump holds is good again on the restored service.
        old_cookie = service.test_client()
        old_cookie.set_cookie("claudeops_session", browser.get_cookie("claudeops_session").value)
        assert old_cookie.get("/").status_code == 200
        ended = service.test_cli_runner().invoke(main, ["logout-all"])
        assert (ended.exit_code, ended.output) == (0, "Ended 1 dashboard login.\n")
        assert old_cookie.get("/").status_code == 302

        # New rows take ids past the restored ones: the dump brought the sequences.
        made = service.test_client().post("/api/v1/memories", json={
            "category": "timing", "service": "web", "observation": "deploys take four minutes"},
            headers={"Authorization": f"Bearer {TOKEN}"})
        assert made.status_code == 201, made.get_data(as_text=True)
        assert made.get_json()["id"] == max(row[0] for row in before["memories"]) + 1
        assert db.session.scalar(select(Memory.observation).where(Memory.id == made.get_json()["id"])) == \
            "deploys take four minutes"
        current = service.test_cli_runner().invoke(main, ["db", "check"])
        assert current.exit_code == 0, current.output
        db.session.remove()
