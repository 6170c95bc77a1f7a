"""Memories out of and into a database: export as JSON (everything, history
included) or Markdown (the prompt's own line format, for people), and import
either through the matcher, so a memory already known is reinforced instead
of stored twice.

Import is all or nothing: every entry is checked first, and one bad entry
refuses the whole file with the entry's number and what is wrong.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any, Iterator, Optional

import orjson
from sqlalchemy import select

from app import strict_json
from app.bulk_insert import BulkInsert
from app.db_redaction import redacted_values
from app.echoed import echoed
from app.extensions import db
from app.models import Session
from app.snapshot import one_snapshot
from app.timeutil import utcnow
from app.web.apiutil import MAX_ID, json_described, unknown_fields, unstorable_text
from app.write_lock import lock_for_writing
from plugins.memory import candidates, store
from plugins.memory.candidates import IdRuns, Pair
from plugins.memory.context import SECTION_HEADING as PROMPT_SECTION_HEADING, format_confidence
from plugins.memory.matcher import CONTRADICT, DISTINCT, REINFORCE, Candidate, Match
from plugins.memory.models import (ACTIVE_THRESHOLD, APPROVED, HISTORY_ACTIONS, OUTCOME_LEVELS, PROPOSED,
                                   REVIEW_STATES, Memory, MemoryHistory, TrackRecord)
from plugins.memory.settings import MAX_OBSERVATION, max_observation_chars

FORMAT_NAME = "claudeops-memories"
MARKDOWN_TITLE = "# Claude Ops memories"   # an export of no memories is still one
FORMAT_VERSION = 1
MAX_IMPORT = 100_000
# The most memories one import over HTTP (the API, the dashboard's form) may
# hold. Its request runs in a gunicorn worker, which is killed after 30 s, and
# its transaction holds SQLite's write lock from its first write to its
# commit, while a session or the scheduler that wants to write waits at most
# the busy timeout (15 s, app/extensions.py SQLITE_BUSY_TIMEOUT_MS) and then
# fails. On a slow, shared 2-core machine, busy with other work, 1,000 took
# 0.5 s (into a service and category of their own) to 2.7 s (into services
# and categories of 60 memories each, five history rows an entry): a small
# part of that wait. `claudeops memories import FILE` takes up to MAX_IMPORT.
MAX_WEB_IMPORT = 1_000
# How many of a service and category's most trusted live memories an import
# names in its reads of their candidates (_candidates).
NAMED_LIVE = 100
# Timestamps an export can hold: none before the epoch, none later than a
# day ahead of this clock (another host's may be a little ahead). Beyond
# them, decay's dates would overflow or its weeks pass what export allows.
EARLIEST_TIME = datetime(1970, 1, 1, tzinfo=timezone.utc)
CLOCK_SKEW = timedelta(days=1)
ACTORS = (store.OPERATOR, store.SESSION, store.SYSTEM)
MARKDOWN_LINE = re.compile(r"^- \[(?P<category>[a-z]+)\] (?P<observation>.+) "
                           r"\(confidence: (?P<confidence>[0-9.]+)"
                           r"(?P<flags>(?:, (?:inactive|pinned|proposed|rejected))*)\)$")


class ImportRefused(ValueError):
    """A file that cannot be imported; nothing of it was imported."""


# --- export ------------------------------------------------------------------

def _timestamp(value: Optional[datetime]) -> Optional[str]:
    """Microseconds kept: an export read back gives the same instant."""
    if value is None:
        return None
    return value.astimezone(timezone.utc).isoformat().replace("+00:00", "Z")


def _ordered() -> list[Memory]:
    return db.session.scalars(select(Memory).order_by(Memory.id)).all()


# Rows fetched at a time: an export streams, so a large one never sits whole in memory.
EXPORT_BATCH = 2_000
# Characters of an export sent at a time: a few writes to the socket, not one per memory.
CHUNK_CHARS = 64 * 1024


def export_json() -> dict:
    """The JSON export as one document (``export_json_chunks`` writes it
    without holding it whole)."""
    return {**_export_header(), "memories": list(_exported_memories())}


def export_json_chunks(indent: bool = True) -> Iterator[str]:
    """The JSON export as text, some 64 KB at a time: for a file, indented
    by two; for the API, compact; text as it is (not \\u-escaped). Built
    whole, an export of 100,000 memories with 500,000 history rows grew the
    worker by 700 MB (to 813 MB); streamed, not measurably. orjson writes
    each memory (the standard library's indenting encoder, pure Python,
    took 6 s more for those); what orjson refuses (text no database should
    hold) the standard library writes."""
    header = _dumps(_export_header(), indent)
    parts = [header[:-1].rstrip() + (',\n  "memories": [' if indent else ',"memories":[')]
    size, written = 0, False
    for memory in _exported_memories():
        text = _dumps(memory, indent)
        parts.append(("," if written else "") + ("\n    " + text.replace("\n", "\n    ") if indent else text))
        size, written = size + len(text), True
        if size >= CHUNK_CHARS:
            yield "".join(parts)
            parts, size = [], 0
    parts.append("\n  ]\n}\n" if indent and written else "]\n}\n" if indent else "]}\n")
    yield "".join(parts)


def _dumps(value: dict, indent: bool) -> str:
    try:
        return orjson.dumps(value, option=orjson.OPT_INDENT_2 if indent else None).decode()
    except TypeError:
        return json.dumps(value, indent=2 if indent else None, ensure_ascii=False)


def _export_header() -> dict:
    return {"format": FORMAT_NAME, "version": FORMAT_VERSION, "exported_at": _timestamp(utcnow())}


def _exported_memories() -> Iterator[dict]:
    """Every memory with its outcomes and history, in id order, read as
    plain rows (ORM objects took twice as long) and a batch at a time. The
    history is read beside them in the same order, by the index on
    (memory_id, id); rows of deleted memories, kept for the audit trail,
    are passed over. All of it as of one moment (app/snapshot.py)."""
    one_snapshot()
    outcomes = {row[0]: dict(zip(OUTCOME_LEVELS, row[1:])) for row in db.session.execute(
        select(TrackRecord.memory_id, *(getattr(TrackRecord, level) for level in OUTCOME_LEVELS)))}
    nothing = dict.fromkeys(OUTCOME_LEVELS, 0)
    history = iter(db.session.execute(select(
        MemoryHistory.memory_id, MemoryHistory.action, MemoryHistory.confidence_before,
        MemoryHistory.confidence_after, MemoryHistory.actor, MemoryHistory.detail, MemoryHistory.session_id,
        MemoryHistory.related_memory_id, MemoryHistory.created_at,
    ).order_by(MemoryHistory.memory_id, MemoryHistory.id).execution_options(yield_per=EXPORT_BATCH)))
    pending = next(history, None)
    for m in db.session.execute(select(
            Memory.id, Memory.service, Memory.category, Memory.observation, Memory.confidence, Memory.active,
            Memory.pinned, Memory.tier, Memory.created_at, Memory.updated_at, Memory.decayed_weeks,
            Memory.session_id, Memory.contradicts_id, Memory.status,
    ).order_by(Memory.id).execution_options(yield_per=EXPORT_BATCH)):
        while pending is not None and pending.memory_id < m.id:
            pending = next(history, None)
        rows = []
        while pending is not None and pending.memory_id == m.id:
            h = pending
            rows.append({"action": h.action, "confidence_before": h.confidence_before,
                         "confidence_after": h.confidence_after, "actor": h.actor, "detail": h.detail,
                         "session_id": h.session_id, "related_memory_id": h.related_memory_id,
                         "created_at": _timestamp(h.created_at)})
            pending = next(history, None)
        yield {
            "id": m.id, "service": m.service, "category": m.category, "observation": m.observation,
            "confidence": m.confidence, "active": m.active, "pinned": m.pinned, "tier": m.tier,
            "created_at": _timestamp(m.created_at), "updated_at": _timestamp(m.updated_at),
            "decayed_weeks": m.decayed_weeks, "session_id": m.session_id, "contradicts_id": m.contradicts_id,
            "outcomes": {level: count or 0 for level, count in outcomes.get(m.id, nothing).items()},
            "status": m.status,
            "history": rows,
        }


def export_markdown() -> str:
    memories = _ordered()
    by_service: dict[str, list[Memory]] = {}
    for memory in sorted(memories, key=lambda m: (-m.confidence, m.id)):
        by_service.setdefault(memory.service_label, []).append(memory)
    services = sorted(s for s in by_service if s != store.GENERAL) + (
        [store.GENERAL] if store.GENERAL in by_service else [])
    lines = [MARKDOWN_TITLE, "",
             f"Exported {_timestamp(utcnow())}: {len(memories)} memor{'y' if len(memories) == 1 else 'ies'}. "
             "Import with `claudeops memories import FILE`.", ""]
    for service in services:
        lines += [f"## {service}", ""]
        for memory in by_service[service]:
            flags = ("" if memory.active else ", inactive") + (", pinned" if memory.pinned else "") + (
                "" if memory.status == APPROVED else f", {memory.status}")
            lines.append(f"- [{memory.category}] {memory.observation} "
                         f"(confidence: {format_confidence(memory.confidence)}{flags})")
        lines.append("")
    return "\n".join(lines)


# --- reading a file ------------------------------------------------------------

@dataclass
class Entry:
    """One memory to import, checked."""
    service: Optional[str]
    category: str
    observation: str
    confidence: float
    active: bool
    pinned: bool
    tier: int = 1
    status: str = APPROVED                     # an export from before review: approved
    created_at: Optional[datetime] = None
    updated_at: Optional[datetime] = None
    decayed_weeks: int = 0
    source_id: Optional[int] = None            # its id in the file, for contradicts links
    session_id: Optional[int] = None           # kept where that session exists here too
    contradicts_source_id: Optional[int] = None
    history: list[dict] = field(default_factory=list)
    outcomes: dict[str, int] = field(default_factory=dict)   # the track record; empty: none
    where: str = ""                            # in the file, for errors: "memory 3", "line 12"


def parse(text: str, fmt: str = "auto", most: int = MAX_IMPORT) -> list[Entry]:
    """Entries of a JSON or Markdown export (``fmt`` "auto" looks at the
    text), at most ``most`` of them."""
    # A byte-order mark, as Notepad and PowerShell write UTF-8, is no part of the text.
    text = text.removeprefix("\ufeff")
    if not text.strip():   # in no format: not said in Markdown's terms (an empty .json file)
        raise ImportRefused("the file is empty: an export holds at least its format and version (JSON), or "
                            "a memory (Markdown)")
    if fmt == "auto":
        fmt = "json" if _looks_like_json(text) else "markdown"
    if fmt == "json":
        try:
            document = strict_json.loads(text)
        except strict_json.DuplicateKey as exc:
            raise ImportRefused(f"in the file, {exc}") from None
        except json.JSONDecodeError as exc:
            raise ImportRefused(f"not valid JSON: {exc}") from None
        except ValueError:   # Python reads no integer of more than 4,300 digits
            raise ImportRefused("not an export: it holds a number too long to read") from None
        except RecursionError:
            raise ImportRefused("not an export: nested too deeply") from None
        problem = unstorable_text(document)
        if problem:
            raise ImportRefused(f"in the file, {problem}")
        return parse_json(document, most)
    if fmt == "markdown":
        return parse_markdown(text, most)
    raise ImportRefused(f"unknown format {fmt!r}; use json or markdown")


def _looks_like_json(text: str) -> bool:
    """JSON of any shape (an array, ``null``) is refused as JSON, in JSON's
    terms, not read as Markdown that holds no memories."""
    if text.lstrip()[:1] in ("{", "["):
        return True
    try:
        json.loads(text)
    except (ValueError, RecursionError):
        return False
    return True


# What an export writes, and all an import takes: a key misspelt in a file
# written or edited by hand ("servce") is refused, not left out (the memory
# would be stored general, at the default confidence, without a word).
DOCUMENT_KEYS = ("format", "version", "exported_at", "memories")
ENTRY_KEYS = ("id", "service", "category", "observation", "confidence", "active", "pinned", "tier", "created_at",
              "updated_at", "decayed_weeks", "session_id", "contradicts_id", "outcomes", "status", "history")
MAX_HISTORY_DETAIL_CHARS = 20_000
# How long an observation parsing takes: any (the file's size bounds it). The
# limit is held in import_entries, which knows which ones are here already.
ANY_LENGTH = 2**63 - 1
HISTORY_KEYS = ("action", "confidence_before", "confidence_after", "actor", "detail", "session_id",
                "related_memory_id", "created_at")


def parse_json(document: Any, most: int = MAX_IMPORT) -> list[Entry]:
    if not isinstance(document, dict) or document.get("format") != FORMAT_NAME:
        raise ImportRefused(f'not a memories export: expected an object with "format": "{FORMAT_NAME}"')
    if "version" not in document:
        raise ImportRefused(f'the export names no version: expected "version": {FORMAT_VERSION}')
    # true is no version, though Python takes it for 1.
    if isinstance(document["version"], bool) or document["version"] != FORMAT_VERSION:
        raise ImportRefused(f"export version {json.dumps(document['version'])[:40]} is not supported "
                            f"(only {FORMAT_VERSION})")
    unknown = unknown_fields(document, DOCUMENT_KEYS)   # a newer version's are refused by its version above
    if unknown:
        raise ImportRefused(f"the export has {unknown}")
    if not isinstance(document.get("exported_at", ""), str):
        raise ImportRefused('"exported_at" must be a timestamp (text)')
    items = document.get("memories")
    if not isinstance(items, list):
        raise ImportRefused('"memories" must be a list')
    _check_size(items, most)
    entries = [_entry(item, number) for number, item in enumerate(items, 1)]
    _check_ids_unique(entries)
    return entries


def _check_ids_unique(entries: list[Entry]) -> None:
    """An id names one memory of the file: contradiction links and history
    rows point at memories by it. Two exports joined into one file by hand
    both start at 1, and each link would go to whichever memory came last."""
    first: dict[int, str] = {}
    for entry in entries:
        if entry.source_id is None:
            continue
        if entry.source_id in first:
            raise ImportRefused(f"{entry.where}: id {entry.source_id} is that of {first[entry.source_id]} too: "
                                "an export names each memory by an id of its own (to join two exports, import "
                                "each file in turn)")
        first[entry.source_id] = entry.where


def _entry(item: Any, number: int) -> Entry:
    def fail(message: str):
        raise ImportRefused(f"memory {number}: {message}")
    if not isinstance(item, dict):
        fail("must be an object")
    unknown = unknown_fields(item, ENTRY_KEYS)
    if unknown:
        fail(unknown)
    try:
        confidence = _confidence(item.get("confidence", 0.7), "confidence")
        entry = Entry(
            service=store.clean_service(item.get("service")),
            category=store.clean_category(item.get("category")),
            observation=store.clean_observation(item.get("observation"), longest=ANY_LENGTH),
            confidence=confidence,
            # Not given (a file written by hand), it follows the confidence, as POST /memories does.
            active=_flag(item, "active", confidence >= ACTIVE_THRESHOLD), pinned=_flag(item, "pinned", False),
            tier=_whole(item, "tier", 1, 1, 3), decayed_weeks=_whole(item, "decayed_weeks", 0, 0, 10_000),
            status=_review_state(item.get("status", APPROVED)),
            created_at=_time(item.get("created_at")), updated_at=_time(item.get("updated_at")),
            source_id=_optional_id(item.get("id")), contradicts_source_id=_optional_id(item.get("contradicts_id")),
            session_id=_optional_id(item.get("session_id")),
            history=_history_rows(item.get("history", [])), outcomes=_outcomes(item.get("outcomes", {})),
            where=f"memory {number}")
    except (store.MemoryInputError, ValueError) as exc:
        fail(str(exc))
    if entry.active and entry.confidence < ACTIVE_THRESHOLD:
        fail(f"active with confidence {item.get('confidence')!r:.40}, below {ACTIVE_THRESHOLD}: "
             "give it \"active\": false, or raise its confidence")
    if entry.created_at and entry.updated_at and entry.updated_at < entry.created_at:
        fail(f"updated_at ({item['updated_at']}) is before created_at ({item['created_at']})")
    return entry


def _confidence(value, name: str) -> float:
    """A JSON number, as the API takes it (text is Markdown's, not JSON's), clamped to [0, 1]."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{name} must be a number, not {json_described(value)}")
    return store.parse_confidence(value)


