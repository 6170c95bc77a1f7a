"""A scripted stand-in for the Anthropic Messages API, for tests that drive the
real Claude Code CLI (point it here with ANTHROPIC_BASE_URL). Standard library only.

    server = MockMessagesAPI(script=[
        [text("Checking."), tool_use("Bash", {"command": "echo hi"})],
        [text("All done.")],
    ], marker="APPENDED-MARKER")
    base_url = server.start()
    ...run `claude -p ...` with ANTHROPIC_BASE_URL=base_url...
    server.requests          # main-conversation request bodies
    server.stop()

The CLI also sends side requests: unless CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1,
a session-title request (same model, `tools: []`, no appended system prompt, JSON
schema output). Only "main" requests consume the script: those whose system prompt
contains `marker` (pass the --append-system-prompt text) or, without a marker, those
that offer tools. Side requests get a short harmless reply (valid JSON if asked for).
"""

from __future__ import annotations

import json
import threading
import uuid
from collections import namedtuple
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

# One entry of `all_requests`; path is raw (the CLI posts to /v1/messages?beta=true).
RecordedRequest = namedtuple("RecordedRequest", "method path body")


def text(s: str) -> dict:
    return {"type": "text", "text": s}


def tool_use(name: str, input: dict, id: str | None = None) -> dict:
    return {"type": "tool_use", "id": id or "toolu_mock_" + uuid.uuid4().hex[:20],
            "name": name, "input": input}


@dataclass
class HTTPError:
    """A script turn answered with an HTTP error instead of a message."""
    status: int
    message: str
    times: int | None  # requests answered before the script moves on; None = forever
    retry: bool        # False sends `x-should-retry: false`: the CLI gives up at once


def http_error(status: int = 500, message: str | None = None,
               times: int | None = None, retry: bool = False) -> HTTPError:
    """Error turn. With retry=False (default) the CLI fails on the first answer.
    With retry=True it retries 5xx/429/529 with backoff (10 retries by default, which
    takes minutes; the CLI's CLAUDE_CODE_MAX_RETRIES env var bounds it). times=N:
    answer N requests with the error, then go on with the script (retry recovered)."""
    if message is None:
        message = "Internal server error (mock)" if status == 500 else "Mock API error %d" % status
    return HTTPError(status, message, times, retry)


_ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error",
                403: "permission_error", 404: "not_found_error", 413: "request_too_large",
                429: "rate_limit_error", 529: "overloaded_error"}


def system_text(body: dict) -> str:
    """The system prompt of a request body; `system` may be a string or text blocks."""
    system = body.get("system") or ""
    if isinstance(system, str):
        return system
    return "\n".join(b.get("text", "") for b in system if isinstance(b, dict))


class MockMessagesAPI:
    def __init__(self, script=(), marker: str | None = None, final_text: str = "Done.",
                 side_text: str = "OK", model: str | None = None, chunk_size: int = 16):
        # A turn is a list of blocks, a bare string (one text block) or an HTTPError.
        self.script = [[text(t)] if isinstance(t, str) else t for t in script]
        for turn in self.script:
            if not isinstance(turn, HTTPError) and (
                    not turn or any(b.get("type") not in ("text", "tool_use") for b in turn)):
                raise ValueError("a turn needs text/tool_use blocks: %r" % (turn,))
        self.marker = marker
        self.final_text = final_text    # reply once the script has run out
        self.side_text = side_text      # reply to non-main requests
        self.model = model              # None: echo the requested model
        self.chunk_size = chunk_size    # text/JSON is streamed in deltas of this size
        self.requests: list[dict] = []
        self.all_requests: list[RecordedRequest] = []
        self._lock = threading.Lock()
        self._pos = 0                   # index of the next script turn
        self._errors_sent = 0           # answers given by the current HTTPError turn
        self._httpd: ThreadingHTTPServer | None = None

    # -- lifecycle ---------------------------------------------------------
    def start(self) -> str:
        handler = type("Handler", (_Handler,), {"api": self})
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._httpd.daemon_threads = True
        self._httpd.block_on_close = False  # don't wait for idle keep-alive connections
        threading.Thread(target=self._httpd.serve_forever, daemon=True).start()
        return self.base_url

    @property
    def base_url(self) -> str:
        return "http://127.0.0.1:%d" % self._httpd.server_address[1]

    def stop(self) -> None:
        if self._httpd:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop()

    # -- inspection --------------------------------------------------------
    def system_prompts(self) -> list[str]:
        return [system_text(b) for b in self.requests]

    @property
    def turns_used(self) -> int:
        return self._pos

    # -- decisions ---------------------------------------------------------
    def is_main(self, body: dict) -> bool:
        if self.marker is not None:
            return self.marker in system_text(body)
        return bool(body.get("tools"))

    def _side_reply(self, body: dict) -> str:
        # The title request asks for {"title": ...} via a JSON schema; a bare "OK"
        # would be a parse failure the CLI shrugs off, but valid JSON is cleaner.
        fmt = (body.get("output_config") or {}).get("format") or {}
        if fmt.get("type") != "json_schema":
            return self.side_text
        schema = fmt.get("schema") or {}
        return json.dumps({k: self.side_text for k in schema.get("required", [])})

    def _next_turn(self, body: dict):
        """Record a /v1/messages request; return its blocks or an HTTPError."""
        with self._lock:
            if not self.is_main(body):
                return [text(self._side_reply(body))]
            self.requests.append(body)
            if self._pos >= len(self.script):
                return [text(self.final_text)]
            turn = self.script[self._pos]
            if isinstance(turn, HTTPError):
                self._errors_sent += 1
                if turn.times is not None and self._errors_sent >= turn.times:
                    self._pos, self._errors_sent = self._pos + 1, 0
                return turn
            self._pos += 1
            return turn


