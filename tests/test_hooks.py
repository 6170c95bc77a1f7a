"""Each hook, exercised by a small plugin registered for one app only.

``test_every_hook_is_tested_and_documented`` fails when a hookspec has no
``test_hook_<name>...`` here or is missing from docs/plugins.md.
"""
from __future__ import annotations

import inspect
import logging
import re
from pathlib import Path

import pytest
from flask import Blueprint
from sqlalchemy import select

from app import hookspecs, runtime
from app.config import PROJECT_ROOT
from app.extensions import db
from app.hookspecs import hookimpl
from app.marker_queue import MarkerQueue
from app.models import SessionActivity
from app.plugin_types import DashboardPage, MarkerRecord, OverviewCard, PendingRecords, PromptSection
from app.plugins import BUILTIN_PLUGINS, ENTRY_POINT_GROUP, PluginError, make_plugin_manager, plugin_manager
from app.sessions import activity
from plugins.events.models import Event
from tests import streamlines as sl
from tests.conftest import make_app

HOOK_NAMES = sorted(name for name, _ in inspect.getmembers(hookspecs, inspect.isfunction)
                    if name.startswith("claudeops_"))


def named(name: str, plugin):
    """``plugin`` registered under ``name``, as an installed one is under its entry point's."""
    plugin.__name__ = name
    return plugin


def all_hookspecs() -> dict:
    """The host's hooks and those the built-in plugins declare, by name."""
    pm = make_plugin_manager(load_entry_points=False)
    return {name: caller.spec.function for name, caller in vars(pm.hook).items()
            if name.startswith("claudeops_") and getattr(caller, "spec", None) is not None}


def test_every_hook_is_tested_and_documented():
    test_sources = "".join(path.read_text() for path in Path(__file__).parent.glob("test_*.py"))
    guide = (PROJECT_ROOT / "docs" / "plugins.md").read_text()
    specs = all_hookspecs()
    assert set(HOOK_NAMES) < set(specs)
    for hook in specs:
        assert f"def test_hook_{hook}" in test_sources, f"{hook} has no test"
        assert f"`{hook}" in guide, f"{hook} is missing from docs/plugins.md"
    assert ENTRY_POINT_GROUP in guide


def test_every_hookspec_documents_its_call_semantics():
    for hook, function in all_hookspecs().items():
        doc = inspect.getdoc(function)
        assert doc and ":returns:" in doc and "Called" in doc, hook
        semantics = doc.split(":returns:")[1].lower()
        assert "called" in semantics or "first result wins" in semantics, \
            f"{hook}: say whether results are collected or the first answer wins"


def test_misspelt_hookimpl_fails_loudly_naming_the_plugin():
    class Typo:
        @hookimpl
        def claudeops_marker(self, text, run):  # missing "s"
            return None
    with pytest.raises(PluginError, match="^plugin typo: unknown hook 'claudeops_marker'$"):
        make_plugin_manager([named("typo", Typo())], load_entry_points=False)


@pytest.mark.parametrize("hook, impl", [
    ("claudeops_markers", lambda self, text, run: (yield)),
    ("claudeops_memory_match", lambda self, category, service, observation, candidates: (yield)),
])
@pytest.mark.parametrize("style", [{"wrapper": True}, {"hookwrapper": True}])
def test_a_hook_wrapper_of_a_hook_the_host_calls_stops_the_start(hook, impl, style):
    """The host calls each implementation on its own: a wrapper would never be called."""
    wrapping = type("Wrapping", (), {hook: hookimpl(**style)(impl)})()
    with pytest.raises(PluginError, match=f"^plugin wrapping: {hook} is a hook wrapper, which the host never calls"):
        make_plugin_manager([named("wrapping", wrapping)], load_entry_points=False)


def test_builtin_plugins_are_registered_by_name(app):
    pm = app.extensions["claudeops.plugins"]
    for name in BUILTIN_PLUGINS:
        assert pm.get_plugin(name) is not None


def test_entry_point_plugins_are_loaded(monkeypatch, tmp_path):
    """An installed distribution (a real dist-info on sys.path) that names a
    module under the entry-point group is registered, under its entry-point name."""
    (tmp_path / "claudeops_test_ep_plugin.py").write_text(
        "from app.hookspecs import hookimpl\n"
        "from app.plugin_types import OverviewCard\n"
        "@hookimpl\n"
        "def claudeops_overview_cards():\n"
        "    return [OverviewCard('From an entry point', '42')]\n")
    _installed(tmp_path, "claudeops-test-ep", "test-ep = claudeops_test_ep_plugin")
    monkeypatch.syspath_prepend(str(tmp_path))
    pm = make_plugin_manager()
    assert pm.get_plugin("test-ep").__name__ == "claudeops_test_ep_plugin"
    app = make_app(tmp_path)
    assert "From an entry point" in app.test_client().get("/").get_data(as_text=True)


def _installed(site, distribution: str, entry_points: str) -> None:
    dist_info = site / f"{distribution.replace('-', '_')}-0.1.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {distribution}\nVersion: 0.1\n")
    (dist_info / "entry_points.txt").write_text(f"[{ENTRY_POINT_GROUP}]\n{entry_points}\n")


def test_a_plugin_name_two_packages_declare_stops_the_start_naming_both(monkeypatch, tmp_path):
    for distribution, module in (("claudeops-ticket", "claudeops_ticket"), ("claudeops-tickets", "tickets_plugin")):
        (tmp_path / f"{module}.py").write_text("")
        _installed(tmp_path, distribution, f"ticket = {module}")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(PluginError) as raised:
        make_plugin_manager()
    assert str(raised.value) == (
        "plugin ticket is declared by more than one installed package: claudeops-ticket (claudeops_ticket); "
        "claudeops-tickets (tickets_plugin). Only one could be loaded: uninstall one of them, or rename its "
        "entry point")
    # Disabled, neither is loaded, and nothing is left to chance.
    assert not make_plugin_manager(disabled=frozenset({"ticket"})).has_plugin("ticket")
    # Two packages of one module (a fork, say) are two declarations too.
    _installed(tmp_path, "claudeops-ticket-ng", "ticket = claudeops_ticket")
    with pytest.raises(PluginError, match=r"claudeops-ticket \(claudeops_ticket\); claudeops-ticket-ng "
                                          r"\(claudeops_ticket\); claudeops-tickets \(tickets_plugin\)"):
        make_plugin_manager()


def test_an_entry_point_named_as_a_built_in_plugin_stops_the_start(monkeypatch, tmp_path):
    (tmp_path / "shadow.py").write_text("")
    _installed(tmp_path, "claudeops-shadow", "plugins.events = shadow")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(PluginError, match=r"^plugin plugins.events: the package claudeops-shadow declares an entry "
                                          r"point named as a built-in plugin"):
        make_plugin_manager()


# --- claudeops_markers ------------------------------------------------------

class Recorder:
    """Records every call; returns a badge for text containing [PING]."""

    def __init__(self):
        self.texts = []

    @hookimpl
    def claudeops_markers(self, text, run):
        self.texts.append((text, run.session_id, run.tier))
        if "[PING]" in text:
            return [MarkerRecord("ping", "pong", "saw a ping")]
        return None


