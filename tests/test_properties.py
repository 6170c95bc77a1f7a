"""Property tests: whatever bytes the CLI writes and whatever text the agent
writes, the stream parser and every marker parser answer without raising,
and what they return keeps its promises."""
from __future__ import annotations

import json
import re

from hypothesis import given, settings
from hypothesis import strategies as st

from app.redaction import PrivateKeys
from app.sessions import stream
from app.sessions.activity import _json as _tool_input_json
from app.sessions.runner import LineSplitter
from plugins.cooldowns.commands import recognise
from plugins.cooldowns.markers import parse_cooldown_markers
from plugins.events.markers import LEVELS, parse_event_markers
from plugins.memory.markers import (ANY_OUTCOME_MARKER, MalformedOutcome, OutcomeMarker, parse_memory_markers,
                                    parse_outcome_markers)
from plugins.memory.models import CATEGORIES, OUTCOME_LEVELS

# Text that looks like markers often enough to exercise the parsers' paths.
def joined(pieces: list[str], max_size: int):
    """Strings made of these pieces, in any order and number."""
    return st.lists(st.sampled_from(pieces), max_size=max_size).map("".join)


MARKERISH = joined(list("[]:-_ \n\tEVNTMORYCLDWSAabcxyz019|—") + [
    "[EVENT:", "[MEMORY:", "[COOLDOWN:", "[OUTCOME:", "restart", "timing", "warning", "success", "worked",
    "failed", ":m", "m12", "]"], 300)
ANY_TEXT = st.one_of(st.text(max_size=500), MARKERISH)


def around(markers: list[str]):
    """Any text, one of these well-formed markers on a line of its own, any
    text: whatever surrounds it, the parser reads at least that one."""
    return st.builds(lambda before, marker, after: f"{before}\n{marker}\n{after}", ANY_TEXT,
                     st.sampled_from(markers), ANY_TEXT)
JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4),
    max_leaves=20)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=2000))
def test_stream_parser_never_raises_anything_but_stream_error(raw):
    try:
        items = stream.parse_line(raw)
    except stream.StreamError:
        return
    assert isinstance(items, list)


def _standard_library_read(line):
    """What the parser read before orjson: the standard library alone."""
    try:
        return json.loads(line.decode("utf-8") if isinstance(line, bytes) else line)
    except (UnicodeDecodeError, ValueError, RecursionError):
        return stream.StreamError


def _fast_read(line):
    try:
        return stream._loads(line)
    except stream.StreamError:
        return stream.StreamError


# Integers within 64 bits: orjson reads a longer one as a float (stream._loads says why).
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-2**63, max_value=2**64 - 1) | st.floats(allow_nan=False)
    | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4),
    max_leaves=20)


@settings(max_examples=500, deadline=None)
@given(JSON_VALUES, st.booleans(), st.sampled_from(["", "\n", "\r\n", " "]))
def test_fast_json_reads_what_the_standard_library_reads(value, ascii_only, end):
    line = json.dumps(value, ensure_ascii=ascii_only) + end
    expected = _standard_library_read(line)
    for form in (line, line.encode("utf-8", "surrogatepass")):
        assert repr(_fast_read(form)) == repr(expected)   # repr: NaN-free, and tells 1 from 1.0 and True


@settings(max_examples=500, deadline=None)
@given(st.one_of(st.binary(max_size=300), MARKERISH.map(str.encode),
                 JSON_VALUES.map(lambda value: json.dumps(value).encode()).flatmap(
                     lambda line: st.integers(0, len(line)).map(lambda cut: line[:cut] + b"\\ud83d" + line[cut:]))))
def test_fast_json_refuses_exactly_what_the_standard_library_refuses(raw):
    expected = _standard_library_read(raw)
    if expected is stream.StreamError or not _holds_huge_integer(expected):
        assert repr(_fast_read(raw)) == repr(expected)


@settings(max_examples=300, deadline=None)
@given(JSON_VALUES)
def test_tool_input_is_shown_as_the_standard_library_indents_it(value):
    shown = _tool_input_json(value)
    assert json.loads(shown) == _as_javascript_writes(value)
    if not _holds_float(value):   # orjson spells some floats otherwise (1e16)
        assert shown == json.dumps(value, indent=2, ensure_ascii=False)


def _as_javascript_writes(value):
    """Infinity written as null, as JavaScript (and so the activity log) writes it."""
    if isinstance(value, float) and value in (float("inf"), float("-inf")):
        return None
    if isinstance(value, list):
        return [_as_javascript_writes(item) for item in value]
    if isinstance(value, dict):
        return {key: _as_javascript_writes(item) for key, item in value.items()}
    return value


