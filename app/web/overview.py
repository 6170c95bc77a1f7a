"""The Overview page: cards from every plugin."""
from __future__ import annotations

import dataclasses
import logging

from flask import Blueprint, url_for
from werkzeug.routing import BuildError

from app.plugin_fault_log import log_fault
from app.plugin_types import OverviewCard
from app.plugins import of_type, results_by_plugin
from app.web.htmx import render_page

log = logging.getLogger(__name__)

overview = Blueprint("overview", __name__)

HOOK = "claudeops_overview_cards"


@overview.get("/")
def index():
    cards = [_with_working_link(plugin, card) for plugin, result in results_by_plugin(HOOK)
             for card in of_type(plugin, HOOK, result, OverviewCard)]
    cards.sort(key=lambda c: c.position)
    # The cards poll themselves: an HTMX request gets them alone.
    return render_page("overview.html", "_overview_cards.html", cards=cards)


def _with_working_link(plugin: str, card: OverviewCard) -> OverviewCard:
    """The card, without its link if the link has no URL: one card's typo
    must not cost the operator the whole page. Said as any other plugin
    fault is (the page polls: not every few seconds)."""
    if card.link_endpoint is None:
        return card
    try:
        url_for(card.link_endpoint)
    except BuildError:
        log_fault(log, plugin, HOOK, "link", "plugin %s: overview card %r links to endpoint %r, which has no URL "
                  "(no such view, or it needs arguments); shown without the link", plugin, card.title,
                  card.link_endpoint)
        return dataclasses.replace(card, link_endpoint=None)
    return card
