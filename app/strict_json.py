"""JSON whose objects give each key once. Python's reader keeps the last of
a key given twice (``{"prompt": "x", "prompt": "y"}`` is ``y``), so what
the sender meant by the first is lost without a word; the API refuses a
query parameter given twice for the same reason."""
from __future__ import annotations

import json
from typing import Any


class DuplicateKey(ValueError):
    """An object gives a key twice; the message names it."""


def loads(text: str | bytes) -> Any:
    """``json.loads``, raising ``DuplicateKey`` for a key an object gives twice."""
    return json.loads(text, object_pairs_hook=_once_each)


def _once_each(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for key, value in pairs:
        if key in found:
            raise DuplicateKey(f"the key {key[:40]!r} is given twice in one object; give it once")
        found[key] = value
    return found