class _Handler(BaseHTTPRequestHandler):
    api: MockMessagesAPI
    protocol_version = "HTTP/1.1"  # keep-alive, as the SDK expects; every reply has a length

    def log_message(self, *args):  # keep pytest output quiet
        pass

    def _body(self):
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        try:
            return json.loads(raw) if raw else None
        except ValueError:
            return raw.decode("utf-8", "replace")

    def _send(self, status, payload, content_type="application/json", headers=()):
        data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("request-id", "req_mock_" + uuid.uuid4().hex[:20])
        for k, v in headers:
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def _handle(self):
        path = self.path.split("?", 1)[0]
        body = self._body() if self.command in ("POST", "PUT", "PATCH") else None
        self.api.all_requests.append(RecordedRequest(self.command, self.path, body))
        if self.command == "POST" and path == "/v1/messages/count_tokens" and isinstance(body, dict):
            return self._send(200, {"input_tokens": _estimate_tokens(body)})
        if self.command == "POST" and path == "/v1/messages" and isinstance(body, dict):
            return self._messages(body)
        if self.command in ("GET", "HEAD") and path == "/":
            return self._send(200, {"ok": True})
        self._send(404, _error_body(404, "Not found (mock): %s %s" % (self.command, path)))

    do_GET = do_HEAD = do_POST = do_PUT = do_PATCH = do_DELETE = _handle

    def _messages(self, body):
        turn = self.api._next_turn(body)
        if isinstance(turn, HTTPError):
            headers = () if turn.retry else (("x-should-retry", "false"),)
            return self._send(turn.status, _error_body(turn.status, turn.message), headers=headers)
        tools_used = any(b["type"] == "tool_use" for b in turn)
        message = {
            "id": "msg_mock_" + uuid.uuid4().hex[:24], "type": "message", "role": "assistant",
            "model": self.api.model or body.get("model", "claude-mock"), "content": turn,
            "stop_reason": "tool_use" if tools_used else "end_turn", "stop_sequence": None,
            "usage": {"input_tokens": _estimate_tokens(body), "output_tokens": _estimate_tokens(turn),
                      "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0},
        }
        if not body.get("stream"):
            return self._send(200, message)
        self._send(200, _sse(message, self.api.chunk_size), "text/event-stream; charset=utf-8",
                   headers=(("Cache-Control", "no-cache"),))


def _estimate_tokens(obj) -> int:
    return max(1, len(json.dumps(obj)) // 4)  # ~4 characters a token, good enough


def _error_body(status, message):
    return {"type": "error", "error": {"type": _ERROR_TYPES.get(status, "api_error"),
                                       "message": message}}


def _sse(message: dict, chunk: int) -> bytes:
    """The event sequence the real API streams for `message`."""
    events = []

    def emit(kind, **data):
        payload = json.dumps({"type": kind, **data}, separators=(",", ":"))
        events.append("event: %s\ndata: %s\n\n" % (kind, payload))

    usage = message["usage"]
    emit("message_start", message={**message, "content": [], "stop_reason": None,
                                   "usage": {**usage, "output_tokens": 1}})
    emit("ping")
    for i, block in enumerate(message["content"]):
        if block["type"] == "text":
            emit("content_block_start", index=i, content_block={"type": "text", "text": ""})
            s = block["text"]
            for j in range(0, len(s), chunk):
                emit("content_block_delta", index=i, delta={"type": "text_delta", "text": s[j:j + chunk]})
        else:  # tool_use: the input arrives as JSON text in pieces
            emit("content_block_start", index=i, content_block={**block, "input": {}})
            s = json.dumps(block["input"])
            for j in range(0, len(s), chunk):
                emit("content_block_delta", index=i,
                     delta={"type": "input_json_delta", "partial_json": s[j:j + chunk]})
        emit("content_block_stop", index=i)
    emit("message_delta", delta={"stop_reason": message["stop_reason"], "stop_sequence": None},
         usage={"output_tokens": usage["output_tokens"]})
    emit("message_stop")
    return "".join(events).encode()
