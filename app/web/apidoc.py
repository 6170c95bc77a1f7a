"""Building blocks for describing API endpoints in the OpenAPI document
(``GET /api/v1/openapi.json``), the host's and plugins' alike.

Everything here returns plain OpenAPI 3.1 dicts (JSON Schema 2020-12), so a
plugin may also write its path items by hand. The limits below are the ones
``app.web.apiutil`` and the URL rules enforce: describe them from here and the
document cannot drift from the code.
"""
from __future__ import annotations

from typing import Any, Iterable

from app.web.apiutil import DEFAULT_LIMIT, MAX_ID, MAX_LIMIT, MAX_OFFSET

ERROR_SCHEMA_NAME = "Error"
ERROR = {"$ref": f"#/components/schemas/{ERROR_SCHEMA_NAME}"}

# The API refuses NUL characters anywhere in a query or a JSON body (a
# PostgreSQL text column cannot hold one, nor can a process argument).
NO_NUL = "^[^\\u0000]*$"

TIMESTAMP = {"type": "string", "format": "date-time", "description": "UTC, ISO 8601 with a Z"}


def text(*, min_length: int | None = None, max_length: int | None = None, pattern: str | None = None,
         description: str | None = None) -> dict:
    """A string input; without a pattern of its own it is described as NUL-free."""
    schema: dict[str, Any] = {"type": "string", "pattern": pattern or NO_NUL}
    if min_length is not None:
        schema["minLength"] = min_length
    if max_length is not None:
        schema["maxLength"] = max_length
    if description:
        schema["description"] = description
    return schema


def integer(minimum: int | None = None, maximum: int | None = None, description: str | None = None) -> dict:
    schema: dict[str, Any] = {"type": "integer"}
    if minimum is not None:
        schema["minimum"] = minimum
    if maximum is not None:
        schema["maximum"] = maximum
    if description:
        schema["description"] = description
    return schema


def nullable(schema: dict) -> dict:
    """The same schema, or ``null``."""
    if "type" in schema and "$ref" not in schema:
        types = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        widened = dict(schema, type=[*types, "null"])
        if "enum" in schema:
            widened["enum"] = [*schema["enum"], None]
        return widened
    return {"anyOf": [schema, {"type": "null"}]}


def obj(properties: dict[str, dict], required: Iterable[str] | None = None, *, closed: bool = True,
        description: str | None = None) -> dict:
    """An object; ``required`` defaults to every property (what responses
    always carry). ``closed`` objects allow no other property."""
    schema: dict[str, Any] = {"type": "object", "properties": properties,
                              "required": sorted(properties if required is None else required),
                              "additionalProperties": not closed}
    if description:
        schema["description"] = description
    return schema


def array(items: dict, **bounds: int) -> dict:
    """``bounds``: minItems, maxItems."""
    return {"type": "array", "items": items, **bounds}


def ref(name: str) -> dict:
    return {"$ref": f"#/components/schemas/{name}"}


# --- parameters ----------------------------------------------------------------

def id_parameter(name: str, what: str) -> dict:
    """A row id in the path. Ids beyond MAX_ID match no URL rule (404)."""
    return {"name": name, "in": "path", "required": True, "description": f"the {what}'s id",
            "schema": integer(0, MAX_ID)}


def query(name: str, schema: dict, description: str) -> dict:
    """An optional query parameter. Every view reads an empty value as not
    given (``?limit=`` is the default limit), which is what allowEmptyValue
    says."""
    return {"name": name, "in": "query", "required": False, "description": description, "schema": schema,
            "allowEmptyValue": True}


def choice(name: str, values: Iterable[str], description: str) -> dict:
    """A query filter that takes one of ``values`` (empty means no filter)."""
    return query(name, {"type": "string", "enum": list(values)}, description)


PAGINATION = [
    query("limit", integer(1, MAX_LIMIT) | {"default": DEFAULT_LIMIT}, "how many to return"),
    query("offset", integer(0, MAX_OFFSET) | {"default": 0}, "how many to skip"),
]


def page_of(key: str, item: dict) -> dict:
    """What ``app.web.apiutil.page()`` returns."""
    return obj({key: array(item),
                "total": integer(0, description="how many match; past a cap (10,000 for the longest "
                                                "lists) the cap, with total_exact false"),
                "total_exact": {"type": "boolean", "description": "false when total is the cap, not the count"},
                "limit": integer(1, MAX_LIMIT), "offset": integer(0, MAX_OFFSET)})


# --- bodies and responses --------------------------------------------------------

def json_body(schema: dict, description: str | None = None) -> dict:
    body: dict[str, Any] = {"required": True, "content": {"application/json": {"schema": schema}}}
    if description:
        body["description"] = description
    return body


def response(description: str, schema: dict | None = None) -> dict:
    answer: dict[str, Any] = {"description": description}
    if schema is not None:
        answer["content"] = {"application/json": {"schema": schema}}
    return answer


def error(description: str) -> dict:
    """A response with the error body, ``{"error": "..."}``."""
    return response(description, ERROR)


# What json_body() answers before a view sees the body.
JSON_BODY_ERRORS = {
    "400": error("the body is not valid JSON, not an object, contains NUL characters, or a field is invalid"),
    "415": error("the body is not sent as application/json"),
}

ERROR_SCHEMA = obj({"error": {"type": "string", "description": "what is wrong, for a person to read"}})
