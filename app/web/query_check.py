"""The API refuses a query parameter its operation does not take, and one
given twice: a misspelt filter (``?staus=failed``) or one an operation does
not have would otherwise be left out without a word, and the unfiltered list
taken for a filtered one. What each operation takes is what the OpenAPI
document says it takes, the host's and every plugin's operations alike; an
operation the document leaves out is not checked, nor is the open health
check, which monitors ask with a cache-buster of their own (``?_=<time>``).

For the same reason an operation the document gives no request body (a
stop, a delete, a read) refuses one: ``{"force": true}`` sent with a stop,
or a filter sent in a read's body, would be left out without a word. No
body, or an empty JSON object (what some clients send with every POST), is
taken."""
from __future__ import annotations

from typing import Any, Optional

from flask import request

from app import strict_json
from app.web.openapi import OPEN_OPERATIONS, cached_document, openapi_path

SHOWN_NAME = 40   # characters of a name a message repeats


def query_problem() -> Optional[str]:
    """What is wrong with the request's query parameters, or None."""
    if not request.args:
        return None
    taken = _query_parameters()
    if taken is None:
        return None
    unknown = sorted(name for name in request.args if name not in taken)
    if unknown:
        allowed = f"allowed: {', '.join(sorted(taken))}" if taken else "this operation takes none"
        return f"unknown query parameter(s): {', '.join(_shown(name) for name in unknown)}; {allowed}"
    for name in request.args:
        given = len(request.args.getlist(name))
        if given > 1 and not _is_array(taken[name]):
            return f"query parameter {name} is given {given} times; give it once"
    return None


def _shown(name: str) -> str:
    return "(a parameter with no name)" if not name else name[:SHOWN_NAME]


def _is_array(parameter: dict[str, Any]) -> bool:
    """A list-valued parameter (``?id=1&id=2``): its type "array", or one of its types (nullable)."""
    kind = parameter.get("schema", {}).get("type")
    return kind == "array" or (isinstance(kind, list) and "array" in kind)


def body_problem() -> Optional[str]:
    """What is wrong with the request's body, sent to an operation that takes none, or None."""
    found = _operation()
    if found is None or "requestBody" in found[1]:
        return None   # not read here: the view reads the body it takes, and judges it itself
    # Within MAX_CONTENT_LENGTH: a larger body was refused before anything read it (app/web/request_body.py).
    data = request.get_data(cache=True)
    if not data.strip():
        return None
    try:
        if strict_json.loads(data) == {}:
            return None
    except (ValueError, RecursionError):
        pass
    return "this operation takes no request body (send none, or {}); nothing was done"


def _operation() -> Optional[tuple[dict[str, Any], dict[str, Any]]]:
    """The request's operation in the document, with its path item; None if
    the document has no such operation, or it is open (the health check)."""
    if request.url_rule is None:
        return None
    path = openapi_path(request.url_rule.rule)
    verb = "get" if request.method == "HEAD" else request.method.lower()
    item = cached_document()["paths"].get(path)
    operation = item and item.get(verb)
    if not isinstance(operation, dict) or (path, verb) in OPEN_OPERATIONS:
        return None
    return item, operation


def _query_parameters() -> Optional[dict[str, dict[str, Any]]]:
    """The query parameters the request's operation takes, by name; None
    if the document has no such operation."""
    found = _operation()
    if found is None:
        return None
    item, operation = found
    parameters = [*item.get("parameters", []), *operation.get("parameters", [])]
    return {parameter["name"]: parameter for parameter in parameters
            if isinstance(parameter, dict) and parameter.get("in") == "query"}
