"""In-session retrieval: the memory store served over MCP by `claudeops mcp`,
given to every session with --mcp-config."""
from __future__ import annotations

import json
import os
import subprocess
import threading
import sys
from pathlib import Path

import anyio
import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from app import redaction
from app.extensions import db
from app.mcp import ALLOW_RULE, build_server, plugin_tools
from plugins.memory import mcp_tools
from plugins.memory.models import TrackRecord
from tests.memory_helpers import add_memory
from tests.support.database import database_env
from tests.support.mock_messages_api import MockMessagesAPI, text as say, tool_use
from tests.test_real_cli import MAIN_REQUEST_MARKER, claude_bin, run_claudeops  # noqa: F401 (fixture)

CLAUDEOPS = Path(sys.executable).with_name("claudeops")


@pytest.fixture
def memories(app):
    return [add_memory("Takes 60s to start after restart", confidence=0.9),
            add_memory("Needs the NFS mount /media before it starts, else the library looks empty " * 3,
                       category="dependency", confidence=0.6),
            add_memory("Old transcoder crashed on HEVC", category="behavior", confidence=0.2, active=False),
            add_memory("Vacuum runs Sundays at 03:00", service="postgres", category="maintenance"),
            add_memory("DNS checks fail during WireGuard reconnects", service=None, category="behavior")]


# ------------------------------------------------------------- the tools

def test_search_is_compact_and_best_first(memories):
    out = mcp_tools.search_memories("jellyfin")
    lines = out.splitlines()
    assert lines[0].startswith("2 of 2 memories match 'jellyfin'")
    assert lines[1] == f"#{memories[0].id} jellyfin [timing] 0.9: Takes 60s to start after restart"
    assert lines[2].startswith(f"#{memories[1].id} jellyfin [dependency] 0.6: Needs the NFS mount")
    assert lines[2].endswith("…") and len(lines[2]) < 200  # a preview, not the whole observation


def test_search_reaches_inactive_memories_only_when_asked(memories):
    assert "HEVC" not in mcp_tools.search_memories("transcoder")
    found = mcp_tools.search_memories("transcoder", include_inactive=True)
    assert f"#{memories[2].id} jellyfin [behavior] 0.2 (inactive): Old transcoder" in found


def test_search_narrows_to_a_service_and_bounds_the_limit(memories):
    assert "Vacuum" not in mcp_tools.search_memories("runs", service="jellyfin")
    assert "Vacuum runs Sundays" in mcp_tools.search_memories("runs", service="postgres")
    assert "1 of 1" in mcp_tools.search_memories("wireguard", service="general")
    assert mcp_tools.search_memories("start", limit=1).startswith("1 of 2 memories")
    assert mcp_tools.search_memories("start", limit=-5).startswith("1 of 2 memories")
    assert mcp_tools.search_memories("zzz-nothing") == "No memories match 'zzz-nothing'."
    assert mcp_tools.search_memories("   ").startswith("Give a query")


def test_search_says_which_words_it_searched(memories):
    """The search takes a query's first words only: the answer names them,
    and does not list a memory as matching a word never looked for."""
    words = "takes 60s to start after restart jellyfin timing takes start"
    out = mcp_tools.search_memories(f"{words} transcoder HEVC")
    assert out.splitlines()[0] == (f"1 of 1 memories match {words!r} (the query's first 10 words; the rest were "
                                   "not searched), best first. Call get_memories with ids for the full text.")
    assert mcp_tools.search_memories("x " * 10_000).startswith(
        f"No memories match {' '.join(['x'] * 10)!r} (the query's first 10 words;")
    assert mcp_tools.search_memories(words).startswith(f"1 of 1 memories match {words!r}, best first.")


def test_a_runaway_argument_is_not_echoed_whole(memories):
    huge = "x" * 100_000
    for answer in (mcp_tools.search_memories(huge), mcp_tools.search_memories("vacuum", service=huge),
                   mcp_tools.list_service_memories(huge), mcp_tools.search_memories(f"a b c d e f g h i {huge} j")):
        assert answer.startswith("No memories ") and len(answer) < 300 and "x…" in answer
    assert mcp_tools.search_memories("x" * mcp_tools.ECHO_CHARS) == f"No memories match {'x' * mcp_tools.ECHO_CHARS!r}."


