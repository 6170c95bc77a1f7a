"""The Overview page: cards from every plugin."""
from __future__ import annotations

from flask import Blueprint, render_template

from app.plugin_types import OverviewCard
from app.plugins import call_each, flatten

overview = Blueprint("overview", __name__)


@overview.get("/")
def index():
    cards = [c for c in flatten(call_each("claudeops_overview_cards")) if isinstance(c, OverviewCard)]
    cards.sort(key=lambda c: c.position)
    return render_template("overview.html", cards=cards)
