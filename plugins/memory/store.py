"""The memory lifecycle: what the agent's markers and the operator's edits do
to memories, each change written to the history.

Confidence stays in [0, 1]; below 0.3 a memory is inactive (kept for audit,
never injected). Reinforcement +0.1, contradiction −0.2 on the old memory,
decay −0.1 per full week past a 30-day grace period, a reported outcome what
its setting says (plugins/memory/outcomes.py).

Review (CLAUDEOPS_MEMORY_REVIEW): the agent's new memories start proposed
and change nothing else until approved: a contradiction they state is
linked at once and takes its 0.2 when the memory is approved. A proposed
memory reinforced by a second, independent session is approved here; the
operator's approve and reject are in review.py. A rejected memory stays
rejected: the agent saying it again stores nothing.
"""
from __future__ import annotations

import logging
import math
import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import partial
from typing import Any, Callable, Iterable, Optional

from sqlalchemy import select

from app.echoed import echoed
from app.extensions import db
from app.plain_numbers import decimal_number
from app.plugin_types import RunInfo
from app.plugins import call_first
from app.session_warnings import AT_DEBUG_LEVEL, warn_once
from app.timeutil import utcnow
from app.web.apiutil import MAX_ID
from app.write_lock import lock_for_writing
from plugins.memory.candidates import candidates as find_candidates
from plugins.memory.context import MemoryContext, build_memory_context
from plugins.memory.matcher import CONTRADICT, REINFORCE, Candidate, Match
from plugins.memory.models import (ACTIVE_THRESHOLD, APPROVED, CATEGORIES, DECAY_GRACE_PERIOD, DEFAULT_CONFIDENCE,
                                   GENERAL, MAX_SERVICE_CHARS, PROPOSED, REJECTED, Memory, MemoryHistory,
                                   memory_spelling)
from plugins.memory.relevance import relevant_services, scheduled_run
from plugins.memory.settings import MAX_OBSERVATION, max_observation_chars, review_on
from plugins.memory.tally import (escalation_chain, note_confirmed, note_contradicted, note_created, note_reinforced,
                                  tally)
from plugins.memory.text_cache import MATCHER_CACHE_CHARS, TextCache

log = logging.getLogger(__name__)

REINFORCE_DELTA = 0.1
CONTRADICT_DELTA = 0.2
DECAY_PER_WEEK = 0.1
GRACE_PERIOD = DECAY_GRACE_PERIOD
SERVICE_PATTERN = re.compile(r"^[A-Za-z0-9_-]+$")

OPERATOR, SESSION, SYSTEM = "operator", "session", "system"


class MemoryInputError(ValueError):
    """An operator's value the memory store cannot take; the message says why."""


def cleaned(checks: dict[str, tuple[Callable[[Any], Any], Any]]) -> dict[str, Any]:
    """``{name: (clean, value)}`` cleaned; every refused value named in one
    error, so that a form with two mistakes is not sent back once for each."""
    results, refused = {}, []
    for name, (clean, value) in checks.items():
        try:
            results[name] = clean(value)
        except MemoryInputError as exc:
            refused.append(str(exc))
    if refused:
        raise MemoryInputError("; ".join(refused))
    return results


# What a marker did to the memories.
CREATED, REINFORCED, CONTRADICTED = "created", "reinforced", "contradicted"
REPEATED = "repeated"   # a memory the session had already created or reinforced
REFUSED = "refused"     # over the session's limit of new memories: nothing changed
ALREADY_REJECTED = "already rejected"   # says again what the operator rejected: nothing stored


@dataclass(frozen=True)
class Recorded:
    relation: str
    memory: Optional[Memory]  # None when refused
    target: Optional[Memory] = None   # the memory a contradiction was aimed at
    approved: bool = False            # the marker confirmed a proposed memory, which is now approved
    confirmation: int = 0             # then: the how-manyth proposal the session confirmed
    # The memory's confidence as the marker left it: what the activity log
    # says, though a later marker of the batch (an outcome) moves it again.
    confidence: Optional[float] = field(default=None, init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "confidence", None if self.memory is None else self.memory.confidence)