def test_hook_claudeops_markers_gets_only_assistant_text(tmp_path, fake_cli):
    recorder = Recorder()
    app = make_app(tmp_path, plugins=[recorder])
    fake_cli(sl.steps(sl.init(), sl.text("first [PING]"), sl.tool_use("echo '[PING] tool input'"),
                      sl.tool_result("[PING] tool output"), sl.text("second"), sl.result("second")))
    with app.app_context():
        from app.sessions import control
        from app.sessions.manager import run_session
        session = run_session(control.claim(control.enqueue(tier=2).id))
        assert [t for t, _, _ in recorder.texts] == ["first [PING]", "second"]
        assert all(sid == session.id and tier == 2 for _, sid, tier in recorder.texts)
        badges = db.session.scalars(select(SessionActivity.title).where(SessionActivity.kind == "marker")).all()
        assert badges == ["ping:pong"]


def test_a_subagents_text_is_logged_but_never_read_for_markers(tmp_path, fake_cli):
    """A subagent (the Task tool) reports to the agent as a tool would, and
    may quote what it read: the CLI names the tool call it works for."""
    recorder = Recorder()
    app = make_app(tmp_path, plugins=[recorder])
    subagent = dict(sl.text("[PING] [EVENT:critical:db] quoted from a log"), parent_tool_use_id="toolu_task_1")
    fake_cli(sl.steps(sl.init(), sl.text("delegating [PING]"), subagent,
                      sl.tool_result("db is fine", tool_id="toolu_task_1"), sl.text("done"), sl.result("done")))
    with app.app_context():
        from app.sessions import control
        from app.sessions.manager import run_session
        session = run_session(control.claim(control.enqueue(tier=1).id))
        assert session.status == "completed"
        assert [t for t, _, _ in recorder.texts] == ["delegating [PING]", "done"]
        assert db.session.scalars(select(Event.message)).all() == []
        texts = db.session.execute(select(SessionActivity.title, SessionActivity.body).where(
            SessionActivity.kind == "text").order_by(SessionActivity.id)).all()
        assert [tuple(row) for row in texts] == [(None, "delegating [PING]"),
                                                 ("subagent", "[PING] [EVENT:critical:db] quoted from a log"),
                                                 (None, "done")]
        assert "quoted from a log" not in session.response


def test_hook_claudeops_markers_a_failing_plugin_loses_only_its_own_work(tmp_path, fake_cli, caplog):
    class Broken:
        @hookimpl
        def claudeops_markers(self, text, run):
            db.session.add(Event(level="info", message="half-written by a broken plugin"))
            raise RuntimeError("plugin bug")

    app = make_app(tmp_path, plugins=[Broken()])
    fake_cli(sl.steps(sl.init(), sl.text("[EVENT:critical:nas] disk"), sl.result()))
    with app.app_context():
        from app.sessions import control
        from app.sessions.manager import run_session
        session = run_session(control.claim(control.enqueue().id))
        assert session.status == "completed"
        assert db.session.scalars(select(Event.message)).all() == ["disk"]
    assert "plugin bug" in caplog.text


class FailsOn:
    """Runs after the builtins and fails on blocks holding ``word``; with
    ``notice``, sends one for every block first."""

    def __init__(self, word: str, notice: bool = False):
        self.word, self.notice = word, notice

    @hookimpl(trylast=True)
    def claudeops_markers(self, text, run):
        if self.notice:
            plugin_manager().hook.claudeops_notice(level="info", message=f"noticed: {text}", service=None, run=run)
        if self.word in text:
            raise RuntimeError("plugin bug")


def test_hook_claudeops_markers_a_failure_takes_back_no_rows_another_plugin_staged(tmp_path, fake_cli, caplog,
                                                                                   monkeypatch):
    """An event marker's row waits for the commit. A plugin failing after the
    events plugin staged it, with nothing written since the last commit
    (each line is committed here), rolls the whole transaction back: the
    staged row survives that; the failing plugin's own notice does not."""
    monkeypatch.setattr(activity, "COMMIT_EVERY_LINES", 1)
    app = make_app(tmp_path, plugins=[FailsOn("boom", notice=True)])
    fake_cli(sl.steps(sl.init(), sl.text("warm up"), sl.text("[EVENT:critical:nas] disk boom"),
                      sl.text("[EVENT:info:nas] after"), sl.result()))
    with app.app_context():
        from app.sessions import control
        from app.sessions.manager import run_session
        session = run_session(control.claim(control.enqueue().id))
        assert session.status == "completed"
        messages = db.session.scalars(select(Event.message).order_by(Event.id)).all()
    assert messages == ["noticed: warm up", "disk boom", "after", "noticed: [EVENT:info:nas] after"]
    assert "plugin bug" in caplog.text


def test_hook_claudeops_markers_a_failure_after_a_savepoint_takes_back_only_its_own_staged_rows(tmp_path, fake_cli):
    """The same with a mark in the database to roll back to (the session's
    row was updated since the last commit, so the fan-out took a savepoint
    before the first block): the failing call's notice goes; what was staged
    before it stays, the plugin's notice of the block before included."""
    app = make_app(tmp_path, plugins=[FailsOn("boom", notice=True)])
    fake_cli(sl.steps(sl.init(), sl.text("[EVENT:info:web] first"), sl.text("[EVENT:critical:nas] disk boom"),
                      sl.result()))
    with app.app_context():
        from app.sessions import control
        from app.sessions.manager import run_session
        run_session(control.claim(control.enqueue().id))
        messages = db.session.scalars(select(Event.message).order_by(Event.id)).all()
    assert messages == ["first", "noticed: [EVENT:info:web] first", "disk boom"]


def test_hook_claudeops_markers_another_threads_writes_set_off_no_savepoint(tmp_path):
    """A savepoint marks only this thread's writes: the scheduler's heartbeat
    writing from its own thread must not make the fan-out begin the batch's
    transaction with a savepoint (on SQLite a deferred transaction, whose
    first write fails at once if another connection wrote after its first read)."""
    import threading
    from sqlalchemy import insert
    from app.sessions import control
    from app.sessions.fanout import MarkerFanOut
    from app.sessions.manager import run_info
    app = make_app(tmp_path, plugins=[FailsOn("never")])
    with app.app_context():
        session = control.claim(control.enqueue().id)
        fan_out = MarkerFanOut(run_info(session))
        db.session.commit()
        fan_out.committed()

        def heartbeat():
            with app.app_context(), db.engine.begin() as connection:
                connection.execute(insert(Event).values(level="info", message="from another thread",
                                                        created_at=session.created_at))
        writer = threading.Thread(target=heartbeat)
        writer.start()
        writer.join()
        fan_out("a text block")
        assert fan_out.savepoint is None   # nothing written by this thread since the commit

        db.session.add(Event(level="info", message="written here", created_at=session.created_at))
        db.session.flush()
        fan_out("another text block")
        assert fan_out.savepoint is not None and fan_out.savepoint.is_active
        db.session.commit()
        assert sorted(db.session.scalars(select(Event.message))) == ["from another thread", "written here"]


# --- claudeops_markers_flush ---------------------------------------------------

