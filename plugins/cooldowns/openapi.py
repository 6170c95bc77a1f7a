"""``GET /api/v1/cooldowns`` in the OpenAPI document (plugins/cooldowns/views.py)."""
from __future__ import annotations

from app.plugin_types import OpenApiPaths
from app.web.apidoc import PAGINATION, TIMESTAMP, array, choice, error, integer, nullable, obj, page_of, query, \
    ref, response, text
from plugins.cooldowns.limits import ACTION_ALIASES, ACTIONS
from plugins.cooldowns.models import HOOK, MARKER, OUTCOMES

USAGE = obj({
    "used": integer(0), "limit": integer(0), "window": {"type": "string", "description": "like 4h"},
    "remaining": integer(0), "at_limit": {"type": "boolean"}, "near_limit": {"type": "boolean"},
    "next_free_at": nullable(TIMESTAMP | {"description": "when one more is allowed; null if now (or never)"}),
})

SCHEMAS = {
    "CooldownLimit": obj({"count": integer(0, description="0 forbids the action"),
                          "window": {"type": "string", "description": "like 4h"},
                          "window_seconds": integer(1)}),
    "CooldownAction": obj({
        "id": integer(1), "service": {"type": "string"}, "action": {"type": "string", "enum": list(ACTIONS)},
        "outcome": {"type": "string", "enum": list(OUTCOMES)},
        "counted": {"type": "boolean", "description": "denied actions are shown, never counted"},
        "source": {"type": "string", "enum": [HOOK, MARKER]},
        "command": {"type": ["string", "null"]}, "message": {"type": ["string", "null"]},
        "session_id": {"type": ["integer", "null"]}, "tier": {"type": ["integer", "null"]},
        "created_at": TIMESTAMP, "reported_at": nullable(TIMESTAMP),
    }),
}

# A page of actions (as every list pages), with the limits and each service's use of them.
COOLDOWNS = obj({
    "limits": obj({action: ref("CooldownLimit") for action in ACTIONS}),
    "services": array(obj({"service": {"type": "string"}, **{action: USAGE for action in ACTIONS}})),
    **page_of("actions", ref("CooldownAction"))["properties"],
})


def openapi_paths() -> OpenApiPaths:
    return OpenApiPaths(schemas=SCHEMAS, paths={
        "/cooldowns": {"get": {
            "summary": "Limits, each service's use of them (most constrained first) and the actions, newest first",
            "tags": ["cooldowns"], "operationId": "listCooldowns",
            "parameters": [
                query("service", text(), "one service (compared in lower case)"),
                choice("action", ACTION_ALIASES, "restart or redeployment, by any of its names (redeploy, …)"),
                choice("outcome", OUTCOMES, "one outcome, in any case"), *PAGINATION],
            "responses": {"200": response("limits, usage and a page of actions", COOLDOWNS),
                          "400": error("action, outcome, limit or offset is invalid")}}},
    })