def _holds_float(value) -> bool:
    if isinstance(value, float):
        return True
    if isinstance(value, (list, dict)):
        return any(_holds_float(item) for item in (value.values() if isinstance(value, dict) else value))
    return False


def _holds_huge_integer(value) -> bool:
    if isinstance(value, int) and not isinstance(value, bool):
        return not -2**63 <= value < 2**64
    if isinstance(value, list):
        return any(_holds_huge_integer(item) for item in value)
    if isinstance(value, dict):
        return any(_holds_huge_integer(item) for item in value.values())
    return False


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(["system", "assistant", "user", "result", "stream_event", "other"]),
       # A message of any shape, and one of content blocks of any shape (text blocks among them).
       st.one_of(JSONISH, st.fixed_dictionaries({"content": st.lists(st.one_of(
           JSONISH, st.fixed_dictionaries({"type": st.just("text"), "text": st.one_of(st.text(max_size=20), JSONISH)})),
           max_size=4)})), JSONISH)
def test_stream_parser_takes_any_shape_of_a_known_type(kind, message, extra):
    line = json.dumps({"type": kind, "subtype": extra if isinstance(extra, str) else "init",
                       "message": message, "result": extra, "total_cost_usd": extra, "num_turns": extra})
    for item in stream.parse_line(line):
        if isinstance(item, stream.AssistantText):
            assert isinstance(item.text, str)
        if isinstance(item, stream.Result):
            assert item.cost_usd is None or isinstance(item.cost_usd, float)
            assert item.num_turns is None or isinstance(item.num_turns, int)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.binary(max_size=300), max_size=10), st.integers(min_value=1, max_value=64))
def test_line_splitter_loses_no_line_within_the_limit(chunks, limit):
    lines, oversized = [], []
    splitter = LineSplitter(limit, lines.append, oversized.append)
    for chunk in chunks:
        splitter.feed(chunk)
    splitter.close()
    expected = [line for line in b"".join(chunks).split(b"\n")]

    def size(line: bytes) -> int:   # a CRLF line's carriage return does not count
        return len(line) - line.endswith(b"\r")
    kept = [line for line in expected if line.strip() and size(line) <= limit]
    assert lines == kept
    assert len(oversized) == len([line for line in expected if size(line) > limit])


def test_a_crlf_line_of_the_limits_size_is_within_it():
    lines, oversized = [], []
    splitter = LineSplitter(8, lines.append, oversized.append)
    for chunk in (b"12345678\r\n", b"1234", b"5678\r", b"\n", b"123456789\r\n"):
        splitter.feed(chunk)
    assert (lines, oversized) == ([b"12345678\r", b"12345678\r"], [10])


@settings(max_examples=300, deadline=None)
@given(around(["[EVENT:info] All quiet", "[EVENT:warning:postgres] Slow queries", "[EVENT:crit:nas] RAID degraded"]))
def test_event_markers(text):
    markers = parse_event_markers(text)
    assert markers
    for marker in markers:
        assert marker.level in LEVELS and marker.message and "\n" not in marker.message


@settings(max_examples=300, deadline=None)
@given(around(["[MEMORY:timing:jellyfin] Takes 60s to start", "[MEMORY:remediation] Retry DNS once"]))
def test_memory_markers(text):
    markers = parse_memory_markers(text)
    assert markers
    for marker in markers:
        assert marker.category in CATEGORIES and marker.observation and "\n" not in marker.observation


@settings(max_examples=300, deadline=None)
@given(around(["[OUTCOME:worked:m12] It came up", "[OUTCOME:failed:m3] Still down", "[OUTCOME:worked:m7]"]))
def test_outcome_markers(text):
    found = parse_outcome_markers(text)
    assert any(isinstance(marker, OutcomeMarker) for marker in found)
    # Whatever is shaped like one is either scored or reported, never silently dropped.
    assert len(found) == len(ANY_OUTCOME_MARKER.findall(text))
    for marker in found:
        if isinstance(marker, OutcomeMarker):
            assert marker.level in OUTCOME_LEVELS and marker.memory_id >= 0 and "\n" not in marker.note
            assert marker.note == marker.note.strip()
        else:
            assert isinstance(marker, MalformedOutcome) and marker.why and "\n" not in marker.text


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(OUTCOME_LEVELS), st.integers(min_value=1, max_value=2**31 - 1),
       st.text(alphabet=st.characters(blacklist_categories=("Cc", "Cs", "Zl", "Zp"), blacklist_characters="["),
               max_size=80),
       st.sampled_from(["m", "M", ""]))