def _review_state(value) -> str:
    if value not in REVIEW_STATES:
        raise ValueError(f"status must be one of {', '.join(REVIEW_STATES)}")
    return value


def _flag(item: dict, name: str, default: bool) -> bool:
    value = item.get(name, default)
    if not isinstance(value, bool):
        raise ValueError(f"{name} must be true or false")
    return value


def _whole(item: dict, name: str, default: int, low: int, high: int) -> int:
    value = item.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ValueError(f"{name} must be a whole number from {low} to {high}")
    return value


def _outcomes(value) -> dict[str, int]:
    if not isinstance(value, dict) or set(value) - set(OUTCOME_LEVELS):
        raise ValueError(f"outcomes must be an object of counts named {', '.join(OUTCOME_LEVELS)}")
    return {level: _whole(value, level, 0, 0, 2**31 - 1) for level in OUTCOME_LEVELS}


def _optional_id(value) -> Optional[int]:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_ID:
        # No export holds another: ids are INTEGER columns (see app/web/row_ids.py).
        raise ValueError(f"ids must be whole numbers from 1 to {MAX_ID}")
    return value


def _time(value) -> Optional[datetime]:
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValueError("timestamps must be ISO 8601 text")
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:   # Python's own words repeat the value whole
        raise ValueError(f"{echoed(value)} is not an ISO 8601 timestamp") from None
    if parsed.tzinfo is None:
        raise ValueError(f"{echoed(value)} has no time zone")
    try:
        parsed = parsed.astimezone(timezone.utc)
    except OverflowError:   # a time zone that pushes the instant past year 9999
        raise ValueError(f"{echoed(value)} is out of range") from None
    if not EARLIEST_TIME <= parsed <= utcnow() + CLOCK_SKEW:
        raise ValueError(f"{echoed(value)} is out of range: timestamps run from 1970 to a day from now")
    return parsed


