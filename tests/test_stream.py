"""The stream-json parser against every captured fixture, both CLI versions."""
from __future__ import annotations


import pytest

from app.sessions import stream
from tests.conftest import FIXTURES

VERSIONS = ["2.1.197", "2.1.330"]


def items_of(name: str) -> list:
    return [item for line in (FIXTURES / name).read_bytes().splitlines() for item in stream.parse_line(line)]


def of_type(items, kind):
    return [item for item in items if isinstance(item, kind)]


def test_every_fixture_file_is_covered():
    names = {p.name for p in FIXTURES.glob("*.ndjson")}
    cases = {"a_markers", "b_tool_denied", "b_tool_injection_allowed", "c_error_http500",
             "c_error_retry_recovered", "d_long_stream", "d_long_stream_partial"}
    assert names == {f"claude-code-{v}-{case}.ndjson" for v in VERSIONS for case in cases}


@pytest.mark.parametrize("version", VERSIONS)
def test_markers_fixture(version):
    items = items_of(f"claude-code-{version}-a_markers.ndjson")
    assert isinstance(items[0], stream.Init) and items[0].cli_version == version
    texts = of_type(items, stream.AssistantText)
    assert len(texts) == 3
    assert texts[0].text.startswith("Checking the services now.\n[EVENT:info:jellyfin]")
    # Two text blocks of one message arrive as two lines with the same message id.
    assert texts[1].message_id == texts[2].message_id != texts[0].message_id
    assert [t.name for t in of_type(items, stream.ToolUse)] == ["Bash"]
    assert of_type(items, stream.ToolResult)[0].content == "checked"
    result = items[-1]
    assert isinstance(result, stream.Result)
    assert result.is_error is False and result.num_turns == 2 and result.cost_usd > 0
    # result.result is only the last block, which is why the response is built from all text.
    assert result.result == texts[2].text


@pytest.mark.parametrize("version", VERSIONS)
def test_tool_injection_fixture_keeps_tool_output_out_of_text(version):
    items = items_of(f"claude-code-{version}-b_tool_injection_allowed.ndjson")
    texts = " ".join(t.text for t in of_type(items, stream.AssistantText))
    assert "[MEMORY:" not in texts
    assert "[MEMORY:timing:fake]" in of_type(items, stream.ToolResult)[0].content
    assert "[MEMORY:" in str(of_type(items, stream.ToolUse)[0].input)


@pytest.mark.parametrize("version", VERSIONS)
def test_tool_denied_fixture(version):
    items = items_of(f"claude-code-{version}-b_tool_denied.ndjson")
    denied = of_type(items, stream.ToolResult)[0]
    assert denied.is_error is True
    result = items[-1]
    assert len(result.permission_denials) == 1 and result.permission_denials[0]["tool_name"] == "Bash"
    if version == "2.1.330":
        assert of_type(items, stream.SystemNotice)[0].subtype == "permission_denied"


@pytest.mark.parametrize("version", VERSIONS)
def test_http500_fixture_is_an_error_despite_subtype_success(version):
    items = items_of(f"claude-code-{version}-c_error_http500.ndjson")
    text = of_type(items, stream.AssistantText)[0]
    assert text.is_api_error is True and text.text.startswith("API Error: 500")
    result = items[-1]
    assert result.is_error is True and result.api_error_status == 500


@pytest.mark.parametrize("version", VERSIONS)
def test_retry_fixture(version):
    items = items_of(f"claude-code-{version}-c_error_retry_recovered.ndjson")
    notices = of_type(items, stream.SystemNotice)
    assert [n.subtype for n in notices] == ["api_retry", "api_retry"]
    assert "500" in notices[0].summary
    assert items[-1].is_error is False


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("case", ["d_long_stream", "d_long_stream_partial"])
def test_long_stream_fixture_gives_one_complete_text_block(version, case):
    items = items_of(f"claude-code-{version}-{case}.ndjson")
    texts = of_type(items, stream.AssistantText)
    assert len(texts) == 1 and len(texts[0].text) == 4901
    assert texts[0].text.endswith("[EVENT:info:jellyfin] Health check passed")
    if case.endswith("partial"):
        # Deltas are tolerated and ignored: the complete assistant line still comes.
        assert len(of_type(items, stream.Ignored)) > 700


@pytest.mark.parametrize("line", [
    b"", b"not json", b"[1,2]", b'"text"', b'{"no_type": 1}', b'{"type": 5}', b"\xff\xfe",
    b'{"type": "assistant"', b"[" * 100000,
])
def test_malformed_lines_raise_stream_error(line):
    with pytest.raises(stream.StreamError):
        stream.parse_line(line)


