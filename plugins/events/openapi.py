"""``GET /api/v1/events`` in the OpenAPI document (plugins/events/views.py)."""
from __future__ import annotations

from app.plugin_types import OpenApiPaths
from app.web.apidoc import PAGINATION, TIMESTAMP, choice, error, integer, nullable, obj, page_of, query, ref, \
    response, text
from plugins.events.markers import LEVEL_ALIASES, LEVELS

SCHEMAS = {
    "Event": obj({
        "id": integer(1),
        "session_id": nullable(integer(1, description="the session that reported it; null: the service itself")),
        "tier": {"type": ["integer", "null"]},
        "level": {"type": "string", "enum": list(LEVELS)},
        "service": {"type": ["string", "null"]}, "message": {"type": "string"}, "created_at": TIMESTAMP,
    }),
}


def openapi_paths() -> OpenApiPaths:
    return OpenApiPaths(schemas=SCHEMAS, paths={
        "/events": {"get": {
            "summary": "Events, newest first", "tags": ["events"], "operationId": "listEvents",
            "parameters": [
                choice("level", LEVEL_ALIASES, "one level, by any of its names (warn for warning, …)"),
                query("service", text(), "one service (compared in lower case)"), *PAGINATION],
            "responses": {"200": response("a page of events", page_of("events", ref("Event"))),
                          "400": error("level, limit or offset is invalid")}}},
    })
