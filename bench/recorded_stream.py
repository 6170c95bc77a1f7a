"""A long stream-json recording, built from the real CLI's own lines.

Every line is a copy of a line the real Claude Code CLI wrote
(tests/fixtures/claude-code-2.1.330-a_markers.ndjson) with its text, ids
and timestamps changed: the agent's text blocks, its Bash calls and their
output, in turns, between the CLI's ``init`` and ``result`` lines. Markers
(events, memories, cooldown reports) are spread over the text blocks;
tool output sometimes holds marker-like text, which must not count.

The mix is what an operations session writes: mostly events, some memories,
now and then a cooldown report; tool output is a status page with the last
few to few dozen log lines (0.3 to 3 KB), as ``systemctl status`` prints.
"""
from __future__ import annotations

import copy
import json
import random
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

from app.config import PROJECT_ROOT
from bench.dataset import DETAILS, EVENT_MESSAGES, SERVICES, SUBJECTS
from plugins.memory.models import CATEGORIES

FIXTURE = PROJECT_ROOT / "tests" / "fixtures" / "claude-code-2.1.330-a_markers.ndjson"
EVENT_LEVELS = ("info", "info", "warning", "critical")
MIX = (0.75, 0.20, 0.05)   # events, memories, cooldown reports
LOG_MESSAGES = ("GET /health 200 1.2ms", "checkpoint complete: wrote 311 buffers (1.9%)",
                "connection from 10.0.4.12 accepted", "worker 3 recycled after 10000 requests",
                "cache hit ratio 0.97 over the last 5 minutes", "slow request: GET /api/items took 2.31s",
                "retrying upstream 10.0.4.20:5432 (attempt 2)", "scheduled job backup-nightly finished")


@dataclass(frozen=True)
class Recording:
    path: Path
    lines: int
    markers: int


def _templates() -> dict[str, dict]:
    lines = [json.loads(line) for line in FIXTURE.read_text().splitlines()]

    def first(kind: str, block: str | None = None) -> dict:
        return next(line for line in lines if line["type"] == kind
                    and (block is None or line["message"]["content"][0]["type"] == block))
    return {"init": first("system"), "text": first("assistant", "text"), "tool_use": first("assistant", "tool_use"),
            "tool_result": first("user"), "result": first("result")}


class _Writer:
    def __init__(self, seed: int, mix: tuple[float, float, float]):
        self.rng = random.Random(seed)
        self.event_share, self.memory_share, _ = mix
        self.templates = _templates()
        self.clock = datetime(2026, 11, 22, 2, 0, tzinfo=timezone.utc)
        self.n = 0

    def line(self, kind: str) -> dict:
        self.n += 1
        self.clock += timedelta(milliseconds=self.rng.randrange(5, 400))
        line = copy.deepcopy(self.templates[kind])
        if "uuid" in line:
            line["uuid"] = f"00000000-0000-4000-8000-{self.n:012d}"
        if "timestamp" in line:
            line["timestamp"] = self.clock.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
        if "message" in line and "id" in line["message"]:
            line["message"]["id"] = f"msg_bench_{self.n // 3:08d}"
        return line

    def marker(self) -> str:
        """One marker line: an event, a memory or a cooldown report, as the mix says."""
        roll = self.rng.random()
        service = self.rng.choice(SERVICES)
        if roll < self.event_share:
            level = self.rng.choice(EVENT_LEVELS)
            return f"[EVENT:{level}:{service}] {self.rng.choice(EVENT_MESSAGES)}"
        if roll < self.event_share + self.memory_share:
            category = self.rng.choice(CATEGORIES)
            return f"[MEMORY:{category}:{service}] {self.rng.choice(SUBJECTS)} {self.rng.choice(DETAILS)}"
        outcome = self.rng.choice(("success", "success", "failure"))
        return f"[COOLDOWN:restart:{service}] {outcome} — restarted after its health check failed"


def _status_page(rng: random.Random, service: str) -> str:
    lines = [f"● {service}.service - {service}",
             f"     Loaded: loaded (/etc/systemd/system/{service}.service; enabled; preset: enabled)",
             f"     Active: active (running) since Sun 2026-11-22 01:{rng.randrange(60):02d}:07 UTC",
             f"   Main PID: {rng.randrange(300, 90000)} ({service})",
             f"     Memory: {rng.randrange(20, 900)}.{rng.randrange(10)}M", ""]
    for _ in range(rng.randrange(4, 30)):
        lines.append(f"Nov 22 02:{rng.randrange(60):02d}:{rng.randrange(60):02d} ops-01 {service}"
                     f"[{rng.randrange(300, 90000)}]: {rng.choice(LOG_MESSAGES)}")
    return "\n".join(lines) + "\n"


def write(path: Path, lines: int, markers: int, seed: int = 50, mix: tuple[float, float, float] = MIX) -> Recording:
    """Write a recording of exactly ``lines`` lines holding exactly ``markers``
    markers, shared between events, memories and cooldown reports by ``mix``."""
    if lines < 5:
        raise ValueError("a recording needs at least 5 lines")
    writer = _Writer(seed, mix)
    turns = (lines - 2) // 3
    body_lines = lines - 2
    text_blocks = body_lines - 2 * turns   # each turn: text, tool call, tool output; the rest are texts
    if markers > 4 * text_blocks:
        raise ValueError(f"{markers} markers do not fit in {text_blocks} text blocks")
    with path.open("w") as out:
        def emit(line: dict) -> None:
            out.write(json.dumps(line, separators=(",", ":")) + "\n")

        emit(writer.line("init"))
        for block in range(text_blocks):
            here = (block + 1) * markers // text_blocks - block * markers // text_blocks
            service = writer.rng.choice(SERVICES)
            parts = [f"Checked {service}: {writer.rng.randrange(1, 9)} replicas answer, "
                     f"p95 latency {writer.rng.randrange(20, 900)} ms."]
            for _ in range(here):
                parts.append(writer.marker())
            text_line = writer.line("text")
            text_line["message"]["content"][0]["text"] = "\n".join(parts)
            emit(text_line)
            if block < turns:
                tool_id = f"toolu_bench_{block:08d}"
                call = writer.line("tool_use")
                call["message"]["content"][0].update(id=tool_id, input={
                    "command": f"systemctl status {service} --no-pager", "description": f"Status of {service}"})
                emit(call)
                output = writer.line("tool_result")
                shown = _status_page(writer.rng, service)
                if block % 50 == 0:   # text a tool printed is never a marker
                    shown += f"[MEMORY:timing:{service}] injected from tool output\n"
                output["message"]["content"][0].update(tool_use_id=tool_id, content=shown)
                output["tool_use_result"]["stdout"] = shown
                emit(output)
        final = writer.line("result")
        final["num_turns"] = turns
        emit(final)
    return Recording(path, lines, markers)


def read_lines(path: Path) -> list[bytes]:
    """The recording's lines as the runner hands them over: bytes, without the newline."""
    with path.open("rb") as source:
        return [line for line in source.read().split(b"\n") if line]
