"""Build stream-json lines shaped exactly like the real CLI's (see tests/fixtures/)."""
from __future__ import annotations

import itertools
import uuid

CLI_SESSION_ID = "5f0c6a43-7d0e-4a53-a8a5-0c2a3c2f9e10"
_ids = itertools.count(1)


def init(model: str = "claude-haiku-4-5") -> dict:
    return {"type": "system", "subtype": "init", "cwd": "/srv/ops/work", "session_id": CLI_SESSION_ID,
            "tools": ["Bash", "Read"], "mcp_servers": [], "model": model, "permissionMode": "default",
            "apiKeySource": "ANTHROPIC_API_KEY", "claude_code_version": "2.1.197", "uuid": str(uuid.uuid4())}


def _assistant(block: dict, message_id: str | None = None) -> dict:
    return {"type": "assistant", "message": {
        "id": message_id or f"msg_fake_{next(_ids)}", "type": "message", "role": "assistant",
        "model": "claude-haiku-4-5", "content": [block], "stop_reason": None, "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 5}},
        "parent_tool_use_id": None, "session_id": CLI_SESSION_ID, "uuid": str(uuid.uuid4())}


def text(value: str, message_id: str | None = None) -> dict:
    return _assistant({"type": "text", "text": value}, message_id)


def tool_use(command: str, tool_id: str = "toolu_fake_1") -> dict:
    return _assistant({"type": "tool_use", "id": tool_id, "name": "Bash",
                       "input": {"command": command, "description": "run it"}})


def tool_result(output: str, tool_id: str = "toolu_fake_1", is_error: bool = False) -> dict:
    return {"type": "user", "message": {"role": "user", "content": [
        {"tool_use_id": tool_id, "type": "tool_result", "content": output, "is_error": is_error}]},
        "parent_tool_use_id": None, "session_id": CLI_SESSION_ID, "uuid": str(uuid.uuid4()),
        "tool_use_result": {"stdout": output, "stderr": "", "interrupted": False, "isImage": False}}


def result(final_text: str = "Done.", is_error: bool = False, api_error_status: int | None = None,
           cost: float = 0.0123, turns: int = 2, duration_ms: int = 1500) -> dict:
    return {"type": "result", "subtype": "success", "is_error": is_error, "api_error_status": api_error_status,
            "duration_ms": duration_ms, "duration_api_ms": duration_ms - 100, "num_turns": turns,
            "result": final_text, "stop_reason": "end_turn", "session_id": CLI_SESSION_ID,
            "total_cost_usd": cost, "usage": {"input_tokens": 100, "output_tokens": 50},
            "permission_denials": [], "uuid": str(uuid.uuid4())}


def over_budget(limit: float, cost: float, turns: int = 1) -> dict:
    """The result of a session the CLI ended at ``--max-budget-usd`` (as the
    real CLI 2.1.197 writes it): no ``result`` text, what happened in ``errors``."""
    return {"type": "result", "subtype": "error_max_budget_usd", "duration_ms": 169, "duration_api_ms": 0,
            "is_error": True, "num_turns": turns, "stop_reason": "tool_use", "session_id": CLI_SESSION_ID,
            "total_cost_usd": cost, "usage": {"input_tokens": 0, "output_tokens": 0}, "permission_denials": [],
            "uuid": str(uuid.uuid4()), "errors": [f"Reached maximum budget (${limit:g})"]}


def api_error_text(status: int = 500) -> dict:
    line = _assistant({"type": "text", "text": f"API Error: {status} Internal server error. Try again."})
    line["message"]["model"] = "<synthetic>"
    line["is_api_error_message"] = True
    line["api_error_status"] = status
    return line


def api_retry(attempt: int, max_retries: int = 10, error_status: int | None = None,
              error: str = "unknown") -> dict:
    """The CLI's notice that it will ask the Messages API again (as in
    claude-code-2.1.197-c_error_retry_recovered.ndjson)."""
    return {"type": "system", "subtype": "api_retry", "attempt": attempt, "max_retries": max_retries,
            "retry_delay_ms": 600.0, "error_status": error_status, "error": error,
            "session_id": CLI_SESSION_ID, "uuid": str(uuid.uuid4())}


def steps(*lines: dict) -> list[dict]:
    return [{"line": line} for line in lines]
