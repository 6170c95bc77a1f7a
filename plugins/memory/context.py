"""The memory section of a session's system prompt (SPEC-0015's format):

    ## Operational Memory (3 of 5 memories, ~96 tokens)

    ### jellyfin
    - [timing] Takes 60s to start after restart (confidence: 0.9)

    ### general
    - [remediation] DNS checks fail during WireGuard reconnects (confidence: 0.6)

Approved, active memories with confidence ≥ 0.3 are packed by confidence, highest
first, under their service's heading (general last). The whole block, header
included, stays within the token budget (tokens = characters / 4, rounded
up); a memory too long to fit is skipped and packing goes on with the next.

Packing reads the most trusted memories in order, in SQL, and stops after
as many as the budget could ever hold (every one the shortest line there
can be); eligible memories are counted up to ``app.listing.COUNT_CAP``
(beyond it the header says "more than"): the cost of a session's context
does not grow with the table.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from types import SimpleNamespace

from sqlalchemy import select

from app.extensions import db
from app.listing import Total, count_up_to
from plugins.memory.models import ACTIVE_THRESHOLD, APPROVED, CATEGORIES, Memory

GENERAL = "general"


@dataclass
class MemoryContext:
    text: str                                   # empty when nothing is given
    included: list[Memory] = field(default_factory=list)
    eligible: int = 0                           # counted up to app.listing.COUNT_CAP
    tokens: int = 0
    memory_ids: list[int] = field(default_factory=list)
    eligible_exact: bool = True                 # False: more than ``eligible``


def tokens(text: str) -> int:
    return math.ceil(len(text) / 4)


def format_confidence(confidence: float) -> str:
    """0.9, 0.95, 1.0: as the spec writes them."""
    text = f"{confidence:.2f}"
    return text[:-1] if text.endswith("0") else text


def memory_line(memory: Memory) -> str:
    return f"- [{memory.category}] {memory.observation} (confidence: {format_confidence(memory.confidence)})"


def header(included: int, eligible: Total, token_count: int) -> str:
    of = eligible.count if eligible.exact else f"more than {eligible.count:,}"
    return f"## Operational Memory ({included} of {of} memories, ~{token_count:,} tokens)"


# The shortest line a memory can have (and its newline): a one-character
# observation in the shortest category at a three-character confidence.
SHORTEST_LINE = len(memory_line(SimpleNamespace(category=min(CATEGORIES, key=len), observation="x",
                                                confidence=ACTIVE_THRESHOLD))) + 1
FETCH_ROWS = 64


def _eligible():
    # A proposed or rejected memory is never given, whatever its confidence.
    return (Memory.status == APPROVED, Memory.active.is_(True), Memory.confidence >= ACTIVE_THRESHOLD)


def eligible_count() -> Total:
    return count_up_to(select(Memory).where(*_eligible()))


def most_trusted_first(limit: int):
    """Eligible memories, most confident first (then the most recently
    confirmed), fetched a few at a time: stop reading and the rest is never read."""
    return db.session.scalars(
        select(Memory).where(*_eligible())
        .order_by(Memory.confidence.desc(), Memory.updated_at.desc(), Memory.id).limit(limit)
        .execution_options(yield_per=FETCH_ROWS))


def build_memory_context(budget_tokens: int) -> MemoryContext:
    eligible = eligible_count()
    budget_chars = budget_tokens * 4
    # Room for the header at its widest: N and M at most the eligible count, T at most the budget.
    used = len(header(eligible.count, eligible, budget_tokens)) + 1
    groups: dict[str, list[Memory]] = {}
    with most_trusted_first(max(budget_chars // SHORTEST_LINE, 1)) as memories:
        for memory in memories:
            if budget_chars - used < SHORTEST_LINE:
                break   # not even the shortest memory would fit
            group = memory.service or GENERAL
            cost = len(memory_line(memory)) + 1
            if group not in groups:
                cost += len(f"### {group}") + 2   # heading, and the blank line before it
            if used + cost > budget_chars:
                continue  # too long for what is left; a shorter one may still fit
            used += cost
            groups.setdefault(group, []).append(memory)
    if not groups:
        return MemoryContext("", [], eligible.count, 0, [], eligible.exact)

    order = [g for g in groups if g != GENERAL] + ([GENERAL] if GENERAL in groups else [])
    body = "\n\n".join("\n".join([f"### {g}"] + [memory_line(m) for m in groups[g]]) for g in order)
    included = [m for g in order for m in groups[g]]
    # The header states the block's own size: settle the number it prints.
    token_count = tokens(body)
    while True:
        text = f"{header(len(included), eligible, token_count)}\n\n{body}"
        if tokens(text) <= token_count:  # converges: the header only grows by a digit at a time
            return MemoryContext(text, included, eligible.count, tokens(text), [m.id for m in included],
                                 eligible.exact)
        token_count = tokens(text)
