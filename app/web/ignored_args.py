"""What of a dashboard address was ignored, said on the page it shows.

The dashboard's filters and pagers are forgiving, as a link a person may
edit or keep should be: a value it does not know (a level misspelt, a page
that is no number, a category of a bookmark from before) is left out, and
the page shows what it would without it. It says so, above the page, rather
than showing an unfiltered list as if filtered. (The API refuses such a
value with a 400 that names it.)
"""
from __future__ import annotations

from typing import Optional

from flask import has_request_context, request

from app.plain_numbers import whole_number

# Kept with the request, not in ``g``: an application context (and its ``g``)
# may outlive a request, as in a script or a test that holds one open.
_KEY = "claudeops.ignored_args"


def ignore(message: str) -> None:
    """``message`` (what was ignored, and what is shown instead) said on this page."""
    request.environ.setdefault(_KEY, []).append(message)


def ignored() -> list[str]:
    return request.environ.get(_KEY, []) if has_request_context() else []


def int_arg(name: str) -> Optional[int]:
    """The query argument ``name`` as an integer; one that is not one is
    ignored, and said to be."""
    raw = request.args.get(name)
    if raw is None or raw == "":
        return None
    try:
        return whole_number(raw)
    except ValueError:
        ignore(f"{name}={raw[:40]!r}, which is not a number; the page is shown without it")
        return None


def id_arg(name: str, lowest: int = 0) -> Optional[int]:
    """The query argument ``name`` as a row's id to page from; one that is no
    number, or below ``lowest`` (below every id), is ignored, and said to be."""
    value = int_arg(name)
    if value is not None and value < lowest:
        ignore(f"{name}={value}, which is below every id; the page is shown without it")
        return None
    return value
