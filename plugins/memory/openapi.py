"""``/api/v1/memories`` in the OpenAPI document (plugins/memory/api.py)."""
from __future__ import annotations

from app.config import TIERS
from app.plugin_types import OpenApiPaths
from app.web.apidoc import (JSON_BODY_ERRORS, PAGINATION, TIMESTAMP, array, choice, error, id_parameter,
                            integer, json_body, nullable, obj, page_of, query, ref, response, text)
from plugins.memory.models import CATEGORIES, HISTORY_ACTIONS, OUTCOME_LEVELS, REVIEW_STATES
from plugins.memory.portability import MAX_WEB_IMPORT
from plugins.memory.review import MAX_REASON_CHARS
from plugins.memory.settings import MAX_OBSERVATION, REVIEW
from plugins.memory.store import MAX_SERVICE_CHARS

CONFIDENCE = {"type": "number", "minimum": 0, "maximum": 1}
# clean_observation: any text with something besides whitespace; whitespace
# runs are folded into single spaces. Its longest length is a runtime setting,
# so the document names it instead of fixing a number.
OBSERVATION = text(min_length=1, pattern="^[^\\u0000]*[^\\s\\u0000][^\\u0000]*$",
                   description="what was learned; whitespace runs become single spaces; at most "
                               f"{MAX_OBSERVATION} characters (2000 unless changed), else 400")
# clean_service: letters, digits, '_' and '-'; empty or "general" is a general memory.
SERVICE = text(pattern=f"^\\s*[A-Za-z0-9_-]{{0,{MAX_SERVICE_CHARS}}}\\s*$",
               description="the service; empty, null or general for a general memory")
# What a change or an approval takes: null there leaves the service as it is.
SERVICE_CHANGE = text(pattern=SERVICE["pattern"],
                      description="the service; empty or general makes the memory general (null leaves it as it is)")
CONFIDENCE_INPUT = {"type": "number", "description": "0 to 1; a value outside is clamped to it"}

SCHEMAS = {
    "Memory": obj({
        "id": integer(1), "service": {"type": ["string", "null"], "description": "null: a general memory"},
        "category": {"type": "string", "enum": list(CATEGORIES)}, "observation": {"type": "string"},
        "confidence": CONFIDENCE, "active": {"type": "boolean"}, "pinned": {"type": "boolean"},
        "created_at": TIMESTAMP,
        "updated_at": TIMESTAMP | {"description": (
            "UTC, ISO 8601 with a Z: when the memory was last learned, confirmed or edited (text, category, "
            "service, confidence; unpinned, reactivated, approved), from which its decay counts. A pin, a "
            "deactivation or a rejection leaves it; the history has every change")},
        "session_id": nullable(integer(1, description="the session that recorded it; null: the operator")),
        "tier": {"type": "integer", "enum": sorted(TIERS)},
        "contradicts_id": nullable(integer(1, description="the older memory this one contradicted")),
        "outcomes": obj({level: integer(0) for level in OUTCOME_LEVELS},
                        description="its track record: how many sessions given it reported, with "
                                    "[OUTCOME:<level>:m<id>], that it worked, partly worked, failed or "
                                    "could not tell (each also an \"outcome\" entry in its history)"),
        "status": {"type": "string", "enum": list(REVIEW_STATES),
                   "description": "only an approved memory is given to sessions (while active); with "
                                  f"{REVIEW} on, the agent's new memories start proposed"},
    }),
    "MemoryChange": obj({
        "id": integer(1), "memory_id": integer(1), "action": {"type": "string", "enum": list(HISTORY_ACTIONS)},
        "confidence_before": nullable(CONFIDENCE), "confidence_after": nullable(CONFIDENCE),
        "session_id": {"type": ["integer", "null"]},
        "actor": {"type": "string", "enum": ["session", "operator", "system"]},
        "detail": {"type": ["string", "null"],
                   "description": "for an outcome: the level, then the agent's note (\"worked: waited 60s\")"},
        "related_memory_id": {"type": ["integer", "null"]},
        "created_at": TIMESTAMP,
    }),
}

MEMORY_ID = id_parameter("memory_id", "memory")
DELETED = obj({"deleted": array(integer(1), minItems=1)})
NOT_FOUND = error("no such memory")