class Deferring:
    """Queues each [PING] and writes the queue as events in claudeops_markers_flush."""

    def __init__(self, fail: str | None = None):
        self.queued, self.flushes, self.fail = [], 0, fail

    @hookimpl
    def claudeops_markers(self, text, run):
        if "[PING]" not in text:
            return None
        pending = PendingRecords()
        self.queued.append((text, pending))
        return [MarkerRecord("ping", "seen", "before the batch"), pending]

    @hookimpl
    def claudeops_markers_flush(self, run):
        self.flushes += 1
        for text, pending in self.queued:
            db.session.add(Event(level="info", message=f"deferred {text}", session_id=run.session_id))
        db.session.flush()
        if self.fail == "raises":
            raise RuntimeError("flush bug")
        for n, (text, pending) in enumerate(self.queued):
            pending.fill([MarkerRecord("ping", f"written {n}", text), MarkerRecord("ping", "again", text)])
        if self.fail == "raises after filling":
            raise RuntimeError("flush bug")
        if self.fail == "refused":   # a row the database refuses at the host's flush, after the filling
            db.session.add(Event(level=None, message="no level", session_id=run.session_id))
        self.queued = []


def _activity(session_id):
    return db.session.execute(select(SessionActivity.kind, SessionActivity.title).where(
        SessionActivity.session_id == session_id).order_by(SessionActivity.id)).all()


def test_hook_claudeops_markers_flush_fills_the_records_in_their_place(tmp_path, fake_cli):
    deferring = Deferring()
    app = make_app(tmp_path, plugins=[deferring])
    fake_cli(sl.steps(sl.init(), sl.text("one [PING]"), sl.text("between"), sl.text("two [PING]"), sl.result("ok")))
    with app.app_context():
        from app.sessions import control
        from app.sessions.manager import run_session
        session = run_session(control.claim(control.enqueue().id))
        activity = [row for row in _activity(session.id) if row.kind in ("text", "marker", "warning")]
        events = db.session.scalars(select(Event.message).where(Event.session_id == session.id)).all()
    assert activity == [("text", None), ("marker", "ping:seen"), ("marker", "ping:written 0"), ("marker", "ping:again"),
                        ("text", None), ("text", None), ("marker", "ping:seen"), ("marker", "ping:written 1"),
                        ("marker", "ping:again")]
    assert sorted(events) == ["deferred one [PING]", "deferred two [PING]"]
    assert deferring.flushes >= 1 and deferring.queued == []


@pytest.mark.parametrize("fail, logged", [("raises", "flush bug"), ("raises after filling", "flush bug"),
                                          ("refused", "IntegrityError")])
def test_hook_claudeops_markers_flush_a_failing_plugin_loses_only_its_own_work(tmp_path, fake_cli, caplog, fail,
                                                                               logged):
    """Records it filled before it failed are not shown as stored: the rows
    they name were rolled back."""
    app = make_app(tmp_path, plugins=[Deferring(fail=fail)])
    fake_cli(sl.steps(sl.init(), sl.text("[PING] and [EVENT:warning:nas] disk"), sl.result("ok")))
    with app.app_context():
        from app.sessions import control
        from app.sessions.manager import run_session
        session = run_session(control.claim(control.enqueue().id))
        assert session.status == "completed"
        activity = _activity(session.id)
        events = db.session.scalars(select(Event.message).where(Event.session_id == session.id)).all()
    assert ("warning", "markers:lost") in activity and ("marker", "event:warning:nas") in activity
    assert ("marker", "ping:written 0") not in activity
    assert events == ["disk"]   # the plugin's own rows rolled back, the events plugin's kept
    assert logged in caplog.text


def test_hook_claudeops_markers_what_a_failing_call_queued_is_not_written(tmp_path, fake_cli, caplog):
    """A markers hook that queues a block's markers and then raises: the
    activity log says nothing it read in the block was stored, and the
    flush does not write them."""
    queue = MarkerQueue("widgets")

    class Queueing:
        @hookimpl
        def claudeops_markers(self, text, run):
            if "[WIDGET]" not in text:
                return None
            pending = queue.add(run, [text])
            if "[BAD]" in text:
                raise RuntimeError("markers bug")
            return pending

        @hookimpl
        def claudeops_markers_flush(self, run):
            for (text,), pending in queue.take(run):
                db.session.add(Event(level="info", message=text, session_id=run.session_id))
                pending.fill([MarkerRecord("widget", "made", text)])

    app = make_app(tmp_path, plugins=[Queueing()])
    fake_cli(sl.steps(sl.init(), sl.text("[WIDGET] one"), sl.text("[WIDGET][BAD] two"), sl.text("[WIDGET] three"),
                      sl.result("ok")))
    with app.app_context():
        from app.sessions import control
        from app.sessions.manager import run_session
        session = run_session(control.claim(control.enqueue().id))
        assert session.status == "completed"
        activity = [row for row in _activity(session.id) if row.kind in ("marker", "warning")]
        events = db.session.scalars(select(Event.message).where(Event.session_id == session.id)
                                    .order_by(Event.id)).all()
    assert activity == [("marker", "widget:made"), ("warning", "markers:lost"), ("marker", "widget:made")]
    assert events == ["[WIDGET] one", "[WIDGET] three"]
    assert "markers bug" in caplog.text


# --- claudeops_marker_tags ---------------------------------------------------

def test_hook_claudeops_marker_tags_only_blocks_with_a_tag_reach_the_plugin(tmp_path, fake_cli, caplog):
    class Tagged(Recorder):
        @hookimpl
        def claudeops_marker_tags(self):
            return ["[PING]", "[PONG:"]

    class Unusable(Recorder):
        @hookimpl
        def claudeops_marker_tags(self):
            return "[PING]"   # a string, not a list of them

    class Failing(Recorder):
        @hookimpl
        def claudeops_marker_tags(self):
            raise RuntimeError("tags bug")

    class NotAList(Recorder):
        @hookimpl
        def claudeops_marker_tags(self):
            return 42

    tagged, untagged, unusable, failing, odd = Tagged(), Recorder(), Unusable(), Failing(), NotAList()
    app = make_app(tmp_path, plugins=[tagged, untagged, unusable, failing, odd])
    texts = ["first [PING]", "nothing here", "a [PONG:x] and", "[ping] is not [PING"]
    fake_cli(sl.steps(sl.init(), *(sl.text(text) for text in texts), sl.tool_result("[PING] tool output"),
                      sl.result("done")))
    with app.app_context():
        from app.sessions import control
        from app.sessions.manager import run_session
        run_session(control.claim(control.enqueue().id))
        badges = db.session.scalars(select(SessionActivity.title).where(SessionActivity.kind == "marker")).all()
    assert [text for text, _, _ in tagged.texts] == ["first [PING]", "a [PONG:x] and"]
    # No tags, or tags that cannot be used: every block, as before the hook.
    for plugin in (untagged, unusable, failing, odd):
        assert [text for text, _, _ in plugin.texts] == texts
    assert badges.count("ping:pong") == 5
    assert "must return a list of non-empty strings" in caplog.text and "tags bug" in caplog.text


def test_hook_claudeops_marker_tags_of_the_builtins_begin_their_markers():
    """Each built-in's tags are where its marker patterns begin: a block
    without them holds none of its markers."""
    import re

    from plugins.cooldowns.markers import ANY_COOLDOWN_MARKER, MARKER_TAGS as COOLDOWN_TAGS
    from plugins.escalation import ESCALATE_MARKER, MARKER_TAG as ESCALATE_TAG
    from plugins.events.markers import EVENT_MARKER, MARKER_TAGS as EVENT_TAGS
    from plugins.memory.markers import ANY_MEMORY_MARKER, ANY_OUTCOME_MARKER, MARKER_TAGS as MEMORY_TAGS
    for patterns, tags in ((ANY_COOLDOWN_MARKER, COOLDOWN_TAGS), (ESCALATE_MARKER, (ESCALATE_TAG,)),
                           (EVENT_MARKER, EVENT_TAGS), (ANY_MEMORY_MARKER, MEMORY_TAGS[:1]),
                           (ANY_OUTCOME_MARKER, MEMORY_TAGS[1:])):
        # (Escalation's tag may follow spaces only, at the start of a line.)
        pattern = patterns.pattern.removeprefix("^[ \\t]*")
        assert pattern.startswith(re.escape(tags[0]).replace("\\:", ":")), (patterns.pattern, tags)
        assert not patterns.flags & re.IGNORECASE


