"""A faulty plugin costs only itself while the service runs: a value of the
wrong type, a hook that raises, a link to no view. At start-up it stops the
service with a message naming the plugin and the hook instead."""
from __future__ import annotations

import logging
import re
import sqlite3

import pytest
from flask import Blueprint
from sqlalchemy import select, text
from sqlalchemy.exc import OperationalError

from app.config import Setting
from app.extensions import db
from app.hookspecs import hookimpl
from app import plugin_fault_log
from app.marker_queue import MarkerQueue
from app.models import Session, SessionActivity
from app.plugin_types import DashboardPage, MarkerRecord, OverviewCard, PromptSection
from app.plugins import ENTRY_POINT_GROUP, PluginError
from app.sessions import control
from app.sessions.manager import run_info, run_session
from plugins.events.models import Event
from plugins.memory.models import Memory
from tests import streamlines as sl
from tests.conftest import make_app


def plugin(name: str, **hooks):
    """A plugin registered under ``name`` whose hooks are the functions
    given (marked ``hookimpl`` here unless they are already)."""
    marked = {hook: fn if hasattr(fn, "claudeops_impl") else hookimpl(fn) for hook, fn in hooks.items()}
    return type(name, (), {"__name__": name, **{hook: staticmethod(fn) for hook, fn in marked.items()}})()


def raises(*_args, **_kwargs):
    raise RuntimeError("plugin bug")


def bad_query(*_args, **_kwargs):
    """A mistake in a plugin's SQL. On PostgreSQL it aborts the transaction,
    which must cost neither the other plugins nor the caller their work."""
    db.session.execute(text("SELECT * FROM no_such_table"))


FAILURES = pytest.mark.parametrize("failure", [raises, bad_query], ids=["raises", "bad-sql"])


def run_one() -> Session:
    """A session run now, in the current application context."""
    return run_session(control.claim(control.enqueue().id))


# --- the types a plugin returns check themselves ------------------------------

@pytest.mark.parametrize("make, field", [
    (lambda: PromptSection("x", None), "PromptSection.text must be str"),
    (lambda: PromptSection("x", "text", position="400"), "PromptSection.position must be int"),
    (lambda: PromptSection("x", "text", position=True), "PromptSection.position must be int"),
    (lambda: DashboardPage("Widgets", None), "DashboardPage.endpoint must be str"),
    (lambda: DashboardPage("Widgets", "widgets.index", blueprint="widgets"), "DashboardPage.blueprint must be"),
    (lambda: OverviewCard("Widgets", 3), "OverviewCard.value must be str"),
    (lambda: OverviewCard("Widgets", "3", link_endpoint=1), "OverviewCard.link_endpoint must be str or None"),
    (lambda: MarkerRecord("widget", "made", None), "MarkerRecord.summary must be str"),
    (lambda: MarkerRecord("widget", "made", stored="no"), "MarkerRecord.stored must be bool"),
])
def test_a_value_of_the_wrong_type_fails_where_the_plugin_makes_it(make, field):
    with pytest.raises(TypeError, match=field):
        make()


def test_an_unknown_card_tone_fails_where_the_plugin_makes_it():
    with pytest.raises(ValueError, match="tone must be one of neutral, good, warn, bad"):
        OverviewCard("Widgets", "3", tone="red")
    assert OverviewCard("Widgets", "3", tone="bad").tone == "bad"