def test_get_gives_the_full_text_and_names_what_is_missing(memories):
    out = mcp_tools.get_memories([memories[1].id, 9999, memories[1].id])
    assert ("Needs the NFS mount /media before it starts, else the library looks empty " * 3).strip() in out
    assert "service jellyfin · dependency · confidence 0.6 · active" in out
    assert out.count("Needs the NFS mount") == 3  # once, with the observation's own repeats
    assert out.endswith("Not found (deleted or never existed): 9999")
    assert mcp_tools.get_memories([]) == "Give one or more memory ids."
    # Beyond a 32-bit id (PostgreSQL would refuse it in the query): not found, on every backend.
    out = mcp_tools.get_memories([2**31, memories[0].id, 2**63, 10**30, 0, -1])
    assert "Takes 60s to start after restart" in out
    assert out.endswith(f"Not found (deleted or never existed): {2**31}, {2**63}, {10**30}, 0, -1")


def test_get_says_which_ids_it_did_not_read(memories):
    """At most MAX_IDS ids are read a call: the rest are named, not passed over
    as if they had been answered."""
    asked = [memories[0].id] + list(range(1000, 1000 + mcp_tools.MAX_IDS))
    out = mcp_tools.get_memories(asked)
    assert "Takes 60s to start after restart" in out
    unread = asked[mcp_tools.MAX_IDS:]
    assert out.endswith(f"Not read (at most {mcp_tools.MAX_IDS} ids, and 20,000 characters, a call; ask again "
                        f"for them): {', '.join(map(str, unread))}")
    many = mcp_tools.get_memories(list(range(1, 100_001)))   # named up to a bound, not echoed whole
    assert many.endswith(f"{2 * mcp_tools.MAX_IDS} and {100_000 - 2 * mcp_tools.MAX_IDS} more")


def test_get_gives_as_many_memories_as_the_cli_passes_on(memories):
    """Claude Code hands the agent a file to read instead of a tool result
    over 25,000 tokens: fifty memories of the longest observation (2,000
    characters by default) would be, so the answer stops at MAX_ANSWER_CHARS
    and names the rest as not read, in the order asked."""
    long = [add_memory(f"{n} " + "é" * 1990, service="nas", category="behavior") for n in range(mcp_tools.MAX_IDS - 1)]
    asked = [memory.id for memory in long]
    out = mcp_tools.get_memories(asked + [9999])
    given = [memory.id for memory in long if f"#{memory.id} · service nas" in out]
    assert given == asked[:len(given)] and 5 < len(given) < 10
    assert len(out) < mcp_tools.MAX_ANSWER_CHARS + 1000
    assert out.endswith(f"Not found (deleted or never existed): 9999\n\nNot read (at most {mcp_tools.MAX_IDS} ids, "
                        f"and 20,000 characters, a call; ask again for them): "
                        f"{', '.join(map(str, asked[len(given):]))}")
    # One memory longer than that all the same: it is given, not refused.
    longest = add_memory("x" * (mcp_tools.MAX_ANSWER_CHARS + 10), service="nas", category="behavior")
    assert "x" * (mcp_tools.MAX_ANSWER_CHARS + 10) in mcp_tools.get_memories([longest.id, memories[0].id])


def test_get_names_the_memories_left_out_for_length_beside_as_many_ids_past_fifty_as_ever(memories):
    """The ids past the fifty a call reads are named up to a bound (not
    echoed whole); those left out for length come first, and do not take
    their places: the agent is not left to work out which ids "and 46
    more" are."""
    long = [add_memory(f"{n} " + "é" * 1990, service="nas", category="behavior") for n in range(mcp_tools.MAX_IDS)]
    asked = [memory.id for memory in long] + list(range(10_001, 10_001 + mcp_tools.MAX_IDS + 5))
    out = mcp_tools.get_memories(asked)
    given = [memory.id for memory in long if f"#{memory.id} · service nas" in out]
    named = out.rpartition("ask again for them): ")[2]
    assert named == ", ".join(map(str, asked[len(given):mcp_tools.MAX_IDS + mcp_tools.MAX_IDS])) + " and 5 more"


