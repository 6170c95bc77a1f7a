"""Forms whose typed text a refusal must not lose.

A form is refused after a redirect as a rule (a flashed message on the page
it came from), which empties its fields: nothing is lost when they hold a
choice or two, but a request typed at length for Run now would be. A view
whose form holds such text registers how to show its page again with the
values sent (status 400); the refusal of a stale page (an expired CSRF
token: the operator logged in again in another tab) uses it too.
"""
from __future__ import annotations

from typing import Callable, Optional

from flask import Response, request

from app.web.origins import from_this_origin

_PAGES: dict[str, Callable[[str], Response]] = {}


def keeps_typed_text(endpoint: str, page: Callable[[str], Response]) -> None:
    """``page(message)``: the form's page with ``message`` shown and the
    fields as sent, for a refused POST to ``endpoint``."""
    _PAGES[endpoint] = page


def page_with_typed_text(message: str) -> Optional[Response]:
    """The page again for a refused form that keeps its text, else ``None``.
    Only for a form sent from the service's own page: one another site
    forged (refused for its missing CSRF token) would otherwise come back
    filled in with its text, and a valid token, one click from running."""
    page = _PAGES.get(request.endpoint)
    return page(message) if page is not None and from_this_origin() else None