def clamp(confidence: float) -> float:
    """In [0, 1], to three places (0.7 + 0.1 is 0.8, not 0.7999…); but a
    value below the active ones' threshold stays below it (0.2999 is 0.299,
    not 0.3, which would make an inactive memory active)."""
    value = min(1.0, max(0.0, float(confidence)))
    kept = round(value, 3)
    if value < ACTIVE_THRESHOLD - 1e-9 and kept >= ACTIVE_THRESHOLD:   # not float noise: below it
        return math.floor(value * 1000) / 1000
    return kept


def clean_observation(raw, longest: Optional[int] = None) -> str:
    """``longest``: the most characters it may hold; the setting's unless given."""
    if not isinstance(raw, str):
        raise MemoryInputError("observation must be text")
    text = one_line(raw)
    if "\x00" in text:   # PostgreSQL cannot store one, and no prompt should carry it
        raise MemoryInputError("observation must not contain NUL characters")
    if not text:
        raise MemoryInputError("observation must not be empty")
    longest = max_observation_chars() if longest is None else longest
    if len(text) > longest:
        raise MemoryInputError(f"observation is {len(text)} characters; the limit is {longest} ({MAX_OBSERVATION})")
    return text


def one_line(text: str) -> str:
    """The prompt format is one memory per line: runs of whitespace, line breaks included, become one space."""
    return " ".join(text.split())


def clean_service(raw) -> Optional[str]:
    """``None``, empty and "general" all mean a general memory. A service is
    named in lower case: "Jellyfin" and "jellyfin" are one service."""
    if raw is None:
        return None
    if not isinstance(raw, str):
        raise MemoryInputError("service must be text or null")
    service = raw.strip()
    if not service or service.lower() == GENERAL:
        return None
    if len(service) > MAX_SERVICE_CHARS or not SERVICE_PATTERN.match(service):
        # As a marker naming a host or a unit (db.lan, getty@tty1) is kept: the operator is told that spelling.
        spelt = memory_spelling(service)
        raise MemoryInputError("service must be 1-100 letters, digits, '_' or '-'"
                               + (f" (memories of {echoed(service)} are kept under {spelt!r})" if spelt else ""))
    return service.lower()


def clean_category(raw) -> str:
    if raw not in CATEGORIES:
        raise MemoryInputError(f"category must be one of {', '.join(CATEGORIES)}, not {echoed(raw)}")
    return raw


def parse_confidence(raw) -> float:
    """A number, clamped to [0, 1]; anything else is refused."""
    if isinstance(raw, bool):
        raise MemoryInputError("confidence must be a number")
    if raw is None:   # JSON's null, as the API was sent it
        raise MemoryInputError("confidence must be a number, not null")
    try:
        # A form's field as a person types it (plain_numbers: not "0_5", which float() reads as 5).
        value = decimal_number(raw.strip()) if isinstance(raw, str) else float(raw)
    except (TypeError, ValueError):
        raise MemoryInputError(f"confidence must be a number, not {echoed(raw)}") from None
    except OverflowError:   # an integer too large for a float
        raise MemoryInputError("confidence must be a finite number") from None
    if value != value or value in (float("inf"), float("-inf")):
        raise MemoryInputError("confidence must be a finite number")
    return clamp(value)


# --- the agent -------------------------------------------------------------

def find_match(category: str, service: Optional[str], observation: str, exclude: Iterable[int] = (),
               live: Optional[list[Candidate]] = None) -> tuple[Match, Optional[Memory]]:
    """What ``observation`` is to the active memories (approved or proposed)
    of its service and category (the most trusted of them:
    plugins/memory/candidates.py), and which one; the
    ``claudeops_memory_match`` hook decides. Memories in ``exclude`` (ids,
    or candidates.IdRuns) are not compared. ``live``: those candidates, when
    the caller has them already."""
    if live is None:
        live, _ = find_candidates(category, service, exclude)
    return _match(category, service, observation, live)