def test_a_bad_prompt_section_costs_only_its_plugin(tmp_path, fake_cli, caplog):
    def slipped_through(run):
        section = PromptSection("changed", "## Changed after it was made")
        object.__setattr__(section, "position", "400")
        return section

    app = make_app(tmp_path, plugins=[
        plugin("no_text", claudeops_prompt_context=lambda run: PromptSection("bad", None)),
        plugin("text_position", claudeops_prompt_context=lambda run: PromptSection("bad", "## Bad", position="400")),
        plugin("slipped", claudeops_prompt_context=slipped_through),
        plugin("fine", claudeops_prompt_context=lambda run: PromptSection("fine", "## Fine", position=900))])
    fake_cli(sl.steps(sl.init(), sl.result("done")))
    with app.app_context():
        session = run_one()
        assert session.status == "completed", session.status_reason
        headings = [line for line in session.system_prompt.splitlines() if line.startswith("## ")]
    assert headings[0] == "## Environment" and headings[-1] == "## Fine" and "## Reporting events" in headings
    assert "## Bad" not in headings and "## Changed after it was made" not in headings
    assert "plugin no_text failed in claudeops_prompt_context" in caplog.text
    assert "plugin text_position failed in claudeops_prompt_context" in caplog.text
    assert "plugin slipped returned a prompt section that is left out: PromptSection.position must be int" \
        in caplog.text


# --- run-time hooks: one implementation that raises costs the others nothing ----------

@FAILURES
def test_a_failing_notice_plugin_costs_the_others_nothing(tmp_path, fake_cli, caplog, failure):
    # Registered last, so pluggy would call it first and give up on the events plugin.
    app = make_app(tmp_path, plugins=[plugin("deaf_feed", claudeops_notice=failure)])
    fake_cli(sl.steps(sl.init(), sl.text("[MEMORY:timing:web] Starts in 40 s\n[ESCALATE] web is slow"),
                      sl.result("done")))
    with app.app_context():
        session_id = run_one().id
        messages = db.session.scalars(select(Event.message).order_by(Event.id)).all()
    assert any("memory #1 [timing:web]" in message for message in messages), messages
    assert any(message.startswith(f"Session #{session_id} escalated to tier 2") for message in messages), messages
    assert caplog.text.count("plugin deaf_feed failed in claudeops_notice") == 2


@FAILURES
def test_a_failing_escalation_plugin_does_not_cancel_the_marker(tmp_path, fake_cli, caplog, failure):
    app = make_app(tmp_path, plugins=[plugin("broken_judge", claudeops_escalation=failure)])
    fake_cli(sl.steps(sl.init(), sl.text("[ESCALATE] the disk needs a closer look"), sl.result("done")))
    with app.app_context():
        session = run_one()
        assert session.status == "completed"
        child = db.session.scalars(select(Session).where(Session.parent_id == session.id)).one()
        assert (child.tier, child.escalation_reason) == (2, "the disk needs a closer look")
    assert "plugin broken_judge failed in claudeops_escalation" in caplog.text


@pytest.mark.parametrize("answer, said", [
    (True, "bool from claudeops_escalation, not str"), (1, "int from claudeops_escalation, not str"),
    (["why"], "list from claudeops_escalation, not str"),
    # Installed plugins are asked before the built-in ones: a blank answer must not silence [ESCALATE].
    ("", "'' from claudeops_escalation, which says nothing"),
    ("  \n ", "'  \\n ' from claudeops_escalation, which says nothing")])
def test_an_escalation_answer_that_is_not_a_reason_is_logged_and_the_next_plugin_asked(tmp_path, fake_cli, caplog,
                                                                                      answer, said):
    app = make_app(tmp_path, plugins=[plugin("loose_judge", claudeops_escalation=lambda run, result: answer)])
    fake_cli(sl.steps(sl.init(), sl.text("[ESCALATE] the disk needs a closer look"), sl.result("done")))
    with app.app_context():
        session = run_one()
        child = db.session.scalars(select(Session).where(Session.parent_id == session.id)).one()
        assert (child.tier, child.escalation_reason) == (2, "the disk needs a closer look")
    assert f"plugin loose_judge returned {said}; ignored, the next plugin is asked" in caplog.text


@FAILURES
def test_a_failing_memory_matcher_leaves_the_marker_to_the_next(tmp_path, fake_cli, caplog, failure):
    app = make_app(tmp_path, plugins=[plugin("broken_matcher", claudeops_memory_match=failure)])
    fake_cli(sl.steps(sl.init(), sl.text("[MEMORY:timing:web] Starts in 40 s"), sl.result("done")))
    with app.app_context():
        assert run_one().status == "completed"
        assert db.session.scalars(select(Memory.observation)).all() == ["Starts in 40 s"]
    assert "plugin broken_matcher failed in claudeops_memory_match" in caplog.text


