"""The host's endpoints in the OpenAPI document: health, stats and sessions
(``app.web.api``), configuration (``app.web.config_page``) and the document
itself. Declared through ``claudeops_openapi_paths`` like any plugin's."""
from __future__ import annotations

from app.config import TIERS, Setting
from app.models import STATUSES, TRIGGERS
from app.plugin_types import OpenApiPaths
from app.runtime import runtime_settings
from app.sessions.control import MAX_PROMPT_CHARS
from app.web.api import HEALTH_SCOPES
from app.web.apidoc import (JSON_BODY_ERRORS, PAGINATION, TIMESTAMP, array, choice, error, id_parameter,
                            integer, json_body, nullable, obj, page_of, ref, response, text)

TIER = {"type": "integer", "enum": sorted(TIERS)}
OPTIONAL_TEXT = {"type": ["string", "null"]}

SESSION_FIELDS = {
    "id": integer(1), "tier": TIER, "model": OPTIONAL_TEXT,
    "trigger": {"type": "string", "enum": list(TRIGGERS)},
    "prompt": nullable({"type": "string", "description": "the operator's request"}),
    "status": {"type": "string", "enum": list(STATUSES)},
    "status_reason": OPTIONAL_TEXT,
    "created_at": TIMESTAMP, "started_at": nullable(TIMESTAMP), "ended_at": nullable(TIMESTAMP),
    "cost_usd": {"type": ["number", "null"]}, "num_turns": {"type": ["integer", "null"]},
    "duration_ms": {"type": ["integer", "null"]},
    "is_error": {"type": "boolean", "description": "what the CLI's result line said; a session that failed otherwise "
                 "(its exit status, a timeout, no result line) says so in status and status_reason"},
    "exit_code": {"type": ["integer", "null"]}, "cli_session_id": OPTIONAL_TEXT,
    "parent_id": nullable(integer(1, description="the session that escalated to this one")),
    "escalation_reason": OPTIONAL_TEXT,
    "logs_removed_at": nullable({**TIMESTAMP, "description": "when retention (CLAUDEOPS_LOG_RETENTION_DAYS) "
                                 "removed the session's activity log, run log and system prompt; the session is kept"}),
}

SCHEMAS = {
    "Session": obj(SESSION_FIELDS),
    "SessionDetail": obj({**SESSION_FIELDS,
                          "response": nullable({"type": "string", "description": "the agent's text: null until "
                                                "the session ends, then what it wrote (empty for nothing)"}),
                          "system_prompt": OPTIONAL_TEXT}),
    "ConfigSetting": obj({
        "name": {"type": "string"}, "value": {"type": "string", "description": "as shown; secrets are masked"},
        "json_value": {"type": ["string", "number", "boolean", "null"],
                       "description": "the value as PUT /config takes it (600, true, \"sonnet\"); null for a secret"},
        "default": {"type": "string"},
        "source": {"type": "string", "enum": ["runtime", "environment", "default"]},
        "runtime": {"type": "boolean", "description": "may be changed with PUT /config"},
        "help": {"type": "string"},
        "ignored": {"type": ["string", "null"],
                    "description": "a stored runtime change this version refuses (an earlier one took it), why, and "
                                   "what is in force instead; null when there is none"}}),
}

CONFIG = obj({"settings": array(ref("ConfigSetting"))})

HEALTH = obj({
    "status": {"type": "string", "enum": ["ok", "degraded"]},
    "database": {"type": "string", "description": "ok, or error: <kind>"},
    "scheduler": {"type": "string", "description": "running; stopped (the last one said so); silent since <time> "
                                                    "(killed, or it cannot write to the database: degraded; on "
                                                    "the scheduler's host, as soon as its process has ended); or "
                                                    "unknown (the database does not answer)"},
    "plugins": array({"type": "string"}) | {"description": "the loaded plugins; only while no credential is "
                                                          "set (then in GET /stats)"},
}, required=("status", "database", "scheduler"))

STATS = obj({
    "runs": integer(0), "runs_24h": integer(0),
    "runs_by_status": {"type": "object", "propertyNames": {"enum": list(STATUSES)},
                       "additionalProperties": integer(1)},
    "escalations": integer(0),
    "success_rate": {"type": ["number", "null"], "minimum": 0, "maximum": 1,
                     "description": "completed of the sessions that ended by themselves (completed, failed, timed out; not those stopped or interrupted); null before any"},
    "cost_usd": {"type": "number"}, "cost_usd_24h": {"type": "number"},
    "next_scheduled_run": nullable(TIMESTAMP),
    "scheduler": obj({"running": {"type": "boolean"}, "pid": {"type": ["integer", "null"]},
                      "heartbeat_at": nullable(TIMESTAMP)}),
    "plugins": array({"type": "string"}) | {"description": "the loaded plugins"},
}, closed=False, description="The host's figures, and those plugins add (claudeops_stats), "
                             "such as active_memories or critical_events_24h.")