def _history_rows(rows) -> list[dict]:
    if not isinstance(rows, list):
        raise ValueError("history must be a list")
    most = _most_detail_chars()
    checked = []
    for row in rows:
        unknown = unknown_fields(row, HISTORY_KEYS) if isinstance(row, dict) else None
        if unknown:
            raise ValueError(f"a history entry has {unknown}")
        if not isinstance(row, dict) or row.get("action") not in HISTORY_ACTIONS:
            raise ValueError(f"each history entry needs an action, one of {', '.join(HISTORY_ACTIONS)}")
        if row.get("actor") not in ACTORS:
            raise ValueError(f"history actor must be one of {', '.join(ACTORS)}")
        confidences = {name: None if row.get(name) is None else _confidence(row[name], f"history {name}")
                       for name in ("confidence_before", "confidence_after")}
        if row.get("detail") is not None and not isinstance(row["detail"], str):
            raise ValueError("history detail must be text")
        if len(row.get("detail") or "") > most:
            raise ValueError(f"a history detail is {len(row['detail'])} characters; the limit is {most}")
        if "\x00" in row["action"] or "\x00" in (row.get("detail") or ""):
            raise ValueError("history must not contain NUL characters")
        checked.append({"action": row["action"], "actor": row["actor"], "detail": row.get("detail"),
                        "session_id": _optional_id(row.get("session_id")),
                        "related_memory_id": _optional_id(row.get("related_memory_id")),
                        **confidences,
                        "created_at": _time(row.get("created_at")) or utcnow()})
    return checked