def _match(category: str, service: Optional[str], observation: str,
           candidates: list[Candidate], match: Optional[Match] = None) -> tuple[Match, Optional[Memory]]:
    """The hook's answer (or ``match``, an answer already had for these
    candidates) and the memory it names."""
    match = match or ask_matcher(category, service, observation, candidates)
    if match.relation not in (REINFORCE, CONTRADICT):
        return match, None
    named = {c.memory_id for c in candidates}
    target = db.session.get(Memory, match.memory_id) if match.memory_id in named else None
    if target is None:
        log.warning("memory matcher named memory %s, which is not a candidate; recording a new memory",
                    match.memory_id)
        return Match("distinct"), None
    return match, target


def ask_matcher(category: str, service: Optional[str], observation: str, candidates: list[Candidate]) -> Match:
    """The same words as a candidate's (case, spacing and a closing full
    stop aside) say that candidate again, whatever the matcher makes of
    them: one too short to share two content words with anything ("Flaky",
    "Needs restart") or in a script it does not split into words would
    otherwise be a new memory every time it is said, and a rejected one
    would come back."""
    said = same_words(observation)
    for candidate in candidates:
        if same_words(candidate.observation) == said:
            return Match(REINFORCE, candidate.memory_id)
    return call_first("claudeops_memory_match", expected=Match, category=category, service=service,
                      observation=observation, candidates=candidates) or Match("distinct")


def _same_words(observation: str) -> str:
    """``observation`` as the same words compare: case, spacing and a closing full stop aside."""
    return " ".join(observation.casefold().split()).rstrip(".。").rstrip()


# Each stored observation is compared again with every new one.
same_words = TextCache(_same_words, MATCHER_CACHE_CHARS)


def record_observation(category: str, service: Optional[str], observation: str, run: RunInfo,
                       may_create: bool = True) -> Recorded:
    """Apply one ``[MEMORY:...]`` marker: reinforce, contradict or create
    (proposed, with review on).

    Without ``may_create`` (the session reached its limit of new memories), a
    marker that would create a memory, or contradict one with a new one,
    changes nothing and is ``refused``; reinforcing one still counts."""
    recorded = decide(category, service, observation, run, may_create,
                      find_candidates(category, service, rejected=True))
    if recorded.relation in (CREATED, CONTRADICTED):
        db.session.flush()   # the new memory's id, for its history
        complete(recorded, run)
    return recorded


def decide(category: str, service: Optional[str], observation: str, run: RunInfo, may_create: bool,
           candidates: tuple[list[Candidate], list[Candidate]], match: Optional[Match] = None,
           add_new: bool = True) -> Recorded:
    """``record_observation`` up to its new memory, if any: added to the
    database session (without ``add_new``: not even that, the caller inserts
    it), not yet flushed, and without its history, which ``complete`` writes
    once it has an id. So a batch of markers inserts its new memories in one
    statement (plugins/memory/batch.py).
    ``candidates``: the live and the rejected candidates of the service and
    category, as ``find_candidates(..., rejected=True)`` gives them;
    ``match``: the matcher's answer for the live ones, if already asked."""
    live, rejected = candidates
    match, target = _match(category, service, observation, live, match)
    if match.relation != REINFORCE and not may_create:
        return Recorded(REFUSED, None)
    if match.relation == REINFORCE:
        # An agent repeating itself is not confirmation: a session, with the
        # sessions before it in its escalation chain, creates or reinforces a
        # given memory once at most.
        if target.id in tally(run.session_id).vouched:
            # Once a memory and session in the service log: a runaway agent says it thousands of times.
            warn_once(log, run.session_id, f"repeated memory {target.id}",
                      f"repeated memory {target.id}, which it or its escalation chain recorded already; "
                      "not counted as reinforcement", later=AT_DEBUG_LEVEL, level=logging.INFO)
            return Recorded(REPEATED, target)
        reinforce(target, observation, run=run)
        note_reinforced(run.session_id, target.id)
        if _confirm_proposal(target, run):
            return Recorded(REINFORCED, target, approved=True, confirmation=tally(run.session_id).confirmed)
        return Recorded(REINFORCED, target)
    repeated = _repeats_rejected(category, service, observation, rejected, run) if rejected else None
    if repeated is not None:
        return Recorded(ALREADY_REJECTED, repeated)

    memory = _new(category, service, observation, DEFAULT_CONFIDENCE, run.session_id, run.tier,
                  PROPOSED if review_on() else APPROVED, add=add_new)
    if match.relation == CONTRADICT:
        return Recorded(CONTRADICTED, memory, target=target)
    return Recorded(CREATED, memory)


