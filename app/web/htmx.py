"""Full page or HTMX fragment from the same view."""
from __future__ import annotations

from flask import make_response, render_template, request

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
