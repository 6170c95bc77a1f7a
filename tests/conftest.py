"""Shared fixtures: a throwaway app (its own state directory and database,
migrated by the real Alembic revisions) and a fake CLI driven by a script.

The database is a SQLite file in the state directory, or with
``bin/test --postgres`` a PostgreSQL database of its own (tests/support/database.py)."""
from __future__ import annotations

import json
from pathlib import Path

import flask_migrate
import pytest

from app import create_app
from tests.support import database

TESTS_DIR = Path(__file__).resolve().parent
FAKE_CLAUDE = TESTS_DIR / "fake_claude.py"
FIXTURES = TESTS_DIR / "fixtures"
# What htmx sends: the views answer with a fragment, not the whole page.
HTMX = {"HX-Request": "true"}


def make_app(tmp_path: Path, plugins=(), upgrade: bool = True, **overrides):
    config = {
        "TESTING": True,
        "WTF_CSRF_ENABLED": False,
        "CLAUDEOPS_STATE_DIR": str(tmp_path / "state"),
        "CLAUDEOPS_DATABASE_URL": "",
        "CLAUDEOPS_RESULTS_DIR": "",
        "CLAUDEOPS_WORKDIR": "",
        "CLAUDEOPS_CLAUDE_BIN": str(FAKE_CLAUDE),
        "CLAUDEOPS_LOG_LEVEL": "INFO",
        "CLAUDEOPS_SECRET_KEY": "test-secret",
    }
    config.update(overrides)
    if "CLAUDEOPS_DATABASE_URL" not in overrides:
        config["CLAUDEOPS_DATABASE_URL"] = database.database_url(config["CLAUDEOPS_STATE_DIR"])
    app = create_app(config, plugins=plugins)
    if upgrade:
        with app.app_context():
            flask_migrate.upgrade(revision="heads")
    return app


def pytest_addoption(parser):
    parser.addoption("--serial", choices=("include", "skip", "only"), default="include",
                     help="tests marked serial, which must run alone: run them with the others (include, "
                          "the default), leave them out (skip: bin/test's run across several processes), "
                          "or run only them")


def pytest_collection_modifyitems(config, items):
    part = config.getoption("--serial")
    if part == "include":
        return
    kept, left_out = [], []
    for item in items:
        alone = item.get_closest_marker("serial") is not None
        (kept if alone == (part == "only") else left_out).append(item)
    if left_out:
        config.hook.pytest_deselected(items=left_out)
        items[:] = kept


@pytest.fixture(autouse=True, scope="session")
def _drop_remaining_databases():
    """What module-scoped services created is dropped when the run ends."""
    yield
    database.drop_created_since(0)


@pytest.fixture(autouse=True)
def _drop_test_databases():
    """Each test's PostgreSQL databases are dropped when it ends (autouse: set
    up before, so torn down after, the test's other function-scoped fixtures)."""
    count = database.created_count()
    yield
    database.drop_created_since(count)


@pytest.fixture
def app(tmp_path):
    app = make_app(tmp_path)
    with app.app_context():
        yield app


@pytest.fixture
def fake_cli(tmp_path, monkeypatch):
    """Write a script for tests/fake_claude.py; returns a function that takes
    the steps and gives the path where the fake records its argv."""
    def script(steps: list[dict]) -> Path:
        script_path = tmp_path / "script.json"
        argv_path = tmp_path / "argv.json"
        script_path.write_text(json.dumps(steps))
        monkeypatch.setenv("FAKE_CLAUDE_SCRIPT", str(script_path))
        monkeypatch.setenv("FAKE_CLAUDE_ARGV", str(argv_path))
        return argv_path
    return script


@pytest.fixture
def cli_pid_file(tmp_path, monkeypatch):
    """Where the fake CLI writes its own pid and process group."""
    path = tmp_path / "cli.pid"
    monkeypatch.setenv("FAKE_CLAUDE_PID", str(path))
    return path