def complete(recorded: Recorded, run: RunInfo) -> None:
    """The rest of a marker that created a memory, now flushed (it has its
    id): its history, the contradiction it states, the session's tally."""
    memory, target = recorded.memory, recorded.target
    note_created(run.session_id, memory.id)
    action = "proposed" if memory.status == PROPOSED else "created"
    if recorded.relation == CONTRADICTED:
        if target.id in tally(run.session_id).contradicted:
            if memory.status == APPROVED:   # linked, as it says (a proposal's link would take trust when approved)
                memory.contradicts_id = target.id
            _history(memory, action, None, run=run, related=target.id,
                     detail=f"contradicts memory {target.id}, which this session or its escalation chain "
                            "contradicted already: no more trust is taken from it")
            return
        contradict(target, memory, run=run)
        if memory.status == APPROVED:
            note_contradicted(run.session_id, target.id)
        pending = "; it takes effect when this one is approved" if memory.status == PROPOSED else ""
        _history(memory, action, None, run=run, detail=f"contradicts memory {target.id}{pending}", related=target.id)
    else:
        _history(memory, action, None, run=run)


def contradict(target: Memory, memory: Memory, *, run: Optional[RunInfo] = None, actor: Optional[str] = None) -> None:
    """``memory`` states the opposite of ``target``: link them, and take
    trust from the older one (inactive below the threshold). A memory not
    approved only links: the trust is taken when it is approved."""
    memory.contradicts_id = target.id
    if memory.status != APPROVED:
        return
    before = target.confidence
    target.confidence = clamp(before - CONTRADICT_DELTA)
    _history(target, "contradicted", before, run=run, actor=actor, detail=memory.observation, related=memory.id)
    if target.confidence < ACTIVE_THRESHOLD:
        target.active = False
        _history(target, "deactivated", target.confidence, run=run, actor=actor, detail="contradicted below 0.3",
                 related=memory.id)


def reinforce(target: Memory, detail: str, *, run: Optional[RunInfo] = None, actor: Optional[str] = None) -> None:
    before = target.confidence
    target.confidence = clamp(before + REINFORCE_DELTA)
    _refresh(target)
    _history(target, "reinforced", before, run=run, actor=actor, detail=detail)


def score(memory: Memory, delta: float, detail: str, *, run: RunInfo, confirms: bool) -> float:
    """A reported outcome: confidence moved by ``delta`` (within [0, 1]),
    inactive below the threshold as after a contradiction; ``confirms``
    restarts its staleness clock as a reinforcement does. Returns the
    confidence before."""
    before = memory.confidence
    memory.confidence = clamp(before + delta)
    if confirms:
        _refresh(memory)
    _history(memory, "outcome", before, run=run, detail=detail)
    if memory.active and memory.confidence < ACTIVE_THRESHOLD:
        memory.active = False
        _history(memory, "deactivated", memory.confidence, run=run, detail="outcome below 0.3")
    return before


def created_by_session(session_id: int) -> int:
    """New memories a session has recorded (contradicting ones included)."""
    return tally(session_id).created