# --- claudeops_prompt_context ---------------------------------------------

def installed_plugins(pm) -> set[str]:
    """The names of the plugins loaded through the entry-point group: packages
    installed beside the service, as docs/plugins.md has their authors run
    this suite with. None in the service's own environment."""
    return {pm.get_name(plugin) for plugin, _ in pm.list_plugin_distinfo()}


def headings_of(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("## ")]


def test_hook_claudeops_prompt_context_sections_in_documented_order(tmp_path, fake_cli, monkeypatch):
    class Late:
        @hookimpl
        def claudeops_prompt_context(self, run):
            return PromptSection("late", "## Late section", position=900)

    class Early:
        @hookimpl
        def claudeops_prompt_context(self, run):
            return PromptSection("early", f"## Early section for tier {run.tier}", position=1)

    class Plain:
        @hookimpl
        def claudeops_prompt_context(self, run):
            return "## Plain string section"

    class Nothing:
        @hookimpl
        def claudeops_prompt_context(self, run):
            return None

    class Broken:
        @hookimpl
        def claudeops_prompt_context(self, run):
            raise ValueError("boom")

    from app.sessions import prompts
    answers = []   # (plugin, result) of every implementation, as the prompt's builder got them

    def recording(hook_name, *args, **kwargs):
        results = real_results_by_plugin(hook_name, *args, **kwargs)
        if hook_name == "claudeops_prompt_context":
            answers.extend(results)
        return results
    real_results_by_plugin = prompts.results_by_plugin
    monkeypatch.setattr(prompts, "results_by_plugin", recording)

    app = make_app(tmp_path, plugins=[Late(), Early(), Plain(), Nothing(), Broken()])
    fake_cli(sl.steps(sl.init(), sl.result()))
    with app.app_context():
        from app.sessions import control
        from app.sessions.manager import run_session
        prompt = run_session(control.claim(control.enqueue(tier=3).id)).system_prompt
    headings = headings_of(prompt)

    # An installed package's sections (none in the service's own environment)
    # are well-formed, and are left aside: the host's, the built-ins' and
    # these test plugins' are exactly these, in this order.
    installed = installed_plugins(app.extensions["claudeops.plugins"])
    ours = list(headings)
    for plugin, result in answers:
        if plugin not in installed:
            continue
        assert isinstance(result, (str, PromptSection)), (plugin, result)
        if isinstance(result, PromptSection):
            result.validate()
        for heading in headings_of(result if isinstance(result, str) else result.text):
            assert heading in ours, (plugin, heading, prompt)
            ours.remove(heading)
    assert ours == ["## Environment", "## Early section for tier 3", "## Reporting events", "## Cooldowns",
                    "## Plain string section", "## Late section"]

    # Every section, an installed package's too, where its position (then its
    # name) puts it; a plain string counts as position 500.
    sections = [PromptSection("", result, 500) if isinstance(result, str) else result
                for _, result in answers if isinstance(result, (str, PromptSection))]
    in_order = sorted(sections, key=lambda section: (section.position, section.name))
    assert headings == ["## Environment"] + [h for section in in_order for h in headings_of(section.text)]


# --- claudeops_dashboard_pages and claudeops_api_blueprints -----------------

def test_hook_claudeops_dashboard_pages_adds_a_page_to_the_sidebar(tmp_path):
    bp = Blueprint("widgets", __name__)

    @bp.get("/widgets")
    def index():
        return "widgets page"

    class Pages:
        @hookimpl
        def claudeops_dashboard_pages(self):
            return [DashboardPage("Widgets", "widgets.index", bp, position=25)]

    app = make_app(tmp_path, plugins=[Pages()])
    client = app.test_client()
    assert client.get("/widgets").data == b"widgets page"
    html = client.get("/").get_data(as_text=True)
    nav = html[html.index('<nav class="sidebar"'):html.index("</nav>")]
    order = [label for label in ("Overview", "Sessions", "Events", "Widgets") if label in nav]
    assert order == ["Overview", "Sessions", "Events", "Widgets"]
    assert nav.index("Events") < nav.index("Widgets")


def test_hook_claudeops_api_blueprints_mounts_under_api_v1_with_json_errors(tmp_path):
    bp = Blueprint("widgets_api", __name__)

    @bp.post("/widgets")
    def create():
        from app.web.apiutil import json_body
        return {"got": json_body()}, 201

    class Api:
        @hookimpl
        def claudeops_api_blueprints(self):
            return [bp]

    app = make_app(tmp_path, plugins=[Api()], WTF_CSRF_ENABLED=True)
    client = app.test_client()
    assert client.post("/api/v1/widgets", json={"a": 1}).get_json() == {"got": {"a": 1}}  # no CSRF for the API
    response = client.post("/api/v1/widgets", data="x", content_type="text/plain")
    assert response.status_code == 415 and "application/json" in response.get_json()["error"]
    assert client.get("/api/v1/widgets").status_code == 405
    assert "error" in client.get("/api/v1/widgets").get_json()


@pytest.mark.parametrize("prefix", ["/gadgets", "gadgets/", "/gadgets/"])
def test_an_api_blueprints_own_url_prefix_is_kept_under_api_v1(tmp_path, prefix):
    bp = Blueprint("gadgets_api", __name__, url_prefix=prefix)
    bp.add_url_rule("/", "gadgets", lambda: {"gadgets": []})
    bp.add_url_rule("/count", "count", lambda: {"count": 0})

    class Api:
        @hookimpl
        def claudeops_api_blueprints(self):
            return [bp]

    app = make_app(tmp_path, plugins=[Api()])
    assert sorted(r.rule for r in app.url_map.iter_rules() if r.endpoint.startswith("gadgets_api.")) == [
        "/api/v1/gadgets/", "/api/v1/gadgets/count"]
    assert app.test_client().get("/api/v1/gadgets/count").get_json() == {"count": 0}


# --- claudeops_openapi_paths -------------------------------------------------

