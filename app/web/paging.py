"""The dashboard's ``?page=`` number, for the lists that page by offset.

Forgiving, as a link a person may edit should be: anything that is not a
whole number is the first page. Bounded, so that the offset stays within
what every driver takes (SQLite's is a signed 64-bit integer; beyond it the
driver raises instead of finding no rows): a page past the bound is as
empty as any page past the last row.
"""
from __future__ import annotations

from flask import request

from app.web.apiutil import MAX_OFFSET


def page_number(page_size: int) -> int:
    page = request.args.get("page", 1, type=int) or 1
    return min(max(page, 1), MAX_OFFSET // page_size + 1)