def _most_detail_chars() -> int:
    """Room for the longest detail this service writes (an observation
    quoted in a sentence), and no more: a page shows every one."""
    return max(MAX_HISTORY_DETAIL_CHARS, max_observation_chars() + 1_000)


def parse_markdown(text: str, most: int = MAX_IMPORT) -> list[Entry]:
    entries, service, heading = [], None, 0
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.rstrip()
        if stripped.startswith(PROMPT_SECTION_HEADING):
            # Its lines look like an export's, but it holds only what fitted a
            # session's budget, under other headings: it would import wrong.
            raise ImportRefused(f"line {number}: this is the memory section of a session's system prompt, not "
                                "an export of the memories: export them from the Memories page or with "
                                "`claudeops memories export`")
        if stripped.startswith("## "):
            service, heading = stripped[3:].strip(), number
            continue
        if not stripped.startswith("- "):
            continue  # headings, prose, blank lines
        match = MARKDOWN_LINE.match(stripped)
        if match is None:
            raise ImportRefused(f"line {number}: expected '- [category] observation (confidence: N)', "
                               f"got {stripped[:80]!r}")
        if service is None:
            raise ImportRefused(f"line {number}: a memory before any '## service' heading")
        flags = match["flags"]
        try:
            confidence = store.parse_confidence(match["confidence"])
            # An export marks every inactive memory, and never holds an active
            # one below the threshold: such a line was written by hand, and its
            # memory is inactive, as POST /memories would make it.
            entry = Entry(service=store.clean_service(service), category=store.clean_category(match["category"]),
                          observation=store.clean_observation(match["observation"], longest=ANY_LENGTH),
                          confidence=confidence,
                          active="inactive" not in flags and confidence >= ACTIVE_THRESHOLD,
                          pinned="pinned" in flags,
                          status=next((state for state in REVIEW_STATES if state in flags), APPROVED),
                          where=f"line {number}")
        except store.MemoryInputError as exc:
            raise ImportRefused(_where_wrong(exc, number, heading)) from None
        entries.append(entry)
    if not entries and not text.startswith(MARKDOWN_TITLE):   # not an export of ours: say so
        raise ImportRefused("no memories found: expected lines '- [category] observation (confidence: N)' "
                            "under '## service' headings")
    _check_size(entries, most)
    return entries


