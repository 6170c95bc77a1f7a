"""Where a marker's text (an event's message, a memory's observation, a
cooldown report's message, an escalation's reason) ends: at the end of its
line, or at the next marker on it.

The next marker is one of the tags the installed plugins declare
(``claudeops_marker_tags``, given to every hook of a session as ``run.marker_tags``),
not anything shaped like one: an agent quotes ``[HTTP:503]`` or
``[WARN: disk]`` from what it read, and an event "got [HTTP:503] from
upstream" must keep its status and the rest of its words.

Only a tag that begins like a marker with fields, ``[`` and capital letters
(digits, ``_``) and ``:``, ends text: ``[TODO:``, or a narrower
``[TODO:HIGH:``, which ends it only where the whole tag is. Another
(``[ESCALATE]``, which is a marker only at the start of a line, where no
text it could end is; or a plugin's ``TODO:`` or ``[``, which would cut
every marker's words) only chooses the text blocks its plugin is given:
"no need to [ESCALATE] yet" in an event keeps its last words.
"""
from __future__ import annotations

import re
from functools import lru_cache
from typing import Iterable

# The tags of the markers the service's own plugins read; what a parser ends
# text at when it is not told the installed plugins' (tests, scripts).
# tests/test_marker_text.py holds it to the plugins' own declarations.
BUILT_IN_TAGS = ("[COOLDOWN:", "[ESCALATE]", "[EVENT:", "[MEMORY:", "[OUTCOME:")
# What a tag that ends text begins with: the start of a marker with fields.
ENDS_TEXT = re.compile(r"\[[A-Z][A-Z0-9_]*:")
# Where str.splitlines ends a line, as the memory parser reads its lines:
# "\r\n" ends at its "\r", a Unicode line separator too.
LINE_END = r"[\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029]"


@lru_cache(maxsize=64)
def _text_end(tags: tuple[str, ...]) -> re.Pattern[str]:
    # Longest first, so that of two tags one of which begins the other the
    # longer is the one found (it makes no difference to where text ends).
    ends = sorted({tag for tag in tags if ENDS_TEXT.match(tag)}, key=len, reverse=True)
    return re.compile("|".join([*map(re.escape, ends), LINE_END]))


def text_end(tags: Iterable[str] = BUILT_IN_TAGS) -> re.Pattern[str]:
    """A pattern whose first match from a marker's end is where its text
    ends: a line's end, or one of ``tags`` that begins like a marker."""
    return _text_end(tuple(tags))


def marker_text(text: str, start: int, tags: Iterable[str] = BUILT_IN_TAGS) -> str:
    """``text`` from ``start`` up to the next of ``tags`` (those that begin
    like a marker) or the end of the line, whichever comes first; not
    stripped. Linear in what it returns, as long as ``tags`` hold the
    caller's own: a line of many markers costs its length, not its square."""
    end = text_end(tags).search(text, start)
    return text[start:end.start() if end else len(text)]
