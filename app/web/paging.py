"""The dashboard's pagers.

``page_number``: the ``?page=`` of the lists that page by offset (memories
are edited and re-ordered; cooldown records are few).

``newest_first``: the pages of an append-only log (events), by id rather
than by offset: ``?before=ID`` shows the rows older than ID, ``?after=ID``
the rows just newer. A page stays put while new rows arrive (a 5 s poll of
an older page shows the same rows, an "older" link skips none and repeats
none), and a page deep in a million rows costs one index range, not a walk
past every row before it.

Both are forgiving, as a link a person may edit should be: a number that is
not one is the first page, and the page says so (app/web/ignored_args.py).
Both are bounded, so that every driver takes the value (SQLite's integers
are signed 64-bit; beyond that the driver raises instead of finding no rows).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from sqlalchemy import ColumnElement, Select, select

from app.extensions import db
from app.web.apiutil import MAX_ID, MAX_OFFSET
from app.web.ignored_args import id_arg, ignore, int_arg


def page_number(page_size: int) -> int:
    page = int_arg("page")
    if page is not None and page < 1:
        ignore(f"page={page}, which is no page (the first is 1); the first page is shown")
    return min(max(page or 1, 1), MAX_OFFSET // page_size + 1)


@dataclass(frozen=True)
class LogPage:
    rows: list
    newer: Optional[dict]   # the query arguments of the page of newer rows; None on the newest
    older: Optional[dict]   # … of older rows; None on the oldest
    position: dict          # this page's own arguments, which its poll keeps


def _id_arg(name: str) -> Optional[int]:
    value = id_arg(name)
    return None if value is None else min(value, MAX_ID)


def newest_first(query: Select, id_column: ColumnElement, size: int) -> LogPage:
    """One page of ``query``'s rows, newest (highest id) first, where the
    request's ``before`` or ``after`` says."""
    before, after = _id_arg("before"), _id_arg("after")
    if before is not None and after is not None:
        ignore(f"after={after}, given with before={before}: the page is shown by before")
        after = None
    if after is not None:
        # The ``size`` rows just above ``after``, read upwards, shown newest first.
        rows = db.session.scalars(query.where(id_column > after).order_by(id_column.asc()).limit(size + 1)).all()
        has_newer, rows = len(rows) > size, rows[:size][::-1]
        has_older = _any(query.where(id_column <= after))
        # Up to the newest rows, it is the newest page: its poll shows what arrives.
        position = {"after": after} if has_newer else {}
    else:
        bounded = query if before is None else query.where(id_column < before)
        rows = db.session.scalars(bounded.order_by(id_column.desc()).limit(size + 1)).all()
        has_older, rows = len(rows) > size, rows[:size]
        has_newer = before is not None and _any(query.where(id_column >= before))
        position = {} if before is None else {"before": before}
    # An empty page past the newest rows leads to the newest; one older than
    # every row (an edited link, or rows retention deleted under an open page)
    # to the oldest rows, the page just newer than it.
    if rows:
        newer_rows = {"after": rows[0].id}
    else:
        newer_rows = {} if before is None else {"after": max(before - 1, 0)}
    newer = newer_rows if has_newer else None
    older = ({"before": rows[-1].id} if rows else {}) if has_older else None
    return LogPage(rows, newer, older, position)


def _any(query: Select) -> bool:
    return bool(db.session.scalar(select(query.exists())))
