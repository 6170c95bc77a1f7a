"""The example plugin in examples/claudeops-incidents works as a real
third-party package: pip installs it (into a throwaway target directory, never
the venv), the host finds it through the entry point, its own Alembic branch
creates its table without drift, its markers are recorded from a session, its
page, API, Overview card and prompt section work, and the real service runs it.

No host file knows the plugin; everything here goes through the public hooks.
"""
from __future__ import annotations

import ast
import logging
import importlib.metadata
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import urllib.request
from pathlib import Path

import flask_migrate
import pytest
from flask import current_app
from sqlalchemy import Column, String, create_engine, inspect, text

from app.config import PROJECT_ROOT
from app.extensions import db
from app.models import SessionActivity
from app.plugins import ENTRY_POINT_GROUP, call_at_startup
from tests import streamlines as sl
from tests.conftest import FAKE_CLAUDE, make_app
from tests.support.browser import wait_for
from tests.support.database import database_env, explicit_database_url
from tests.support.service import CLAUDEOPS, Service

EXAMPLE = PROJECT_ROOT / "examples" / "claudeops-incidents"
DIST_NAME = "claudeops-incidents"
PLUGIN_NAME = "incidents"
PACKAGE = "claudeops_incidents"
BRANCH_HEAD = "incidents_0001"

# All the plugin may import from the host: the public plugin API.
PUBLIC_API = {"app.hookspecs", "app.plugin_types", "app.marker_queue", "app.extensions", "app.runtime", "app.timeutil",
              "app.web.apiutil", "app.web.apidoc",
              "app.web.htmx"}