TRIGGER = obj({
    "prompt": nullable(text(max_length=MAX_PROMPT_CHARS,
                            description="the operator's request, added to the tier's prompt")),
    "start_tier": TIER | {"default": 1},
}, required=())

SESSION_ID = id_parameter("session_id", "session")


def setting_value_schema(spec: Setting) -> dict:
    """What PUT /config takes for one runtime setting: its value, or null."""
    value = dict(spec.schema) if spec.schema else {"type": ["string", "number", "boolean"]}
    value["description"] = " ".join(filter(None, (spec.help, value.get("description"))))
    return {"anyOf": [value, {"type": "null", "description": "remove the change"}]}


def config_change() -> dict:
    return {"type": "object", "minProperties": 1, "additionalProperties": False,
            "properties": {spec.name: setting_value_schema(spec) for spec in runtime_settings()}}


def openapi_paths() -> OpenApiPaths:
    return OpenApiPaths(schemas=SCHEMAS, paths={
        "/health": {"get": {
            "summary": "Database and scheduler status (and loaded plugins, while no credential is set)",
            "tags": ["service"], "operationId": "health",
            "parameters": [choice("scope", HEALTH_SCOPES,
                                  "service (the default): degraded when the database does not answer or the "
                                  "scheduler has gone silent; host: only when this host's database does not "
                                  "answer, for a load balancer in front of several dashboard hosts")],
            "responses": {"200": response("the database answers (and, but for scope=host, the scheduler beats)",
                                          HEALTH),
                          "400": error("scope is neither service nor host"),
                          "503": response("the database does not answer, or (but for scope=host) the scheduler "
                                          "has gone silent", HEALTH)}}},
        "/stats": {"get": {
            "summary": "Runs, escalations, success rate, cost, next run and plugins' figures",
            "tags": ["service"], "operationId": "stats",
            "responses": {"200": response("the figures", STATS)}}},
        "/sessions": {"get": {
            "summary": "Sessions, newest first", "tags": ["sessions"], "operationId": "listSessions",
            "parameters": PAGINATION,
            "responses": {"200": response("a page of sessions", page_of("sessions", ref("Session"))),
                          "400": error("limit or offset is invalid")}}},
        "/sessions/{session_id}": {"get": {
            "summary": "One session, with its response and system prompt", "tags": ["sessions"],
            "operationId": "getSession", "parameters": [SESSION_ID],
            "responses": {"200": response("the session", ref("SessionDetail")),
                          "404": error("no such session")}}},
        "/sessions/trigger": {"post": {
            "summary": "Queue an ad-hoc session", "tags": ["sessions"], "operationId": "triggerSession",
            "description": "The scheduler runs it next, one session at a time. Sent again with the same "
                           "Idempotency-Key (a retry after a lost answer), it queues no second session: the "
                           "answer is the session the first call queued, as it is now.",
            "parameters": [{"name": "Idempotency-Key", "in": "header", "required": False,
                            "description": "the client's name for this trigger, 1 to 80 letters, digits, "
                                           "'-', '_', '.' or ':'",
                            "schema": {"type": "string", "pattern": "^[A-Za-z0-9._:-]{1,80}$"}}],
            "requestBody": json_body(TRIGGER),
            "responses": {"201": response("the queued session", ref("Session")),
                          "200": response("the session this Idempotency-Key queued before", ref("Session")),
                          "422": error("this Idempotency-Key queued a session with another tier or request"),
                          **JSON_BODY_ERRORS}}},
        "/sessions/{session_id}/stop": {"post": {
            "summary": "Stop a session", "tags": ["sessions"], "operationId": "stopSession",
            "description": "A queued session stops at once, a running one within a second or two.",
            "parameters": [SESSION_ID],
            "responses": {"202": response("the session, stopped or stopping", ref("Session")),
                          "404": error("no such session"), "409": error("the session has already ended")}}},
        "/config": {
            "get": {"summary": "The effective configuration (secrets masked)", "tags": ["service"],
                    "operationId": "getConfig", "responses": {"200": response("every setting", CONFIG)}},
            "put": {"summary": "Change runtime settings", "tags": ["service"], "operationId": "changeConfig",
                    "description": "All or nothing; in force in every process within a second, and after a restart. "
                                   "null removes a change, so the environment's value holds again.",
                    "requestBody": json_body(config_change()),
                    "responses": {"200": response("every setting, after the change", CONFIG),
                                  **JSON_BODY_ERRORS}}},
        "/openapi.json": {"get": {
            "summary": "This document", "tags": ["service"], "operationId": "openapi",
            "responses": {"200": response("the OpenAPI 3.1 document", {"type": "object"})}}},
    })