def test_a_plugins_failed_query_costs_the_other_cards_and_figures_nothing(tmp_path, caplog):
    app = make_app(tmp_path, plugins=[plugin("bad_sql", claudeops_overview_cards=bad_query,
                                             claudeops_stats=bad_query)])
    client = app.test_client()
    html = client.get("/").get_data(as_text=True)
    assert "Events in 24 h" in html and "Sessions" in html
    stats = client.get("/api/v1/stats").get_json()
    assert {"critical_events_24h", "active_memories", "cooldown_denials_24h"} <= set(stats), stats
    assert "plugin bad_sql failed in claudeops_overview_cards" in caplog.text
    assert "plugin bad_sql failed in claudeops_stats" in caplog.text
    # Only the plugin at fault is named.
    assert re.findall(r"plugin (\S+) failed in claudeops_(?:overview_cards|stats)", caplog.text) == ["bad_sql"] * 2


def test_a_plugin_given_as_an_object_is_logged_by_its_class_not_a_number(tmp_path, caplog):
    class Broken:
        @hookimpl
        def claudeops_overview_cards(self):
            raise RuntimeError("no cards today")

    app = make_app(tmp_path, plugins=[Broken(), Broken()])
    assert app.test_client().get("/").status_code == 200
    name = f"{__name__}.{Broken.__qualname__}"
    assert f"plugin {name} failed in claudeops_overview_cards" in caplog.text
    assert f"plugin {name}#2 failed in claudeops_overview_cards" in caplog.text


# --- a fault repeated over and over is logged a few times, then counted ------------------

def test_a_plugin_failing_on_every_text_block_is_logged_a_few_times_not_for_each(tmp_path, fake_cli, caplog):
    app = make_app(tmp_path, plugins=[plugin("flaky", claudeops_markers=raises)])
    blocks = [sl.text(f"[EVENT:info:web] check {n} passed") for n in range(20)]
    fake_cli(sl.steps(sl.init(), *blocks, sl.result("done")))
    with app.app_context():
        assert run_one().status == "completed"
        # The plugin's failures cost nobody else: every event is stored.
        assert len(db.session.scalars(select(Event.message).where(Event.message.like("check %"))).all()) == 20
        # Each block's activity log says the plugin lost what it read there, as a failed flush does.
        lost = db.session.scalars(select(SessionActivity.body).where(SessionActivity.kind == "warning",
                                                                     SessionActivity.title == "markers:lost")).all()
        assert lost == ["plugin flaky failed on this text block (RuntimeError); nothing it read in it was stored; "
                        "see the service log"] * 20
    logged = [r for r in caplog.records if "plugin flaky failed in claudeops_markers" in r.getMessage()]
    assert len(logged) == plugin_fault_log.BURST
    assert all(r.exc_info for r in logged)   # each with its traceback
    assert "more like it within a minute are counted, not logged" in logged[-1].getMessage()
    # Another application (another service, another test) has counts of its own.
    other = make_app(tmp_path / "other", plugins=[plugin("flaky", claudeops_markers=raises)])
    fake_cli(sl.steps(sl.init(), blocks[0], sl.result("done")))
    with other.app_context():
        assert run_one().status == "completed"
    assert len([r for r in caplog.records if "plugin flaky failed in claudeops_markers" in r.getMessage()]) == \
        plugin_fault_log.BURST + 1


