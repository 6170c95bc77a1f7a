"""The Overview page: cards from every plugin."""
from __future__ import annotations

import dataclasses
import logging

from flask import Blueprint, url_for
from werkzeug.routing import BuildError

from app.plugin_types import OverviewCard
from app.plugins import collect
from app.web.htmx import render_page

log = logging.getLogger(__name__)

overview = Blueprint("overview", __name__)


@overview.get("/")
def index():
    cards = [_with_working_link(card) for card in collect("claudeops_overview_cards", OverviewCard)]
    cards.sort(key=lambda c: c.position)
    # The cards poll themselves: an HTMX request gets them alone.
    return render_page("overview.html", "_overview_cards.html", cards=cards)


def _with_working_link(card: OverviewCard) -> OverviewCard:
    """The card, without its link if the link has no URL: one card's typo
    must not cost the operator the whole page."""
    if card.link_endpoint is None:
        return card
    try:
        url_for(card.link_endpoint)
    except BuildError:
        log.warning("overview card %r links to endpoint %r, which has no URL (no such view, or it needs "
                    "arguments); shown without the link", card.title, card.link_endpoint)
        return dataclasses.replace(card, link_endpoint=None)
    return card
