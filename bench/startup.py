"""Session start: the ``claudeops_session_starting`` hooks (memory decay)
and the system prompt (every plugin's context, the memory section built and
its injections recorded), as ``app.sessions.manager.run_session`` runs them.
At 100,000 memories it may take at most 3× its time at 100.

Before each start, untimed, a few stale memories are made due for one more
week of decay, as happens between two sessions of a running service: every
timed start really decays something, the same amount at both sizes.
"""
from __future__ import annotations

import random

from flask import Flask
from sqlalchemy import select

from app.extensions import db
from app.models import Session
from app.plugins import call_each
from app.sessions import control
from app.sessions.manager import run_info
from app.sessions.prompts import system_prompt
from bench.report import Figure, size_ratio
from bench.timing import compare
from plugins.memory.models import Memory, MemoryHistory

TARGET = 3.0
DUE_PER_START = 10


class SessionStart:
    def __init__(self, app: Flask, seed: int = 3):
        self.app = app
        self.rng = random.Random(seed)
        self.session_id = None

    def prepare(self) -> None:
        with self.app.app_context():
            candidates = db.session.scalars(select(Memory.id).where(
                Memory.active.is_(True), Memory.pinned.is_(False), Memory.decayed_weeks >= 1)).all()
            for memory_id in self.rng.sample(candidates, min(DUE_PER_START, len(candidates))):
                memory = db.session.get(Memory, memory_id)
                memory.decayed_weeks -= 1   # the week it has yet to take
            self.session_id = control.claim(control.enqueue(tier=1, trigger="api").id).id
            db.session.commit()

    def start(self) -> None:
        with self.app.app_context():
            session = db.session.get(Session, self.session_id)
            run = run_info(session)
            call_each("claudeops_session_starting", run=run, commit_each=True)
            session.system_prompt = system_prompt(run, self.app.config["CLAUDEOPS_WORKDIR"])
            db.session.commit()
            if "## Operational Memory" not in session.system_prompt:
                raise RuntimeError("the session was given no memory section")


def measure(small: Flask, large: Flask, sizes: tuple[int, int], repeat: int) -> list[Figure]:
    small_start, large_start = SessionStart(small), SessionStart(large)
    small_s, large_s = compare(small_start.start, large_start.start, repeat,
                               prepare_small=small_start.prepare, prepare_large=large_start.prepare)
    return [size_ratio("Session start (decay + context)", f"{sizes[0]:,} memories", small_s,
                       f"{sizes[1]:,}", large_s, TARGET)]


def decayed_something(app: Flask) -> bool:
    """Did the timed starts decay memories (the benchmark measured real work)?"""
    with app.app_context():
        return db.session.scalar(select(MemoryHistory.id).where(MemoryHistory.action == "decayed").limit(1)) \
            is not None