def test_fault_counts_let_a_burst_through_each_minute_and_say_how_many_were_left_out():
    now = [0.0]
    counts = plugin_fault_log.FaultCounts(clock=lambda: now[0])
    burst = [counts.admit(("p", "hook", "RuntimeError")) for _ in range(plugin_fault_log.BURST)]
    assert burst == [(0, False)] * (plugin_fault_log.BURST - 1) + [(0, True)]
    assert [counts.admit(("p", "hook", "RuntimeError")) for _ in range(5)] == [None] * 5
    # Another kind of fault, hook or plugin is counted apart.
    assert counts.admit(("p", "hook", "KeyError")) == (0, False)
    assert counts.admit(("q", "hook", "RuntimeError")) == (0, False)
    now[0] += plugin_fault_log.INTERVAL_SECONDS - 1
    assert counts.admit(("p", "hook", "RuntimeError")) is None
    now[0] += 1
    assert counts.admit(("p", "hook", "RuntimeError")) == (6, False)   # the minute is over: logged, with the count
    assert counts.admit(("p", "hook", "RuntimeError")) == (0, False)


def test_fault_counts_forget_keys_whose_minute_is_over_once_they_are_many(monkeypatch):
    monkeypatch.setattr(plugin_fault_log, "MAX_KEYS", 10)
    now = [0.0]
    counts = plugin_fault_log.FaultCounts(clock=lambda: now[0])
    for n in range(10):
        assert counts.admit(("p", "claudeops_stats", f"figure {n}")) == (0, False)
    now[0] += plugin_fault_log.INTERVAL_SECONDS
    assert counts.admit(("p", "claudeops_stats", "figure 10")) == (0, False)
    assert len(counts._windows) == 1
    # Within the minute nothing is forgotten, however many.
    for n in range(11, 25):
        counts.admit(("p", "claudeops_stats", f"figure {n}"))
    assert len(counts._windows) == 15


def test_a_fault_logged_after_its_minute_says_how_many_were_not(tmp_path, caplog):
    now = [100.0]
    app = make_app(tmp_path)
    app.extensions[plugin_fault_log.EXTENSION] = plugin_fault_log.FaultCounts(clock=lambda: now[0])
    log = logging.getLogger("tests.plugin_faults")
    with app.app_context():
        for _ in range(plugin_fault_log.BURST + 4):
            plugin_fault_log.log_fault(log, "p", "hook", "wrong type", "plugin %s returned %s", "p", "dict")
        now[0] += plugin_fault_log.INTERVAL_SECONDS
        plugin_fault_log.log_fault(log, "p", "hook", "wrong type", "plugin %s returned %s", "p", "dict")
    messages = [r.getMessage() for r in caplog.records if r.name == "tests.plugin_faults"]
    assert len(messages) == plugin_fault_log.BURST + 1
    assert messages[-1] == "plugin p returned dict (4 more like it were counted, not logged, before this one)"
    assert all(r.levelno == logging.WARNING for r in caplog.records if r.name == "tests.plugin_faults")


# --- results of the wrong type are logged, naming the plugin -----------------------------

def test_results_of_the_wrong_type_are_logged_naming_the_plugin(tmp_path, fake_cli, caplog):
    app = make_app(tmp_path, plugins=[plugin(
        "sloppy",
        claudeops_markers=lambda text, run: [{"kind": "widget"}] if "[WIDGET]" in text else None,
        claudeops_overview_cards=lambda: [{"title": "Widgets"}],
        claudeops_stats=lambda: [("widgets", 3)],
        claudeops_dashboard_pages=lambda: ["Widgets"],
        claudeops_settings=lambda: [{"name": "CLAUDEOPS_WIDGETS"}])])
    client = app.test_client()
    assert client.get("/").status_code == 200
    assert client.get("/api/v1/stats").status_code == 200
    fake_cli(sl.steps(sl.init(), sl.text("[WIDGET] made one"), sl.result("done")))
    with app.app_context():
        assert run_one().status == "completed"
    for hook, expected in (("claudeops_markers", "MarkerRecord or PendingRecords"),
                           ("claudeops_overview_cards", "OverviewCard"), ("claudeops_stats", "dict"),
                           ("claudeops_dashboard_pages", "DashboardPage"), ("claudeops_settings", "Setting")):
        assert f"from {hook}, not {expected}; ignored" in caplog.text, hook
    assert "plugin sloppy returned dict from claudeops_markers" in caplog.text


