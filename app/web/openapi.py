"""``GET /api/v1/openapi.json``: the OpenAPI 3.1 document of the whole API,
assembled from what the host and every plugin declare through
``claudeops_openapi_paths``."""
from __future__ import annotations

import importlib.metadata
import logging
import re
from typing import Any

from flask import Blueprint, Flask, current_app

from app.plugin_fault_log import log_fault
from app.plugin_types import OpenApiPaths
from app.plugins import plugin_manager
from app.web import API_PREFIX, MAX_REQUEST_BYTES
from app.web.apidoc import ERROR_SCHEMA, ERROR_SCHEMA_NAME, error

log = logging.getLogger(__name__)

openapi_api = Blueprint("openapi_api", __name__)

OPENAPI_VERSION = "3.1.0"
# Methods Flask answers by itself for every rule; never documented.
IMPLICIT_METHODS = {"HEAD", "OPTIONS"}


@openapi_api.get("/openapi.json")
def document():
    return cached_document()


def cached_document() -> dict[str, Any]:
    """Built on first use, then kept: plugins and settings are fixed once
    the application exists."""
    doc = current_app.extensions.get("claudeops.openapi")
    if doc is None:
        doc = current_app.extensions["claudeops.openapi"] = build_document()
    return doc


def build_document() -> dict[str, Any]:
    paths: dict[str, Any] = {}
    schemas: dict[str, Any] = {ERROR_SCHEMA_NAME: ERROR_SCHEMA}
    for plugin_name, part in _contributions():
        clashes = sorted(set(part.paths) & set(paths)) + sorted(set(part.schemas) & set(schemas))
        if clashes:
            log.error("plugin %s declares %s, already in the OpenAPI document; its part is left out",
                      plugin_name, ", ".join(clashes))
            continue
        paths.update(part.paths)
        schemas.update(part.schemas)
    _declare_common_errors(paths)
    doc = {
        "openapi": OPENAPI_VERSION,
        "info": {
            "title": "Claude Ops API",
            "version": _version(),
            "description": "Sessions, configuration and what the plugins record. Errors are "
                           "`{\"error\": \"...\"}`; a method a path does not offer is answered 405, "
                           "an unknown path 404.",
        },
        "servers": [{"url": API_PREFIX}],
        "paths": dict(sorted(paths.items())),
        "components": {
            "schemas": dict(sorted(schemas.items())),
            "securitySchemes": {"bearerAuth": {
                "type": "http", "scheme": "bearer",
                "description": "the API token, where one is configured; without one the API is open on loopback"}},
        },
        # Either: no credentials (open on loopback) or the bearer token.
        "security": [{}, {"bearerAuth": []}],
    }
    missing = undocumented_rules(current_app, doc)
    if missing:
        log.warning("API endpoints without OpenAPI documentation: %s", ", ".join(missing))
    return doc


# Open whatever the configuration (see app/auth.py OPEN_ENDPOINTS).
OPEN_OPERATIONS = {("/health", "get")}
AUTH_ERRORS = {
    "401": error("authentication is on and the bearer token is missing or wrong (`WWW-Authenticate: Bearer`)"),
    "403": error("no credential is configured and the request came from another machine"),
    "429": error("over 10 wrong bearer tokens from this address within the minute: refused unchecked, the right "
                 "token too; `Retry-After` says when to try again"),
}
# What any operation may answer while the database takes nothing (app/web/__init__.py).
UNAVAILABLE = error("the database is unavailable just now (locked past the busy timeout, disk full, read-only, "
                    "or the server not answering); `Retry-After` says when to try again")


TOO_LARGE = error(f"the request body is larger than the {MAX_REQUEST_BYTES // (1024 * 1024)} MiB the service takes; "
                  "nothing was done")
TAKES_A_BODY = ("post", "put", "patch")
# What every operation answers before its view runs (app/web/query_check.py).
UNTAKEN_QUERY = error("a query parameter the operation does not take, or one given twice; nothing was done")
# … and of one that takes no body, a body (app/web/query_check.py).
UNTAKEN_QUERY_OR_BODY = error("a query parameter the operation does not take, one given twice, or a request body "
                              "(it takes none; {} is taken as none); nothing was done")


def _declare_common_errors(paths: dict[str, Any]) -> None:
    """What app/auth.py answers before any view runs, on every operation it
    guards (the health check needs nothing), what every operation answers
    for a query parameter it does not take and while the database is
    unavailable, and what one that takes a body answers for one over the
    limit."""
    for path, item in paths.items():
        for method, operation in item.items():
            if not isinstance(operation, dict) or "responses" not in operation:
                continue
            if (path, method) in OPEN_OPERATIONS:
                operation["security"] = [{}]
            else:
                for status, answer in AUTH_ERRORS.items():
                    operation["responses"].setdefault(status, answer)
            if (path, method) not in OPEN_OPERATIONS:   # a monitor's cache-buster is let be (query_check.py)
                operation["responses"].setdefault("400", UNTAKEN_QUERY if "requestBody" in operation
                                                  else UNTAKEN_QUERY_OR_BODY)
            operation["responses"].setdefault("503", UNAVAILABLE)
            if method in TAKES_A_BODY:
                operation["responses"].setdefault("413", TOO_LARGE)


def _contributions() -> list[tuple[str, OpenApiPaths]]:
    """Every plugin's part, by plugin name, in the order plugins were
    registered (the host and built-ins first, so on a clash the newcomer is
    the one left out); one that raises or returns something else is logged
    and left out."""
    parts = []
    for impl in plugin_manager().hook.claudeops_openapi_paths.get_hookimpls():
        try:
            result = impl.function()
        except Exception as exc:
            log_fault(log, impl.plugin_name, "claudeops_openapi_paths", type(exc).__name__,
                      "plugin %s failed in claudeops_openapi_paths", impl.plugin_name, exc_info=True)
            continue
        if isinstance(result, dict):
            result = OpenApiPaths(paths=result)
        if result is None:
            continue
        if not isinstance(result, OpenApiPaths):
            log_fault(log, impl.plugin_name, "claudeops_openapi_paths", "wrong type",
                      "plugin %s returned %r from claudeops_openapi_paths; expected OpenApiPaths or a dict",
                      impl.plugin_name, type(result).__name__, level=logging.ERROR)
            continue
        parts.append((impl.plugin_name, result))
    return parts


def openapi_path(rule: str) -> str:
    """``/api/v1/memories/<int:memory_id>`` → ``/memories/{memory_id}``."""
    return re.sub(r"<(?:[^:<>]+:)?([^<>]+)>", r"{\1}", rule[len(API_PREFIX):])


def undocumented_rules(app: Flask, doc: dict) -> list[str]:
    """``METHOD /api/v1/...`` of every URL rule the document leaves out."""
    missing = []
    for rule in app.url_map.iter_rules():
        if not rule.rule.startswith(API_PREFIX + "/"):
            continue
        item = doc["paths"].get(openapi_path(rule.rule), {})
        for method in sorted((rule.methods or set()) - IMPLICIT_METHODS):
            if method.lower() not in item:
                missing.append(f"{method} {rule.rule}")
    return missing


def _version() -> str:
    try:
        return importlib.metadata.version("claudeops")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"