def _repeat_noted(memory: Memory, session_id: int) -> bool:
    """Whether the session's saying a rejected memory again is in its history already."""
    if any(row["memory_id"] == memory.id and row["session_id"] == session_id and row["action"] == "repeated"
           for row in db.session.info.get(HISTORY_ROWS, ())):
        return True
    return db.session.scalar(select(MemoryHistory.id).where(
        MemoryHistory.memory_id == memory.id, MemoryHistory.session_id == session_id,
        MemoryHistory.action == "repeated").limit(1)) is not None


# --- review ------------------------------------------------------------------

def _confirm_proposal(memory: Memory, run: RunInfo) -> bool:
    """A proposed memory that a second session reinforced is approved. Not
    a session of the proposer's own escalation chain: an escalated session
    is shown what the tiers before it recorded, so it would only be
    repeating them. (The proposer itself never gets here: a session
    reinforces nothing it created.)"""
    if memory.status != PROPOSED:
        return False
    proposer = memory.session_id
    if proposer is not None and escalation_chain(proposer)[-1] == escalation_chain(run.session_id)[-1]:
        log.info("memory %s: reinforced within the escalation chain that proposed it; still proposed", memory.id)
        return False
    by = f"session #{proposer}" if proposer is not None else "an earlier session"
    mark_approved(memory, SYSTEM, run=run,
                  detail=f"confirmed by session #{run.session_id}, a second session after {by} proposed it")
    note_confirmed(run.session_id)
    return True


def _repeats_rejected(category: str, service: Optional[str], observation: str, candidates: list[Candidate],
                      run: RunInfo) -> Optional[Memory]:
    """The rejected memory (of ``candidates``) that ``observation`` says
    again (reinforces, in the matcher's words), if any. The operator's
    rejection stands: nothing is stored, and the rejected memory's history
    notes the repeat, once per session."""
    match, rejected = _match(category, service, observation, candidates)
    if match.relation != REINFORCE:
        return None
    if not _repeat_noted(rejected, run.session_id):
        _history(rejected, "repeated", rejected.confidence, run=run,
                 detail=f"said again after its rejection; not stored: {observation}")
    return rejected


def mark_approved(memory: Memory, actor: str, *, run: Optional[RunInfo] = None, detail: Optional[str] = None) -> None:
    """A proposed or rejected memory becomes approved: given to sessions
    from now on (while active), its clock restarted, and the contradiction
    it states, if any, takes effect."""
    was = memory.status
    memory.status = APPROVED
    _refresh(memory)
    target = db.session.get(Memory, memory.contradicts_id) if memory.contradicts_id is not None else None
    gone = _contradiction_gone(memory, target) if target is not None else None
    if gone:
        memory.contradicts_id = None
    takes = target is not None and not gone and target.active and target.status != REJECTED
    taken = takes and _chain_took_trust(target, memory)
    no_trust = gone or (f"its session or escalation chain contradicted memory {target.id} already: no more trust "
                        "is taken from it" if taken else None)
    _history(memory, "approved", memory.confidence, run=run, actor=actor,
             detail="; ".join(filter(None, (detail or f"was {was}", no_trust))))
    if takes and not taken:
        contradict(target, memory, run=run, actor=actor)


def _chain_took_trust(target: Memory, memory: Memory) -> bool:
    """Whether the session that proposed ``memory``, or another of its
    escalation chain, took trust from ``target`` already: by a memory of
    theirs approved before this one, or recorded without review. A chain
    takes trust from a memory once, however many ways it says the opposite."""
    if memory.session_id is None:
        return False
    by = db.session.execute(select(MemoryHistory.session_id, Memory.session_id)
                            .outerjoin(Memory, Memory.id == MemoryHistory.related_memory_id)
                            .where(MemoryHistory.memory_id == target.id, MemoryHistory.action == CONTRADICTED)).all()
    # And the rows a batch of markers has gathered, not written yet (plugins/memory/batch.py).
    for row in db.session.info.get(HISTORY_ROWS, ()):
        if row["memory_id"] == target.id and row["action"] == CONTRADICTED:
            related = db.session.get(Memory, row["related_memory_id"]) if row["related_memory_id"] else None
            by.append((row["session_id"], related.session_id if related is not None else None))
    sessions = {session for pair in by for session in pair if session is not None}
    if not sessions:
        return False
    root = escalation_chain(memory.session_id)[-1]
    return any(escalation_chain(session)[-1] == root for session in sessions)


