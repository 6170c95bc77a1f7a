"""Where a marker's text ends: at the end of its line, or at the next tag of
an installed plugin's markers, never at other bracketed words the agent
quotes (``[HTTP:503]``, ``[WARN: disk]``)."""
from __future__ import annotations

import pytest
from sqlalchemy import select

from app.extensions import db
from app.marker_text import BUILT_IN_TAGS, ENDS_TEXT, marker_text
from app.models import Session
from plugins.cooldowns.markers import CooldownMarker, parse_cooldown_markers
from plugins.cooldowns.models import CooldownAction
from plugins.events.markers import EventMarker, parse_event_markers
from plugins.events.models import Event
from plugins.memory.markers import MemoryMarker, OutcomeMarker, parse_memory_markers, parse_outcome_markers
from plugins.memory.models import Memory
from tests import streamlines as sl

QUOTED = "got [HTTP:503] and [WARN: disk 91%] from upstream"


def test_text_ends_at_the_line_end_or_the_next_tag_given():
    text = "[X] one [EVENT:info] two\nthree"
    assert marker_text(text, 3) == " one "
    assert marker_text(text, 3, ()) == " one [EVENT:info] two"
    assert marker_text(text, 3, ["[TODO:"]) == " one [EVENT:info] two"
    assert marker_text("[X] a [TODO:x] b", 3, ["[TODO:"]) == " a "
    assert marker_text("[X] to the end", 3) == " to the end"
    # A line ends where str.splitlines ends it, as the memory parser reads lines.
    for line_end in ("\r\n", "\r", "\v", "\f", "\x1c", "\x85", "\u2028", "\u2029"):
        assert marker_text(f"[X] one{line_end}two", 3) == " one"
    assert parse_event_markers("[EVENT:info:a] one\u2028two")[0].message == \
        parse_memory_markers("[MEMORY:timing:a] one\u2028two")[0].observation == "one"
    # Tags are matched as written: neither a lower-case one nor one without its colon ends text.
    assert marker_text("[X] keep [event:info] and [EVENT] too", 3) == " keep [event:info] and [EVENT] too"
    # A tag's "[" is its own character, not a pattern's; digits and "_" may follow its first letter.
    assert marker_text("[X] a_b [A_1:c] d", 3, ["[A_1:"]) == " a_b "
    assert marker_text("[X] a A_1:c d", 3, ["[A_1:"]) == " a A_1:c d"


def test_only_a_tag_shaped_like_a_markers_start_ends_text():
    """``[ESCALATE]`` is a marker only at the start of a line, where no text
    it could end is; a plugin's broad prefix chooses its blocks, no more."""
    assert marker_text("[X] no need to [ESCALATE] yet", 3) == " no need to [ESCALATE] yet"
    assert marker_text("[X] fix TODO: later # now [ a", 3, ["TODO:", "#", "[", "[todo:", "[A.B:"]) == \
        " fix TODO: later # now [ a"
    # A narrower tag ends text where the whole of it is, not where its start is.
    assert marker_text("[X] see [TICKET:LOW:a] then [TICKET:HIGH:b] c", 3, ["[TICKET:HIGH:"]) == \
        " see [TICKET:LOW:a] then "
    assert parse_event_markers("[EVENT:info:web] ok [TICKET:HIGH:web] renew", tags=("[TICKET:HIGH:",))[
        0].message == "ok"


def test_a_long_run_of_spaces_before_the_text_is_read_in_one_pass():
    """(As after ``[ESCALATE]``: a pattern that backed off through the
    spaces for every start would take minutes here; nothing is timed.)"""
    assert marker_text(" " * 2_000_000 + "why [EVENT:x", 0).strip() == "why"


def test_every_hook_of_a_session_is_told_every_installed_plugins_tags(tmp_path, fake_cli):
    """Not only the marker hooks: one that reads the agent's response when
    the session ends reads its markers' text as they do."""
    from app.hookspecs import hookimpl
    from tests.conftest import make_app

    told = {}
    asked = []

    class Tickets:
        @hookimpl
        def claudeops_marker_tags(self):
            asked.append(1)
            return ["[TICKET:"]

        @hookimpl
        def claudeops_prompt_context(self, run):
            told["prompt"] = run.marker_tags

        @hookimpl
        def claudeops_markers(self, text, run):
            told["markers"] = run.marker_tags

        @hookimpl
        def claudeops_session_finished(self, run, result):
            told["finished"] = run.marker_tags

    app = make_app(tmp_path, plugins=[Tickets()])
    fake_cli(sl.steps(sl.init(), sl.text("[TICKET:web] renew the cert"), sl.result()))
    with app.app_context():
        from app.sessions import control
        from app.sessions.manager import run_session
        assert run_session(control.claim(control.enqueue().id)).status == "completed"
    assert set(told) == {"prompt", "markers", "finished"}
    assert len(asked) == 1, "asked once a session, for its RunInfo and its fan-out alike"
    assert all(tags == tuple(sorted({*BUILT_IN_TAGS, "[TICKET:"})) for tags in told.values()), told