def test_outcome_markers_round_trip(level, memory_id, note, prefix):
    """What the prompt teaches, with any note, reads back as written."""
    (marker,) = parse_outcome_markers(f"Done.\n[OUTCOME:{level}:{prefix}{memory_id}] {note}\nNext.")
    assert (marker.level, marker.memory_id, marker.note) == (level, memory_id, note.strip())


def test_a_line_of_many_markers_is_read_in_one_pass():
    """Each marker's text is read up to the next marker, not to the end of
    the line and back: before, a line of 20,000 outcome markers took about
    6 seconds to read and 200,000 would have taken ten minutes or more,
    which is how this test would show a return of that (it asserts no time)."""
    count = 200_000
    outcomes = parse_outcome_markers("[OUTCOME:worked:m7] ok " * count)
    assert len(outcomes) == count and set(outcomes) == {OutcomeMarker("worked", 7, "ok")}
    memories = parse_memory_markers("[MEMORY:timing:web] slow start " * count)
    assert len(memories) == count and {m.observation for m in memories} == {"slow start"}
    events = parse_event_markers("[EVENT:info:web] up again " * count)
    assert len(events) == count and {e.message for e in events} == {"up again"}


@settings(max_examples=300, deadline=None)
@given(around(["[COOLDOWN:restart:jellyfin] success — up again", "[COOLDOWN:redeployment:web] failure — crashed"]))
def test_cooldown_markers(text):
    markers = parse_cooldown_markers(text)
    assert markers
    for marker in markers:
        assert marker.action in ("restart", "redeployment") and marker.outcome in ("success", "failure")


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(max_size=200), joined(
    ["docker ", "restart ", "compose ", "up ", "-d ", "sudo ", "bash -c '", "'", '"', "&& ", "; ", "| ",
     "systemctl ", "helm ", "upgrade ", "x ", "$y ", "\\", "(", ")", "<(", ">(", "< ", "tmux ", "send-keys ",
     "new -d ", "screen ", "-X ", "stuff ", "'\\9\\015^M' ", "\\; ", "x; ", "Enter ", "sg ", "-c ", "#{p} "], 30)))
def test_command_recogniser_never_raises(line):
    for found in recognise(line):
        assert found.action in ("restart", "redeployment")


# --- the private key shape, against the two patterns it replaced -----------------------

def _pattern_spans(pattern: re.Pattern, text: str) -> list[tuple[int, int]]:
    spans, position = [], 0
    while (match := pattern.search(text, position)) is not None:
        position = max(match.end(), match.start() + 1)
        if match.start() < match.end():
            spans.append(match.span())
    return spans


def _merged(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    merged = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


KEY_PIECES = ["-----BEGIN RSA PRIVATE KEY-----", "-----END RSA PRIVATE KEY-----", "-----BEGIN PRIVATE KEY-----",
              "-----END PRIVATE KEY-----", "-----BEGIN PGP PRIVATE KEY BLOCK-----",
              "-----END PGP PRIVATE KEY BLOCK-----", "-----END EC PRIVATE KEY-----", '"', "\n", "\\n", "MIIE",
              "ab+/=", " ", ".", "xyzxyzxyz", "PRIVATE KEY",
              # Markers sharing their dashes: one's end may begin the next.
              "-----", "END RSA PRIVATE KEY-----", "BEGIN RSA PRIVATE KEY-----", "BEGIN EC PRIVATE KEY-----"]


@settings(max_examples=1000, deadline=None)
@given(st.lists(st.sampled_from(KEY_PIECES), max_size=30))
def test_private_keys_are_found_where_the_two_patterns_they_replaced_found_them(pieces):
    """Whole blocks and blocks cut short: the footer of each header is looked
    up, not searched for (a text of many headers cost 64 KiB of scanning
    each), and the spans are the same as the patterns' were, merged. The
    reach is shortened here so that texts this size go past it."""
    reach = 40
    block = re.compile(r"-----BEGIN (?P<label>[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?)-----"
                       rf"[^\"]{{0,{reach}}}?-----END (?P=label)-----")
    cut_short = re.compile(r"-----BEGIN (?P<label>[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?)-----"
                           rf"(?![^\"]{{0,{reach}}}?-----END (?P=label)-----)"
                           r"(?:[A-Za-z0-9+/=\r\n \t:,.()\u2192-]|\\+(?:[nrt]|u2192))*")
    text = "".join(pieces)
    expected = _merged(_pattern_spans(block, text) + _pattern_spans(cut_short, text))
    assert _merged(list(PrivateKeys(reach=reach).matches(text, text))) == expected, text