def _contradiction_gone(memory: Memory, target: Memory) -> Optional[str]:
    """Why ``memory`` no longer says the opposite of ``target``, which it did
    when it was proposed; None if it still does. Either may have been edited
    since (its text, its service or category; the proposal as it is
    approved): trust is taken only for what holds now, asked of the matcher
    again."""
    if (memory.service, memory.category) != (target.service, target.category):
        return f"no longer contradicts memory {target.id}, which is about another service or category now"
    match = ask_matcher(memory.category, memory.service, memory.observation,
                        [Candidate(target.id, target.observation)])
    if match.relation != CONTRADICT:
        return f"no longer contradicts memory {target.id}, as the two read now"
    return None


def mark_rejected(memory: Memory, detail: Optional[str]) -> None:
    """The operator's rejection: kept for audit, never given to a session."""
    memory.status = REJECTED
    _history(memory, "rejected", memory.confidence, actor=OPERATOR, detail=detail)


# --- the operator ----------------------------------------------------------

def _flag(name: str, value) -> bool:
    if not isinstance(value, bool):
        raise MemoryInputError(f"{name} must be true or false")
    return value


def create(category, service, observation, confidence=DEFAULT_CONFIDENCE) -> Memory:
    """An operator's memory: no session, active (if confidence allows)."""
    values = cleaned({"category": (clean_category, category), "service": (clean_service, service),
                      "observation": (clean_observation, observation), "confidence": (parse_confidence, confidence)})
    memory = _insert(values["category"], values["service"], values["observation"], values["confidence"], None, 1)
    memory.active = memory.confidence >= ACTIVE_THRESHOLD
    _history(memory, "created", None, actor=OPERATOR)
    return memory


def update(memory: Memory, *, observation=None, confidence=None, active=None, pinned=None, category=None,
           service=None) -> Memory:
    """An operator's edit; only the fields given change (``service`` "" or
    "general": a general memory). Every value is checked before any changes."""
    # Its text sent back as it is (an edit of its category, say) is not new
    # text: a longest observation lowered since it was stored does not stop it.
    unchanged = isinstance(observation, str) and one_line(observation) == memory.observation
    checks = {"observation": (clean_observation, None if unchanged else observation),
              "category": (clean_category, category), "service": (clean_service, service),
              "confidence": (parse_confidence, confidence),
              "active": (partial(_flag, "active"), active), "pinned": (partial(_flag, "pinned"), pinned)}
    values = cleaned({name: check for name, check in checks.items() if check[1] is not None})
    new_text, new_confidence = values.get("observation"), values.get("confidence")
    new_category = values.get("category", memory.category)
    new_service = values.get("service", memory.service)   # "" or "general" given: None, a general memory
    effective = new_confidence if new_confidence is not None else memory.confidence
    if active is True and effective < ACTIVE_THRESHOLD:
        raise MemoryInputError(f"an active memory needs confidence of at least {ACTIVE_THRESHOLD}; "
                               "raise its confidence as well")

    if new_text is not None and new_text != memory.observation:
        _history(memory, "edited", memory.confidence, actor=OPERATOR, detail=f"{memory.observation} → {new_text}")
        memory.observation = new_text
        _refresh(memory)
    if new_category != memory.category:
        _history(memory, "edited", memory.confidence, actor=OPERATOR,
                 detail=f"category {memory.category} → {new_category}")
        memory.category = new_category
        _refresh(memory)
    if new_service != memory.service:
        _history(memory, "edited", memory.confidence, actor=OPERATOR,
                 detail=f"service {memory.service_label} → {new_service or GENERAL}")
        memory.service = new_service
        _refresh(memory)
    moved = new_confidence is not None and new_confidence != memory.confidence
    if moved:
        before = memory.confidence
        memory.confidence = new_confidence
        _history(memory, "edited", before, actor=OPERATOR, detail="confidence")
        _refresh(memory)
    # The slider decides: at or above the threshold is active. Also when only
    # the confidence is set, at the value it had (so a memory deactivated by
    # hand comes back), but not when it merely comes along with other fields.
    only_confidence = all(field is None for field in (observation, active, pinned, category, service))
    if new_confidence is not None and active is None and (moved or only_confidence):
        _set_active(memory, new_confidence >= ACTIVE_THRESHOLD)
    if active is not None:
        _set_active(memory, active)
    if pinned is not None and pinned != memory.pinned:
        memory.pinned = pinned
        if not pinned:
            _refresh(memory)   # its weeks pinned are not decay due at once: its 30 days start again
        _history(memory, "pinned" if pinned else "unpinned", memory.confidence, actor=OPERATOR)
    return memory


