"""The memory store as tools the agent can call during a session (served by
``claudeops mcp``): search, get by id, list a service's memories.

Results come compact first: one line per memory, the observation cut to a
preview, so a search costs the agent few tokens; ``get_memories`` gives the
full text of the ones it wants. The session's prompt already holds the most
trusted memories; these reach the rest.

Only approved memories are knowledge: search and list never return a
proposed (awaiting the operator's review) or rejected one. Asked for one by
id, get_memories gives it under a warning that it is not to be relied on.
"""
from __future__ import annotations

from typing import Optional

from sqlalchemy import select
from sqlalchemy.orm import selectinload

from app.extensions import db
from app.plugin_types import McpTool
from app.redaction import redactor
from app.timeutil import isoformat
from app.web.apiutil import MAX_ID
from plugins.memory import queries, search
from plugins.memory.context import format_confidence
from plugins.memory.models import APPROVED, MAX_SERVICE_CHARS, PROPOSED, REJECTED, Memory
from plugins.memory.store import GENERAL, MemoryInputError

PREVIEW_CHARS = 120
MAX_RESULTS = 50
MAX_IDS = 50
# The longest get_memories answer. Claude Code does not pass on a tool
# result over 25,000 tokens (MAX_MCP_OUTPUT_TOKENS): the agent is given the
# path of a file holding it instead, which a tier allowed no Read tool cannot
# open. Fifty memories of the longest observation by default (2,000
# characters) are over 100,000 characters; this many stay within the CLI's
# bound even in a script of one token a character.
MAX_ANSWER_CHARS = 20_000
ECHO_CHARS = MAX_SERVICE_CHARS


def _preview(text: str) -> str:
    text = " ".join(text.split())
    return _cut(text, PREVIEW_CHARS)


def _cut(text: str, longest: int) -> str:
    return text if len(text) <= longest else text[:longest - 1].rstrip() + "…"


def _echoed(argument: str) -> str:
    """An argument as the answer repeats it: cut, so that a runaway one (a
    log pasted as the query) does not come back whole, making the answer as
    long as the question. No service name is longer than this."""
    return _cut(argument, ECHO_CHARS)


def compact_line(memory: Memory) -> str:
    # Whether it is trusted, and how it served the sessions given it ([OUTCOME:...]).
    notes = ([] if memory.active else ["inactive"]) + ([memory.outcomes_label] if memory.outcomes_label else [])
    shown = f" ({'; '.join(notes)})" if notes else ""
    # Redacted before it is cut: a secret the preview cuts in two is no
    # longer the value the redaction of the whole answer looks for, and
    # its first half would reach the agent.
    return (f"#{memory.id} {memory.service_label} [{memory.category}] "
            f"{format_confidence(memory.confidence)}{shown}: {_preview(redactor().redact(memory.observation))}")


UNTRUSTED = {PROPOSED: "NOT TRUSTED: proposed, and not yet reviewed by the operator; do not rely on it",
             REJECTED: "NOT TRUSTED: rejected by the operator; do not rely on it"}


def full_entry(memory: Memory) -> str:
    source = f"session #{memory.session_id}" if memory.session_id else "the operator"
    warning = () if memory.status == APPROVED else (UNTRUSTED[memory.status],)
    return "\n".join(warning + (
        f"#{memory.id} · service {memory.service_label} · {memory.category} · confidence "
        f"{format_confidence(memory.confidence)} · {'active' if memory.active else 'inactive'}"
        f"{' · pinned' if memory.pinned else ''}",
        f"recorded {isoformat(memory.created_at)} by {source}; last confirmed or edited {isoformat(memory.updated_at)}",
        f"outcomes reported: {memory.outcomes_label or 'none yet'}",
        memory.observation,
    ))


def _listing(memories: list[Memory], total: int, what: str) -> str:
    if not memories:
        return f"No memories {what}."
    lines = [f"{len(memories)} of {total} memories {what}, best first. "
             "Call get_memories with ids for the full text."]
    return "\n".join(lines + [compact_line(m) for m in memories])


def _bounded(limit: int) -> int:
    return max(1, min(int(limit), MAX_RESULTS))


