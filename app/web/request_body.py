"""Request bodies the service refuses before anything reads them: these
checks run before the CSRF check, which reads a form's fields first.

A body sent without its length (chunked) is read here, whole, up to
MAX_REQUEST_BYTES: werkzeug stops reading one at the limit without a word,
and a view would take what came before it for all of it (an import half
done). One that reaches the limit is refused (413).

A dashboard form must come as UTF-8 text. Werkzeug reads one that is not
without a word: a form whose bytes are not UTF-8 comes out empty (every
field missing, and the view blames the first it needs), and a
percent-escape that decodes to no UTF-8 (``%FF``) is kept as its three
characters, which a view would store. Browsers send UTF-8; a script that
does not is told so (400), and nothing is changed.
"""
from __future__ import annotations

from typing import Optional
from urllib.parse import parse_qsl

from flask import Flask, request
from werkzeug.exceptions import BadRequest, RequestEntityTooLarge
from werkzeug.sansio.multipart import Data, Epilogue, Field, File, MultipartDecoder, NeedData

# The largest request body taken: a memory import of the most the web takes
# (1,000 memories, their history included) fits several times over. A larger
# one is refused (413) before it is read, not parsed whole in a worker first.
MAX_REQUEST_BYTES = 32 * 1024 * 1024
FORM = "application/x-www-form-urlencoded"
MULTIPART = "multipart/form-data"
NOT_UTF8 = ("Nothing was changed: the form was not sent as UTF-8 text ({where}). A browser sends it so; "
            "a script must {how}.")
PERCENT_ESCAPED = "encode the fields as UTF-8, percent-escaped"


class FormNotUtf8(BadRequest):
    """Answered within the dashboard's layout (app/web/__init__.py)."""


def register_body_checks(app: Flask, api_prefix: str) -> None:
    """To be called before the CSRF protection is registered."""
    app.config["MAX_CONTENT_LENGTH"] = MAX_REQUEST_BYTES

    @app.before_request
    def refuse_a_body_past_the_limit():
        if request.content_length is not None:
            # Also where no view reads it (a GET, a Stop): werkzeug refuses
            # one only as it is read, and the answer would not say why.
            if request.content_length > MAX_REQUEST_BYTES:
                raise RequestEntityTooLarge()
            return
        if "Transfer-Encoding" not in request.headers:
            return
        request.get_data(cache=True)   # what views and form parsing then read
        if request.stream.is_exhausted:
            raise RequestEntityTooLarge()

    @app.before_request
    def refuse_a_form_that_is_not_utf8():
        if request.method in ("GET", "HEAD", "OPTIONS"):
            return   # a body there is read by nothing
        if request.path == api_prefix or request.path.startswith(api_prefix + "/"):
            return   # the API takes JSON, and refuses a form by its type
        problem = form_encoding_problem()
        if problem is not None:
            raise FormNotUtf8(problem)


def form_encoding_problem() -> Optional[str]:
    """What is wrong with the request's form's encoding, or None."""
    if request.mimetype == MULTIPART:
        return _multipart_encoding_problem()
    if request.mimetype != FORM:
        return None
    body = request.get_data(cache=True)   # what form parsing then reads
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        return NOT_UTF8.format(where=f"byte {exc.start} of the body is not", how=PERCENT_ESCAPED)
    try:
        parse_qsl(text, keep_blank_values=True, encoding="utf-8", errors="strict")
    except UnicodeDecodeError:
        return NOT_UTF8.format(where="a percent-escaped field is not", how=PERCENT_ESCAPED)
    return None


# A multipart body up to this size (every form of text fields) is read here
# to check its fields' bytes; a larger one is an upload, whose files werkzeug
# spools to disk, and is not read into memory twice.
MULTIPART_READ_BYTES = 1024 * 1024
MULTIPART_HOW = "send each field of a multipart form as UTF-8"


def _multipart_encoding_problem() -> Optional[str]:
    """A multipart form's fields (not its files) as UTF-8: werkzeug decodes
    each one, and puts U+FFFD for what is not, without a word. A small body
    is read as sent; one werkzeug cannot read is left to it to refuse. A
    larger one (an upload) is judged by its fields as werkzeug decoded them:
    one holding U+FFFD is refused, the mark of bytes that were not UTF-8."""
    length = request.content_length
    if length is None or length > MULTIPART_READ_BYTES:
        marked = next((name for name, value in request.form.items(multi=True) if "\ufffd" in value), None)
        return None if marked is None else NOT_UTF8.format(
            where=f"the field {marked[:40]!r} holds U+FFFD, which stands for bytes that were not", how=MULTIPART_HOW)
    boundary = request.mimetype_params.get("boundary")
    if not boundary:
        return None
    try:
        decoder = MultipartDecoder(boundary.encode("latin-1"))
    except UnicodeError:   # a boundary werkzeug decoded from RFC 2231 (boundary*=UTF-8''…): not one it reads
        return None
    decoder.receive_data(request.get_data(cache=True))   # what form parsing then reads
    decoder.receive_data(None)
    field, chunks = None, []
    try:
        event = decoder.next_event()
        while not isinstance(event, (Epilogue, NeedData)):
            if isinstance(event, Field):
                field, chunks = event.name, []
            elif isinstance(event, File):
                field = None
            elif isinstance(event, Data) and field is not None:
                chunks.append(event.data)
                if not event.more_data:
                    try:
                        b"".join(chunks).decode("utf-8")
                    except UnicodeDecodeError:
                        return NOT_UTF8.format(where=f"the field {field[:40]!r} is not", how=MULTIPART_HOW)
            event = decoder.next_event()
    except ValueError:
        return None
    return None