def test_cli_settings_of_the_wrong_type_are_logged_naming_the_plugin(tmp_path, fake_cli, caplog):
    app = make_app(tmp_path, plugins=[plugin("sloppy", claudeops_cli_settings=lambda run: "--verbose")])
    argv_file = fake_cli(sl.steps(sl.init(), sl.result("done")))
    with app.app_context():
        assert run_one().status == "completed"
    assert "plugin sloppy returned str from claudeops_cli_settings, not dict; ignored" in caplog.text
    assert "--verbose" not in argv_file.read_text().split('"--settings"')[1].split('"--mcp-config"')[0]


def test_mcp_tools_of_the_wrong_type_are_logged_naming_the_plugin(tmp_path, caplog):
    from app.mcp import plugin_tools
    app = make_app(tmp_path, plugins=[plugin("sloppy", claudeops_mcp_tools=lambda: [{"name": "widgets"}])])
    with app.app_context():
        assert "widgets" not in {tool.name for tool in plugin_tools()}
    assert "plugin sloppy returned dict from claudeops_mcp_tools, not McpTool; ignored" in caplog.text


# --- what a plugin queued is dropped by the host when the session ends ------------------

def test_what_a_session_left_in_a_plugins_queue_is_dropped_when_it_ends(tmp_path, fake_cli):
    """A plugin that keeps to the guide (add in claudeops_markers, take in
    claudeops_markers_flush) and never clears its queue: the database refuses
    the batch before its flush, and the session's end drops what it queued."""
    queue = MarkerQueue("widgets")

    def flush(run):
        for markers, pending in queue.take(run):
            pending.fill([MarkerRecord("widget", "made", markers[0])])

    def locked(run):
        raise OperationalError("INSERT INTO widgets", {}, sqlite3.OperationalError("database is locked"))

    app = make_app(tmp_path, plugins=[
        plugin("widgets", claudeops_markers=lambda text, run: [queue.add(run, [text])] if "[WIDGET]" in text else None,
               claudeops_markers_flush=flush),
        plugin("locked", claudeops_markers_flush=hookimpl(tryfirst=True)(locked))])
    fake_cli(sl.steps(sl.init(), sl.text("[WIDGET] one"), sl.result("done")))
    with app.app_context():
        session = run_one()
        assert session.status == "failed" and "database is locked" in session.status_reason
        assert queue.take(run_info(session)) == []


# --- start-up hooks: a failure stops the service, naming the plugin and the hook ----------

def test_an_installed_plugin_that_cannot_be_imported_stops_the_start(tmp_path, monkeypatch):
    (tmp_path / "claudeops_test_broken_ep.py").write_text("raise ImportError('needs widgets 2')\n")
    dist_info = tmp_path / "claudeops_test_broken_ep-0.1.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text("Metadata-Version: 2.1\nName: claudeops-test-broken-ep\nVersion: 0.1\n")
    (dist_info / "entry_points.txt").write_text(f"[{ENTRY_POINT_GROUP}]\nbroken-ep = claudeops_test_broken_ep\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(PluginError, match="^plugin broken-ep could not be loaded: ImportError: needs widgets 2$"):
        make_app(tmp_path)


def installed_broken_plugin(tmp_path, monkeypatch, name="broken-ep", module="claudeops_test_broken_ep") -> None:
    (tmp_path / f"{module}.py").write_text("raise ImportError('needs widgets 2')\n")
    dist_info = tmp_path / f"{module}-0.1.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {module}\nVersion: 0.1\n")
    (dist_info / "entry_points.txt").write_text(f"[{ENTRY_POINT_GROUP}]\n{name} = {module}\n")
    monkeypatch.syspath_prepend(str(tmp_path))


