"""Full page or HTMX fragment from the same view."""
from __future__ import annotations

import functools
from typing import Callable

from flask import make_response, redirect, render_template, request, url_for

# What a polled block sends: a key of its page's filter choices (app/web/filter_options.py).
# A header, not a query argument: pager links that push their URL would put it in the address bar.
CHOICES_HEADER = "X-Claudeops-Choices"


def is_htmx() -> bool:
    """An HTMX request that wants a fragment. Restoring history (Back, after
    htmx's snapshot cache was evicted) also sends HX-Request but needs the
    whole page, which htmx swaps into <body>."""
    return (request.headers.get("HX-Request") == "true"
            and request.headers.get("HX-History-Restore-Request") != "true")


def render_page(page_template: str, fragment_template: str, **context):
    """The fragment for an HTMX request (polling, filters), the full page
    otherwise; ``Vary`` keeps caches from mixing the two."""
    template = fragment_template if is_htmx() else page_template
    response = make_response(render_template(template, **context))
    # The filters' choices too: a fragment brings them when they have changed.
    response.vary.update(("HX-Request", "HX-History-Restore-Request", CHOICES_HEADER))
    return response


def fragment_of(endpoint: str) -> Callable:
    """For a view that only ever answers HTMX with a piece of a page (a
    row, its edit form): its URL opened any other way (a new tab, a
    bookmark, a link copied from the page's source) is sent to the page
    the piece belongs to, ``endpoint`` with the same URL values, rather
    than shown bare, without the layout, its styles or its scripts."""
    def decorate(view: Callable) -> Callable:
        @functools.wraps(view)
        def answer(**values):
            if not is_htmx():
                return redirect(url_for(endpoint, **values))
            return view(**values)
        return answer
    return decorate
