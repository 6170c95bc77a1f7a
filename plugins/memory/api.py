"""``/api/v1/memories``: list, create, read, update, delete, bulk delete,
history, the review inbox (approve, reject), the context the next session
will be given, export and import."""
from __future__ import annotations

from flask import Blueprint, Response, request, stream_with_context
from sqlalchemy import select

from app.echoed import echoed
from app.extensions import db
from app.runtime import setting
from app.write_lock import lock_for_request
from app.web.apiutil import (ApiError, json_body, json_error, json_described, page, pagination, unknown_fields)
from plugins.memory import queries, review, store
from plugins.memory.models import Memory, MemoryHistory

api = Blueprint("memory_api", __name__)

CREATE_FIELDS = {"service", "category", "observation", "confidence"}
UPDATE_FIELDS = {"observation", "category", "service", "confidence", "active", "pinned"}
APPROVE_FIELDS = set(review.EDIT_FIELDS)
REJECT_FIELDS = {"reason"}


def _get(memory_id: int, change: bool = False) -> Memory:
    """The memory; to ``change`` it, read once no session can change it
    before this request commits (app/write_lock.py)."""
    if change:
        lock_for_request()
    memory = db.session.get(Memory, memory_id)
    if memory is None:
        raise ApiError(f"memory {memory_id} not found", 404)
    return memory


def _only(body: dict, allowed: set[str]) -> None:
    """The body holds only ``allowed`` fields, a confidence as a number."""
    unknown = unknown_fields(body, allowed)
    if unknown:
        raise ApiError(unknown)
    confidence = body.get("confidence")
    # A form's text is read as a number (store.parse_confidence); in JSON a
    # number is written as one, as the OpenAPI document says.
    if confidence is not None and (isinstance(confidence, bool) or not isinstance(confidence, (int, float))):
        raise ApiError(f"confidence must be a number from 0 to 1, not {json_described(confidence)}")


def _active_arg():
    raw = request.args.get("active")
    if raw in (None, ""):
        return None
    if raw.lower() in ("true", "1", "yes"):
        return True
    if raw.lower() in ("false", "0", "no"):
        return False
    raise ApiError(f"active must be true or false, not {echoed(raw)}")


def _optional_body(allowed: set[str]) -> dict:
    """The JSON object sent, or {} when nothing was sent; null leaves a field as it is."""
    if not request.get_data(cache=True):
        return {}
    body = json_body()
    _only(body, allowed)
    return {field: value for field, value in body.items() if value is not None}


@api.errorhandler(store.MemoryInputError)
def _input_error(exc):
    return json_error(str(exc), 400)


@api.errorhandler(review.ReviewStateError)
def _state_error(exc):
    return json_error(str(exc), 409)


@api.get("/memories")
def list_memories():
    limit, offset = pagination()
    query = queries.memory_query(request.args.get("service") or None, request.args.get("category") or None,
                                 _active_arg(), request.args.get("q"), request.args.get("status") or None)
    rows = db.session.scalars(queries.newest_first(query).limit(limit).offset(offset)).all()
    return page([m.to_dict() for m in rows], queries.count(query), limit, offset, key="memories")


@api.post("/memories")
def create_memory():
    body = json_body()
    _only(body, CREATE_FIELDS)
    if "category" not in body or "observation" not in body:
        raise ApiError("category and observation are required")
    memory = store.create(body["category"], body.get("service"), body["observation"],
                          body.get("confidence", store.DEFAULT_CONFIDENCE))
    db.session.commit()
    return memory.to_dict(), 201


@api.get("/memories/<int:memory_id>")
def get_memory(memory_id: int):
    return _get(memory_id).to_dict()


@api.put("/memories/<int:memory_id>")
def update_memory(memory_id: int):
    memory = _get(memory_id, change=True)
    body = json_body()
    _only(body, UPDATE_FIELDS)
    changes = {field: value for field, value in body.items() if value is not None}  # null: leave as is
    if not changes:
        raise ApiError(f"nothing to change (null leaves a field as it is); send any of "
                       f"{', '.join(sorted(UPDATE_FIELDS))}")
    store.update(memory, **changes)
    db.session.commit()
    return memory.to_dict()