def test_an_installed_plugin_named_in_disable_plugins_is_not_loaded_and_the_service_starts(tmp_path, monkeypatch,
                                                                                             caplog):
    installed_broken_plugin(tmp_path, monkeypatch)
    with caplog.at_level(logging.WARNING, logger="app.plugins"):
        app = make_app(tmp_path, CLAUDEOPS_DISABLE_PLUGINS=" broken-ep ,")
    assert "plugin broken-ep is not loaded: CLAUDEOPS_DISABLE_PLUGINS names it" in caplog.text
    names = [name for name, _ in app.extensions["claudeops.plugins"].list_name_plugin()]
    assert "broken-ep" not in names and "plugins.memory" in names
    with app.app_context():
        assert app.test_client().get("/api/v1/health").get_json()["status"] == "ok"


def test_a_name_in_disable_plugins_that_is_not_installed_is_a_warning(tmp_path, monkeypatch, caplog):
    installed_broken_plugin(tmp_path, monkeypatch)
    with caplog.at_level(logging.WARNING, logger="app.plugins"):
        with pytest.raises(PluginError, match="^plugin broken-ep could not be loaded"):   # the typo left it loaded
            make_app(tmp_path, CLAUDEOPS_DISABLE_PLUGINS="broken_ep,plugins.memory")
    assert "CLAUDEOPS_DISABLE_PLUGINS names broken_ep, which is not an installed plugin (installed: " in caplog.text
    assert "CLAUDEOPS_DISABLE_PLUGINS names plugins.memory, which is not an installed plugin" in caplog.text
    assert "built-in plugins cannot be disabled" in caplog.text


def test_disable_plugins_takes_only_plugin_names_and_is_shown_as_it_is_written(tmp_path):
    from app.config import SETTINGS, ConfigError, plugin_names
    from app.web.config_page import shown
    with pytest.raises(ConfigError, match=r"^CLAUDEOPS_DISABLE_PLUGINS='a b': 'a b' is not a plugin's name"):
        make_app(tmp_path, CLAUDEOPS_DISABLE_PLUGINS="a b")
    (spec,) = [s for s in SETTINGS if s.name == "CLAUDEOPS_DISABLE_PLUGINS"]
    assert shown(spec, plugin_names("widgets, incidents,")) == "incidents,widgets"   # as `claudeops config` prints it


def test_the_start_up_error_of_an_installed_plugin_says_how_to_start_without_it(tmp_path, monkeypatch):
    import os
    import subprocess
    import sys
    from pathlib import Path

    from tests.support.database import database_env
    installed_broken_plugin(tmp_path, monkeypatch)
    env = {**os.environ, "CLAUDEOPS_STATE_DIR": str(tmp_path / "state"), **database_env(tmp_path / "state"),
           "PYTHONPATH": str(tmp_path)}
    claudeops = str(Path(sys.executable).with_name("claudeops"))
    broken = subprocess.run([claudeops, "memories", "list"], env=env, capture_output=True, text=True, timeout=120)
    assert broken.returncode == 78   # EX_CONFIG
    assert ("plugin broken-ep could not be loaded: ImportError: needs widgets 2 "
            "(CLAUDEOPS_DISABLE_PLUGINS=broken-ep starts the service without it)") in broken.stderr
    skipped = subprocess.run([claudeops, "memories", "list"], env={**env, "CLAUDEOPS_DISABLE_PLUGINS": "broken-ep"},
                             capture_output=True, text=True, timeout=120)
    assert "plugin broken-ep is not loaded" in skipped.stderr and "could not be loaded" not in skipped.stderr
    assert "there is no Claude Ops database" in skipped.stderr   # past the plugins, to the command's own check


@pytest.mark.parametrize("hook", ["claudeops_settings", "claudeops_dashboard_pages", "claudeops_cli_commands",
                                  "claudeops_api_blueprints", "claudeops_migration_dirs"])
def test_a_start_up_hook_that_raises_stops_the_start_naming_the_plugin(tmp_path, hook):
    with pytest.raises(PluginError, match=f"^plugin broken failed in {hook}: RuntimeError: plugin bug$"):
        make_app(tmp_path, plugins=[plugin("broken", **{hook: raises})])


