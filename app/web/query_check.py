"""The API refuses a query parameter its operation does not take, and one
given twice: a misspelt filter (``?staus=failed``) or one an operation does
not have would otherwise be left out without a word, and the unfiltered list
taken for a filtered one. What each operation takes is what the OpenAPI
document says it takes, the host's and every plugin's operations alike; an
operation the document leaves out is not checked."""
from __future__ import annotations

from typing import Any, Optional

from flask import request

from app.web.openapi import cached_document, openapi_path

SHOWN_NAME = 40   # characters of a name a message repeats


def query_problem() -> Optional[str]:
    """What is wrong with the request's query parameters, or None."""
    if not request.args or request.url_rule is None:
        return None
    taken = _query_parameters(request.url_rule.rule, request.method)
    if taken is None:
        return None
    unknown = sorted(name for name in request.args if name not in taken)
    if unknown:
        allowed = f"allowed: {', '.join(sorted(taken))}" if taken else "this operation takes none"
        return f"unknown query parameter(s): {', '.join(name[:SHOWN_NAME] for name in unknown)}; {allowed}"
    for name in request.args:
        given = len(request.args.getlist(name))
        if given > 1 and taken[name].get("schema", {}).get("type") != "array":
            return f"query parameter {name} is given {given} times; give it once"
    return None


def _query_parameters(rule: str, method: str) -> Optional[dict[str, dict[str, Any]]]:
    """The query parameters the operation at ``rule`` takes, by name; None
    if the document has no such operation."""
    item = cached_document()["paths"].get(openapi_path(rule))
    operation = item and item.get("get" if method == "HEAD" else method.lower())
    if not isinstance(operation, dict):
        return None
    parameters = [*item.get("parameters", []), *operation.get("parameters", [])]
    return {parameter["name"]: parameter for parameter in parameters
            if isinstance(parameter, dict) and parameter.get("in") == "query"}