def test_results_carry_each_memorys_track_record(memories):
    memories[0].track_record = TrackRecord(worked=2, partial=0, failed=1, unknown=0)
    memories[2].track_record = TrackRecord(worked=0, partial=0, failed=3, unknown=1)
    db.session.commit()
    assert (f"#{memories[0].id} jellyfin [timing] 0.9 (2 worked, 1 failed): Takes 60s to start after restart"
            in mcp_tools.search_memories("jellyfin").splitlines())
    assert (f"#{memories[2].id} jellyfin [behavior] 0.2 (inactive; 3 failed, 1 unknown): Old transcoder"
            in mcp_tools.search_memories("transcoder", include_inactive=True))
    assert f"#{memories[0].id} jellyfin [timing] 0.9 (2 worked, 1 failed)" in mcp_tools.list_service_memories("jellyfin")
    full = mcp_tools.get_memories([memories[0].id, memories[1].id]).split("\n\n")
    assert "outcomes reported: 2 worked, 1 failed" in full[0].splitlines()
    assert "outcomes reported: none yet" in full[1].splitlines()


def test_list_a_services_memories(memories):
    out = mcp_tools.list_service_memories("postgres")
    assert out.splitlines()[1] == f"#{memories[3].id} postgres [maintenance] 0.7: Vacuum runs Sundays at 03:00"
    assert "about no single service" in mcp_tools.list_service_memories("general")
    assert mcp_tools.list_service_memories("nginx") == "No memories about nginx."


def test_a_service_named_in_another_case_is_listed_as_it_is_kept(memories):
    """Services are kept in lower case and looked up in any case (and
    without the spaces around them): the
    listing names the service the memories are of, and "General" the
    general memories."""
    out = mcp_tools.list_service_memories("Postgres")
    assert out.splitlines()[0].endswith("memories about postgres, best first. Call get_memories with ids for the full text.")
    assert "about no single service" in mcp_tools.list_service_memories("General")
    assert mcp_tools.list_service_memories("NGINX") == "No memories about nginx."
    assert mcp_tools.search_memories("vacuum", service="Postgres").splitlines()[0].endswith(
        "memories match 'vacuum' for postgres, best first. Call get_memories with ids for the full text.")
    # Spaces around the name too, in the search as in the listing.
    assert mcp_tools.search_memories("vacuum", service=" postgres ").splitlines()[0].endswith(
        "memories match 'vacuum' for postgres, best first. Call get_memories with ids for the full text.")
    assert mcp_tools.list_service_memories(" Postgres ").startswith("1 of 1 memories about postgres,")
    assert mcp_tools.search_memories("wireguard", service="  ").startswith("1 of 1 memories match 'wireguard',")


def test_a_secret_the_preview_cuts_in_two_is_redacted_whole(app, memories, monkeypatch):
    """A secret configured after the memory holding it was written, standing
    where the preview is cut: none of it reaches the agent, as none of it
    does through get_memories."""
    secret = "S3cretValue-9f8e7d6c"
    leaked = add_memory("x" * 100 + " login uses " + secret, service="vault", category="behavior")
    monkeypatch.setenv("DB_PASSWORD", secret)
    redaction.init_app(app)
    server = build_server(app)
    for tool, arguments in (("list_service_memories", {"service": "vault"}), ("search_memories", {"query": "login"})):
        answer = anyio.run(server.call_tool, tool, arguments).content[0].text
        assert f"#{leaked.id} vault [behavior] 0.7: {'x' * 100} login uses [redact…" in answer.splitlines()
        assert "S3c" not in answer
    assert "S3c" not in anyio.run(server.call_tool, "get_memories", {"ids": [leaked.id]}).content[0].text