def _where_wrong(exc: store.MemoryInputError, line: int, heading: int) -> str:
    """A memory's line, or, for its service, the heading that names it."""
    if str(exc).startswith("service "):
        return f"line {heading}: the heading's {exc}"
    return f"line {line}: {exc}"


def _check_size(items: list, most: int) -> None:
    if len(items) > most:
        if most < MAX_IMPORT:   # over HTTP
            raise ImportRefused(f"{len(items)} memories in one file; at most {most} through the API or the "
                                "dashboard: import a larger file with `claudeops memories import FILE`")
        raise ImportRefused(f"{len(items)} memories in one file; at most {most}")


# --- import ------------------------------------------------------------------

@dataclass
class ImportReport:
    created: int = 0
    reinforced: int = 0
    contradicted: int = 0
    unchanged: int = 0

    def to_dict(self) -> dict:
        return {"created": self.created, "reinforced": self.reinforced, "contradicted": self.contradicted,
                "unchanged": self.unchanged}


def import_entries(entries: list[Entry], source: str) -> ImportReport:
    """Each entry through the matcher: the same text already there (before
    the import: two entries of one text are two memories) is left alone, a
    reinforcement strengthens the memory there, a contradiction weakens it
    and stores the imported one beside it, anything else is a new memory
    with everything the file says (history included). A rejected or
    inactive entry is no one's belief: it changes no memory here, and is
    stored as it is unless its text is here already. The caller commits."""
    lock_for_writing()   # what is read stays as read until the commit (app/write_lock.py)
    texts: dict[Pair, set[str]] = {}   # the observations of each service and category, read once
    _refuse_new_text_over_the_limit(entries, texts)
    report = ImportReport()
    new_ids: dict[int, Memory] = {}
    links: list[tuple[Memory, int]] = []
    history: list[tuple[dict, Optional[int]]] = []   # the new memories' rows, with the file's id of a related one
    imported = IdRuns()  # compared with what was here before, never with each other
    named: dict[Pair, _Named] = {}
    sessions: dict[int, Optional[int]] = {}
    for entry in entries:
        pair = (entry.category, entry.service)
        if pair not in texts:
            texts[pair] = _observations(pair)
        if store.same_words(entry.observation) in texts[pair]:   # the same words already there
            report.unchanged += 1
            continue
        if _speaks_for_itself(entry):
            live = _candidates(pair, named, imported)
            match, target = store.find_match(entry.category, entry.service, entry.observation, live=live)
        else:
            match, target = Match(DISTINCT), None
        if match.relation == REINFORCE:
            store.reinforce(target, f"imported from {source}: {entry.observation}", actor=store.OPERATOR)
            report.reinforced += 1
            continue
        memory = _insert(entry, source, history, sessions)
        imported.add(memory.id)
        if entry.source_id is not None:
            new_ids[entry.source_id] = memory
        if match.relation == CONTRADICT:
            store.contradict(target, memory, actor=store.OPERATOR)
            named[pair].lowered += 1
            report.contradicted += 1
        else:
            report.created += 1
            if entry.contradicts_source_id is not None:
                links.append((memory, entry.contradicts_source_id))
    for memory, source_id in links:  # contradictions within the file, once every id is known
        if source_id in new_ids:
            memory.contradicts_id = new_ids[source_id].id
    _insert_history(history, new_ids)
    return report


