"""The memory section of a session's system prompt (SPEC-0015's format):

    ## Operational Memory (3 of 5 memories, ~96 tokens)

    ### jellyfin
    - [timing] Takes 60s to start after restart (confidence: 0.9)

    ### general
    - [remediation] DNS checks fail during WireGuard reconnects (confidence: 0.6)

Active memories with confidence ≥ 0.3 are packed by confidence, highest
first, under their service's heading (general last). The whole block, header
included, stays within the token budget (tokens = characters / 4, rounded
up); a memory too long to fit is skipped and packing goes on with the next.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from sqlalchemy import select

from app.extensions import db
from plugins.memory.models import ACTIVE_THRESHOLD, Memory

GENERAL = "general"


@dataclass
class MemoryContext:
    text: str                                   # empty when nothing is given
    included: list[Memory] = field(default_factory=list)
    eligible: int = 0
    tokens: int = 0
    memory_ids: list[int] = field(default_factory=list)


def tokens(text: str) -> int:
    return math.ceil(len(text) / 4)


def format_confidence(confidence: float) -> str:
    """0.9, 0.95, 1.0: as the spec writes them."""
    text = f"{confidence:.2f}"
    return text[:-1] if text.endswith("0") else text


def memory_line(memory: Memory) -> str:
    return f"- [{memory.category}] {memory.observation} (confidence: {format_confidence(memory.confidence)})"


def header(included: int, eligible: int, token_count: int) -> str:
    return f"## Operational Memory ({included} of {eligible} memories, ~{token_count:,} tokens)"


def eligible_memories() -> list[Memory]:
    return db.session.scalars(select(Memory).where(
        Memory.active.is_(True), Memory.confidence >= ACTIVE_THRESHOLD)
        .order_by(Memory.confidence.desc(), Memory.updated_at.desc(), Memory.id)).all()


def build_memory_context(budget_tokens: int) -> MemoryContext:
    memories = eligible_memories()
    budget_chars = budget_tokens * 4
    # Room for the header at its widest: N and M at most len(memories), T at most the budget.
    used = len(header(len(memories), len(memories), budget_tokens)) + 1
    groups: dict[str, list[Memory]] = {}
    for memory in memories:
        group = memory.service or GENERAL
        cost = len(memory_line(memory)) + 1
        if group not in groups:
            cost += len(f"### {group}") + 2   # heading, and the blank line before it
        if used + cost > budget_chars:
            continue  # too long for what is left; a shorter one may still fit
        used += cost
        groups.setdefault(group, []).append(memory)
    if not groups:
        return MemoryContext("", [], len(memories), 0, [])

    order = [g for g in groups if g != GENERAL] + ([GENERAL] if GENERAL in groups else [])
    body = "\n\n".join("\n".join([f"### {g}"] + [memory_line(m) for m in groups[g]]) for g in order)
    included = [m for g in order for m in groups[g]]
    # The header states the block's own size: settle the number it prints.
    token_count = tokens(body)
    while True:
        text = f"{header(len(included), len(memories), token_count)}\n\n{body}"
        if tokens(text) <= token_count:  # converges: the header only grows by a digit at a time
            return MemoryContext(text, included, len(memories), tokens(text), [m.id for m in included])
        token_count = tokens(text)
