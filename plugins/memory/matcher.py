"""The default matcher: does a new observation reinforce, contradict, or
stand beside an existing memory of the same service and category?

Deterministic and offline. Two observations are on the same topic when they
share enough content words after normalising (case, plural and tense
endings, a few synonyms, numbers with units). The service's own name is not
one: every candidate is of that service, so sharing it says nothing, and
"jellyfin depends on the NAS" would otherwise take "jellyfin depends on
postgres" for the same fact, and the second fact would be lost. On the same topic, they
contradict when their polarity differs: one is negated and the other is not
("does not clear", "no longer", "never", "unreachable" against "reachable"),
or they state different quantities ("within 1s" against "over 30s"), or
they take different sides of an opposition both speak of ("after WireGuard"
against "before WireGuard", "every Monday" against "every Friday").
Otherwise the new one reinforces the old.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Optional, Sequence

from plugins.memory.text_cache import MATCHER_CACHE_CHARS, TextCache

REINFORCE, CONTRADICT, DISTINCT = "reinforce", "contradict", "distinct"

# Same topic: at least this many shared content words, covering at least
# this share of the shorter observation's content words.
MIN_SHARED_WORDS = 2
MIN_OVERLAP = 0.34

STOPWORDS = frozenset("""
a an the and or but if then than so as of to in on at by for with from into onto over under up down
out off about around roughly approximately nearly almost just only also still even ever once very
is are was were be been being am has have had do does did can could should would will shall may might
must need needs needed require requires required it its it's this that these those there here
their them they we our you your he she his her which who what when where while whenever before after
until unless because due since each every all any some one other another such same own
has to have to get gets got make makes made really usually often sometimes always first
""".split())

# Words that negate what follows them. "unless" is not one: "degrades unless
# vacuumed" and "needs vacuuming or degrades" say the same thing.
NEGATIONS = frozenset({"not", "no", "never", "none", "nothing", "without", "cannot", "instead",
                       "independently", "neither", "nor"})
NEGATION_SCOPE = 3   # words after a negation whose numbers it negates

SYNONYMS = {
    "db": "database", "secs": "second", "sec": "second", "s": "second", "seconds": "second",
    "mins": "minute", "min": "minute", "minutes": "minute", "hrs": "hour", "hr": "hour", "hours": "hour",
    "hourly": "hour", "daily": "day", "weekly": "week", "monthly": "month",
    "fixes": "clear", "fix": "clear", "fixed": "clear", "clears": "clear", "cleared": "clear",
    "startup": "start", "boot": "start", "boots": "start", "booting": "start",
    "completes": "finish", "complete": "finish", "completed": "finish",
    "answers": "respond", "answer": "respond", "replies": "respond", "returns": "respond", "return": "respond",
    "works": "succeed", "work": "succeed", "succeeds": "succeed", "succeeded": "succeed",
    "cron": "cron", "container": "container",
}

# Words of which an observation takes a side: two on the same topic that
# speak of one of these and share no side of it disagree. Read from the
# words as written (before/after are stopwords of the topic; "mondays" is
# "monday"). An order is of what follows it: "after WireGuard" and "before
# WireGuard" disagree, "postgres before jellyfin" and "jellyfin after
# postgres" say one thing.
ORDER = "order"
OPPOSITIONS = {
    **{word: (ORDER, word) for word in ("before", "after")},
    **{day: ("weekday", day) for day in ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")},
    **{word: ("switch", "on") for word in ("enable", "enables", "enabled", "enabling")},
    **{word: ("switch", "off") for word in ("disable", "disables", "disabled", "disabling")},
}

UNIT_SECONDS = {"ms": 0.001, "second": 1, "minute": 60, "hour": 3600, "day": 86400, "week": 604800}
NUMBER_WITH_UNIT = re.compile(r"^(\d+(?:\.\d+)?)(ms|s|sec|secs|min|mins|h|hr|hrs)?$")
WORD = re.compile(r"n't|[a-z0-9_.:]+")


@dataclass(frozen=True)
class Candidate:
    memory_id: int
    observation: str


@dataclass(frozen=True)
class Match:
    relation: str                    # reinforce, contradict or distinct
    memory_id: Optional[int] = None  # the memory reinforced or contradicted


@dataclass(frozen=True)
class Features:
    words: frozenset
    negated: bool
    quantities: frozenset            # numbers stated positively, in base units
    sides: frozenset = frozenset()   # (opposition, side) pairs, from OPPOSITIONS


def match(observation: str, candidates: Sequence[Candidate], service: Optional[str] = None) -> Match:
    """Compare ``observation`` with each candidate (memories of ``service``);
    the most similar one on the same topic decides: the one sharing most of
    the shorter one's words, then most of the words of both, then one it
    agrees with; of equals, the first (the most trusted). So a memory said
    again is reinforced: a second "takes 30s to start after a restart"
    reinforces the first, not a more trusted "takes 45s to start", whose
    words it holds too and which it would contradict."""
    ignored = service_words(service)
    new = features(observation)
    best: Optional[tuple[tuple[float, float, bool], Candidate]] = None
    for candidate in candidates:
        old = features(candidate.observation)
        score = topic_overlap(new, old, ignored)
        if score is None:
            continue
        rank = (score, word_likeness(new, old, ignored), not contradicts(new, old))
        if best is None or rank > best[0]:
            best = (rank, candidate)
    if best is None:
        return Match(DISTINCT)
    (_, _, agrees), candidate = best
    return Match(REINFORCE if agrees else CONTRADICT, candidate.memory_id)


def topic_overlap(a: Features, b: Features, ignored: frozenset = frozenset()) -> Optional[float]:
    """Share of the smaller word set found in the other, or None when too
    small; ``ignored`` words count on neither side."""
    a_words, b_words = a.words - ignored, b.words - ignored
    shared = a_words & b_words
    smaller = min(len(a_words), len(b_words))
    if len(shared) < MIN_SHARED_WORDS or not smaller:
        return None
    score = len(shared) / smaller
    return score if score >= MIN_OVERLAP else None


def word_likeness(a: Features, b: Features, ignored: frozenset = frozenset()) -> float:
    """Share of all the words of both found in each (``ignored`` ones left out)."""
    a_words, b_words = a.words - ignored, b.words - ignored
    return len(a_words & b_words) / len(a_words | b_words)


@lru_cache(maxsize=1024)
def service_words(service: Optional[str]) -> frozenset:
    """The words of a service's name as ``features`` reads them ("home-assistant":
    home, assistant)."""
    return frozenset(_normalise(token) for token in _tokens(service)) if service else frozenset()


def contradicts(a: Features, b: Features) -> bool:
    if a.negated != b.negated:
        return True
    if a.quantities and b.quantities and not (a.quantities & b.quantities):
        return True
    return any(not (_sides_of(a, opposition) & _sides_of(b, opposition))
               for opposition in _sides_of(a) & _sides_of(b))


def _sides_of(features: Features, opposition: Optional[str] = None) -> set:
    """The oppositions ``features`` speaks of, or the sides it takes of one."""
    if opposition is None:
        return {name for name, _side in features.sides}
    return {side for name, side in features.sides if name == opposition}


def _features(text: str) -> Features:
    tokens = _tokens(text)
    words: set[str] = set()
    quantities: set[float] = set()
    negations = 0
    negated_until = -1
    sides = _sides(tokens)
    for index, token in enumerate(tokens):
        if token in NEGATIONS or token == "n't" or token.endswith("n't"):
            negations += 1
            negated_until = index + NEGATION_SCOPE
            continue
        quantity = _quantity(token, tokens[index + 1] if index + 1 < len(tokens) else None)
        if quantity is not None:
            if index > negated_until:
                quantities.add(quantity)
            continue
        word = _normalise(token)
        if word and word not in STOPWORDS and not _is_unit(word):
            words.add(word)
    # "unreachable" against "reachable": a negating prefix counts as a negation,
    # and the stem still counts as the shared topic word.
    for word in list(words):
        if word.startswith("un") and len(word) > 5:
            words.discard(word)
            words.add(_normalise(word[2:]))
            negations += 1
    return Features(frozenset(words), negations % 2 == 1, frozenset(quantities), frozenset(sides))


# The same stored observations are compared again with every new one: room
# for the 50 candidates of some 300 services and categories, as long as
# observations are short (text_cache.py). Smaller, a stream's markers for
# more services than it holds would each work out all 50 of their
# candidates again (1 ms a marker).
features = TextCache(_features, MATCHER_CACHE_CHARS)


def _tokens(text: str) -> list[str]:
    text = text.lower().replace("no longer", "no").replace("--", " ")
    text = re.sub(r"(\w)n't\b", r"\1 n't", text)
    return [t.strip(".:") for t in WORD.findall(text) if t.strip(".:")]


def _sides(tokens: list[str]) -> set[tuple[str, str]]:
    """The (opposition, side) pairs of OPPOSITIONS the tokens take."""
    sides = set()
    for index, token in enumerate(tokens):
        opposition = OPPOSITIONS.get(token[:-1] if token.endswith("days") else token)
        if opposition is None:
            continue
        name, side = opposition
        if name == ORDER:
            of = next((word for word in map(_normalise, tokens[index + 1:]) if word and word not in STOPWORDS), None)
            if of is None:
                continue
            name = f"{ORDER} {of}"
        sides.add((name, side))
    return sides


def _quantity(token: str, following: Optional[str]) -> Optional[float]:
    found = NUMBER_WITH_UNIT.match(token)
    if not found:
        return None
    value, unit = float(found.group(1)), found.group(2)
    unit = SYNONYMS.get(unit, unit) if unit else (SYNONYMS.get(following or "", following) if following else None)
    if unit == "h":
        unit = "hour"
    return value * UNIT_SECONDS.get(unit, 1) if unit in UNIT_SECONDS else value


def _is_unit(word: str) -> bool:
    return word in UNIT_SECONDS


def _normalise(token: str) -> str:
    token = SYNONYMS.get(token, token)
    for suffix, replacement in (("ies", "y"), ("ing", ""), ("ed", ""), ("es", ""), ("s", "")):
        if token.endswith(suffix) and len(token) - len(suffix) >= 3:
            stem = token[: len(token) - len(suffix)] + replacement
            return SYNONYMS.get(stem, stem)
    return token