@pytest.mark.parametrize("line, expected", [
    ('{"type": "stream_event", "event": {}}', [stream.Ignored("stream_event")]),
    ('{"type": "system", "subtype": "status"}', [stream.Ignored("system/status")]),
    ('{"type": "future_type"}', [stream.Ignored("future_type")]),
    ('{"type": "assistant", "message": {"content": [{"type": "thinking", "thinking": "hm"}]}}',
     [stream.Ignored("assistant/thinking")]),
    ('{"type": "user", "message": {"content": "a plain prompt"}}', [stream.Ignored("user")]),
])
def test_unknown_or_odd_shapes_are_tolerated(line, expected):
    assert stream.parse_line(line) == expected


@pytest.mark.parametrize("line, what", [
    ('{"type": "assistant"}', "an assistant line whose message is null (or missing), not an object"),
    ('{"type": "assistant", "message": {}}',
     "an assistant line whose message content is null (or missing), not a list of blocks"),
    ('{"type": "assistant", "message": "hi"}', "an assistant line whose message is a string, not an object"),
    ('{"type": "assistant", "message": {"content": "oops"}}',
     "an assistant line whose message content is a string, not a list of blocks"),
    ('{"type": "assistant", "message": {"content": [{"type": "text", "text": null}]}}',
     "an assistant text block whose text is null (or missing)"),
    ('{"type": "assistant", "message": {"content": [{"type": "text", "text": ["a"]}]}}',
     "an assistant text block whose text is a list"),
    ('{"type": "assistant", "message": {"content": [7]}}',
     "an assistant content block that is a number, not an object"),
])
def test_an_assistant_line_not_shaped_as_the_cli_writes_it_is_said_to_be_unread(line, what):
    """Not passed over without a word: the agent's words may be in it."""
    assert stream.parse_line(line) == [stream.Malformed(what)]


def test_a_line_of_many_unreadable_blocks_is_told_once():
    line = '{"type": "assistant", "message": {"content": [' + ", ".join(["0"] * 100_000) + \
        ', {"type": "text", "text": "[EVENT:info:web] up"}]}}'
    assert stream.parse_line(line) == [
        stream.Malformed("an assistant content block that is a number, not an object (and 99999 more blocks not read)"),
        stream.AssistantText("[EVENT:info:web] up", None)]


def test_a_malformed_block_costs_only_itself():
    line = ('{"type": "assistant", "message": {"content": [{"type": "text", "text": null}, '
            '{"type": "text", "text": "[EVENT:info:web] up"}]}}')
    malformed, text = stream.parse_line(line)
    assert isinstance(malformed, stream.Malformed) and text.text == "[EVENT:info:web] up"


def test_tool_result_content_as_a_list_of_parts():
    line = ('{"type": "user", "message": {"content": [{"type": "tool_result", "tool_use_id": "t", '
            '"content": [{"type": "text", "text": "one"}, {"type": "image"}, {"type": "text", "text": "two"}]}]}}')
    (result,) = stream.parse_line(line)
    assert result.content == "one\n[image]\ntwo" and result.is_error is False


def test_result_with_wrong_types_keeps_what_is_valid():
    (result,) = stream.parse_line('{"type": "result", "is_error": false, "total_cost_usd": "lots", '
                                  '"num_turns": true, "duration_ms": 12.7, "session_id": 5}')
    assert result.cost_usd is None and result.num_turns is None
    assert result.duration_ms == 12 and result.cli_session_id is None


@pytest.mark.parametrize("fields", ['"total_cost_usd": -0.5, "num_turns": -5, "duration_ms": 1e400',
                                    '"total_cost_usd": 1e400, "num_turns": -1, "duration_ms": -1.5',
                                    '"total_cost_usd": -1e-9, "num_turns": 1e400, "duration_ms": -1e400',
                                    '"total_cost_usd": 1e307, "num_turns": -2, "duration_ms": -2',
                                    '"total_cost_usd": 1000000.01, "num_turns": -2, "duration_ms": -2'])
def test_result_numbers_that_cannot_be_so_are_unknown(fields):
    """A cost, a turn count or a duration below 0 or infinite is no
    figure, nor is a cost of over a million dollars: stored, it would skew
    the totals of every session (and two of 1e307 add up to infinity)."""
    (result,) = stream.parse_line(f'{{"type": "result", "is_error": false, {fields}}}')
    assert (result.cost_usd, result.num_turns, result.duration_ms) == (None, None, None)
    (zero,) = stream.parse_line('{"type": "result", "total_cost_usd": 0, "num_turns": 0, "duration_ms": 0}')
    assert (zero.cost_usd, zero.num_turns, zero.duration_ms) == (0.0, 0, 0)
    (most,) = stream.parse_line('{"type": "result", "total_cost_usd": 1000000}')
    assert most.cost_usd == stream.MAX_COST_USD