def test_a_plugin_tools_answer_is_redacted_whatever_its_form(app, monkeypatch):
    """A plugin's tool that answers a dict or a list, or refuses with a
    ToolError, instead of answering text: what reaches the agent is
    redacted all the same."""
    from mcp.server.mcpserver.exceptions import ToolError
    from app import mcp
    from app.plugin_types import McpTool
    secret = "S3cretValue-9f8e7d6c"

    def as_dict(name: str) -> dict:
        return {"host": name, "login": f"uses {secret}"}

    def as_list(name: str) -> list:
        return [f"uses {secret}", {"password": "hunter2"}]

    def refusing(name: str) -> str:
        raise ToolError(f"{name} refused the password {secret}")

    monkeypatch.setenv("DB_PASSWORD", secret)
    redaction.init_app(app)
    monkeypatch.setattr(mcp, "plugin_tools", lambda: [McpTool("as_dict", as_dict), McpTool("as_list", as_list),
                                                      McpTool("refusing", refusing)])
    server = build_server(app)
    answer = anyio.run(server.call_tool, "as_dict", {"name": "db"}).content
    assert [block.text for block in answer] == ['{\n  "host": "db",\n  "login": "uses [redacted]"\n}']
    answer = [block.text for block in anyio.run(server.call_tool, "as_list", {"name": "db"}).content]
    assert answer[0] == "uses [redacted]" and "hunter2" not in answer[1]
    with pytest.raises(ToolError) as refused:
        anyio.run(server.call_tool, "refusing", {"name": "db"})
    assert str(refused.value) == "Error executing tool refusing: db refused the password [redacted]"


def test_a_plugin_tools_answer_the_sdk_sends_as_json_or_as_it_is_is_redacted_too(app, monkeypatch):
    """A dataclass, a pydantic model or a set the SDK writes out as JSON
    text; a content block or a whole result it sends as it is; a
    ResourceError's message it passes on as a ToolError's."""
    import dataclasses
    import pydantic
    from mcp.server.mcpserver.exceptions import ResourceError, ToolError
    from mcp_types import CallToolResult, TextContent
    from app import mcp
    from app.plugin_types import McpTool
    secret = "S3cretValue-9f8e7d6c"

    @dataclasses.dataclass
    class Row:
        login: str

    class Model(pydantic.BaseModel):
        login: str

    answers = {"as_dataclass": lambda: Row(f"uses {secret}"), "as_model": lambda: Model(login=f"uses {secret}"),
               "as_set": lambda: {f"uses {secret}"},
               "as_block": lambda: TextContent(type="text", text=f"uses {secret}"),
               "as_result": lambda: CallToolResult(content=[TextContent(type="text", text=f"uses {secret}")],
                                                   structured_content={"login": secret})}

    def tool(name):
        def answer(host: str):
            return answers[name]()
        return McpTool(name, answer, description=name)

    def refusing(host: str) -> str:
        raise ResourceError(f"{host} refused the password {secret}")

    monkeypatch.setenv("DB_PASSWORD", secret)
    redaction.init_app(app)
    monkeypatch.setattr(mcp, "plugin_tools", lambda: [tool(name) for name in answers] + [McpTool("refusing", refusing)])
    server = build_server(app)
    given = {name: anyio.run(server.call_tool, name, {"host": "db"}) for name in answers}
    assert {name: [block.text for block in result.content] for name, result in given.items()} == {
        "as_dataclass": ['{\n  "login": "uses [redacted]"\n}'], "as_model": ['{\n  "login": "uses [redacted]"\n}'],
        "as_set": ['[\n  "uses [redacted]"\n]'], "as_block": ["uses [redacted]"],
        "as_result": ["uses [redacted]", '{\n  "login": "[redacted]"\n}']}
    assert given["as_result"].structured_content is None
    with pytest.raises(ToolError) as refused:
        anyio.run(server.call_tool, "refusing", {"host": "db"})
    assert str(refused.value) == "Error executing tool refusing: db refused the password [redacted]"


def test_the_memory_plugin_offers_its_tools(app):
    assert [t.name for t in plugin_tools()] == ["search_memories", "get_memories", "list_service_memories"]


def test_the_server_cannot_write(app, memories):
    build_server(app)
    with pytest.raises(DBAPIError, match="readonly|read-only"):   # SQLite's words, and PostgreSQL's
        db.session.execute(text("DELETE FROM memories"))
    db.session.rollback()


@pytest.mark.parametrize("tool, arguments, name", [
    ("list_service_memories", {"service": "web\udcff"}, "service"),
    ("search_memories", {"query": "nfs", "service": "\ud800"}, "service"),
    ("search_memories", {"query": "nfs \udcff"}, "query")])