def test_hook_claudeops_openapi_paths_documents_a_plugins_endpoints(tmp_path, caplog):
    from app.plugin_types import OpenApiPaths
    from app.web import apidoc

    bp = Blueprint("gadgets_api", __name__)

    @bp.get("/gadgets/<int:gadget_id>")
    def gadget(gadget_id):
        return {"id": gadget_id}

    @bp.get("/gizmos")
    def gizmos():
        return {"gizmos": []}

    class Gadgets:
        @hookimpl
        def claudeops_api_blueprints(self):
            return [bp]

        @hookimpl
        def claudeops_openapi_paths(self):
            return OpenApiPaths(
                schemas={"Gadget": apidoc.obj({"id": apidoc.integer(0)})},
                paths={"/gadgets/{gadget_id}": {"get": {
                    "parameters": [apidoc.id_parameter("gadget_id", "gadget")],
                    "responses": {"200": apidoc.response("the gadget", apidoc.ref("Gadget")),
                                  "404": apidoc.error("no such gadget")}}}})

    class Clashing:   # declares a schema name the host already has: left out whole
        @hookimpl
        def claudeops_openapi_paths(self):
            return OpenApiPaths(paths={"/clash": {}}, schemas={"Session": {"type": "object"}})

    class Broken:
        @hookimpl
        def claudeops_openapi_paths(self):
            raise RuntimeError("no documentation today")

    app = make_app(tmp_path, plugins=[Gadgets(), Clashing(), Broken()])
    with caplog.at_level("WARNING"):
        doc = app.test_client().get("/api/v1/openapi.json").get_json()
    assert doc["paths"]["/gadgets/{gadget_id}"]["get"]["responses"]["200"]["content"]["application/json"][
        "schema"] == {"$ref": "#/components/schemas/Gadget"}
    assert doc["components"]["schemas"]["Gadget"]["required"] == ["id"]
    assert "/clash" not in doc["paths"] and doc["components"]["schemas"]["Session"]["type"] == "object"
    assert "required" in doc["components"]["schemas"]["Session"]          # the host's, not the clash's
    assert "/memories" in doc["paths"]                                      # the others are still there
    assert "already in the OpenAPI document" in caplog.text and "no documentation today" in caplog.text
    # The endpoint it did not document is named in the log.
    assert "without OpenAPI documentation: GET /api/v1/gizmos" in caplog.text


# --- claudeops_session_starting and claudeops_session_finished --------------

def test_hook_claudeops_session_starting_and_claudeops_session_finished(tmp_path, fake_cli):
    calls = []

    class Lifecycle:
        @hookimpl
        def claudeops_session_starting(self, run):
            calls.append(("starting", run.session_id, run.model, run.operator_prompt))

        @hookimpl
        def claudeops_prompt_context(self, run):
            calls.append(("prompt", run.session_id))

        @hookimpl
        def claudeops_session_finished(self, run, result):
            calls.append(("finished", run.session_id, result.status, result.response, result.cost_usd))

    app = make_app(tmp_path, plugins=[Lifecycle()])
    fake_cli(sl.steps(sl.init(), sl.text("hi"), sl.result("hi", cost=0.5)))
    with app.app_context():
        from app.sessions import control
        from app.sessions.manager import run_session
        session_id = run_session(control.claim(control.enqueue(prompt="check dns").id)).id
    assert calls == [("starting", session_id, "haiku", "check dns"), ("prompt", session_id),
                     ("finished", session_id, "completed", "hi", 0.5)]


def test_hook_claudeops_session_finished_sees_failures(tmp_path):
    seen = []

    class Watcher:
        @hookimpl
        def claudeops_session_finished(self, run, result):
            seen.append((result.status, result.reason))

    app = make_app(tmp_path, plugins=[Watcher()], CLAUDEOPS_CLAUDE_BIN="/nonexistent/claude")
    with app.app_context():
        from app.sessions import control
        from app.sessions.manager import run_session
        run_session(control.claim(control.enqueue().id))
    assert seen[0][0] == "failed" and "could not start" in seen[0][1]


def test_a_row_the_database_refuses_at_commit_costs_only_its_plugins_hook(tmp_path, fake_cli, caplog):
    """A plugin that adds a row the database refuses (no message) in
    claudeops_prompt_context and claudeops_session_finished: its commit fails,
    and the session still starts, ends, and escalates as asked."""
    class BadRow:
        @hookimpl(tryfirst=True)   # before the others, which must run all the same
        def claudeops_prompt_context(self, run):
            db.session.add(Event(level="info", message=None))
            return "bad-row section"

        @hookimpl(tryfirst=True)
        def claudeops_session_finished(self, run, result):
            db.session.add(Event(level="info", message=None))

    app = make_app(tmp_path, plugins=[BadRow()])
    fake_cli(sl.steps(sl.init(), sl.text("[ESCALATE] the disk needs a closer look"), sl.result("done")))
    with app.app_context():
        from app.models import Session
        from app.sessions import control
        from app.sessions.manager import run_session
        session = run_session(control.claim(control.enqueue(tier=1).id))
        assert session.status == "completed", session.status_reason
        assert "bad-row section" not in session.system_prompt and "## Escalating" in session.system_prompt
        children = db.session.scalars(select(Session.tier).where(Session.parent_id == session.id)).all()
        assert children == [2]
    assert caplog.text.count("failed in claudeops_prompt_context") == 1
    assert caplog.text.count("failed in claudeops_session_finished") == 1


# --- claudeops_overview_cards ----------------------------------------------

def test_hook_claudeops_overview_cards_render_in_position_order_and_survive_a_broken_plugin(tmp_path):
    class Cards:
        @hookimpl
        def claudeops_overview_cards(self):
            return [OverviewCard("Zeta card", "1", position=999), OverviewCard("Alpha card", "<b>2</b>", position=-1)]

    class Broken:
        @hookimpl
        def claudeops_overview_cards(self):
            raise RuntimeError("no cards today")

    app = make_app(tmp_path, plugins=[Cards(), Broken()])
    html = app.test_client().get("/").get_data(as_text=True)
    cards = html[html.index('<section id="overview-cards" class="cards"'):]
    assert cards.index("Alpha card") < cards.index("Sessions") < cards.index("Events in 24 h") < cards.index("Zeta card")
    assert "&lt;b&gt;2&lt;/b&gt;" in html


# --- claudeops_add_hookspecs --------------------------------------------------

class GreetingSpecs:
    @staticmethod
    @hookspecs.hookspec(firstresult=True)
    def claudeops_test_greeting(name):
        """A hook one plugin declares and another implements."""


def test_hook_claudeops_add_hookspecs_lets_a_plugin_declare_hooks_for_others():
    class Declarer:
        @hookimpl
        def claudeops_add_hookspecs(self, pluginmanager):
            pluginmanager.add_hookspecs(GreetingSpecs)

    class Implementer:
        @hookimpl
        def claudeops_test_greeting(self, name):
            return f"hello {name}"

    # The implementer is registered before the declarer: the spec still applies.
    pm = make_plugin_manager([Implementer(), Declarer()], load_entry_points=False)
    assert pm.hook.claudeops_test_greeting(name="ops") == "hello ops"


def test_hook_claudeops_add_hookspecs_an_unknown_hook_still_fails_without_it():
    class Implementer:
        @hookimpl
        def claudeops_test_greeting(self, name):
            return name
    with pytest.raises(Exception, match="unknown hook 'claudeops_test_greeting'"):
        make_plugin_manager([Implementer()], load_entry_points=False)


# --- claudeops_settings -------------------------------------------------------

class WidgetSettings:
    @hookimpl
    def claudeops_settings(self):
        from app.plugin_types import Setting
        return [Setting("CLAUDEOPS_WIDGET_LIMIT", "5", "How many widgets.", int)]


def test_hook_claudeops_settings_are_read_from_the_environment(tmp_path, monkeypatch):
    assert make_app(tmp_path / "a", plugins=[WidgetSettings()]).config["CLAUDEOPS_WIDGET_LIMIT"] == 5
    monkeypatch.setenv("CLAUDEOPS_WIDGET_LIMIT", "12")
    app = make_app(tmp_path / "b", plugins=[WidgetSettings()])
    assert app.config["CLAUDEOPS_WIDGET_LIMIT"] == 12
    assert "CLAUDEOPS_WIDGET_LIMIT" in [s.name for s in app.extensions["claudeops.settings"]]