CREATE = obj({"category": {"type": "string", "enum": list(CATEGORIES)}, "observation": OBSERVATION,
              "service": nullable(SERVICE), "confidence": CONFIDENCE_INPUT | {"default": 0.7}},
             required=("category", "observation"))
UPDATE = obj({"observation": nullable(OBSERVATION), "category": nullable({"type": "string", "enum": list(CATEGORIES)}),
              "service": nullable(SERVICE_CHANGE), "confidence": nullable(CONFIDENCE_INPUT),
              "active": {"type": ["boolean", "null"],
                         "description": "true needs a confidence of at least 0.3 (given here, or the memory's)"},
              "pinned": {"type": ["boolean", "null"]}},
             required=(), description="Any of the fields; null leaves one as it is (a service of '' or "
                                      "'general' makes the memory general). A confidence change alone sets "
                                      "active by the 0.3 threshold.")
UPDATE["minProperties"] = 1
BULK_DELETE = obj({"ids": array({"type": "integer"}, minItems=1, maxItems=1000)})
APPROVE = obj({"observation": nullable(OBSERVATION), "category": nullable({"type": "string", "enum": list(CATEGORIES)}),
               "service": nullable(SERVICE_CHANGE), "confidence": nullable(CONFIDENCE_INPUT)},
              required=(), description="Edits made before approving; each optional, null leaves a field as it "
                                       "is. A confidence given sets active by the 0.3 threshold.")
REJECT = obj({"reason": nullable(text(max_length=MAX_REASON_CHARS, description="kept in the memory's history"))},
             required=())
WRONG_STATE = {"approve": error("the memory is already approved"),
               "reject": error("the memory is not proposed (approved or already rejected)")}

CONTEXT = obj({
    "text": {"type": "string", "description": "the memory section; empty when there is nothing to give"},
    "memory_ids": array(integer(1)), "included": integer(0), "eligible": integer(0),
    "eligible_exact": {"type": "boolean", "description": "false when eligible is the count's cap (10,000)"},
    "tokens": integer(0), "budget": integer(1),
    "first": {"type": "object", "additionalProperties": {"type": "string"},
              "description": "services whose memories were packed ahead of more trusted ones, each with why "
                             "(for a scheduled session: a recent warning or critical event)"},
})


# An export (plugins/memory/portability.py); its entries are checked by the
# import itself, which names the entry at fault.
EXPORT = {"type": "object", "required": ["format", "version", "memories"], "properties": {
    "format": {"const": "claudeops-memories"}, "version": {"const": 1},
    "exported_at": {"type": "string"},
    "memories": {"type": "array", "items": {"type": "object"}}}}
IMPORT_REPORT = obj({name: integer(0) for name in ("created", "reinforced", "contradicted", "unchanged")})


