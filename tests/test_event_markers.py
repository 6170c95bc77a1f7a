"""Event markers: levels, services, several per block, mid-line, bad ones skipped."""
from __future__ import annotations

import re

import pytest

from plugins.events.markers import MAX_MESSAGE_CHARS, EventMarker, parse_event_markers


def test_level_only_and_level_with_service():
    assert parse_event_markers("[EVENT:info] All quiet\n[EVENT:warning:postgres] Slow queries") == [
        EventMarker("info", None, "All quiet"), EventMarker("warning", "postgres", "Slow queries")]


@pytest.mark.parametrize("raw, level", [
    ("info", "info"), ("INFO", "info"), ("notice", "info"), ("warn", "warning"), ("Warning", "warning"),
    ("error", "critical"), ("err", "critical"), ("crit", "critical"), ("fatal", "critical"), ("critical", "critical"),
])
def test_level_variants_are_normalised(raw, level):
    assert parse_event_markers(f"[EVENT:{raw}:svc] message") == [EventMarker(level, "svc", "message")]


def test_unknown_level_is_logged_and_skipped(caplog):
    assert parse_event_markers("[EVENT:purple:svc] what\n[EVENT:info:svc] kept") == [
        EventMarker("info", "svc", "kept")]
    assert "unknown level 'purple'" in caplog.text


def test_mid_line_markers_and_several_on_one_line():
    text = ("I checked and [EVENT:critical:nas] RAID degraded, one disk missing. "
            "Also [EVENT:info:web] Site up\nNothing else.")
    assert parse_event_markers(text) == [
        EventMarker("critical", "nas", "RAID degraded, one disk missing. Also"),
        EventMarker("info", "web", "Site up"),
    ]


def test_message_stops_at_a_marker_of_another_plugin():
    text = "[EVENT:info:jellyfin] Restarted [MEMORY:timing:jellyfin] Takes 60s to start"
    assert parse_event_markers(text) == [EventMarker("info", "jellyfin", "Restarted")]


def test_empty_message_is_skipped(caplog):
    assert parse_event_markers("[EVENT:info:svc]   \n") == []
    assert "no message" in caplog.text


@pytest.mark.parametrize("text", [
    "[EVENT info] no colon", "[event:info] lower-case tag", "EVENT:info no brackets",
    "[EVENT:info:bad service] space in service", "[EVENT:] nothing",
])
def test_malformed_markers_are_not_events(text):
    assert parse_event_markers(text) == []


@pytest.mark.parametrize("text", [
    "[EVENT:critical:db:5432] Down", "[EVENT:warning:my service] Slow", "[EVENT:critical:db#2] Down",
    "[EVENT:warning:jellÿfin] Slow",
    "[EVENT:] nothing",
])
def test_malformed_markers_are_reported_not_dropped_silently(text):
    """A critical event the agent wrote with a port in its service is lost:
    the operator must at least be told, as for memory and cooldown markers."""
    warned = []
    assert parse_event_markers(text, lambda kind, message: warned.append(message)) == []
    assert warned == [f"ignoring malformed event marker {text.split(']')[0] + ']'!r} "
                      "(a service is ASCII letters, digits, _, -, ., @ and /)"]


def test_a_malformed_marker_does_not_hide_the_next_one():
    warned = []
    text = "[EVENT:critical:db:5432] Down [EVENT:info:web] Up"
    assert parse_event_markers(text, lambda kind, message: warned.append(message)) == [
        EventMarker("info", "web", "Up")]
    assert len(warned) == 1


def test_a_marker_left_without_its_bracket_does_not_take_the_next_one_with_it():
    """Read up to the first "]", a marker the agent did not close would run
    into the next one and drop it, a well-formed critical event included."""
    text = "[EVENT:warning:db on port 5432 is slow [EVENT:critical:web] Site down"
    assert parse_event_markers(text) == [EventMarker("critical", "web", "Site down")]


def test_long_message_is_truncated():
    (marker,) = parse_event_markers("[EVENT:info] " + "x" * 5000)
    assert len(marker.message) == 2000


def test_fixture_text_blocks():
    text = ("Checking the services now.\n[EVENT:info:jellyfin] Health check passed\n"
            "[EVENT:warning:postgres] Slow queries\n[MEMORY:timing:jellyfin] Takes 60s to start")
    assert [(m.level, m.service) for m in parse_event_markers(text)] == [("info", "jellyfin"), ("warning", "postgres")]


def test_a_service_over_the_length_limit_is_reported_not_cut(caplog):
    """Cut to 100 characters, two long names that begin alike were one service."""
    long_name = "a" * 100
    text = f"[EVENT:info:{long_name}X] one\n[EVENT:info:{long_name}] two"
    assert parse_event_markers(text) == [EventMarker("info", long_name, "two")]
    assert "service is over 100 characters" in caplog.text


def test_a_message_over_the_limit_is_kept_to_its_beginning_with_the_length_written():
    long_message = "Disk filling " + "x" * 3000
    [marker] = parse_event_markers(f"[EVENT:warning:nas] {long_message}")
    assert marker.message == long_message[:MAX_MESSAGE_CHARS] and marker.cut_from == 3013
    [whole] = parse_event_markers("[EVENT:info] " + "y" * MAX_MESSAGE_CHARS)
    assert whole.message == "y" * MAX_MESSAGE_CHARS and whole.cut_from is None


def test_the_prompt_names_every_character_a_service_may_hold():
    """The agent is told what it may write: a unit named as the cooldown
    hook records it (getty@tty1) is one service in events and cooldowns."""
    from plugins.events import PROMPT
    told = re.search(r"it is letters, digits,\s+(.*?) \(no port", PROMPT, re.S).group(1)
    named = set(re.findall(r"`(.)`", told))
    for char in "_-.@/":
        assert parse_event_markers(f"[EVENT:info:a{char}b] message") == [EventMarker("info", f"a{char}b", "message")]
    assert named == set("_-.@/")