def test_a_lone_surrogate_is_refused_in_words_the_agent_can_act_on(app, memories, tool, arguments, name):
    """JSON may carry half of a surrogate pair ("\\udcff"), which no database
    takes: the tool says which argument, as for any other bad argument."""
    from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
    server = build_server(app)
    with pytest.raises(ToolError) as refused:
        anyio.run(server.call_tool, tool, arguments)
    assert not isinstance(refused.value, UnexpectedToolError)
    assert str(refused.value) == (f"Error executing tool {tool}: {name} must be text: "
                                  "it holds half of a surrogate pair")

# ---------------------------------------------- the server over stdio

def test_claudeops_mcp_over_stdio(app, memories, tmp_path):
    """An MCP client (the official SDK's) talks to the real `claudeops mcp`."""
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client
    # A secret configured after a memory holding it was written: redacted in the answer.
    leaked = add_memory("DB login uses S3cretValue-9f8e7d6c", service="postgres", category="behavior")
    env = {"PATH": os.environ["PATH"], "CLAUDEOPS_STATE_DIR": app.config["CLAUDEOPS_STATE_DIR"],
           "CLAUDEOPS_DATABASE_URL": app.config["CLAUDEOPS_DATABASE_URL"], "DB_PASSWORD": "S3cretValue-9f8e7d6c"}

    async def talk():
        params = StdioServerParameters(command=str(CLAUDEOPS), args=["mcp"], env=env)
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            tools = {t.name: t for t in (await session.list_tools()).tools}
            result = await session.call_tool("get_memories", {"ids": [memories[3].id]})
            bad = await session.call_tool("get_memories", {"ids": "not a list"})
            secret = await session.call_tool("get_memories", {"ids": [leaked.id]})
            return tools, result, bad, secret

    tools, result, bad, secret = anyio.run(talk)
    assert "DB login uses [redacted]" in secret.content[0].text and "S3cret" not in secret.content[0].text
    assert set(tools) == {"search_memories", "get_memories", "list_service_memories"}
    assert tools["search_memories"].input_schema["required"] == ["query"]
    assert tools["get_memories"].annotations.read_only_hint is True
    assert "Vacuum runs Sundays at 03:00" in result.content[0].text and not result.is_error
    assert bad.is_error  # a wrong argument is the tool's error, not the server's end