def test_the_built_in_tags_are_the_built_in_plugins_own():
    from plugins import cooldowns, escalation, events, memory
    declared = {tag for plugin in (cooldowns, escalation, events, memory) for tag in plugin.claudeops_marker_tags()}
    assert declared == set(BUILT_IN_TAGS)


def test_bracketed_words_the_agent_quotes_stay_in_every_markers_text():
    assert parse_event_markers(f"[EVENT:warning:web] {QUOTED}") == [EventMarker("warning", "web", QUOTED)]
    assert parse_memory_markers(f"[MEMORY:behavior:web] {QUOTED}") == [MemoryMarker("behavior", "web", QUOTED)]
    assert parse_outcome_markers(f"[OUTCOME:worked:m3] {QUOTED}") == [OutcomeMarker("worked", 3, QUOTED)]
    assert parse_cooldown_markers(f"[COOLDOWN:restart:web] success — {QUOTED}") == [
        CooldownMarker("restart", "web", "success", QUOTED)]


@pytest.mark.parametrize("tag", [tag for tag in BUILT_IN_TAGS if ENDS_TEXT.fullmatch(tag)])
def test_every_built_in_tag_ends_every_markers_text(tag):
    after = f" {tag}info:web] next"
    assert parse_event_markers(f"[EVENT:info:web] first{after}")[0].message == "first"
    assert parse_memory_markers(f"[MEMORY:timing:web] first{after}")[0].observation == "first"
    assert parse_outcome_markers(f"[OUTCOME:worked:m3] first{after}")[0].note == "first"
    assert parse_cooldown_markers(f"[COOLDOWN:restart:web] success: first{after}")[0].message == "first"


def test_a_mid_line_escalate_is_the_agents_words():
    text = "tier 1 should [ESCALATE] when disk > 90%"
    assert parse_event_markers(f"[EVENT:info:web] {text}")[0].message == text
    assert parse_memory_markers(f"[MEMORY:behavior:web] {text}")[0].observation == text
    assert parse_cooldown_markers(f"[COOLDOWN:restart:web] success — {text}")[0].message == text


def test_a_parser_ends_text_at_its_own_markers_whatever_tags_it_is_given():
    """So that a line of many of its markers is read in one pass, and each
    keeps its own words, even from a caller that names no tags."""
    count = 100_000
    events = parse_event_markers("[EVENT:info:web] up " * count, tags=())
    assert len(events) == count and {e.message for e in events} == {"up"}
    assert [m.observation for m in parse_memory_markers("[MEMORY:timing:a] x [MEMORY:timing:b] y", tags=())] == \
        ["x", "y"]
    assert [o.note for o in parse_outcome_markers("[OUTCOME:worked:m1] a [OUTCOME:failed:m2] b", tags=())] == \
        ["a", "b"]
    assert [c.message for c in parse_cooldown_markers(
        "[COOLDOWN:restart:a] success: x [COOLDOWN:restart:b] failure: y", tags=())] == ["x", "y"]


def test_the_tags_given_are_where_text_ends():
    """A plugin's tag that is installed ends text; one that is not, or a
    built-in plugin's left out, is the agent's words."""
    text = "[EVENT:info:web] cert renewed [TODO:web] check [MEMORY:timing:web] slow"
    assert parse_event_markers(text)[0].message == "cert renewed [TODO:web] check"
    assert parse_event_markers(text, tags=("[TODO:",))[0].message == "cert renewed"
    assert parse_event_markers(text, tags=("[EVENT:",))[0].message == text.split("] ", 1)[1]
    assert parse_memory_markers("[MEMORY:timing:web] slow [TODO:web] check", tags=(*BUILT_IN_TAGS, "[TODO:"))[
        0].observation == "slow"


def test_a_session_keeps_quoted_brackets_and_splits_at_markers(app, fake_cli, run_session_now):
    """Through the stream handler, which gives the plugins the installed
    plugins' tags: each marker keeps its own words, quoted brackets
    included, and ends where the next marker begins."""
    fake_cli(sl.steps(sl.init(), sl.text(
        f"[EVENT:warning:web] {QUOTED} [MEMORY:behavior:web] Answers [HTTP:503] under load\n"
        "Restarted it. [COOLDOWN:restart:web] success — back after [HTTP:200] in 5s [EVENT:info:web] healthy\n"
        "[ESCALATE] [DB:locked] errors persist [EVENT:critical:db] locked"), sl.result()))
    parent = run_session_now()
    assert parent.status == "completed", parent.status_reason
    events = [(e.level, e.service, e.message)
              for e in db.session.scalars(select(Event).where(Event.session_id == parent.id).order_by(Event.id))]
    assert events[:3] == [("warning", "web", QUOTED), ("info", "web", "healthy"), ("critical", "db", "locked")]
    assert [m.observation for m in db.session.scalars(select(Memory))] == ["Answers [HTTP:503] under load"]
    reports = [c.message for c in db.session.scalars(select(CooldownAction).where(CooldownAction.source == "marker"))]
    assert reports == ["back after [HTTP:200] in 5s"]
    child = db.session.scalars(select(Session).where(Session.parent_id == parent.id)).one()
    assert child.escalation_reason == "[DB:locked] errors persist"
