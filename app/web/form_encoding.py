"""A dashboard form must come as UTF-8 text.

Werkzeug reads a form that is not without a word: one whose bytes are not
UTF-8 comes out empty (every field missing, and the view blames the first
it needs), and a percent-escape that decodes to no UTF-8 (``%FF``) is kept
as its three characters, which a view would store. Browsers send UTF-8;
a script that does not is told so, and nothing is changed.
"""
from __future__ import annotations

from typing import Optional
from urllib.parse import parse_qsl

from flask import request

FORM = "application/x-www-form-urlencoded"
NOT_UTF8 = ("Nothing was changed: the form was not sent as UTF-8 text ({where}). A browser sends it so; "
            "a script must encode the fields as UTF-8, percent-escaped.")


def form_encoding_problem() -> Optional[str]:
    """What is wrong with the request's form's encoding, or None."""
    if request.mimetype != FORM:
        return None
    body = request.get_data(cache=True)   # what form parsing then reads
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        return NOT_UTF8.format(where=f"byte {exc.start} of the body is not")
    try:
        parse_qsl(text, keep_blank_values=True, encoding="utf-8", errors="strict")
    except UnicodeDecodeError:
        return NOT_UTF8.format(where="a percent-escaped field is not")
    return None