class WebhookSecret:
    @hookimpl
    def claudeops_settings(self):
        from app.plugin_types import Setting

        def webhook_token(raw: str) -> str:
            if raw and len(raw) < 12:
                raise ValueError("must be 12 characters or more")
            return raw
        return [Setting("CLAUDEOPS_WEBHOOK_TOKEN", "", "The webhook's token.", webhook_token, runtime=True, secret=True)]


def test_a_secret_runtime_setting_refused_or_ignored_never_shows_its_value(tmp_path, caplog):
    app = make_app(tmp_path, plugins=[WebhookSecret()])
    response = app.test_client().put("/api/v1/config", json={"CLAUDEOPS_WEBHOOK_TOKEN": "short-tok"})
    assert response.status_code == 400
    assert response.get_json()["error"] == "CLAUDEOPS_WEBHOOK_TOKEN=(set, hidden): must be 12 characters or more"
    with app.app_context():
        spec = next(s for s in app.extensions["claudeops.settings"] if s.name == "CLAUDEOPS_WEBHOOK_TOKEN")
        runtime.in_force(spec, "stored-tok")   # stored by a version that took it
    assert "ignoring stored CLAUDEOPS_WEBHOOK_TOKEN=(set, hidden) (not valid for this version)" in caplog.text
    assert "short-tok" not in caplog.text and "stored-tok" not in caplog.text
    with app.app_context():
        from app.models import RuntimeSetting
        from app.timeutil import utcnow
        db.session.add(RuntimeSetting(name="CLAUDEOPS_WEBHOOK_TOKEN", value="stored-tok", updated_at=utcnow()))
        db.session.commit()
    client = app.test_client()
    (row,) = [r for r in client.get("/api/v1/config").get_json()["settings"] if r["name"] == "CLAUDEOPS_WEBHOOK_TOKEN"]
    # Nor the parser's words, which may hold it.
    assert row["ignored"].startswith("the stored change '(set, hidden)' is ignored (not valid for this version)")
    assert "stored-tok" not in client.get("/config").get_data(as_text=True)


def test_hook_claudeops_settings_bad_value_names_the_variable(tmp_path, monkeypatch):
    from app.config import ConfigError
    monkeypatch.setenv("CLAUDEOPS_WIDGET_LIMIT", "many")
    with pytest.raises(ConfigError, match="CLAUDEOPS_WIDGET_LIMIT='many'"):
        make_app(tmp_path, plugins=[WidgetSettings()])


# --- claudeops_cli_commands ---------------------------------------------------

def test_hook_claudeops_cli_commands_adds_a_subcommand(tmp_path):
    import click
    from flask import current_app

    @click.command("widgets")
    @click.option("--count", default=1)
    def widgets(count):
        """List widgets."""
        click.echo(f"{count} widgets in {current_app.config['CLAUDEOPS_STATE_DIR']}")

    class Commands:
        @hookimpl
        def claudeops_cli_commands(self):
            return [widgets]

    from app.cli import main
    app = make_app(tmp_path, plugins=[Commands()])
    # Through the real `claudeops` group, which pushes the application context.
    result = app.test_cli_runner().invoke(main, ["widgets", "--count", "3"])
    assert result.exit_code == 0, result.output
    assert result.output.strip() == f"3 widgets in {app.config['CLAUDEOPS_STATE_DIR']}"


# --- claudeops_cli_settings -----------------------------------------------------

def test_hook_claudeops_cli_settings_are_merged_and_passed_with_settings(tmp_path, fake_cli):
    import json as json_

    class GuardA:
        @hookimpl
        def claudeops_cli_settings(self, run):
            return {"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "a"}]}]},
                    "env": {"A": "1"}}

    class GuardB:
        @hookimpl
        def claudeops_cli_settings(self, run):
            return {"hooks": {"PreToolUse": [{"matcher": "Edit", "hooks": [{"type": "command", "command": "b"}]}]},
                    "env": {"B": str(run.tier)}}

    app = make_app(tmp_path, plugins=[GuardA(), GuardB()])
    argv_file = fake_cli(sl.steps(sl.init(), sl.result()))
    with app.app_context():
        from app.sessions import control
        from app.sessions.manager import run_session
        run_session(control.claim(control.enqueue(tier=2).id))
    argv = json_.loads(argv_file.read_text())["argv"]
    settings = json_.loads(argv[argv.index("--settings") + 1])
    ours = [m for m in settings["hooks"]["PreToolUse"] if m["hooks"][0]["command"] in ("a", "b")]
    assert [m["matcher"] for m in ours] == ["Edit", "Bash"]     # pluggy's order: last registered first
    assert settings["env"] == {"A": "1", "B": "2"}


def test_hook_claudeops_cli_settings_merge_rules():
    from app.sessions.manager import merge_settings
    assert merge_settings([]) == {}
    assert merge_settings([None, "not a dict", {"a": {"x": [1]}, "b": 1}, {"a": {"x": [2], "y": 3}, "b": 2}]) == {
        "a": {"x": [1, 2], "y": 3}, "b": 2}


# --- claudeops_notice -------------------------------------------------------------

def test_hook_claudeops_notice_becomes_an_event(app, client):
    app.extensions["claudeops.plugins"].hook.claudeops_notice(
        level="warning", message="Backups are late", service="nas", run=None)
    db.session.commit()
    (event,) = client.get("/api/v1/events").get_json()["events"]
    assert (event["level"], event["service"], event["message"], event["session_id"]) == (
        "warning", "nas", "Backups are late", None)


def test_a_notices_service_is_cut_to_the_column_after_it_is_lowered(app, client):
    """A plugin names services as it likes: one whose lower case is longer
    ("İ" lowers to two characters) still fits the column, which PostgreSQL
    enforces, refusing the whole batch with it."""
    app.extensions["claudeops.plugins"].hook.claudeops_notice(
        level="info", message="odd name", service="İ" * 100, run=None)
    db.session.commit()
    (event,) = client.get("/api/v1/events").get_json()["events"]
    assert event["service"] == "İ".lower() * 50 and len(event["service"]) == 100


# --- claudeops_migration_dirs -----------------------------------------------------

WIDGET_REVISION = '''
"""Widgets (a test plugin's own table)."""
from alembic import op
import sqlalchemy as sa

revision = "widgets_0001"
down_revision = None
branch_labels = ("widgets",)
depends_on = "0001_sessions"


def upgrade():
    op.create_table("widgets", sa.Column("id", sa.Integer(), nullable=False),
                    sa.PrimaryKeyConstraint("id", name=op.f("pk_widgets")))


def downgrade():
    op.drop_table("widgets")
'''


def test_hook_claudeops_migration_dirs_brings_a_plugins_own_revisions(tmp_path):
    import flask_migrate
    from sqlalchemy import Column, Integer, Table, inspect
    versions = tmp_path / "widget_migrations"
    versions.mkdir()
    (versions / "widgets_0001.py").write_text(WIDGET_REVISION)
    table = Table("widgets", db.metadata, Column("id", Integer, primary_key=True))

    class Widgets:
        @hookimpl
        def claudeops_migration_dirs(self):
            return [str(versions)]

    try:
        app = make_app(tmp_path / "app", plugins=[Widgets()])
        with app.app_context():
            assert "widgets" in inspect(db.engine).get_table_names()
            flask_migrate.check()                      # no drift, with the plugin's table
            flask_migrate.downgrade(revision="widgets@base")
            assert "widgets" not in inspect(db.engine).get_table_names()
            assert "sessions" in inspect(db.engine).get_table_names()
    finally:
        db.metadata.remove(table)


