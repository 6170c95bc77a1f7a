"""Ingest: the full pipeline (parse, fan-out to every plugin, store) over a
recorded stream, against a bare loop that only JSON-decodes each line and
runs the marker regexes over the agent's text; and the pipeline's memory
(tracemalloc peak) on a short and a five-times-longer stream.

The pipeline is the real ``StreamHandler`` fed line by line, as the runner
feeds it, on a fresh database each time, and closed as ``run_session``
closes it (with the process's earlier objects set apart from the garbage
collector meanwhile, as there); its time includes every commit.
"""
from __future__ import annotations

import json
import shutil
import tracemalloc
from pathlib import Path
from typing import Iterable

from flask import Flask
from sqlalchemy import func, select

from app import runtime
from app.extensions import db
from app.marker_text import marker_text
from app.models import SessionActivity
from app.sessions import control
from app.sessions.activity import StreamHandler
from app.sessions.collector import earlier_objects_set_apart
from app.sessions.manager import run_info
from bench.dataset import fill, make_app
from bench.recorded_stream import Recording, read_lines
from bench.report import Figure, size_ratio
from bench.timing import compare
from plugins.cooldowns.markers import ANY_COOLDOWN_MARKER, COOLDOWN_MARKER
from plugins.escalation import ESCALATE_MARKER
from plugins.events.markers import EVENT_MARKER
from plugins.memory.markers import ANY_MEMORY_MARKER, MEMORY_MARKER

SPEED_TARGET = 0.25
# Flat: five times the lines may cost at most a quarter more at the peak.
MEMORY_TARGET = 1.25
# Markers are matched against the memories already kept: a hundred times as
# many may cost the stream at most twice the time, as for the reads.
SCALE_TARGET = 2.0
# The per-session limits, raised so that every marker of the recording is
# stored: the figure is the cost of storing, not of refusing.
UNLIMITED = {"CLAUDEOPS_EVENTS_MAX_PER_SESSION": 10**9, "CLAUDEOPS_MEMORY_MAX_PER_SESSION": 10**9,
             "CLAUDEOPS_COOLDOWN_MAX_PER_SESSION": 10**9}
# The pipeline writes into a database that already holds this much, as a live one would.
EXISTING_MEMORIES = 1_000
EXISTING_EVENTS = 1_000
SEARCHES = (EVENT_MARKER, ANY_MEMORY_MARKER, ANY_COOLDOWN_MARKER, ESCALATE_MARKER)


def bare_loop(lines: list[bytes]) -> int:
    """JSON-decode each line and run the marker regexes over its text blocks; nothing else."""
    found = 0
    for line in lines:
        obj = json.loads(line)
        if obj.get("type") != "assistant":
            continue
        for block in obj["message"]["content"]:
            if block.get("type") != "text":
                continue
            text = block["text"]
            for search in SEARCHES:
                for match in search.finditer(text):
                    found += 1
                    if search is ANY_MEMORY_MARKER:
                        MEMORY_MARKER.match(text, match.start())   # SPEC-0015's, with the rest of the line
                    elif search is ANY_COOLDOWN_MARKER:
                        header = COOLDOWN_MARKER.match(text, match.start())
                        if header:
                            marker_text(text, header.end())
                    else:   # an event's message, an escalation's reason
                        marker_text(text, match.end())
    return found


