"""``claudeops mcp``: the plugins' read-only tools, served to the agent over
MCP (stdio), so that a session can look up what did not fit its prompt.

The CLI starts this server itself, once per session, from the
``--mcp-config`` the host passes (``session_mcp_config``). Each tool call
runs in its own application context, on a database connection that refuses
writes: whatever the agent asks, the tools can only read.
"""
from __future__ import annotations

import functools
import json
import logging
import os
import sqlite3
import threading
from typing import Optional

from flask import Flask
from sqlalchemy import event

from app.extensions import db
from app.plugin_fault_log import log_fault
from app.plugin_types import McpTool
from app.plugins import of_type, results_by_plugin
from app.portable_text import is_unicode
from app.redaction import redactor

log = logging.getLogger(__name__)

SERVER_NAME = "claudeops"
# The allow rule that lets the agent call every tool of this server without
# asking (sessions run non-interactively, where asking means refusing).
ALLOW_RULE = f"mcp__{SERVER_NAME}"


def plugin_tools() -> list[McpTool]:
    """Every plugin's tools. Of two tools with one name, the plugin registered
    first (built-ins before installed ones) keeps it; the other is logged and
    left out, so an installed package cannot shadow a built-in tool."""
    tools: dict[str, McpTool] = {}
    # Plugins are called the last registered first; read in registration order.
    for plugin, result in reversed(results_by_plugin("claudeops_mcp_tools")):
        for tool in of_type(plugin, "claudeops_mcp_tools", result, McpTool):
            if tool.name in tools:
                log_fault(log, plugin, "claudeops_mcp_tools", f"tool {tool.name}",
                          "plugin %s offers MCP tool %r, which another plugin offers first; ignored", plugin, tool.name)
            else:
                tools[tool.name] = tool
    return list(tools.values())


def session_mcp_config(executable: list[str]) -> Optional[dict]:
    """The ``--mcp-config`` for a session, or None when no plugin offers a tool.

    The server inherits the CLI's environment, which carries the session's
    database settings (see ``manager.child_env``), so no secret is put on
    the command line."""
    if not plugin_tools():
        return None
    command, *args = executable
    return {"mcpServers": {SERVER_NAME: {"type": "stdio", "command": command, "args": [*args, "mcp"]}}}


def _refuse_writes(engine) -> None:
    """Every new connection of ``engine`` is read-only, at the database level."""
    @event.listens_for(engine, "connect")
    def read_only(dbapi_connection, _record):
        cursor = dbapi_connection.cursor()
        if isinstance(dbapi_connection, sqlite3.Connection):
            cursor.execute("PRAGMA query_only = ON")
        else:
            cursor.execute("SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY")
            dbapi_connection.commit()   # a SET rolled back with its transaction would be undone
        cursor.close()
    engine.dispose()  # connections made before the listener would still write


def _in_app_context(app: Flask, function):
    """``function`` in an application context, its answer redacted: what a
    tool reads was redacted when it was written, but a secret configured
    since (or a shape caught since) must not reach the agent here either,
    as it does not through the prompt, which is redacted whole. A call
    with an argument that is not text is refused before it runs."""
    from mcp.server.mcpserver.exceptions import ResourceError, ToolError

    @functools.wraps(function)
    def call(*args, **kwargs):
        name = _not_text(kwargs)
        if name:   # the agent is told, as of any bad argument, instead of a crash it learns nothing from
            raise ToolError(f"{name} must be text: it holds half of a surrogate pair")
        with app.app_context():
            try:
                return _redacted(function(*args, **kwargs))
            except (ToolError, ResourceError) as refused:   # its words reach the agent too
                raise ToolError(redactor().redact(str(refused))) from refused
            finally:
                db.session.rollback()
    return call


def _redacted(answer):
    """A tool's answer, redacted as the agent will read it. A tool should
    answer text, but the SDK sends any other answer too: a list as one
    content block for each item, a content block as it is, and anything
    else (a dict, a dataclass, a pydantic model, a set) as JSON text. Each
    is redacted in the form sent, which is the one the redaction's shapes
    (a "password" key's value) are looked for in."""
    import pydantic_core
    from mcp.server.mcpserver.utilities.types import Audio, Image
    from mcp.types import CallToolResult, ContentBlock, EmbeddedResource, TextContent, TextResourceContents

    if answer is None or isinstance(answer, (Image, Audio)):   # nothing, or binary: no text to redact
        return answer
    if isinstance(answer, str):
        return redactor().redact(answer)
    if isinstance(answer, (list, tuple)):
        return [_redacted(item) for item in answer]
    if isinstance(answer, TextContent):
        return answer.model_copy(update={"text": redactor().redact(answer.text)})
    if isinstance(answer, EmbeddedResource) and isinstance(answer.resource, TextResourceContents):
        text = redactor().redact(answer.resource.text)
        return answer.model_copy(update={"resource": answer.resource.model_copy(update={"text": text})})
    if isinstance(answer, ContentBlock):   # an image, audio or a link: sent as it is
        return answer
    if isinstance(answer, CallToolResult):   # the SDK sends it as it is
        # Its structured content may reach the agent whole, and no redaction
        # looks into JSON values: it is given as redacted JSON text instead.
        given = _redacted(list(answer.content) + (
            [answer.structured_content] if answer.structured_content is not None else []))
        return CallToolResult(content=[TextContent(type="text", text=block) if isinstance(block, str) else block
                                       for block in given], is_error=answer.is_error)
    # As the SDK writes it out (mcpserver/utilities/func_metadata.py, _convert_to_content).
    return redactor().redact(pydantic_core.to_json(answer, fallback=str, indent=2).decode())


