"""The memory section of a session's system prompt (SPEC-0015's format, each
line ending with the memory's id for outcome markers):

    ## Operational Memory (3 of 5 memories, ~96 tokens)

    ### jellyfin
    - [timing] Takes 60s to start after restart (confidence: 0.9) [m12]

    ### general
    - [remediation] DNS checks fail during WireGuard reconnects (confidence: 0.6) [m3]

Approved, active memories with confidence ≥ 0.3 are packed under their service's
heading (general last). The memories of the services the session is about
(plugins/memory/relevance.py) go first, most confident first; the rest of
the budget is filled with the others, most confident first. The whole
block, header included, stays within the token budget (tokens = characters
/ 4, rounded up); a memory too long to fit is skipped and packing goes on
with the next. It also stays within ``MOST_BYTES`` of UTF-8, which the
largest budget's characters take when they are ASCII: the system prompt is
one command-line argument of at most 128 KiB, and text of several bytes a
character (CJK, say) would otherwise make every session fail to start.

Packing reads memories in order, in SQL, and stops after as many as the
budget could ever hold (every one the shortest line there can be), and the
first pass reads only the relevant services' memories. When long memories
left room that the next one read would not fill, the ``TAIL_WINDOW``
memories after them are searched, in SQL, for ones short enough to fill it.
Eligible memories are counted up to ``app.listing.COUNT_CAP`` (beyond it the
header says "more than"): the cost of a session's context does not grow with
the table.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from decimal import ROUND_FLOOR, Decimal
from types import SimpleNamespace
from typing import Iterable, Mapping, Optional

from sqlalchemy import func, select
from sqlalchemy.orm import aliased

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
    reasons: dict[int, str] = field(default_factory=dict)   # memory id → why it went first
    first: dict[str, str] = field(default_factory=dict)     # service → why its memories went first


def tokens(text: str) -> int:
    return math.ceil(len(text) / 4)


def format_confidence(confidence: float) -> str:
    """0.9, 0.95, 1.0: as the spec writes them. Cut to two places, not
    rounded: 0.299 is inactive, and shown as 0.3 it would read as active
    (ACTIVE_THRESHOLD). The float's shortest form is what is cut, so that
    0.29 (stored as 0.28999…) stays 0.29."""
    cut = Decimal(repr(confidence)).quantize(Decimal("0.01"), rounding=ROUND_FLOOR)
    text = f"{cut:.2f}"
    return text[:-1] if text.endswith("0") else text


def memory_ref(memory_id: int) -> str:
    """How the section names a memory, and outcome markers name it back: m12."""
    return f"m{memory_id}"


# What the line gives after an observation: an observation (the agent's
# text) must not seem to give them itself, with another confidence or id.
LINE_PARTS_IN_TEXT = re.compile(r"\(\s*confidence\s*:|\[\s*m\s*(\d+)\s*\]", re.IGNORECASE)


def plain_observation(observation: str) -> str:
    """``observation`` without what would read as the line's own confidence
    or memory id: "(confidence: 1.0) [m1]" becomes "(confidence 1.0) m1"."""
    return LINE_PARTS_IN_TEXT.sub(lambda m: f"m{m.group(1)}" if m.group(1) else "(confidence", observation)


def memory_line(memory: Memory) -> str:
    return (f"- [{memory.category}] {plain_observation(memory.observation)} "
            f"(confidence: {format_confidence(memory.confidence)}) [{memory_ref(memory.id)}]")


SECTION_HEADING = "## Operational Memory ("


def header(included: int, eligible: Total, token_count: int) -> str:
    of = eligible.count if eligible.exact else f"more than {eligible.count:,}"
    return f"{SECTION_HEADING}{included} of {of} memories, ~{token_count:,} tokens)"


# The shortest line a memory can have (and its newline): a one-character
# observation in the shortest category at a three-character confidence, id 1.
SHORTEST_LINE = len(memory_line(SimpleNamespace(id=1, category=min(CATEGORIES, key=len), observation="x",
                                                confidence=ACTIVE_THRESHOLD))) + 1
FETCH_ROWS = 64
# How far past the memories the budget could hold at most the shorter ones
# that would fill what long ones left are looked for.
TAIL_WINDOW = 1_000
# settings.MAX_BUDGET's tokens as ASCII characters: the rest of the 128 KiB
# system prompt (every other plugin's section) keeps about 32 KiB.
MOST_BYTES = 96_000


def _eligible():
    # A proposed or rejected memory is never given, whatever its confidence.
    return (Memory.status == APPROVED, Memory.active.is_(True), Memory.confidence >= ACTIVE_THRESHOLD)


def eligible_count() -> Total:
    return count_up_to(select(Memory).where(*_eligible()))


def _most_trusted_order(memory=Memory):
    return memory.confidence.desc(), memory.updated_at.desc(), memory.id


def most_trusted_first(limit: int, services: Optional[list[str]] = None):
    """Eligible memories (of ``services`` only, if given), most confident
    first (then the most recently confirmed), fetched a few at a time: stop
    reading and the rest is never read."""
    query = select(Memory).where(*_eligible())
    if services:
        query = query.where(Memory.service.in_(services))
    return db.session.scalars(
        query.order_by(*_most_trusted_order()).limit(limit).execution_options(yield_per=FETCH_ROWS))


def short_enough_after(skip: int, room_chars: int):
    """Of the ``TAIL_WINDOW`` eligible memories after the ``skip`` most
    trusted, those whose line could fit in ``room_chars``, most trusted
    first: what is left of a budget that long memories did not fill goes to
    shorter, less trusted ones, within a window that keeps the read bounded."""
    window = aliased(Memory, select(Memory).where(*_eligible()).order_by(*_most_trusted_order())
                     .offset(skip).limit(TAIL_WINDOW).subquery())
    longest = room_chars - SHORTEST_LINE + 1   # the observation of the shortest line there can be is 1 character
    # No LIMIT but the window's: one that fits the room now may not once another is packed, and is passed over.
    return db.session.scalars(select(window).where(func.length(window.observation) <= longest)
                              .order_by(*_most_trusted_order(window)).execution_options(yield_per=FETCH_ROWS))


class _Packer:
    """Fills the budget line by line, grouping by service in the order the
    groups are first met."""

    def __init__(self, budget_chars: int, used: int):
        self.budget_chars, self.used = budget_chars, used
        self.used_bytes = used   # the header is ASCII
        self.groups: dict[str, list[Memory]] = {}
        self.seen: set[int] = set()
        self.reasons: dict[int, str] = {}

    @property
    def room(self) -> int:
        return self.budget_chars - self.used

    def pack(self, memories: Iterable[Memory], reasons: Optional[Mapping[str, str]] = None) -> int:
        """Packs what fits of ``memories``; gives how many it read."""
        read = 0
        for memory in memories:
            read += 1
            if memory.id in self.seen:
                continue   # read in the first pass already
            self.seen.add(memory.id)
            if self.room < SHORTEST_LINE:
                break   # not even the shortest memory would fit
            group = memory.service or GENERAL
            line = memory_line(memory)
            cost = len(line) + 1
            # Its UTF-8 bytes beyond its characters (a service's heading is ASCII).
            extra_bytes = 0 if line.isascii() else len(line.encode("utf-8", "surrogatepass")) - len(line)
            if group not in self.groups:
                cost += len(f"### {group}") + 2   # heading, and the blank line before it
            if self.used + cost > self.budget_chars or self.used_bytes + cost + extra_bytes > MOST_BYTES:
                continue  # too long for what is left; a shorter one may still fit
            self.used += cost
            self.used_bytes += cost + extra_bytes
            self.groups.setdefault(group, []).append(memory)
            if reasons:
                self.reasons[memory.id] = reasons[memory.service]
        return read


def build_memory_context(budget_tokens: int, relevant: Optional[Mapping[str, str]] = None) -> MemoryContext:
    """``relevant``: services whose memories go first, each with why."""
    eligible = eligible_count()
    budget_chars = budget_tokens * 4
    # Room for the header at its widest: N and M at most the eligible count, T at most the budget.
    packer = _Packer(budget_chars, len(header(eligible.count, eligible, budget_tokens)) + 1)
    most = max(budget_chars // SHORTEST_LINE, 1)
    if relevant:
        with most_trusted_first(most, list(relevant)) as memories:
            packer.pack(memories, relevant)
    # The first pass's memories come round again here, and are passed over.
    limit = most + len(packer.seen)
    with most_trusted_first(limit) as memories:
        read = packer.pack(memories)
    if read == limit and packer.room >= SHORTEST_LINE:   # more to read, and room that long ones left
        with short_enough_after(read, packer.room) as memories:
            packer.pack(memories)
    groups = packer.groups
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
            first = {m.service: packer.reasons[m.id] for m in included if m.id in packer.reasons}
            return MemoryContext(text, included, eligible.count, tokens(text), [m.id for m in included],
                                 eligible.exact, packer.reasons, first)
        token_count = tokens(text)