def _refuse_new_text_over_the_limit(entries: list[Entry], texts: dict[Pair, set[str]]) -> None:
    """An observation longer than the limit is refused, before anything is
    written, unless it is here already: the limit holds for new text only,
    and an export of memories kept from before it was lowered imports
    again as unchanged. Fills ``texts`` for the pairs it reads."""
    longest = max_observation_chars()
    for entry in entries:
        if len(entry.observation) <= longest:
            continue
        pair = (entry.category, entry.service)
        if pair not in texts:
            texts[pair] = _observations(pair)
        if store.same_words(entry.observation) not in texts[pair]:
            raise ImportRefused(f"{entry.where}: observation is {len(entry.observation)} characters; the limit is "
                                f"{longest} ({MAX_OBSERVATION})")


_history_insert = BulkInsert(MemoryHistory.__table__, (
    "memory_id", "action", "confidence_before", "confidence_after", "session_id", "actor", "detail",
    "related_memory_id", "created_at"))


def _insert_history(history: list[tuple[dict, Optional[int]]], new_ids: dict[int, Memory]) -> None:
    """The new memories' history, once every memory of the file has its id
    here, in one statement: an export may hold hundreds of thousands of
    rows, and as ORM objects each took some 120 µs (41 s for a 32 MiB
    file, past a web worker's 30 s; 7 s now). A row naming
    a memory of the file names it by its id here; one not imported as
    itself would be another memory here, so it names none."""
    rows = []
    seen: dict[str, str] = {}
    for row, source_id in history:
        if source_id is not None:
            row["related_memory_id"] = new_ids[source_id].id if source_id in new_ids else None
        rows.append(redacted_values(MemoryHistory, row, seen))   # as a flush would write them
    _history_insert(db.session.connection(), rows)