@pytest.fixture
def orphan_pid_file(tmp_path, monkeypatch):
    """Where the fake CLI's leftover child (an ``orphan`` step) writes its pid."""
    path = tmp_path / "orphan.pid"
    monkeypatch.setenv("FAKE_CLAUDE_ORPHAN_PID", str(path))
    return path


@pytest.fixture
def run_session_now(app):
    """Queue a session and run it in this process, as the scheduler would."""
    from app.sessions import control
    from app.sessions.manager import run_session

    def run(tier: int = 1, prompt: str | None = None, trigger: str = "api", shutdown=None):
        session = control.claim(control.enqueue(tier=tier, prompt=prompt, trigger=trigger).id)
        return run_session(session, shutdown)
    return run


# --- the browser tests' shared service and browser ------------------------------

@pytest.fixture
def guard():
    """The confirm dialogs a test announces (``guard.expect``) before it
    causes them: those are accepted, any other dialog fails the test."""
    from tests.support.browser import ConfirmGuard
    return ConfirmGuard()


@pytest.fixture
def page(browser, service, guard):
    """A page of the module's ``service``, guarded (tests/support/browser.py);
    a confirm dialog announced and never shown fails the test too."""
    from tests.support.browser import guarded_page
    with guarded_page(browser, service.base_url, guard, width=1400) as page:
        yield page
    assert not guard.expected, f"confirm dialogs announced but never shown: {guard.expected}"


@pytest.fixture(scope="module")
def browser():
    """Debian's chromium through Playwright, one per test module; skips when
    bin/test did not provide chromium (before any service is started)."""
    from playwright.sync_api import sync_playwright

    from tests.support.browser import chromium_path, launch
    chromium_path()
    with sync_playwright() as playwright:
        browser = launch(playwright)
        yield browser
        browser.close()


@pytest.fixture(scope="module")
def browser_service(browser, tmp_path_factory):
    """The real `claudeops serve` (gunicorn + scheduler) with the fake CLI,
    one per test module. Tests rewrite ``service.script_path`` before they
    trigger a session."""
    from tests import streamlines as sl
    from tests.support.browser import write_script
    from tests.support.service import Service
    root = tmp_path_factory.mktemp("browser")
    script = root / "script.json"
    write_script(script, sl.steps(sl.init(), sl.result("idle")))
    service = Service(root / "state", {"CLAUDEOPS_INTERVAL": "0", "CLAUDEOPS_CLAUDE_BIN": str(FAKE_CLAUDE),
                                       "FAKE_CLAUDE_SCRIPT": str(script)}, workers=2)
    service.script_path = script
    service.start()
    yield service
    service.terminate()


@pytest.fixture(scope="module")
def review_browser_service(browser_service):
    """The module's service with memory review on: the agent's memories wait in the inbox."""
    status, body = browser_service.request("PUT", "/api/v1/config", {"CLAUDEOPS_MEMORY_REVIEW": True})
    assert status == 200, body
    return browser_service


OPERATOR_PASSWORD = "a long operator password"
OPERATOR_TOKEN = "api-token-7d0c2b9f6e4a"


@pytest.fixture(scope="module")
def locked_browser_service(browser, tmp_path_factory):
    """The real service on every address, so closed: the dashboard takes
    ``OPERATOR_PASSWORD`` (the login page, Log out), the API ``OPERATOR_TOKEN``.
    Its CLI answers every session with "All quiet."."""
    from tests import streamlines as sl
    from tests.support.browser import write_script
    from tests.support.service import Service
    root = tmp_path_factory.mktemp("locked")
    script = root / "script.json"
    write_script(script, sl.steps(sl.init(), sl.text("All quiet."), sl.result("All quiet.")))
    service = Service(root / "state", {"CLAUDEOPS_INTERVAL": "0", "CLAUDEOPS_CLAUDE_BIN": str(FAKE_CLAUDE),
                                       "FAKE_CLAUDE_SCRIPT": str(script), "CLAUDEOPS_PASSWORD": OPERATOR_PASSWORD,
                                       "CLAUDEOPS_API_TOKEN": OPERATOR_TOKEN}, host="0.0.0.0")
    service.start()
    yield service
    service.terminate()
