"""Filters whose choices grow with the rows: the services of the Events,
Memories and Cooldowns pages.

A page's filter form is drawn once; its rows are polled. A service seen
for the first time after the page was opened would be missing from the
Service filter until a reload. So the polled block sends, in a header, a
key of the choices the page shows, and a fragment whose choices differ
from it brings the filter again (templates/filter_select.html, swapped
out of band), the operator's choice kept. Not on every poll: a select
replaced while its list is open closes under the operator's pointer.
"""
from __future__ import annotations

import hashlib
import json
from typing import Iterable

from flask import request

from app.web.htmx import CHOICES_HEADER, is_htmx


def choices_key(choices: Iterable[str]) -> str:
    return hashlib.sha256(json.dumps(list(choices)).encode()).hexdigest()[:16]


def choices_state(choices: Iterable[str]) -> dict:
    """Template context: the polled block's ``hx-headers``, which send back
    the key of these choices, and whether this fragment must bring the
    filter again. One asked without the key (a filter change: the form is
    outside the block) brings it too, so that the key its block then sends
    is true. Pager links, inside the block, send the key as its polls do."""
    key = choices_key(choices)
    return {"choices_headers": json.dumps({CHOICES_HEADER: key}),
            "refresh_choices": is_htmx() and request.headers.get(CHOICES_HEADER) != key}