# What stands for half of a surrogate pair in a request read over stdio
# (``serve_stdio``): a noncharacter, which no text an agent means holds.
LONE_SURROGATE = "\U0010fffe"


def _not_text(arguments: dict) -> Optional[str]:
    """The first argument holding half of a surrogate pair, which JSON may
    carry (a lone "\\udcff" escape) but no database takes."""
    for name, value in arguments.items():
        if any(isinstance(v, str) and (not is_unicode(v) or LONE_SURROGATE in v)
               for v in (value if isinstance(value, list) else [value])):
            return name
    return None


def serve_stdio(server) -> None:
    """``server`` on stdin and stdout. The SDK's reader refuses a request
    that holds half of a surrogate pair before any tool sees it, and
    answers nothing: the CLI's call would wait until it gave up. So each
    line passes through here first, such halves marked (LONE_SURROGATE),
    and the tool refuses the argument in words the agent can act on."""
    read_end, write_end = os.pipe()
    given = os.dup(0)
    os.dup2(read_end, 0)
    os.close(read_end)
    threading.Thread(target=_mark_lone_surrogates, args=(given, write_end), name="mcp-stdin", daemon=True).start()
    server.run("stdio")


def _mark_lone_surrogates(source: int, target: int) -> None:
    with os.fdopen(source, "rb") as lines, os.fdopen(target, "wb") as out:
        for line in lines:
            out.write(_marked(line))
            out.flush()


def _marked(line: bytes) -> bytes:
    if b"\\u" not in line:
        return line
    try:
        message = json.loads(line)
        marked = _replace_lone_surrogates(message)
        return line if marked is message else json.dumps(marked).encode() + b"\n"
    except (ValueError, RecursionError):
        # Passed on as it is: the SDK's to answer (to one nested too deep,
        # a few hundred arrays in an argument, it answers nothing, as to any
        # request nested a hundred deep). Raised here, it would end this
        # thread, and with it the server's stdin: the session would lose its tools.
        return line


def _replace_lone_surrogates(value):
    """``value`` with each string's halves of surrogate pairs replaced, or
    ``value`` itself if it holds none."""
    if isinstance(value, str):
        return value if is_unicode(value) else "".join(
            LONE_SURROGATE if "\ud800" <= char <= "\udfff" else char for char in value)
    if isinstance(value, list):
        items = [_replace_lone_surrogates(item) for item in value]
        return value if all(a is b for a, b in zip(items, value)) else items
    if isinstance(value, dict):
        pairs = {_replace_lone_surrogates(k): _replace_lone_surrogates(v) for k, v in value.items()}
        return value if all(k in value and pairs[k] is value[k] for k in pairs) else pairs
    return value


def build_server(app: Flask):
    """An MCP server (the official SDK's) with every plugin's tools."""
    from mcp.server.mcpserver import MCPServer
    from mcp.types import ToolAnnotations

    server = MCPServer(SERVER_NAME, instructions=(
        "Claude Ops: what earlier sessions learned about this infrastructure. Read-only."))
    with app.app_context():
        db.session.remove()   # a connection already taken out would still write
        _refuse_writes(db.engine)
        tools = plugin_tools()
    for tool in tools:
        server.add_tool(_in_app_context(app, tool.function), name=tool.name,
                        description=tool.description or None,
                        annotations=ToolAnnotations(readOnlyHint=True, openWorldHint=False),
                        structured_output=False)
    log.info("MCP server with %d tool(s): %s", len(tools), ", ".join(t.name for t in tools) or "none")
    return server


def describe(app: Flask) -> str:
    """The tools as JSON, for ``claudeops mcp --list``."""
    with app.app_context():
        return json.dumps([{"name": t.name, "description": t.description or (t.function.__doc__ or "").strip()}
                           for t in plugin_tools()], indent=2)