@api.delete("/memories/<int:memory_id>")
def delete_memory(memory_id: int):
    store.delete(_get(memory_id, change=True))
    db.session.commit()
    return {"deleted": [memory_id]}


@api.post("/memories/bulk-delete")
def bulk_delete():
    body = json_body()
    _only(body, {"ids"})
    try:
        memories = store.find_many(body.get("ids"))
    except LookupError as exc:
        raise ApiError(str(exc), 404) from None
    for memory in memories:
        store.delete(memory)
    db.session.commit()
    return {"deleted": sorted(m.id for m in memories)}


@api.get("/memories/review")
def review_inbox():
    """The proposed memories, newest first: what awaits the operator's review."""
    limit, offset = pagination()
    rows = review.proposed(limit, offset)
    return page([m.to_dict() for m in rows], review.proposed_count(), limit, offset, key="memories")


@api.post("/memories/<int:memory_id>/approve")
def approve_memory(memory_id: int):
    memory = _get(memory_id, change=True)
    review.approve(memory, **_optional_body(APPROVE_FIELDS))
    db.session.commit()
    return memory.to_dict()


@api.post("/memories/<int:memory_id>/reject")
def reject_memory(memory_id: int):
    memory = _get(memory_id, change=True)
    review.reject(memory, _optional_body(REJECT_FIELDS).get("reason"))
    db.session.commit()
    return memory.to_dict()


@api.get("/memories/<int:memory_id>/history")
def memory_history(memory_id: int):
    if db.session.get(Memory, memory_id) is None and not db.session.scalar(
            select(MemoryHistory.id).where(MemoryHistory.memory_id == memory_id).limit(1)):
        raise ApiError(f"memory {memory_id} not found", 404)
    rows = db.session.scalars(select(MemoryHistory).where(MemoryHistory.memory_id == memory_id)
                              .order_by(MemoryHistory.id)).all()
    return {"history": [h.to_dict() for h in rows]}


@api.get("/memories/context")
def next_context():
    context = store.preview_next_context(setting("CLAUDEOPS_MEMORY_BUDGET"))
    return {"text": context.text, "memory_ids": context.memory_ids,
            "included": len(context.memory_ids), "eligible": context.eligible,
            "eligible_exact": context.eligible_exact, "tokens": context.tokens,
            "budget": setting("CLAUDEOPS_MEMORY_BUDGET"), "first": context.first}


@api.get("/memories/export")
def export_memories():
    """Every memory: ``format=json`` (default; history included) or ``markdown``."""
    from plugins.memory import portability
    fmt = request.args.get("format", "json")
    if fmt == "json":
        # Streamed: a large export is never held whole in the worker.
        return Response(stream_with_context(portability.export_json_chunks(indent=False)),
                        mimetype="application/json")
    if fmt == "markdown":
        return Response(portability.export_markdown(), mimetype="text/markdown")
    raise ApiError(f"format must be json or markdown, not {echoed(fmt)}")


@api.post("/memories/import")
def import_memories():
    """An export, as ``application/json`` or ``text/markdown``; all or nothing."""
    from plugins.memory import portability
    if request.mimetype not in ("application/json", "text/markdown", "text/plain"):
        raise ApiError("send an export as application/json or text/markdown", 415)
    try:
        text = request.get_data().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ApiError(f"nothing imported: the body is not UTF-8 text (byte {exc.start} is not)") from None
    fmt = "json" if request.mimetype == "application/json" else "markdown"
    try:
        entries = portability.parse(text, fmt, portability.MAX_WEB_IMPORT)
        report = portability.import_entries(entries, source="the API")
    except portability.ImportRefused as exc:
        raise ApiError(f"nothing imported: {exc}") from None
    db.session.commit()
    return report.to_dict(), 201
