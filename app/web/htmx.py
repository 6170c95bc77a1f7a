"""Full page or HTMX fragment from the same view."""
from __future__ import annotations

from flask import make_response, render_template, request


def is_htmx() -> bool:
    return request.headers.get("HX-Request") == "true"


def render_page(page_template: str, fragment_template: str, **context):
    """The fragment for an HTMX request (polling, filters), the full page
    otherwise; ``Vary`` keeps caches from mixing the two."""
    template = fragment_template if is_htmx() else page_template
    response = make_response(render_template(template, **context))
    response.vary.add("HX-Request")
    return response