def resembling(memory: Memory) -> Optional[tuple[str, Memory]]:
    """Another live memory of ``memory``'s service and category that the
    matcher says it restates (REINFORCE) or contradicts (CONTRADICT), with
    which: what an operator who adds or edits one by hand is told, since an
    operator's memory is stored as given, never merged."""
    db.session.flush()   # its id, so that it is not its own candidate
    live, _ = find_candidates(memory.category, memory.service, exclude=[memory.id])
    match = ask_matcher(memory.category, memory.service, memory.observation, live)
    if match.memory_id is None:
        return None
    other = db.session.get(Memory, match.memory_id)
    return (match.relation, other) if other is not None else None


def delete(memory: Memory) -> None:
    _history(memory, "deleted", memory.confidence, actor=OPERATOR,
             detail=f"[{memory.category}:{memory.service_label}] {memory.observation}")
    db.session.delete(memory)


def find_many(ids: Iterable) -> list[Memory]:
    """The memories, to change: read once no session can change them before
    the caller commits (app/write_lock.py)."""
    ids = _clean_ids(ids)
    lock_for_writing()
    # Ids are INTEGER columns: no row has one beyond 32 bits, and PostgreSQL
    # refuses such a number in a query where SQLite finds nothing.
    possible = [i for i in ids if 0 <= i <= MAX_ID]
    found = db.session.scalars(select(Memory).where(Memory.id.in_(possible))).all() if possible else []
    missing = sorted(set(ids) - {m.id for m in found})
    if missing:
        # Worded as a single id's "memory 12 not found" (the API's, the CLI's).
        raise LookupError(f"{'memory' if len(missing) == 1 else 'memories'} {', '.join(map(str, missing))} not found")
    return found


def _clean_ids(ids) -> list[int]:
    if not isinstance(ids, (list, tuple)) or not ids:
        raise MemoryInputError("ids must be a non-empty list of memory ids")
    if len(ids) > 1000:
        raise MemoryInputError("at most 1000 ids at a time")
    if not all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
        raise MemoryInputError("ids must be whole numbers")
    return sorted(set(ids))


# --- decay -----------------------------------------------------------------

def weeks_of_decay_due(updated_at: datetime, now: datetime) -> int:
    """Full weeks past the grace period since the last reinforcement or edit."""
    return max(0, int((now - updated_at - GRACE_PERIOD) / timedelta(weeks=1)))


def decay(now: Optional[datetime] = None, run: Optional[RunInfo] = None) -> int:
    """Take 0.1 off per full week past the grace period since the last
    reinforcement or edit. Idempotent: weeks already taken off are counted
    in ``decayed_weeks``, so running it again the same week changes nothing.
    Only approved memories decay: not pinned ones, nor the proposed waiting
    in the review inbox (approval starts their 30 days) or the rejected.
    Returns how many memories changed.

    Only the memories whose next week has fallen due are read (an index on
    ``decay_due_at``), so a start costs the same however many memories are
    kept."""
    lock_for_writing()   # what is read stays as read until the commit (app/write_lock.py)
    return _decay(now or utcnow(), run)