def _pip_install(source: Path, target: Path) -> str:
    """Install like an operator would (a wheel, not editable); returns how."""
    base = [sys.executable, "-m", "pip", "install", "--no-deps", "--no-input", "--disable-pip-version-check",
            "--quiet", "--target", str(target)]
    attempts = []
    if importlib.util.find_spec("setuptools") is not None:
        # Offline, with the venv's own setuptools; needs a setuptools that can
        # build wheels by itself (>= 70.1) or the `wheel` package beside it.
        attempts.append(("--no-build-isolation", base + ["--no-build-isolation", str(source)]))
    attempts.append(("build isolation", base + [str(source)]))  # setuptools from the index
    failures = []
    for how, command in attempts:
        shutil.rmtree(target, ignore_errors=True)
        done = subprocess.run(command, check=False, capture_output=True, text=True, timeout=300)
        if done.returncode == 0:
            return how
        failures.append(f"{how}: {done.stdout[-2000:]}{done.stderr[-2000:]}")
    pytest.fail("pip could not install the example plugin:\n" + "\n".join(failures))


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """The example, pip-installed into a target directory that is on sys.path
    (and PYTHONPATH, for subprocesses) for this module only."""
    work = tmp_path_factory.mktemp("incidents-plugin")
    # Build from a copy: building in place would leave build/ and *.egg-info in examples/.
    source = work / "src"
    shutil.copytree(EXAMPLE, source, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    target = work / "site"
    how = _pip_install(source, target)
    print(f"installed {DIST_NAME} into {target} ({how})")
    with pytest.MonkeyPatch.context() as mp:
        mp.syspath_prepend(str(target))
        mp.setenv("PYTHONPATH", os.pathsep.join(p for p in (str(target), os.environ.get("PYTHONPATH")) if p))
        yield target
    # The plugin's table joined the host's (process-wide) metadata when the
    # plugin was imported; later tests run apps without the plugin's branch,
    # whose drift check would otherwise miss the table. The module objects stay
    # in sys.modules, unreachable: no entry point points at them any more.
    incidents = db.metadata.tables.get("incidents")
    if incidents is not None:
        db.metadata.remove(incidents)


@pytest.fixture
def app(installed, tmp_path):
    """conftest's app, made with the plugin installed (overrides conftest's
    `app`, so `run_session_now` runs sessions in this one)."""
    app = make_app(tmp_path)
    with app.app_context():
        yield app


def incidents():
    from claudeops_incidents.models import Incident
    db.session.expire_all()
    return {i.service: i for i in db.session.scalars(db.select(Incident).order_by(Incident.id))}


def alembic_versions() -> set[str]:
    return set(db.session.scalars(text("SELECT version_num FROM alembic_version")))


def script_directory():
    from alembic.script import ScriptDirectory
    return ScriptDirectory.from_config(current_app.extensions["migrate"].migrate.get_config())


def host_heads() -> set[str]:
    """The host's own head(s), whatever revision the host has reached."""
    return set(script_directory().get_heads()) - {BRANCH_HEAD}


def migration_dirs_by_plugin() -> list[tuple[str, str]]:
    """(plugin, directory) of every claudeops_migration_dirs answer."""
    pm = current_app.extensions["claudeops.plugins"]
    return [(plugin, str(directory))
            for plugin, directory in call_at_startup(pm, "claudeops_migration_dirs", (str, os.PathLike))]


def other_plugins_revisions() -> set[str]:
    """The revisions of other packages installed beside the service (as
    docs/plugins.md has their authors run this suite with): their own
    branches, not this plugin's or the host's. None in the service's own
    environment."""
    theirs = {Path(directory).resolve() for plugin, directory in migration_dirs_by_plugin() if plugin != PLUGIN_NAME}
    return {revision.revision for revision in script_directory().walk_revisions()
            if Path(revision.path).resolve().parent in theirs}


def system_prompt_of(argv_file: Path) -> str:
    argv = json.loads(argv_file.read_text())["argv"]
    return argv[argv.index("--append-system-prompt") + 1]


# --- (1) discovery --------------------------------------------------------------------------

def test_discovered_through_the_entry_point_from_the_installed_copy(app, installed):
    pm = app.extensions["claudeops.plugins"]
    plugin = pm.get_plugin(PLUGIN_NAME)
    assert plugin is not None and plugin.__name__ == PACKAGE
    location = Path(plugin.__file__).resolve()
    assert location.is_relative_to(installed.resolve())
    assert not location.is_relative_to(EXAMPLE.resolve())

    dist = importlib.metadata.distribution(DIST_NAME)
    (entry_point,) = [ep for ep in dist.entry_points if ep.group == ENTRY_POINT_GROUP]
    assert (entry_point.name, entry_point.value) == (PLUGIN_NAME, PACKAGE)
    assert Path(str(dist.locate_file(""))).resolve() == installed.resolve()
    assert PLUGIN_NAME in dict(pm.list_name_plugin())  # registered under its entry point's name

    # Package data came along with a normal (non-editable) install.
    package_dir = installed / PACKAGE
    assert (package_dir / "templates" / "incidents" / "index.html").is_file()
    assert (package_dir / "templates" / "incidents" / "_rows.html").is_file()
    assert (package_dir / "migrations" / "incidents_0001_incidents.py").is_file()
    # Its own directory, once; a directory any other plugin declares is an
    # installed package's (none in the service's own environment), never a
    # built-in's: they keep their tables in the host's revisions.
    by_plugin = migration_dirs_by_plugin()
    assert app.extensions["claudeops.migration_dirs"] == [directory for _, directory in by_plugin]
    assert [directory for plugin, directory in by_plugin if plugin == PLUGIN_NAME] == [
        str(package_dir.resolve() / "migrations")]
    installed_plugins = {pm.get_name(plugin) for plugin, _ in pm.list_plugin_distinfo()}
    assert {plugin for plugin, _ in by_plugin} <= installed_plugins


def test_not_loaded_when_entry_points_are_off(installed, tmp_path):
    app = make_app(tmp_path, CLAUDEOPS_LOAD_ENTRY_POINTS=False)
    assert app.extensions["claudeops.plugins"].get_plugin(PLUGIN_NAME) is None
    assert app.test_client().get("/incidents").status_code == 404


def test_the_plugin_imports_only_the_public_plugin_api(installed):
    imported = set()
    for path in (installed / PACKAGE).rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and node.module:
                imported.add(node.module)
            elif isinstance(node, ast.Import):
                imported.update(alias.name for alias in node.names)
    host = {name for name in imported if name == "app" or name.startswith(("app.", "plugins"))}
    assert host and host <= PUBLIC_API, host - PUBLIC_API


def test_disabled_its_tables_stay_and_the_service_starts_while_nothing_else_needs_migrating(app, tmp_path, caplog):
    """CLAUDEOPS_DISABLE_PLUGINS sets aside a plugin that keeps the service
    from starting. Its revision, which the installation no longer knows, is
    taken to be its own while the rest of the schema is at its heads."""
    from claudeops_incidents.models import Incident

    from app.revisions import dashboard_refusal
    from app.serve import MigrationError, apply_migrations
    assert BRANCH_HEAD in alembic_versions()
    db.session.add(Incident(service="nas", severity="warning", summary="scrub runs long"))
    db.session.commit()
    without = make_app(tmp_path, upgrade=False, CLAUDEOPS_DISABLE_PLUGINS=PLUGIN_NAME)
    assert without.extensions["claudeops.plugins"].get_plugin(PLUGIN_NAME) is None
    with caplog.at_level(logging.WARNING, logger="app.revisions"):
        apply_migrations(without)   # the start's migration: nothing to run
    assert (f"schema revision(s) {BRANCH_HEAD}, which this installation does not know, taken to be those of the "
            f"plugin(s) CLAUDEOPS_DISABLE_PLUGINS leaves out ({PLUGIN_NAME})") in caplog.text
    assert dashboard_refusal(without) is None
    # A name that is no installed plugin (a typo) sets nothing aside: the revision stays unknown.
    mistyped = make_app(tmp_path, upgrade=False, CLAUDEOPS_LOAD_ENTRY_POINTS=False, CLAUDEOPS_DISABLE_PLUGINS="typo")
    with pytest.raises(MigrationError, match=re.escape(f"is at schema revision {BRANCH_HEAD}, which this "
                                                       "installation does not know")):
        apply_migrations(mistyped)
    assert "not know" in dashboard_refusal(mistyped) and "typo" not in dashboard_refusal(mistyped)
    cli = subprocess.run([str(CLAUDEOPS), "memories", "list"], capture_output=True,
                         text=True, timeout=120, env={**os.environ, **database_env(tmp_path / "state"),
                                                      "CLAUDEOPS_STATE_DIR": str(tmp_path / "state"),
                                                      "CLAUDEOPS_DISABLE_PLUGINS": PLUGIN_NAME})
    assert cli.returncode == 0, cli.stderr
    assert BRANCH_HEAD in alembic_versions() and "nas" in incidents()   # left as they were

    # With a revision of its own to run, the installation cannot: Alembic would stop at the unknown one.
    (host_head,) = host_heads()
    behind = script_directory().get_revision(host_head).down_revision
    db.session.execute(text("UPDATE alembic_version SET version_num = :behind WHERE version_num = :head"),
                       {"behind": behind, "head": host_head})
    db.session.commit()
    with pytest.raises(MigrationError, match=re.escape(
            f"is at schema revision {BRANCH_HEAD}, which this installation does not know. If it is that of a "
            f"plugin CLAUDEOPS_DISABLE_PLUGINS leaves out ({PLUGIN_NAME}): this installation's own revisions "
            "cannot be run without it")):
        apply_migrations(without)
    assert "not know" in dashboard_refusal(without)



def test_disabled_the_db_commands_tell_the_schema_and_a_restore_names_the_setting(app, tmp_path):
    """With the plugin left out by CLAUDEOPS_DISABLE_PLUGINS and the rest of
    the schema at its heads, `db current` names each revision, `db upgrade
    heads` has nothing to run (as at a start), and what needs the plugin's
    revisions (`db check`, a restore of a backup at its revision) says to take
    it out of the setting, not that a newer version made the database."""
    (host_head,) = host_heads()
    state = tmp_path / "state"
    env = {**os.environ, **database_env(state), "CLAUDEOPS_STATE_DIR": str(state)}

    def claudeops(*args, disabled=True):
        return subprocess.run([str(CLAUDEOPS), *args], capture_output=True, text=True, timeout=120,
                              env={**env, "CLAUDEOPS_DISABLE_PLUGINS": PLUGIN_NAME} if disabled else env)

    db.session.remove()
    db.engine.dispose()   # the restore finds no other process with the database open
    current = claudeops("db", "current")
    assert current.returncode == 0, current.stderr
    assert f"{host_head} (head)" in current.stdout
    assert f"{BRANCH_HEAD} (of a plugin CLAUDEOPS_DISABLE_PLUGINS leaves out)" in current.stdout
    upgrade = claudeops("db", "upgrade", "heads")
    assert upgrade.returncode == 0, upgrade.stderr
    assert upgrade.stdout.startswith("Nothing to upgrade: the database ")
    assert f"is at this version's schema ({host_head}); its revision(s) {BRANCH_HEAD} are taken" in upgrade.stdout
    check = claudeops("db", "check")
    assert check.returncode == 1
    assert "`claudeops db check` needs their revisions: take them out of CLAUDEOPS_DISABLE_PLUGINS" in check.stderr
    assert "newer version" not in check.stderr
    assert alembic_versions() == {host_head, BRANCH_HEAD}

    if database_env(state):
        return   # PostgreSQL: pg_restore, not claudeops restore
    backup = tmp_path / "backup.db"
    made = claudeops("backup", str(backup), disabled=False)
    assert made.returncode == 0, made.stderr
    before = (state / "claudeops.db").read_bytes()
    restored = claudeops("restore", str(backup))
    assert restored.returncode == 1
    assert (f"is at schema revision {BRANCH_HEAD}, which this installation does not know. If it is that of a "
            f"plugin CLAUDEOPS_DISABLE_PLUGINS leaves out ({PLUGIN_NAME}): take it out of "
            "CLAUDEOPS_DISABLE_PLUGINS for the restore") in restored.stderr
    assert (state / "claudeops.db").read_bytes() == before
    assert claudeops("restore", str(backup), disabled=False).returncode == 0

# --- (2) migration --------------------------------------------------------------------------

def test_its_migration_applies_with_the_hosts_and_does_not_drift(app):
    flask_migrate.check()  # raises SystemExit when autogenerate would change anything
    inspector = inspect(db.engine)
    assert "incidents" in inspector.get_table_names()
    assert alembic_versions() == host_heads() | {BRANCH_HEAD}
    columns = {c["name"] for c in inspector.get_columns("incidents")}
    assert {"id", "service", "severity", "summary", "status", "opened_at", "resolved_at",
            "opened_session_id", "resolved_session_id", "tier"} <= columns
    foreign_keys = {fk["constrained_columns"][0]: fk for fk in inspector.get_foreign_keys("incidents")}
    for column in ("opened_session_id", "resolved_session_id"):
        assert foreign_keys[column]["referred_table"] == "sessions"
        assert foreign_keys[column]["options"].get("ondelete") == "SET NULL"


def test_its_revision_is_a_branch_of_its_own_that_depends_on_sessions(app):
    script = script_directory()
    revision = script.get_revision(BRANCH_HEAD)
    assert revision.down_revision is None and revision.branch_labels == {"incidents"}
    assert revision.dependencies == "0001_sessions"
    assert BRANCH_HEAD in script.get_heads() and host_heads()
    assert script.get_revision("incidents@head").revision == BRANCH_HEAD


def test_drift_is_detected_when_a_column_is_added_without_a_revision(app, caplog):
    """The check above can fail: the plugin's model is covered by it."""
    table = db.metadata.tables["incidents"]
    extra = Column("owner", String(100))
    table.append_column(extra)
    try:
        with pytest.raises(SystemExit):
            flask_migrate.check()
    finally:
        table._columns.remove(extra)  # no public API takes a column off a Table
    assert "New upgrade operations detected" in caplog.text and "owner" in caplog.text
    flask_migrate.check()  # and the model is as it was


def test_its_branch_downgrades_alone_and_comes_back(app):
    flask_migrate.downgrade(revision="incidents@base")
    tables = set(inspect(db.engine).get_table_names())
    assert "incidents" not in tables and {"sessions", "events", "memories"} <= tables
    assert alembic_versions() == host_heads()
    flask_migrate.upgrade(revision="heads")
    assert alembic_versions() == host_heads() | {BRANCH_HEAD}
    flask_migrate.check()


def test_host_revisions_that_rebuild_sessions_keep_its_links(app, fake_cli, run_session_now):
    """0004 rebuilds `sessions` on SQLite; the incidents pointing at a session keep their link."""
    fake_cli(sl.steps(sl.init(), sl.text("[INCIDENT:major:nas] Disk failing"), sl.result()))
    session_id = run_session_now().id
    # As at start-up, nothing else holds the tables: PostgreSQL's DDL would
    # wait for this test's own open transaction.
    db.session.commit()
    heads = alembic_versions()
    flask_migrate.downgrade(revision="0003_memories")
    # Another installed package's branch is its own affair: whether it stays
    # depends on the host revision it needs.
    assert alembic_versions() - other_plugins_revisions() == {"0003_memories", BRANCH_HEAD}
    flask_migrate.upgrade(revision="heads")
    assert alembic_versions() == heads
    assert incidents()["nas"].opened_session_id == session_id


def test_the_cli_upgrades_heads_checks_and_catches_a_missing_revision(installed, tmp_path):
    """What an operator runs: `claudeops db upgrade heads` and `claudeops db check`;
    and a copy of the plugin whose model gained a column without a revision fails the check."""
    def claudeops(site: Path, *args: str) -> subprocess.CompletedProcess:
        env = dict(os.environ, CLAUDEOPS_STATE_DIR=str(tmp_path / site.name), PYTHONPATH=str(site),
                   **database_env(tmp_path / site.name))
        return subprocess.run([str(CLAUDEOPS), *args], check=False, env=env, capture_output=True, text=True,
                              timeout=60)

    upgraded = claudeops(installed, "db", "upgrade", "heads")
    assert upgraded.returncode == 0, upgraded.stderr
    assert "Running upgrade  -> incidents_0001" in upgraded.stderr + upgraded.stdout
    checked = claudeops(installed, "db", "check")
    assert checked.returncode == 0, checked.stderr

    changed = tmp_path / "changed-site"
    shutil.copytree(installed, changed)
    models = changed / PACKAGE / "models.py"
    owner = "    owner: Mapped[str | None] = mapped_column(String(100))\n"
    models.write_text(models.read_text().replace("    updates: Mapped[int]", owner + "    updates: Mapped[int]"))
    assert claudeops(changed, "db", "upgrade", "heads").returncode == 0
    drifted = claudeops(changed, "db", "check")
    assert drifted.returncode != 0
    assert "Detected added column 'incidents.owner'" in drifted.stderr + drifted.stdout


# --- (3) markers through the real session pipeline ------------------------------------------

def test_markers_open_update_and_resolve_incidents_from_a_session(app, fake_cli, run_session_now):
    fake_cli(sl.steps(
        sl.init(),
        sl.text("Replication looks bad.\n[INCIDENT:major:postgres] Replica lag above 30 s"),
        sl.tool_use("echo '[INCIDENT:critical:evil] from a tool'"),
        sl.tool_result("[INCIDENT:critical:evil] from a tool\n[INCIDENT:resolved:postgres] from a tool"),
        sl.text("[INCIDENT:critical:postgres] Replica stopped replicating"),
        sl.text("Also [INCIDENT:minor:dns] Slow lookups [EVENT:info:dns] checked resolvers"),
        sl.text("[INCIDENT:Resolved:dns] Lookups fast again [DNS:NOERROR]"),
        sl.text("[INCIDENT:resolved:ghost] nothing was open\n[INCIDENT:purple:web] unknown severity\n"
                "[INCIDENT:major:web]"),
        sl.result()))
    session = run_session_now(tier=2)
    assert session.status == "completed"

    found = incidents()
    assert set(found) == {"postgres", "dns"}  # no tool output, no bad markers, one row per incident
    postgres, dns = found["postgres"], found["dns"]
    assert (postgres.status, postgres.severity, postgres.summary, postgres.updates) == (
        "open", "critical", "Replica stopped replicating", 1)
    assert (postgres.opened_session_id, postgres.tier, postgres.resolved_at) == (session.id, 2, None)
    assert (dns.status, dns.severity, dns.summary, dns.resolution) == (
        "resolved", "minor", "Slow lookups", "Lookups fast again [DNS:NOERROR]")   # no marker's tag ends it
    assert dns.resolved_session_id == session.id and dns.resolved_at >= dns.opened_at

    # The built-in events plugin still saw its own marker on the same line.
    events = app.test_client().get("/api/v1/events?service=dns").get_json()["events"]
    assert [e["message"] for e in events] == ["checked resolvers"]

    # What the plugin recorded is in the session's activity log, as badges.
    activity = app.test_client().get(f"/sessions/{session.id}").get_data(as_text=True)
    for badge in ("incident:opened:major:postgres", "incident:updated:critical:postgres",
                  "incident:opened:minor:dns", "incident:resolved:minor:dns"):
        assert badge in activity
    assert "evil" not in json.dumps([i.to_dict() for i in found.values()])

    # A later session resolves the open one; a new incident for the service then opens afresh.
    fake_cli(sl.steps(sl.init(), sl.text("[INCIDENT:resolved:postgres] Replica caught up"),
                      sl.text("[INCIDENT:minor:postgres] Lag creeping up again"), sl.result()))
    later = run_session_now()
    from claudeops_incidents.models import Incident
    rows = db.session.scalars(db.select(Incident).where(Incident.service == "postgres").order_by(Incident.id)).all()
    assert [(r.status, r.severity) for r in rows] == [("resolved", "critical"), ("open", "minor")]
    assert rows[0].resolved_session_id == later.id and rows[1].opened_session_id == later.id


def test_a_session_opens_at_most_its_limit_of_incidents(app, fake_cli, run_session_now, caplog):
    """Beyond CLAUDEOPS_INCIDENTS_MAX_PER_SESSION (a runtime setting) an
    opening marker is refused, noted in the activity log and logged; updating
    and resolving still work, and the next session has its own allowance."""
    from app.runtime import change
    caplog.set_level(logging.DEBUG, logger="claudeops_incidents")
    assert "CLAUDEOPS_INCIDENTS_MAX_PER_SESSION" in [s.name for s in app.extensions["claudeops.settings"]]
    change({"CLAUDEOPS_INCIDENTS_MAX_PER_SESSION": 2})
    fake_cli(sl.steps(
        sl.init(),
        sl.text("[INCIDENT:minor:a] one\n[INCIDENT:minor:b] two\n[INCIDENT:minor:c] three"),
        sl.text("[INCIDENT:major:a] worse\n[INCIDENT:resolved:b] fine\n[INCIDENT:minor:d] four"),
        sl.result()))
    session = run_session_now()
    assert session.status == "completed"
    found = incidents()
    assert {service: (i.status, i.severity) for service, i in found.items()} == {
        "a": ("open", "major"), "b": ("resolved", "minor")}
    warnings = db.session.scalars(db.select(SessionActivity.body).where(
        SessionActivity.session_id == session.id, SessionActivity.kind == "warning",
        SessionActivity.title == "incident:not stored")).all()
    assert warnings == ["1 incident marker(s) not stored: the session reached CLAUDEOPS_INCIDENTS_MAX_PER_SESSION=2"] * 2
    # The service log has the first of them; the activity log has each.
    logged = [r for r in caplog.records if "CLAUDEOPS_INCIDENTS_MAX_PER_SESSION=2" in r.getMessage()]
    assert [r.levelname for r in logged] == ["WARNING", "DEBUG"]

    fake_cli(sl.steps(sl.init(), sl.text("[INCIDENT:minor:c] three, again"), sl.result()))
    run_session_now()
    assert set(incidents()) == {"a", "b", "c"}


def test_incident_marker_parsing():
    from claudeops_incidents.markers import IncidentMarker, parse_incident_markers
    assert parse_incident_markers(
        "[INCIDENT:MAJOR:web-1] Site down [MEMORY:timing:web-1] slow\n[INCIDENT:resolved:web-1]") == [
        IncidentMarker("major", "web-1", "Site down"), IncidentMarker("resolved", "web-1", "")]
    assert parse_incident_markers("[INCIDENT:major] no service\n[INCIDENT:major:web] ") == []
    # Its own tag ends a summary whatever tags it is given, so a line of many is read in one pass.
    many = parse_incident_markers("[INCIDENT:minor:a] x " * 50_000, tags=())
    assert len(many) == 50_000 and {marker.summary for marker in many} == {"x"}
    # A tag given ends it; a bracketed word that is no tag does not.
    assert [m.summary for m in parse_incident_markers("[INCIDENT:minor:a] HTTP [HTTP:503] [TODO:a] b",
                                                      tags=("[TODO:",))] == ["HTTP [HTTP:503]"]


# --- (4) page, card and API -----------------------------------------------------------------

def test_page_renders_in_the_sidebar_polls_and_escapes_agent_text(app, fake_cli, run_session_now):
    fake_cli(sl.steps(sl.init(), sl.text("[INCIDENT:critical:web] <script>alert(1)</script> site down"),
                      sl.text("[INCIDENT:minor:<b>x</b>] not a service"), sl.result()))
    run_session_now()
    client = app.test_client()

    response = client.get("/incidents")
    page = response.get_data(as_text=True)
    assert response.status_code == 200
    assert re.search(r'<a href="/incidents"\s+aria-current="page">Incidents</a>', page)
    assert page.index('href="/cooldowns"') < page.index('href="/incidents"')  # position 45, after Cooldowns (40)
    assert "&lt;script&gt;alert(1)&lt;/script&gt; site down" in page
    assert "<script>alert" not in page and "<b>x</b>" not in page
    assert 'hx-trigger="every 5s"' in page and 'id="incident-rows"' in page

    fragment = client.get("/incidents", headers={"HX-Request": "true"})
    assert "HX-Request" in fragment.headers["Vary"]
    assert "<nav" not in fragment.get_data(as_text=True)
    assert 'id="incidents-table"' in fragment.get_data(as_text=True)
    assert "No incidents match" in client.get("/incidents?status=resolved").get_data(as_text=True)

    assert 'href="/incidents"' in client.get("/events").get_data(as_text=True)  # on every page's sidebar
    overview = client.get("/").get_data(as_text=True)
    assert '<a href="/incidents">Open incidents</a>' in overview and "1 critical" in overview


def test_api_lists_filters_and_finds_incidents(app, fake_cli, run_session_now):
    fake_cli(sl.steps(sl.init(), sl.text("[INCIDENT:major:nas] Backups late\n[INCIDENT:critical:web] Down\n"
                                         "[INCIDENT:resolved:web] Up"), sl.result()))
    session = run_session_now()
    client = app.test_client()

    body = client.get("/api/v1/incidents").get_json()
    assert body["total"] == 2 and (body["limit"], body["offset"]) == (50, 0)
    nas, web = body["incidents"]  # open ones first
    assert nas == {"id": 1, "service": "nas", "severity": "major", "status": "open", "summary": "Backups late",
                   "resolution": None, "updates": 0, "tier": 1, "opened_at": nas["opened_at"],
                   "updated_at": nas["updated_at"], "resolved_at": None, "opened_session_id": session.id,
                   "resolved_session_id": None}
    assert nas["opened_at"].endswith("Z")
    assert (web["status"], web["resolution"], web["resolved_session_id"]) == ("resolved", "Up", session.id)

    assert [i["service"] for i in client.get("/api/v1/incidents?status=open").get_json()["incidents"]] == ["nas"]
    assert [i["service"] for i in client.get("/api/v1/incidents?severity=critical").get_json()["incidents"]] == ["web"]
    assert client.get("/api/v1/incidents?service=web&limit=1").get_json()["total"] == 1
    assert client.get("/api/v1/incidents/1").get_json()["service"] == "nas"

    bad = client.get("/api/v1/incidents?status=closed")
    assert bad.status_code == 400 and "status must be one of open, resolved" in bad.get_json()["error"]
    assert client.get("/api/v1/incidents?limit=0").status_code == 400
    missing = client.get("/api/v1/incidents/99")
    assert missing.status_code == 404 and missing.get_json() == {"error": "incident 99 not found"}
    assert client.get("/api/v1/stats").get_json()["open_incidents"] == 1


def test_its_api_is_in_the_openapi_document_and_keeps_to_it(app, fake_cli, run_session_now):
    """Its own description (claudeops_openapi_paths) joins the host's document,
    and schemathesis finds its endpoints true to it."""
    import schemathesis
    from hypothesis import HealthCheck, given, settings
    from openapi_spec_validator import validate
    from schemathesis.checks import not_a_server_error, response_schema_conformance, status_code_conformance

    fake_cli(sl.steps(sl.init(), sl.text("[INCIDENT:major:nas] Backups late\n[INCIDENT:critical:web] Down"),
                      sl.result()))
    run_session_now()
    doc = app.test_client().get("/api/v1/openapi.json").get_json()
    validate(doc)
    assert {"/incidents", "/incidents/{incident_id}"} <= set(doc["paths"])
    assert doc["components"]["schemas"]["Incident"]["properties"]["severity"]["enum"] == ["minor", "major",
                                                                                         "critical"]

    schema = schemathesis.openapi.from_wsgi("/api/v1/openapi.json", app).include(path_regex="^/incidents")
    operations = [result.ok() for result in schema.get_all_operations()]
    assert sorted(op.label for op in operations) == ["GET /incidents", "GET /incidents/{incident_id}"]
    for operation in operations:
        for mode in (schemathesis.GenerationMode.POSITIVE, schemathesis.GenerationMode.NEGATIVE):
            @given(case=operation.as_strategy(generation_mode=mode))
            @settings(max_examples=20, deadline=None, database=None, derandomize=True,
                      suppress_health_check=list(HealthCheck))
            def conforms(case):
                case.call_and_validate(checks=[not_a_server_error, status_code_conformance,
                                               response_schema_conformance])
            conforms()


# --- (5) prompt contribution ----------------------------------------------------------------

def test_prompt_section_gives_the_format_and_the_open_incidents(app, fake_cli, run_session_now):
    argv_file = fake_cli(sl.steps(sl.init(), sl.text("[INCIDENT:major:postgres] Replica lag above 30 s"),
                                  sl.result()))
    first = run_session_now()
    prompt = system_prompt_of(argv_file)
    assert prompt == first.system_prompt
    assert "## Incidents" in prompt and "[INCIDENT:<severity>:<service>] <summary>" in prompt
    assert "[INCIDENT:resolved:<service>]" in prompt and "No incident is open." in prompt
    # Sections by position: events 100, memory 200, … incidents 400.
    assert prompt.index("## Reporting events") < prompt.index("## Incidents")

    argv_file = fake_cli(sl.steps(sl.init(), sl.result()))
    second = run_session_now()
    prompt = system_prompt_of(argv_file)
    assert "Open incidents (1)" in prompt
    assert "- [major] postgres: Replica lag above 30 s (open since" in prompt and "incident #1)" in prompt
    assert prompt == second.system_prompt


# --- (6) the real service -------------------------------------------------------------------

@pytest.mark.slow
def test_the_real_service_runs_the_installed_plugin(installed, tmp_path, fake_cli):
    fake_cli(sl.steps(sl.init(), sl.text("[INCIDENT:major:nas] Backups <i>late</i>"), sl.result("noted")))
    state = tmp_path / "state"
    service = Service(state, {"CLAUDEOPS_INTERVAL": "0", "CLAUDEOPS_CLAUDE_BIN": str(FAKE_CLAUDE),
                              "PYTHONPATH": os.environ["PYTHONPATH"]})
    service.start()
    try:
        status, health = service.get("/api/v1/health")
        assert status == 200 and PLUGIN_NAME in health["plugins"]

        status, queued = service.post("/api/v1/sessions/trigger", {})
        assert status == 201
        wait_for(lambda: service.get(f"/api/v1/sessions/{queued['id']}")[1]["status"] == "completed",
                 timeout=30, what="the session to complete")
        status, body = service.get("/api/v1/incidents")
        assert status == 200 and [i["summary"] for i in body["incidents"]] == ["Backups <i>late</i>"]

        with urllib.request.urlopen(service.base_url + "/incidents", timeout=10) as response:
            page = response.read().decode()
        assert '>Incidents</a>' in page and "Backups &lt;i&gt;late&lt;/i&gt;" in page
        engine = create_engine(explicit_database_url(state))
        with engine.connect() as connection:
            versions = set(connection.scalars(text("SELECT version_num FROM alembic_version")))
        engine.dispose()
        assert BRANCH_HEAD in versions and versions - {BRANCH_HEAD}  # `claudeops serve` upgraded every head
    finally:
        assert service.terminate() == 0, service.log()