def openapi_paths() -> OpenApiPaths:
    return OpenApiPaths(schemas=SCHEMAS, paths={
        "/memories": {
            "get": {"summary": "Memories, most recently updated first", "tags": ["memories"],
                    "operationId": "listMemories",
                    "parameters": [
                        query("service", text(), "a service, or general for general memories (compared in lower case)"),
                        choice("category", CATEGORIES, "one category, in any case"),
                        query("active", {"type": "boolean"}, "active or inactive only"),
                        choice("status", REVIEW_STATES,
                               "approved, proposed (awaiting review) or rejected only, in any case"),
                        query("q", text(), "full-text search: every word must match the observation, service or "
                                           "category (stemmed, as a prefix); best match first"),
                        *PAGINATION],
                    "responses": {"200": response("a page of memories", page_of("memories", ref("Memory"))),
                                  "400": error("a filter, limit or offset is invalid")}},
            "post": {"summary": "Add an operator's memory", "tags": ["memories"], "operationId": "createMemory",
                     "requestBody": json_body(CREATE),
                     "responses": {"201": response("the new memory", ref("Memory")), **JSON_BODY_ERRORS}}},
        "/memories/{memory_id}": {
            "get": {"summary": "One memory", "tags": ["memories"], "operationId": "getMemory",
                    "parameters": [MEMORY_ID],
                    "responses": {"200": response("the memory", ref("Memory")), "404": NOT_FOUND}},
            "put": {"summary": "Edit, re-weigh, (de)activate or (un)pin a memory", "tags": ["memories"],
                    "operationId": "updateMemory", "parameters": [MEMORY_ID], "requestBody": json_body(UPDATE),
                    "responses": {"200": response("the memory after the change", ref("Memory")),
                                  "404": NOT_FOUND, **JSON_BODY_ERRORS}},
            "delete": {"summary": "Delete a memory (its history is kept)", "tags": ["memories"],
                       "operationId": "deleteMemory", "parameters": [MEMORY_ID],
                       "responses": {"200": response("what was deleted", DELETED), "404": NOT_FOUND}}},
        "/memories/bulk-delete": {"post": {
            "summary": "Delete several memories: all of them, or none if any id is unknown",
            "tags": ["memories"], "operationId": "bulkDeleteMemories", "requestBody": json_body(BULK_DELETE),
            "responses": {"200": response("what was deleted", DELETED),
                          "404": error("an id names no memory; nothing was deleted"), **JSON_BODY_ERRORS}}},
        "/memories/review": {"get": {
            "summary": "The review inbox: proposed memories, newest first", "tags": ["memories"],
            "operationId": "memoryReviewInbox", "parameters": PAGINATION,
            "responses": {"200": response("a page of proposed memories", page_of("memories", ref("Memory"))),
                          "400": error("limit or offset is invalid")}}},
        "/memories/{memory_id}/approve": {"post": {
            "summary": "Approve a proposed (or rejected) memory, edited first if fields are sent",
            "description": "From now on the memory is given to sessions (while active), and a contradiction it "
                           "states takes 0.2 from the older memory. The body is optional.",
            "tags": ["memories"], "operationId": "approveMemory", "parameters": [MEMORY_ID],
            "requestBody": json_body(APPROVE) | {"required": False},
            "responses": {"200": response("the memory, approved", ref("Memory")), "404": NOT_FOUND,
                          "409": WRONG_STATE["approve"], **JSON_BODY_ERRORS}}},
        "/memories/{memory_id}/reject": {"post": {
            "summary": "Reject a proposed memory: kept for audit, never given to a session",
            "description": "The agent recording the same observation again stores nothing. The body is optional.",
            "tags": ["memories"], "operationId": "rejectMemory", "parameters": [MEMORY_ID],
            "requestBody": json_body(REJECT) | {"required": False},
            "responses": {"200": response("the memory, rejected", ref("Memory")), "404": NOT_FOUND,
                          "409": WRONG_STATE["reject"], **JSON_BODY_ERRORS}}},
        "/memories/{memory_id}/history": {"get": {
            "summary": "Every change to a memory, kept after its deletion", "tags": ["memories"],
            "operationId": "memoryHistory", "parameters": [MEMORY_ID],
            "responses": {"200": response("the changes, oldest first", obj({"history": array(ref("MemoryChange"))})),
                          "404": error("no memory with this id ever existed")}}},
        "/memories/export": {"get": {
            "summary": "Every memory, to keep or to import elsewhere", "tags": ["memories"],
            "operationId": "exportMemories",
            "parameters": [choice("format", ("json", "markdown"),
                                  "json (default): everything, history included; markdown: the prompt's line format")],
            "responses": {
                "200": {"description": "the export",
                        "content": {"application/json": {"schema": EXPORT},
                                    "text/markdown": {"schema": {"type": "string"}}}},
                "400": error("format is neither json nor markdown")}}},
        "/memories/import": {"post": {
            "summary": "Read an export; each memory goes through the matcher; all or nothing",
            "tags": ["memories"], "operationId": "importMemories",
            "requestBody": {"required": True, "content": {
                "application/json": {"schema": EXPORT},
                "text/markdown": {"schema": {"type": "string"}},
                "text/plain": {"schema": {"type": "string", "description": "read as Markdown"}}}},
            "responses": {"201": response("what the import did", IMPORT_REPORT),
                          "400": error("the export is not valid (the message names the entry or line), or "
                                       f"holds more than {MAX_WEB_IMPORT} memories (`claudeops memories import "
                                       "FILE` takes a larger file); nothing was imported"),
                          "415": error("the body is neither application/json nor text/markdown (or text/plain)")}}},
        "/memories/context": {"get": {
            "summary": "The memory section the next session will be given", "tags": ["memories"],
            "operationId": "memoryContext",
            "responses": {"200": response("the section and what it holds", CONTEXT)}}},
    })