@pytest.mark.parametrize("given, said", [
    ("missing", "which is not a directory (is it in the package's data?)"),
    ("relative", "which is not an absolute path (build it from the module's __file__)")])
def test_hook_claudeops_migration_dirs_naming_no_directory_stops_the_start(tmp_path, given, said):
    """Alembic would pass it over, and the plugin's tables would be missing
    with no word of why."""
    directory = str(tmp_path / "migration") if given == "missing" else "migrations"

    class Typo:
        @hookimpl
        def claudeops_migration_dirs(self):
            return [directory]

    with pytest.raises(PluginError, match=f"claudeops_migration_dirs returned '?{re.escape(directory)}'?, {re.escape(said)}"):
        make_app(tmp_path / "app", plugins=[Typo()])


# --- claudeops_escalation ---------------------------------------------------------

def test_hook_claudeops_escalation_first_answer_wins(tmp_path, fake_cli):
    class Always:
        @hookimpl(tryfirst=True)
        def claudeops_escalation(self, run, result):
            return f"tier {run.tier} always escalates ({result.status})"

    app = make_app(tmp_path, plugins=[Always()])
    fake_cli(sl.steps(sl.init(), sl.text("[ESCALATE] the marker's reason loses"), sl.result()))
    with app.app_context():
        from app.models import Session
        from app.sessions import control
        from app.sessions.manager import run_session
        run_session(control.claim(control.enqueue().id))
        child = db.session.scalars(select(Session).where(Session.parent_id.is_not(None))).one()
        assert (child.tier, child.escalation_reason) == (2, "tier 1 always escalates (completed)")


# --- claudeops_stats --------------------------------------------------------------

def test_hook_claudeops_stats_adds_figures(tmp_path):
    class Figures:
        @hookimpl
        def claudeops_stats(self):
            return {"widgets_broken": 3}

    class Broken:
        @hookimpl
        def claudeops_stats(self):
            raise RuntimeError("no stats today")

    stats = make_app(tmp_path, plugins=[Figures(), Broken()]).test_client().get("/api/v1/stats").get_json()
    assert stats["widgets_broken"] == 3 and stats["runs"] == 0


def test_a_plugins_stats_figure_never_takes_the_place_of_anothers(tmp_path, caplog):
    class Usurper:
        @hookimpl
        def claudeops_stats(self):
            return {"runs": -1, "widgets_broken": 99, "widgets_fixed": 1}

    class Widgets:
        @hookimpl(tryfirst=True)   # asked before the other: its figure stands
        def claudeops_stats(self):
            return {"widgets_broken": 3}

    app = make_app(tmp_path, plugins=[named("usurper", Usurper()), named("widgets", Widgets())])
    with caplog.at_level(logging.WARNING, logger="app.web.api"):
        stats = app.test_client().get("/api/v1/stats").get_json()
    assert (stats["runs"], stats["widgets_broken"], stats["widgets_fixed"]) == (0, 3, 1)
    assert "plugin usurper: its claudeops_stats figure 'runs' is the host's already; ignored" in caplog.text
    assert ("plugin usurper: its claudeops_stats figure 'widgets_broken' is plugin widgets's already; "
            "ignored") in caplog.text
    assert caplog.text.count("ignored") == 2, caplog.text


def test_hook_claudeops_mcp_tools_serves_a_plugins_tool(tmp_path):
    """A third party's tool is offered beside the memory plugin's, a broken
    implementation and a repeated name are left out, and the tool runs in an
    application context."""
    from app.mcp import plugin_tools
    from app.plugin_types import McpTool

    def open_incidents(limit: int = 5) -> str:
        """Open incidents."""
        from flask import current_app
        return f"{current_app.name}: none of {limit}"

    class Incidents:
        @hookimpl
        def claudeops_mcp_tools(self):
            return [McpTool("open_incidents", open_incidents), McpTool("search_memories", open_incidents)]

    class Broken:
        @hookimpl
        def claudeops_mcp_tools(self):
            raise RuntimeError("no tools today")

    app = make_app(tmp_path, plugins=[Incidents(), Broken()])
    with app.app_context():
        tools = {tool.name: tool for tool in plugin_tools()}
    assert set(tools) == {"search_memories", "get_memories", "list_service_memories", "open_incidents"}
    assert tools["search_memories"].function is not open_incidents  # the first of a name stays
    with app.app_context():
        assert tools["open_incidents"].function(limit=2) == "app: none of 2"


def _plugin_package(root: Path, name: str, table: str, revision: str | None, extra_column: str = "") -> None:
    """A plugin package ``name`` with one model (``table``), and a revision
    ``revision`` that creates it, or none; with ``extra_column``, a column
    of the model that the revision does not create."""
    package = root / name
    (package / "migrations").mkdir(parents=True)
    (package / "__init__.py").write_text(f'''
from pathlib import Path
from app.extensions import db
from app.hookspecs import hookimpl
from app.marker_queue import MarkerQueue


class Row(db.Model):
    __tablename__ = "{table}"
    id = db.Column(db.Integer, primary_key=True)
    {f"{extra_column} = db.Column(db.String(20))" if extra_column else ""}


@hookimpl
def claudeops_migration_dirs():
    return [str(Path(__file__).with_name("migrations"))]
''')
    if revision:
        (package / "migrations" / f"{name}_0001.py").write_text(
            WIDGET_REVISION.replace('"widgets_0001"', repr(revision)).replace('("widgets",)', repr((name,)))
            .replace('"widgets"', repr(table)).replace("pk_widgets", f"pk_{table}"))


@pytest.fixture
def plugin_packages(tmp_path, monkeypatch):
    """Import plugin packages written under a fresh path; their tables leave
    the shared metadata afterwards."""
    import importlib
    import sys
    root = tmp_path / "packages"
    root.mkdir()
    monkeypatch.syspath_prepend(str(root))
    imported = []

    def load(*names):
        modules = [importlib.import_module(name) for name in names]
        imported.extend(modules)
        return modules
    yield root, load
    for module in imported:
        db.metadata.remove(module.Row.__table__)
        sys.modules.pop(module.__name__, None)


def test_a_plugins_table_that_no_revision_creates_stops_the_start(tmp_path, plugin_packages):
    from app.serve import MigrationError, apply_migrations
    root, load = plugin_packages
    _plugin_package(root, "gizmos", "gizmos", revision=None)
    _plugin_package(root, "sprockets", "sprockets", revision="sprockets_0001")
    app = make_app(tmp_path / "app", plugins=load("gizmos", "sprockets"))
    with pytest.raises(MigrationError) as refused:
        apply_migrations(app)
    assert str(refused.value) == ("tables or columns missing after migrating (plugin gizmos: gizmos): no revision "
                                  "creates them: a plugin ships its own, for every table and column its models add "
                                  "(docs/plugins.md, Tables)")