@pytest.mark.parametrize("name, owner", [("CLAUDEOPS_INTERVAL", "the host"),
                                         ("CLAUDEOPS_EVENTS_MAX_PER_SESSION", "plugin plugins.events")])
def test_a_setting_named_like_anothers_stops_the_start_naming_both(tmp_path, name, owner):
    taker = plugin("taker", claudeops_settings=lambda: [Setting(name, "5", "mine now", int)])
    with pytest.raises(PluginError, match=f"^plugin taker declares the setting {name}, which {owner} declares already$"):
        make_app(tmp_path, plugins=[taker])


def test_a_setting_outside_the_services_names_stops_the_start(tmp_path):
    stray = plugin("stray", claudeops_settings=lambda: [Setting("TODO_LIMIT", "5", "a limit", int)])
    with pytest.raises(PluginError, match="^plugin stray declares the setting 'TODO_LIMIT': "
                                          "a setting's name begins with CLAUDEOPS_$"):
        make_app(tmp_path, plugins=[stray])


def test_a_sidebar_link_to_no_view_stops_the_start(tmp_path):
    typo = Blueprint("typo", __name__)

    @typo.get("/typo")
    def index():
        return "typo"

    pages = plugin("typo_pages", claudeops_dashboard_pages=lambda: [DashboardPage("Typo", "typo.indx", typo)])
    with pytest.raises(PluginError, match="plugin typo_pages: the dashboard page 'Typo' links to endpoint 'typo.indx'"):
        make_app(tmp_path, plugins=[pages])


@pytest.mark.parametrize("hook, name, owner", [("claudeops_dashboard_pages", "events", "plugin plugins.events"),
                                               ("claudeops_api_blueprints", "api", "the host")])
def test_a_blueprint_name_already_taken_stops_the_start(tmp_path, hook, name, owner):
    clash = Blueprint(name, __name__)

    @clash.get("/clash")
    def index():
        return "clash"

    returns = [DashboardPage("Clash", f"{name}.index", clash)] if hook == "claudeops_dashboard_pages" else [clash]
    with pytest.raises(PluginError, match=f"{owner} and plugin clash both have a blueprint named '{name}'"):
        make_app(tmp_path, plugins=[plugin("clash", **{hook: lambda: returns})])


@pytest.mark.parametrize("path, other", [("/config", "the host (config.index)"),
                                         ("/sessions/<int:number>", "the host (sessions.detail)"),
                                         ("/memories", "plugin plugins.memory (memory.index)")])
def test_a_page_at_a_url_another_view_answers_stops_the_start(tmp_path, path, other):
    """Flask sends a request to the rule registered first: the plugin's page
    would take over the other's, or never be seen."""
    shadow = Blueprint("shadow", __name__)
    shadow.add_url_rule("/shadow", "index", lambda: "mine")
    shadow.add_url_rule(path, "taken", lambda **_: "mine too")
    pages = plugin("shadow", claudeops_dashboard_pages=lambda: [DashboardPage("Shadow", "shadow.index", shadow,
                                                                              position=5)])
    with pytest.raises(PluginError) as refused:
        make_app(tmp_path, plugins=[pages])
    owners = {other, "plugin shadow (shadow.taken)"}
    assert re.fullmatch(r"(.+ \(.+\)) and (.+ \(.+\)) both answer GET (\S+); only one would ever be reached: "
                        r"give each a URL of its own", str(refused.value))
    assert set(re.match(r"(.+) and (.+) both", str(refused.value)).groups()) == owners


