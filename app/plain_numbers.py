"""Numbers as people and clients write them: ASCII digits, a sign, and for a
decimal a point and an exponent.

Python's ``int()`` and ``float()`` read more than that: "1_0" (as 10), other
scripts' digits ("٣" as 3), and ``float()`` "nan" and "infinity", none of
which a setting, a query argument or a form's field is meant to be; and
``int()`` refuses more than 4,300 digits with an error that says nothing of
the number. Every place the service reads a number from text reads it here,
so that "1_0" is refused alike by a setting, the API and the dashboard.
"""
from __future__ import annotations

import re

WHOLE_NUMBER = re.compile(r"[+-]?[0-9]+")
DECIMAL_NUMBER = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
# Past every bound the service checks, and past the 2**63 - 1 a database's
# integer column holds. A number of more digits is read as this, on the side
# of its sign, so that the bound checked next refuses it by name ("must be at
# most …"), however many digits it has.
BEYOND_EVERY_BOUND = 10**20
_MOST_DIGITS = len(str(BEYOND_EVERY_BOUND)) - 1


def is_whole_number(text: str) -> bool:
    return WHOLE_NUMBER.fullmatch(text) is not None


def whole_number(text: str) -> int:
    """``text`` as a whole number, or ``ValueError``. One beyond 20 digits is
    read as ``BEYOND_EVERY_BOUND`` (negated for a negative one), for the
    caller's bounds to refuse."""
    if not is_whole_number(text):
        raise ValueError("must be a whole number")
    digits = text.lstrip("+-").lstrip("0") or "0"
    value = int(digits) if len(digits) <= _MOST_DIGITS else BEYOND_EVERY_BOUND
    return -value if text.startswith("-") else value


def decimal_number(text: str) -> float:
    """``text`` as a decimal number, or ``ValueError``. One too large for a
    float is infinite, for the caller's bounds (or ``math.isfinite``) to refuse."""
    if DECIMAL_NUMBER.fullmatch(text) is None:
        raise ValueError("must be a number")
    return float(text)
