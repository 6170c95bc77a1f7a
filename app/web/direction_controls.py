"""Unicode's explicit direction controls, shown for what they are.

An embedding, override or isolate (U+202A to U+202E, U+2066 to U+2069) makes
a browser lay text out in another order than it is written: "restart db"
can read as something else, while the agent, which reads the characters in
their order, gets what was written ("Trojan Source", CVE-2021-42574). Agent
text is untrusted, and an operator reviewing what the agent learned must see
what it will read, so every value a dashboard template writes shows each of
them as its code point, "⟨U+202E⟩", in its place. The text stored, the API
and the prompt keep them as written.
"""
from __future__ import annotations

import re

from markupsafe import Markup

DIRECTION_CONTROL = re.compile("[\u202a-\u202e\u2066-\u2069]")


def _code_point(match: re.Match) -> str:
    return f"⟨U+{ord(match.group()):04X}⟩"


def shown(value):
    """Jinja's ``finalize``: ``value`` with its direction controls spelt out.
    The spelling holds nothing HTML treats specially, so it is as safe in an
    attribute or a textarea as in text, and markup already escaped stays so."""
    if not isinstance(value, str) or DIRECTION_CONTROL.search(value) is None:
        return value
    spelt = DIRECTION_CONTROL.sub(_code_point, str(value))
    return Markup(spelt) if isinstance(value, Markup) else spelt