@dataclass
class _Named:
    """The live memories of a service and category that its entries are
    compared with: the NAMED_LIVE most trusted, read before any entry of
    the pair was stored (``whole``: all of them)."""
    ids: list[int]
    whole: bool
    lowered: int = 0   # how many of them the import has contradicted since


def _candidates(pair: Pair, named: dict[Pair, _Named], imported: IdRuns) -> list[Candidate]:
    """The live candidates of ``pair`` (plugins/memory/candidates.py), none
    of them imported, read among the memories ``named`` (a read as small as
    they are, however many the file adds to the pair).

    Those are enough: an import's own memories are left out, and it brings
    none to life and raises none it was not compared with (it reinforces
    and contradicts candidates only). So a memory outside them stays below
    every one of them the import has not contradicted; while at least
    MAX_CANDIDATES of them are, the candidates are among them. Past that,
    the pair is read again, leaving out the import's own memories by their
    runs of ids."""
    category, service = pair
    most = candidates.MAX_CANDIDATES
    known = named.get(pair)
    if known is None or (not known.whole and NAMED_LIVE - known.lowered < most):
        live, _ = candidates.candidates(category, service, imported, most=max(NAMED_LIVE + 1, most))
        named[pair] = _Named([c.memory_id for c in live[:NAMED_LIVE]], whole=len(live) <= NAMED_LIVE)
        return live[:most]
    if not known.ids:
        return []
    live, _ = candidates.candidates(category, service, within=known.ids)
    if not live and known.whole:
        known.ids = []
    return live