class Pipeline:
    """One fresh state directory per run, so every run stores into the same
    database: a copy of one filled with ``memories`` and ``events`` once."""

    def __init__(self, workdir: Path, memories: int = EXISTING_MEMORIES, events: int = EXISTING_EVENTS):
        self.workdir = workdir
        self.runs = 0
        self.app: Flask | None = None
        self.template = workdir / f"template-{memories}-{events}"
        if not self.template.exists():
            filled = make_app(self.template)
            fill(filled, memories=memories, events=events)
            with filled.app_context():
                db.engine.dispose()

    def prepare(self) -> None:
        self.dispose()
        self.runs += 1
        state = self.workdir / f"ingest-{self.template.name}-{self.runs}"
        shutil.rmtree(state, ignore_errors=True)
        shutil.copytree(self.template, state)
        self.app = make_app(state)
        with self.app.app_context():
            runtime.change(UNLIMITED)

    def ingest(self, lines: Iterable[bytes]) -> int:
        """Feed ``lines`` to a StreamHandler; returns how many markers it recorded."""
        with self.app.app_context():
            session = control.claim(control.enqueue(tier=1, trigger="api").id)
            handler = StreamHandler(session, run_info(session))
            with earlier_objects_set_apart():
                for line in lines:
                    handler.handle_line(line)
                handler.close()
            session.response = handler.response
            db.session.commit()
            return db.session.scalar(select(func.count()).select_from(SessionActivity).where(
                SessionActivity.session_id == session.id, SessionActivity.kind == "marker"))

    def dispose(self) -> None:
        if self.app is not None:
            with self.app.app_context():
                db.engine.dispose()
            self.app = None


def measure_speed(recording: Recording, repeat: int, workdir: Path, name: str = "") -> Figure:
    lines = read_lines(recording.path)
    found = bare_loop(lines)
    if found != recording.markers:
        raise RuntimeError(f"the bare loop found {found} markers, the recording holds {recording.markers}")
    pipeline = Pipeline(workdir)
    stored = []
    bare_s, pipeline_s = compare(lambda: bare_loop(lines), lambda: stored.append(pipeline.ingest(lines)),
                                 repeat, warmup=0, prepare_large=pipeline.prepare)
    pipeline.dispose()
    if set(stored) != {recording.markers}:
        raise RuntimeError(f"the pipeline recorded {stored} markers, the recording holds {recording.markers}")
    name = name or f"Ingest speed vs bare loop ({recording.lines:,} lines, {recording.markers:,} markers)"
    return Figure(name, "bare loop", bare_s, "pipeline", pipeline_s, "s", bare_s / pipeline_s, SPEED_TARGET,
                  at_least=True)


def measure_scaling(recording: Recording, memories: tuple[int, int], repeat: int, workdir: Path) -> Figure:
    """The same stream into a database that keeps ``memories[0]`` and one that keeps ``memories[1]``."""
    lines = read_lines(recording.path)
    small, large = (Pipeline(workdir, memories=n) for n in memories)
    small_s, large_s = compare(lambda: small.ingest(lines), lambda: large.ingest(lines), repeat, warmup=0,
                               prepare_small=small.prepare, prepare_large=large.prepare)
    small.dispose()
    large.dispose()
    return size_ratio(f"Ingest at {memories[1]:,} memories vs {memories[0]:,} (same stream)",
                      f"{memories[0]:,} memories", small_s, f"{memories[1]:,} memories", large_s, SCALE_TARGET)


def _stream_from_file(path: Path, limit: int) -> Iterable[bytes]:
    """Lines one at a time, as they arrive: the recording itself is never held."""
    with path.open("rb") as source:
        for n, line in enumerate(source):
            if n >= limit:
                return
            yield line.rstrip(b"\n")


def peak_memory(recording: Recording, lines: int, workdir: Path) -> int:
    """Bytes the pipeline held at its peak (tracemalloc) above what it held before."""
    pipeline = Pipeline(workdir)
    pipeline.prepare()
    pipeline.ingest(_stream_from_file(recording.path, 50))   # warm caches: not what the stream costs
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        pipeline.ingest(_stream_from_file(recording.path, lines))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
        pipeline.dispose()
    return peak - before


def measure_memory(recording: Recording, sizes: tuple[int, int], workdir: Path) -> Figure:
    small, large = (peak_memory(recording, n, workdir / f"memory-{n}") for n in sizes)
    return size_ratio("Pipeline memory (tracemalloc peak)", f"{sizes[0]:,} lines", small,
                      f"{sizes[1]:,} lines", large, MEMORY_TARGET, unit="B")