def test_two_plugins_api_endpoints_at_one_url_stop_the_start(tmp_path):
    def api_of(name):
        blueprint = Blueprint(f"{name}_api", __name__)
        blueprint.add_url_rule("/tickets", "list", lambda: {"from": name})
        return plugin(name, claudeops_api_blueprints=lambda: [blueprint])
    with pytest.raises(PluginError, match=r"both answer GET /api/v1/tickets; only one would ever be reached"):
        make_app(tmp_path, plugins=[api_of("first"), api_of("second")])
    # The same URL for another method is no clash.
    other = Blueprint("other_api", __name__)
    other.add_url_rule("/tickets", "add", lambda: {}, methods=["POST"])
    make_app(tmp_path / "other", plugins=[api_of("first"), plugin("other", claudeops_api_blueprints=lambda: [other])])


@pytest.mark.parametrize("name, owner", [("run", "the host"), ("memories", "plugin plugins.memory"),
                                         ("db", "the host")])
def test_a_command_named_like_anothers_stops_the_start(tmp_path, name, owner):
    import click
    command = click.Command(name, callback=lambda: None)
    with pytest.raises(PluginError) as refused:
        make_app(tmp_path, plugins=[plugin("clash", claudeops_cli_commands=lambda: [command])])
    said = re.fullmatch(rf"(.+) and (.+) both have a command '{name}'; each needs a name of its own", str(refused.value))
    assert said and set(said.groups()) == {owner, "plugin clash"}


def test_a_hook_not_marked_hookimpl_stops_the_start(tmp_path):
    """pluggy registers only marked functions: this one would never be called."""
    unmarked = type("unmarked", (), {"__name__": "unmarked",
                                     "claudeops_markers": staticmethod(lambda text, run: None)})()
    with pytest.raises(PluginError, match="^plugin unmarked: claudeops_markers is not marked @hookimpl"):
        make_app(tmp_path, plugins=[unmarked])


def test_an_overview_card_linking_to_no_view_is_shown_without_its_link(tmp_path, caplog):
    cards = plugin("typo_cards", claudeops_overview_cards=lambda: [
        OverviewCard("Typo card", "1", link_endpoint="events.indx", position=99)])
    response = make_app(tmp_path, plugins=[cards]).test_client().get("/")
    assert response.status_code == 200
    html = response.get_data(as_text=True)
    assert "<h2>Typo card</h2>" in html and 'href="/events"' in html   # the events card keeps its link
    assert "plugin typo_cards: overview card 'Typo card' links to endpoint 'events.indx'" in caplog.text


def test_a_command_meeting_a_plugins_table_no_revision_creates_says_so_not_to_migrate(tmp_path):
    """At every head, migrating again (the usual advice) would not mend it."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    from tests.support.database import database_env
    (tmp_path / "claudeops_test_gadgets.py").write_text('''
import click
from flask.cli import with_appcontext
from sqlalchemy import select, text

from app.extensions import db
from app.hookspecs import hookimpl


class Gadget(db.Model):
    __tablename__ = "gadgets"
    id = db.Column(db.Integer, primary_key=True)


@click.command("gadgets")
@with_appcontext
def gadgets():
    click.echo(len(db.session.scalars(select(Gadget)).all()))


@hookimpl
def claudeops_cli_commands():
    return [gadgets]
''')
    dist_info = tmp_path / "claudeops_test_gadgets-0.1.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text("Metadata-Version: 2.1\nName: claudeops-test-gadgets\nVersion: 0.1\n")
    (dist_info / "entry_points.txt").write_text(f"[{ENTRY_POINT_GROUP}]\ngadgets = claudeops_test_gadgets\n")
    env = {**os.environ, "CLAUDEOPS_STATE_DIR": str(tmp_path / "state"), **database_env(tmp_path / "state"),
           "PYTHONPATH": str(tmp_path)}
    claudeops = str(Path(sys.executable).with_name("claudeops"))
    subprocess.run([claudeops, "db", "upgrade", "heads"], env=env, capture_output=True, check=True, timeout=120)
    result = subprocess.run([claudeops, "gadgets"], env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 1
    assert ("Error: tables or columns missing after migrating (plugin gadgets: gadgets): no revision creates them: "
            "a plugin ships its own") in result.stderr, result.stderr
    assert "db upgrade heads" not in result.stderr and "Traceback" not in result.stderr
