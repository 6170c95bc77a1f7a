"""``GET /api/v1/events`` in the OpenAPI document (plugins/events/views.py)."""
from __future__ import annotations

from app.plugin_types import OpenApiPaths
from app.web.apiutil import MAX_ID
from app.web.apidoc import PAGINATION, TIMESTAMP, choice, error, integer, nullable, obj, page_of, query, ref, \
    response, text
from plugins.events.markers import LEVEL_ALIASES, LEVELS, MAX_MESSAGE_CHARS

SCHEMAS = {
    "Event": obj({
        "id": integer(1),
        "session_id": nullable(integer(1, description=(
            "the session it was reported in, by the agent or by the service (a notice of the session's "
            "failure or escalation); null: the service, of no session"))),
        "tier": {"type": ["integer", "null"]},
        "level": {"type": "string", "enum": list(LEVELS)},
        "service": {"type": ["string", "null"]},
        "message": {"type": "string", "maxLength": MAX_MESSAGE_CHARS,
                    "description": f"the marker's text; a longer one is cut to its first {MAX_MESSAGE_CHARS:,} "
                                   "characters"},
        "created_at": TIMESTAMP,
    }),
}


def openapi_paths() -> OpenApiPaths:
    return OpenApiPaths(schemas=SCHEMAS, paths={
        "/events": {"get": {
            "summary": "Events, newest first", "tags": ["events"], "operationId": "listEvents",
            "parameters": [
                choice("level", LEVEL_ALIASES, "one level, by any of its names (warn for warning, …)"),
                query("service", text(), "one service (compared in lower case); general: the events about no "
                                          "one service"),
                query("before", integer(0, MAX_ID), "only events older than this id (to walk back from the "
                                                    "last one seen); not with after"),
                query("after", integer(0, MAX_ID), "only events newer than this id: the `limit` just newer "
                                                   "(to read what arrived since the newest one seen, paging on "
                                                   "with the newest of each answer); not with before"),
                *PAGINATION],
            "responses": {"200": response("a page of events, newest first; `total` counts what the filters, "
                                          "before and after select", page_of("events", ref("Event"))),
                          "400": error("level, before, after, limit or offset is invalid, or both before and "
                                       "after are given")}}},
    })