def _due(now: datetime):
    return select(Memory).where(Memory.active.is_(True), Memory.pinned.is_(False), Memory.decay_due_at <= now,
                                Memory.status == APPROVED)


def _decay(now: datetime, run: Optional[RunInfo]) -> int:
    """``decay``'s changes, made in the session's transaction, without the lock."""
    due = db.session.scalars(_due(now)).all()
    changed = 0
    for memory in due:
        weeks_due = weeks_of_decay_due(memory.updated_at, now)
        weeks = weeks_due - memory.decayed_weeks
        if weeks <= 0:
            continue
        before = memory.confidence
        memory.confidence = clamp(before - DECAY_PER_WEEK * weeks)
        memory.decayed_weeks = weeks_due
        _history(memory, "decayed", before, run=run, actor=SYSTEM,
                 detail=f"{weeks_due} week(s) past the 30-day grace period")
        if memory.confidence < ACTIVE_THRESHOLD:
            memory.active = False
            _history(memory, "deactivated", memory.confidence, run=run, actor=SYSTEM, detail="decayed below 0.3")
        changed += 1
    return changed


def preview_next_context(budget_tokens: int) -> MemoryContext:
    """Exactly what a scheduled session starting now would be given: decay as
    of now, then the context (its services in trouble first), then nothing of
    the decay kept (the session does its own). When no memory's decay has
    fallen due since the last session, nothing is written, and no writer is
    held back. When some has, the context's reads write the decay first
    (autoflush), so that it is read as a session would read it: under
    ``lock_for_writing``, as every writer of memories, so that on PostgreSQL
    its row locks and a session batch's cannot wait for each other. It waits
    for a writer under way, and holds writers back for the few milliseconds
    until its rollback."""
    now = utcnow()
    services = relevant_services(scheduled_run())   # other plugins are asked before any lock is taken
    if db.session.scalar(select(_due(now).exists())):
        lock_for_writing()
    _decay(now, None)
    context = build_memory_context(budget_tokens, services)
    context.memory_ids = [m.id for m in context.included]
    db.session.rollback()
    return context


# --- shared ------------------------------------------------------------------

def _insert(category, service, observation, confidence, session_id, tier, status=APPROVED) -> Memory:
    memory = _new(category, service, observation, confidence, session_id, tier, status)
    db.session.flush()  # the id, for the history
    return memory


def _new(category, service, observation, confidence, session_id, tier, status=APPROVED, add=True) -> Memory:
    now = utcnow()
    memory = Memory(category=category, service=service, observation=observation, confidence=confidence,
                    active=True, created_at=now, updated_at=now, session_id=session_id, tier=tier, status=status)
    if add:
        db.session.add(memory)
    return memory


def _refresh(memory: Memory) -> None:
    memory.updated_at = utcnow()
    memory.decayed_weeks = 0


def _set_active(memory: Memory, active: bool) -> None:
    if active != memory.active:
        memory.active = active
        if active:   # its weeks inactive (which never decay) are not due at once: its 30 days start again
            _refresh(memory)
        _history(memory, "reactivated" if active else "deactivated", memory.confidence, actor=OPERATOR)


# Where a batch of markers (plugins/memory/batch.py) gathers its history
# rows, to write them in one statement: a list in the database session's
# ``info`` while it records. Otherwise each row is added to the session.
HISTORY_ROWS = "claudeops.memory.history_rows"


def _history(memory: Memory, action: str, before: Optional[float], *, run: Optional[RunInfo] = None,
             actor: Optional[str] = None, detail: Optional[str] = None, related: Optional[int] = None) -> None:
    row = dict(memory_id=memory.id, action=action, confidence_before=before, confidence_after=memory.confidence,
               session_id=run.session_id if run else None, actor=actor or SESSION, detail=detail,
               related_memory_id=related, created_at=utcnow())
    gathered = db.session.info.get(HISTORY_ROWS)
    if gathered is not None:
        gathered.append(row)
    else:
        db.session.add(MemoryHistory(**row))