def _speaks_for_itself(entry: Entry) -> bool:
    """Whether the entry may reinforce or contradict a memory here: one
    approved and active, or proposed (which, like a marker, waits for its
    approval to take trust from what it contradicts). A rejected memory, or
    one decayed or contradicted out of use, is a record, not evidence."""
    return entry.status == PROPOSED or (entry.status == APPROVED and entry.active)


def _observations(pair: Pair) -> set[str]:
    """Every observation of a service and category, whatever its state, as
    the same words compare (store.same_words): a marker's is stored as the
    agent spaced it, so its export would otherwise read as a paraphrase, and
    one said again with a full stop would be reinforced at every import."""
    category, service = pair
    return {store.same_words(observation) for observation in db.session.scalars(select(Memory.observation).where(
        Memory.category == category, Memory.service.is_(None) if service is None else Memory.service == service))}


def _session_here(session_id: Optional[int], known: dict[int, Optional[int]]) -> Optional[int]:
    """A session link survives the trip when that session is in this
    database (a restore into the same service); elsewhere it would point at
    an unrelated session, so it is dropped. ``known``: the answers so far."""
    if session_id is None:
        return None
    if session_id not in known:
        known[session_id] = session_id if db.session.get(Session, session_id) is not None else None
    return known[session_id]


def _insert(entry: Entry, source: str, history: list[tuple[dict, Optional[int]]],
            sessions: dict[int, Optional[int]]) -> Memory:
    """The entry as a new memory; its history, and an "imported" row, join
    ``history``, with the file's id of the memory a row names, to be
    inserted once every memory of the file has its id here."""
    now = utcnow()
    memory = Memory(service=entry.service, category=entry.category, observation=entry.observation,
                    confidence=entry.confidence, active=entry.active, pinned=entry.pinned, tier=entry.tier,
                    status=entry.status,
                    created_at=entry.created_at or now, updated_at=entry.updated_at or now,
                    decayed_weeks=entry.decayed_weeks, session_id=_session_here(entry.session_id, sessions))
    if any(entry.outcomes.values()):
        memory.track_record = TrackRecord(**entry.outcomes)
    db.session.add(memory)
    db.session.flush()
    for row in entry.history:
        history.append(({**row, "memory_id": memory.id, "session_id": _session_here(row["session_id"], sessions),
                         "related_memory_id": None}, row["related_memory_id"]))
    history.append(({"memory_id": memory.id, "action": "imported", "confidence_before": None,
                     "confidence_after": memory.confidence, "actor": store.OPERATOR, "detail": f"from {source}",
                     "session_id": None, "related_memory_id": None, "created_at": now}, None))
    return memory