def test_a_lone_surrogate_sent_over_stdio_is_answered_not_left_waiting(app, memories):
    """The SDK's reader refuses such a request before any tool sees it, and
    answers nothing: the CLI's call would hang until it gave up. It is
    answered as the tool's error, naming the argument."""
    env = {"PATH": os.environ["PATH"], "CLAUDEOPS_STATE_DIR": app.config["CLAUDEOPS_STATE_DIR"],
           "CLAUDEOPS_DATABASE_URL": app.config["CLAUDEOPS_DATABASE_URL"]}
    requests = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
         "params": {"name": "search_memories", "arguments": {"query": "nfs \ud800"}}},
        {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
         "params": {"name": "search_memories", "arguments": {"query": "vacuum"}}}]
    sent = "".join(json.dumps(request) + "\n" for request in requests)   # json.dumps writes "\ud800" as it is
    assert "\\ud800" in sent
    server = subprocess.Popen([str(CLAUDEOPS), "mcp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, env=env, text=True)
    watchdog = threading.Timer(30, server.kill)   # a request left unanswered ends the wait, and the test
    watchdog.start()
    try:
        server.stdin.write(sent)
        server.stdin.flush()
        answers = {}
        while not {2, 3} <= set(answers):   # stdin is kept open: at its end the server would stop
            line = server.stdout.readline()
            assert line, "the server ended without answering"
            answer = json.loads(line)
            answers[answer.get("id")] = answer
    finally:
        watchdog.cancel()
        server.stdin.close()
        server.wait(30)
    refused = answers[2]["result"]
    assert refused["isError"] is True
    assert refused["content"][0]["text"] == ("Error executing tool search_memories: query must be text: it holds "
                                             "half of a surrogate pair")
    assert "Vacuum" in answers[3]["result"]["content"][0]["text"]   # the next call is served as ever


@pytest.mark.parametrize("depth", [500, 5000])   # too deep to mark, and too deep to read at all
def test_a_request_nested_too_deep_to_read_does_not_end_the_servers_input(depth):
    """Each line is read once before the SDK reads it (for halves of
    surrogate pairs): one nested too deep for Python's reader is passed on
    as it is, to the SDK, and the lines after it still come
    through; the server's stdin does not end with it."""
    from app.mcp import _mark_lone_surrogates
    deep = ('{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"search_memories",'
            '"arguments":{"query":"\\u00e9","x":' + "[" * depth + "]" * depth + "}}}\n").encode()
    after = b'{"jsonrpc":"2.0","id":3,"method":"tools/list"}\n'
    given_read, given_write = os.pipe()
    passed_read, passed_write = os.pipe()
    with os.fdopen(given_write, "wb") as given:
        given.write(deep + after)
    reader = threading.Thread(target=_mark_lone_surrogates, args=(given_read, passed_write), daemon=True)
    reader.start()
    reader.join(30)
    with os.fdopen(passed_read, "rb") as passed:
        assert passed.read() == deep + after


# --------------------------------------------------------- every session

def test_every_session_is_given_the_server(app, fake_cli, run_session_now):
    from tests import streamlines as sl
    argv_path = fake_cli(sl.steps(sl.init(), sl.result("ok")))
    run_session_now()
    argv = json.loads(argv_path.read_text())["argv"]
    config = json.loads(argv[argv.index("--mcp-config") + 1])
    server = config["mcpServers"]["claudeops"]
    assert server["args"][-1] == "mcp" and Path(server["command"]).name == "claudeops"
    assert "env" not in server  # inherited from the CLI: no database URL on any command line
    allowed = argv[argv.index("--allowedTools") + 1].split(",")
    assert ALLOW_RULE in allowed and "Bash" in allowed


def test_an_empty_tool_list_allows_only_the_servers_tools_as_the_readme_says(app, fake_cli, run_session_now):
    from app.config import PROJECT_ROOT
    from tests import streamlines as sl
    app.config["CLAUDEOPS_TIER1_ALLOWED_TOOLS"] = []
    argv_path = fake_cli(sl.steps(sl.init(), sl.result("ok")))
    run_session_now()
    argv = json.loads(argv_path.read_text())["argv"]
    assert argv[argv.index("--allowedTools") + 1] == ALLOW_RULE
    readme = (PROJECT_ROOT / "README.md").read_text()
    row = next(line for line in readme.splitlines() if line.startswith("| `CLAUDEOPS_TIER1_ALLOWED_TOOLS` |"))
    assert f"also allowed `{ALLOW_RULE}`" in row and "empty allows only those" in row


@pytest.mark.real_cli
def test_the_real_cli_searches_memories_mid_session(tmp_path, claude_bin):  # noqa: F811
    """The real Claude Code CLI starts `claudeops mcp` from --mcp-config and
    calls the search tool the mock API asks for; the tool result it sends back
    holds the real memories."""
    env = dict(os.environ, CLAUDEOPS_STATE_DIR=str(tmp_path / "state"), **database_env(tmp_path / "state"))
    subprocess.run([str(CLAUDEOPS), "db", "upgrade", "heads"], env=env, check=True, capture_output=True)
    for observation, category in (("Takes 60s to start after restart", "timing"),
                                  ("Needs the NFS mount /media before it starts", "dependency")):
        subprocess.run([str(CLAUDEOPS), "memories", "add", "--category", category, "--service", "jellyfin",
                        observation], env=env, check=True, capture_output=True)
    mock = MockMessagesAPI(marker=MAIN_REQUEST_MARKER, script=[
        [say("Let me check what is known about jellyfin."),
         tool_use("mcp__claudeops__search_memories", {"query": "jellyfin"})],
        [say("Jellyfin needs its NFS mount.")],
    ])
    with mock:
        result = run_claudeops(tmp_path, claude_bin, mock.start(), "--tier", "1")
    assert result.returncode == 0, result.stdout + result.stderr
    offered = [tool["name"] for tool in mock.requests[0]["tools"]]
    assert "mcp__claudeops__search_memories" in offered and "mcp__claudeops__get_memories" in offered
    tool_results = [block for message in mock.requests[1]["messages"] if isinstance(message["content"], list)
                    for block in message["content"] if block.get("type") == "tool_result"]
    assert len(tool_results) == 1 and not tool_results[0].get("is_error")
    returned = json.dumps(tool_results[0]["content"])
    assert "2 of 2 memories match 'jellyfin'" in returned
    assert "Takes 60s to start after restart" in returned and "Needs the NFS mount /media" in returned
