"""``/api/v1/incidents`` in the host's OpenAPI document (views.py)."""
from __future__ import annotations

from app.plugin_types import OpenApiPaths
from app.web.apidoc import (PAGINATION, TIMESTAMP, choice, error, id_parameter, integer, nullable, obj, page_of,
                            query, ref, response, text)
from claudeops_incidents.markers import SEVERITIES
from claudeops_incidents.models import STATUSES

SCHEMAS = {
    "Incident": obj({
        "id": integer(1), "service": {"type": "string"},
        "severity": {"type": "string", "enum": list(SEVERITIES)},
        "status": {"type": "string", "enum": list(STATUSES)},
        "summary": {"type": "string", "description": "the latest word on it"},
        "resolution": {"type": ["string", "null"]},
        "updates": integer(0, description="markers that repeated or changed it while open"),
        "tier": {"type": ["integer", "null"]},
        "opened_at": TIMESTAMP, "updated_at": TIMESTAMP, "resolved_at": nullable(TIMESTAMP),
        "opened_session_id": {"type": ["integer", "null"]}, "resolved_session_id": {"type": ["integer", "null"]},
    }),
}


def openapi_paths() -> OpenApiPaths:
    return OpenApiPaths(schemas=SCHEMAS, paths={
        "/incidents": {"get": {
            "summary": "Incidents: open ones first, most severe first, then the newest", "tags": ["incidents"],
            "operationId": "listIncidents",
            "parameters": [choice("status", STATUSES, "open or resolved"),
                           choice("severity", SEVERITIES, "one severity"),
                           query("service", text(), "one service"), *PAGINATION],
            "responses": {"200": response("a page of incidents", page_of("incidents", ref("Incident"))),
                          "400": error("status, severity, limit or offset is invalid")}}},
        "/incidents/{incident_id}": {"get": {
            "summary": "One incident", "tags": ["incidents"], "operationId": "getIncident",
            "parameters": [id_parameter("incident_id", "incident")],
            "responses": {"200": response("the incident", ref("Incident")), "404": error("no such incident")}}},
    })