def test_a_plugins_column_that_no_revision_adds_stops_the_start(tmp_path, plugin_packages):
    """Before, the service started, and every query of the table failed."""
    from app.serve import MigrationError, apply_migrations
    root, load = plugin_packages
    _plugin_package(root, "gizmos", "gizmos", revision="gizmos_0001", extra_column="note")
    app = make_app(tmp_path / "app", plugins=load("gizmos"), upgrade=False)
    with pytest.raises(MigrationError) as refused:
        apply_migrations(app)
    assert str(refused.value).startswith("tables or columns missing after migrating (plugin gizmos: gizmos.note): ")


def test_a_plugin_that_is_an_object_has_its_tables_checked_too(tmp_path, plugin_packages):
    """An entry point may name an object (a class's instance) rather than a
    module: its package's models are its own all the same."""
    import sys
    from app.serve import MigrationError, apply_migrations
    root, load = plugin_packages
    _plugin_package(root, "doohickeys", "doohickeys", revision=None)
    (root / "doohickeys" / "plugin.py").write_text(
        "from app.hookspecs import hookimpl\n\n\nclass Doohickeys:\n"
        "    @hookimpl\n    def claudeops_stats(self):\n        return {}\n")
    load("doohickeys")
    from doohickeys.plugin import Doohickeys
    try:
        app = make_app(tmp_path / "app", plugins=[Doohickeys()])
        with pytest.raises(MigrationError) as refused:
            apply_migrations(app)
    finally:
        sys.modules.pop("doohickeys.plugin", None)
    assert re.fullmatch(r"tables or columns missing after migrating \(plugin \S+: doohickeys\): no revision "
                        r"creates them: .*", str(refused.value))


def test_two_plugins_revisions_with_one_id_stop_the_start_naming_both(tmp_path, plugin_packages):
    from app.plugins import PluginError
    root, load = plugin_packages
    _plugin_package(root, "gadgets", "gadgets", revision="parts_0001")
    _plugin_package(root, "widgetry", "widgetry", revision="parts_0001")
    with pytest.raises(PluginError) as refused:
        make_app(tmp_path / "app", plugins=load("gadgets", "widgetry"))
    assert str(refused.value) == (
        f"two schema revisions have the id parts_0001 (plugin gadgets's {root}/gadgets/migrations/gadgets_0001.py; "
        f"plugin widgetry's {root}/widgetry/migrations/widgetry_0001.py), and Alembic would keep only one of them: "
        "revision ids are one namespace, give each plugin's its own prefix")


def _second_revision(root: Path, name: str, revision: str, down_revision: str) -> Path:
    path = root / name / "migrations" / f"{name}_0002.py"
    path.write_text(f"revision = {revision!r}\ndown_revision = {down_revision!r}\nbranch_labels = None\n"
                    "depends_on = None\n\n\ndef upgrade():\n    pass\n\n\ndef downgrade():\n    pass\n")
    return path


def test_a_plugins_revision_naming_a_parent_no_revision_has_stops_the_start_naming_it(tmp_path, plugin_packages):
    """A typo in down_revision made every command end in Alembic's KeyError."""
    from app.plugins import PluginError
    root, load = plugin_packages
    _plugin_package(root, "gizmos", "gizmos", revision="gizmos_0001")
    second = _second_revision(root, "gizmos", "gizmos_0002", "gizmos_001")
    with pytest.raises(PluginError) as refused:
        make_app(tmp_path / "app", plugins=load("gizmos"))
    assert str(refused.value) == (f"plugin gizmos's schema revision {second} names a revision 'gizmos_001' that no "
                                  "installed revision has (a typo in its down_revision or depends_on?)")


def test_a_plugins_revision_with_an_id_of_the_hosts_stops_the_start_naming_it(tmp_path, plugin_packages):
    from app.plugins import PluginError
    root, load = plugin_packages
    _plugin_package(root, "gizmos", "gizmos", revision="0001_sessions")
    with pytest.raises(PluginError) as refused:
        make_app(tmp_path / "app", plugins=load("gizmos"))
    message = str(refused.value)
    assert message.startswith(f"plugin gizmos's schema revision {root}/gizmos/migrations/gizmos_0001.py ")
    assert "0001_sessions" in message and "give yours a prefix of your own" in message


def test_a_plugins_revision_that_does_not_import_stops_the_start_naming_it(tmp_path, plugin_packages):
    from app.plugins import PluginError
    root, load = plugin_packages
    _plugin_package(root, "gizmos", "gizmos", revision="gizmos_0001")
    second = _second_revision(root, "gizmos", "gizmos_0002", "gizmos_0001")
    second.write_text(second.read_text() + "\nimport a_module_that_is_not_there\n")
    with pytest.raises(PluginError) as refused:
        make_app(tmp_path / "app", plugins=load("gizmos"))
    assert str(refused.value) == (f"plugin gizmos's schema revision {second} cannot be read with the rest "
                                  "(ModuleNotFoundError: No module named 'a_module_that_is_not_there')")


def test_the_revision_graph_is_read_once_while_its_files_stay_as_they_are(tmp_path, plugin_packages, monkeypatch):
    from app import revision_graph
    root, load = plugin_packages
    _plugin_package(root, "gizmos", "gizmos", revision="gizmos_0001")
    plugins = load("gizmos")
    make_app(tmp_path / "one", plugins=plugins)
    reads = []
    real = revision_graph.ScriptDirectory

    class Counted:
        @staticmethod
        def from_config(config):
            reads.append(config)
            return real.from_config(config)
    monkeypatch.setattr(revision_graph, "ScriptDirectory", Counted)
    make_app(tmp_path / "two", plugins=plugins, upgrade=False)
    assert reads == []
    _second_revision(root, "gizmos", "gizmos_0002", "gizmos_0001")
    make_app(tmp_path / "three", plugins=plugins, upgrade=False)
    assert len(reads) == 1


def test_a_branch_label_two_plugins_give_names_both(tmp_path, plugin_packages):
    from app.plugins import PluginError
    root, load = plugin_packages
    _plugin_package(root, "gizmos", "gizmos", revision="gizmos_0001")
    _plugin_package(root, "sprockets", "sprockets", revision="sprockets_0001")
    revision = root / "sprockets" / "migrations" / "sprockets_0001.py"
    revision.write_text(revision.read_text().replace("branch_labels = ('sprockets',)", "branch_labels = ('gizmos',)"))
    assert "('gizmos',)" in revision.read_text()
    with pytest.raises(PluginError) as refused:
        make_app(tmp_path / "app", plugins=load("gizmos", "sprockets"))
    message = str(refused.value)
    assert message.startswith("the schema revisions plugin ") and " cannot be read together (RevisionError: " \
        "Branch name 'gizmos' in revision " in message
    assert f"plugin sprockets's {revision}" in message
    assert f"plugin gizmos's {root}/gizmos/migrations/gizmos_0001.py" in message


def test_a_file_among_a_plugins_revisions_that_is_none_is_named(tmp_path, plugin_packages):
    from app.plugins import PluginError
    root, load = plugin_packages
    _plugin_package(root, "gizmos", "gizmos", revision="gizmos_0001")
    helpers = root / "gizmos" / "migrations" / "helpers.py"
    helpers.write_text("def shared():\n    pass\n")
    with pytest.raises(PluginError) as refused:
        make_app(tmp_path / "app", plugins=load("gizmos"))
    assert str(refused.value).startswith(f"plugin gizmos's schema revision {helpers} cannot be read with the rest "
                                         "(CommandError: Could not determine revision id from filename helpers.py")