def _service(name: str) -> str:
    """A service as it is kept (store.clean_service): in lower case, without
    the spaces around it; either tool, given " Postgres", finds postgres."""
    return name.strip().lower()


def search_memories(query: str, service: Optional[str] = None, include_inactive: bool = False,
                    limit: int = 10) -> str:
    """Search what earlier sessions learned about this infrastructure.

    Matches every word of `query` (its first 10 words) in a memory's observation,
    service name or category.
    `service` narrows to one service ("general" for memories about no single
    service). Inactive memories (no longer trusted) only with include_inactive.
    Returns one compact line per memory (id, service, category, confidence,
    preview); use get_memories for full text."""
    if not query.strip():
        return "Give a query: words that should appear in the memory."
    service = _service(service) if service else None
    try:
        found = queries.memory_query(service=service or None, q=query, review=APPROVED,
                                     active=None if include_inactive else True)
    except MemoryInputError as exc:
        return f"Cannot search: {exc}"
    total = queries.count(found)
    rows = db.session.scalars(queries.best_first(found).limit(_bounded(limit))).all()
    return _listing(rows, total, f"match {_searched(query)}" + (f" for {_echoed(service)}" if service else ""))


def _searched(query: str) -> str:
    """The query as it was searched, quoted. The search takes its first
    ``search.MAX_WORDS`` words only: a memory that lacks a later one must
    not be listed as matching it, nor "No memories" said of words never
    looked for."""
    every = search.WORD.findall(query)
    if len(every) <= search.MAX_WORDS:
        return repr(_echoed(query.strip()))
    return (f"{_echoed(' '.join(every[:search.MAX_WORDS]))!r} (the query's first {search.MAX_WORDS} words; "
            "the rest were not searched)")


def get_memories(ids: list[int]) -> str:
    """The full text and details of memories, by id (as shown in search results
    and in the prompt's memory section), at most 50 ids (and 20,000
    characters) a call; those left out are named."""
    asked = list(dict.fromkeys(ids))
    wanted, unread = asked[:MAX_IDS], asked[MAX_IDS:]
    if not wanted:
        return "Give one or more memory ids."
    # Ids are INTEGER columns: a larger number names no memory, and PostgreSQL
    # would refuse it in the query (app/web/row_ids.py).
    possible = [i for i in wanted if 0 < i <= MAX_ID]
    found = {m.id: m for m in db.session.scalars(select(Memory).where(Memory.id.in_(possible))
                                                  .options(selectinload(Memory.track_record)))} if possible else {}
    entries, left, size = [], [], 0
    for i in (i for i in wanted if i in found):
        entry = full_entry(found[i])
        if left or (entries and size + len(entry) > MAX_ANSWER_CHARS):
            left.append(i)   # in the order asked: the first one left out is the first to ask for again
        else:
            entries.append(entry)
            size += len(entry) + 2
    # Those past the ids a call reads are named up to a bound, not echoed
    # whole; those left out here, fewer than MAX_IDS, come first and all.
    beyond = len(unread) - MAX_IDS
    unread = left + unread[:MAX_IDS]
    missing = [str(i) for i in wanted if i not in found]
    if missing:
        entries.append(f"Not found (deleted or never existed): {', '.join(missing)}")
    if unread:   # named, so that the agent does not take them for answered
        more = f" and {beyond} more" if beyond > 0 else ""
        entries.append(f"Not read (at most {MAX_IDS} ids, and {MAX_ANSWER_CHARS:,} characters, a call; "
                       f"ask again for them): {', '.join(map(str, unread))}{more}")
    return "\n\n".join(entries)


def list_service_memories(service: str, include_inactive: bool = False, limit: int = 25) -> str:
    """Everything remembered about one service ("general" for memories about no
    single service), best first, one compact line each."""
    service = _service(service)
    if not service:
        return "Give a service name."
    found = queries.memory_query(service=service, review=APPROVED, active=None if include_inactive else True)
    total = queries.count(found)
    rows = db.session.scalars(queries.best_first(found).limit(_bounded(limit))).all()
    label = "about no single service" if service == GENERAL else f"about {_echoed(service)}"
    return _listing(rows, total, label)


TOOLS = [McpTool("search_memories", search_memories),
         McpTool("get_memories", get_memories),
         McpTool("list_service_memories", list_service_memories)]
