"""The Memories page: the review inbox of proposed memories (approve, edit
and approve, reject), a filterable table that polls every 5 s (paused while
the operator edits or selects), inline edit, confidence slider, pin, delete,
bulk actions, Add Memory, a memory's history, and a preview of what the next
session will be given."""
from __future__ import annotations

from pathlib import Path
from typing import Callable, Optional

from flask import (Blueprint, Response, abort, flash, make_response, redirect, render_template, request,
                   stream_with_context, url_for)
from sqlalchemy import select

from app.echoed import echoed
from app.extensions import db
from app.runtime import setting
from app.web import direction_controls
from app.web.apiutil import MAX_ID
from app.models import Session
from app.web.filter_options import choices_state
from app.write_lock import lock_for_request
from app.web.htmx import fragment_of, is_htmx, render_page
from app.web.ignored_args import ignore
from app.web.paging import page_number
from plugins.memory import queries, review, store
from plugins.memory.context import format_confidence
from plugins.memory.models import APPROVED, CATEGORIES, REJECTED, Memory, MemoryHistory, MemoryInjection
from plugins.memory.settings import max_observation_chars, review_on
from plugins.memory.store import one_line

HERE = Path(__file__).parent
pages = Blueprint("memory", __name__, template_folder=str(HERE / "templates"),
                  static_folder=str(HERE / "static"), static_url_path="/memories/static")

PAGE_SIZE = 100
INBOX_SIZE = 50


@pages.app_template_filter("confidence")
def _confidence(value: float) -> str:
    return format_confidence(value)


def _filters() -> dict:
    # Any case, as the Events and Cooldowns filters take theirs: a link typed by hand.
    # The notice quotes the value as it was written, so that it can be found in the link.
    raw_category, raw_status = request.values.get("category", ""), request.values.get("status", "")
    category, status = raw_category.lower(), raw_status.lower()
    if category and category not in CATEGORIES:
        ignore(f"the category {raw_category[:40]!r}, none of {', '.join(CATEGORIES)}: every category is shown")
        category = ""
    if status and status not in queries.STATUSES:
        ignore(f"the status {raw_status[:40]!r}, none of {', '.join(queries.STATUSES)}: every status is shown")
        status = ""
    # Services are kept in lower case: the filter shows the one it chose.
    return {"service": request.values.get("service", "").strip().lower(), "category": category, "status": status,
            "q": request.values.get("q", "").strip()[:200]}


def _table_context() -> dict:
    filters = _filters()
    asked = page = page_number(PAGE_SIZE)
    query = queries.memory_query(filters["service"] or None, filters["category"] or None, q=filters["q"],
                                 **queries.status_filter(filters["status"]))
    total = queries.count(query)
    # The table's refresh after a change (memories.js) shows the last page
    # when its own is past it now, its last rows deleted, not an empty page.
    # A poll or a link still shows the page asked for, and says it is empty.
    if request.values.get("past_end") == "last" and total.exact:
        page = min(page, max(1, (total.count - 1) // PAGE_SIZE + 1))
    # One row more than a page says whether an older page exists, whatever the total.
    memories = db.session.scalars(queries.newest_first(query).limit(PAGE_SIZE + 1)
                                  .offset((page - 1) * PAGE_SIZE)).all()
    return {"memories": memories[:PAGE_SIZE], "has_older": len(memories) > PAGE_SIZE, "total": total,
            "page": page, "page_size": PAGE_SIZE, "filters": filters, "last_page_instead": page != asked}


def _inbox_context() -> dict:
    return {"proposed": review.proposed(INBOX_SIZE), "proposed_total": review.proposed_count(),
            "review_on": review_on()}


def _get(memory_id: int, change: bool = False) -> Memory:
    """The memory; to ``change`` it, read once no session can change it
    before this request commits (app/write_lock.py)."""
    if change:
        lock_for_request()
    return db.session.get(Memory, memory_id) or abort(404)


def _error(message: str, status: int = 200):
    """Show a problem above the table, whatever element asked."""
    response = make_response(render_template("memory/_error.html", message=message), status)
    response.headers["HX-Retarget"] = "#memory-errors"
    response.headers["HX-Reswap"] = "innerHTML"
    return response


def _changed(*events: str, said: str = ""):
    """Success of a form that does not swap the table itself: clear the error
    area (or put ``said`` there) and tell the table (and whoever listens) to
    refresh."""
    response = make_response(render_template("memory/_done.html", message=said) if said else "")
    response.headers["HX-Retarget"] = "#memory-errors"
    response.headers["HX-Reswap"] = "innerHTML"
    response.headers["HX-Trigger"] = ", ".join(("memories-changed",) + events)
    return response


def _refused(body: str, message: str):
    """``body`` for the element that asked (its row: "" takes it away), and
    ``message`` above the table (an out-of-band swap)."""
    return make_response(body + render_template("memory/_error_oob.html", message=message))


def _row(memory: Memory):
    return render_template("memory/_row.html", memory=memory)


def _saved(memory: Memory):
    """A row redrawn after a change that worked: an error shown for an
    earlier attempt is out of date (memory-saved clears it)."""
    response = make_response(_row(memory))
    response.headers["HX-Trigger"] = "memory-saved"
    return response


@pages.get("/memories")
def index():
    extra = {} if is_htmx() else _inbox_context()   # a table poll needs no inbox
    services = queries.services()
    table = _table_context()
    response = render_page("memory/index.html", "memory/_table.html", categories=CATEGORIES,
                           services=services, statuses=queries.STATUSES, max_observation=max_observation_chars(),
                           **choices_state(services), **table, **extra)
    if table["last_page_instead"]:
        # The address names the page shown: a reload shows it again.
        shown = {name: value for name, value in table["filters"].items() if value}
        response.headers["HX-Replace-Url"] = url_for("memory.index", page=table["page"] if table["page"] > 1 else None,
                                                      **shown)
    return response


@pages.post("/memories")
def create():
    try:
        memory = store.create(request.form.get("category"), request.form.get("service"),
                              request.form.get("observation", ""), request.form.get("confidence", "0.7"))
    except store.MemoryInputError as exc:
        return _error(f"Memory not added: {exc}")
    similar = store.resembling(memory)
    db.session.commit()
    # Said where errors are: the new row may be far down the table, or on another page.
    asked = request.form.get("confidence") or ""
    said = (f"Added memory #{memory.id} ({memory.service or 'general'}, {memory.category}, "
            f"confidence {format_confidence(memory.confidence)}){_clamped(asked, memory.confidence) if asked else ''}.")
    return _changed("memory-added", said=said + _resemblance(similar))


def _resemblance(similar) -> str:
    """What an operator is told of a memory their new or edited one
    restates or contradicts: both are kept, and one may be meant to go."""
    if similar is None:
        return ""
    relation, other = similar
    if relation == store.REINFORCE:
        says, then = "says much the same", "Delete one of the two if they say the same."
    else:
        says, then = "says otherwise", "Delete the one that is wrong."
    return f" Memory #{other.id} of the same service and category {says}: “{other.observation}”. {then}"


@pages.get("/memories/<int:memory_id>/row")
@fragment_of("memory.detail")
def row(memory_id: int):
    return _row(_get(memory_id))


# What a row's edit form edits, and the inbox's Edit & approve.
ROW_FIELDS = ("observation", "category", "service")
# The hidden field beside each of an edit form's that holds the value the
# form was opened with, as on the Config page: see ``_edits``.
SHOWN_AS = "shown-as."


def _as_shown(memory: Memory, name: str) -> str:
    """A field of ``memory`` as an edit form's input shows it: a direction
    control spelt out, as every template shows one (app/web/direction_controls.py)."""
    value = getattr(memory, name)
    return "" if value is None else direction_controls.shown(str(value))


def _edit_form(template: str, memory: Memory, names: tuple[str, ...], typed: dict | None = None) -> str:
    """An edit form of ``memory``'s fields ``names``, each holding what was
    ``typed`` in it or else the memory's value, and each compared, when
    saved, with the memory's value now."""
    shown_as = {name: _as_shown(memory, name) for name in names}
    return render_template(template, memory=memory, fields={**shown_as, **(typed or {})}, shown_as=shown_as,
                           categories=CATEGORIES, max_observation=max_observation_chars())


def _edits(memory: Memory, names: tuple[str, ...]) -> tuple[dict, list]:
    """What the operator edited in an edit form, and only that: a field left
    as the form showed it is not saved, whatever it holds now. Another tab,
    the API or a session may have changed it since the form was opened, and
    saving the form's old value would undo that without a word. Also which
    fields edited here were changed elsewhere meanwhile: those are not
    saved until the operator has seen the other change (``_edited_elsewhere``)."""
    current = {name: _as_shown(memory, name) for name in names}
    wanted = {name: request.form[name] for name in names if name in request.form}
    # A form without the hidden fields (a script's request) is compared with what is there now.
    shown_as = {name: request.form.get(SHOWN_AS + name, current[name]) for name in wanted}
    edited = {name: value for name, value in wanted.items() if one_line(value) != one_line(shown_as[name])}
    since = [name for name, value in edited.items()
             if current[name] != shown_as[name] and one_line(value) != one_line(current[name])]
    return edited, since


def _edited_elsewhere(template: str, memory: Memory, names: tuple[str, ...], edited: dict, since: list,
                      not_done: str, again: str):
    """The form again, with what was typed in it (a field not edited shows
    the memory's value now), to be saved again over the other change; and
    above the table, what that change was."""
    described = {"observation": f"“{memory.observation}”", "category": memory.category,
                 "service": memory.service_label, "confidence": format_confidence(memory.confidence)}
    now = ", ".join(f"its {name} is now {described[name]}" for name in since)
    message = (f"{not_done}: memory {memory.id} was changed elsewhere since this form was opened ({now}). "
               f"{again} again to replace that with what you typed.")
    return _refused(_edit_form(template, memory, names, typed=edited), message)


@pages.get("/memories/<int:memory_id>/edit")
@fragment_of("memory.detail")
def edit(memory_id: int):
    return _edit_form("memory/_row_edit.html", _get(memory_id), ROW_FIELDS)


@pages.put("/memories/<int:memory_id>")
def update(memory_id: int):
    """The row's edit form: its observation, and its service and category
    when the form sends them (a field not sent, or not edited, is left as it
    is; one edited here and elsewhere is not saved: ``_edits``)."""
    memory = _get(memory_id, change=True)
    edits, since = _edits(memory, ROW_FIELDS)
    if since:
        return _edited_elsewhere("memory/_row_edit.html", memory, ROW_FIELDS, edits, since, "Not saved", "Save")
    try:
        store.update(memory, **edits)
    except store.MemoryInputError as exc:
        return _error(f"Not saved: {exc}")
    db.session.commit()
    return _saved(memory)


@pages.put("/memories/<int:memory_id>/confidence")
def set_confidence(memory_id: int):
    memory = _get(memory_id, change=True)
    try:
        store.update(memory, confidence=request.form.get("confidence"))
    except store.MemoryInputError as exc:
        return _error(f"Not saved: {exc}")
    db.session.commit()
    return _saved(memory)


@pages.post("/memories/<int:memory_id>/pin")
def toggle_pin(memory_id: int):
    """Pin or unpin, as the button asked (``pinned``: true or false): two
    tabs that both showed Pin leave the memory pinned, where turning it over
    each time left it unpinned. Without it (a page from an earlier version),
    the pin is turned over."""
    memory = _get(memory_id, change=True)
    asked = request.form.get("pinned")
    if asked not in (None, "true", "false"):
        return _error(f"Not saved: pinned must be true or false, not {asked[:40]!r}")
    wanted = (asked == "true") if asked is not None else not memory.pinned
    if wanted != memory.pinned:
        store.update(memory, pinned=wanted)
        db.session.commit()
    return _saved(memory)


@pages.delete("/memories/<int:memory_id>")
def delete(memory_id: int):
    store.delete(_get(memory_id, change=True))
    db.session.commit()
    response = make_response("")
    response.headers["HX-Trigger"] = "memories-changed, memory-saved"   # the count, and the next page's first row
    return response


@pages.post("/memories/bulk")
def bulk():
    raw_ids = request.form.getlist("ids")
    if not raw_ids:
        return _error("Select at least one memory first.")
    # A checkbox's value: ASCII digits, no more than the largest id has. (str.isdigit()
    # also takes "²", which int() refuses, and other scripts' digits, which it reads.)
    # Any other refuses them all, as an id of no memory does: the rest is not changed without it.
    not_ids = [raw for raw in raw_ids if not (raw.isascii() and raw.isdigit() and len(raw) <= len(str(MAX_ID)))]
    if not_ids:
        return _error(f"Nothing changed: {not_ids[0][:40]!r} names no memory.")
    ids = [int(raw) for raw in raw_ids]
    try:
        memories = store.find_many(ids)
        count = f"{len(memories)} {'memory' if len(memories) == 1 else 'memories'}"
        if request.form.get("action") == "delete":
            for memory in memories:
                store.delete(memory)
            said = f"Deleted {count}."
        elif request.form.get("action") == "confidence":
            asked = request.form.get("bulk_confidence", "")
            confidence = store.parse_confidence(asked)
            for memory in memories:
                store.update(memory, confidence=confidence)
            said = f"Set the confidence of {count} to {format_confidence(confidence)}{_clamped(asked, confidence)}."
        else:
            return _error("Unknown bulk action.")
    except (store.MemoryInputError, LookupError) as exc:
        db.session.rollback()
        return _error(f"Nothing changed: {exc}")
    db.session.commit()
    return _changed(said=said)


def _clamped(asked: str, confidence: float) -> str:
    """What is said of a confidence asked beyond 0 to 1, which is kept at
    the nearest end (SPEC-0015: clamped before saving); one within it is
    only rounded, as it is shown."""
    if 0.0 <= float(asked) <= 1.0:
        return ""
    return f" ({asked.strip()} was asked: a confidence is kept from 0 to 1)"


@pages.get("/memories/inbox")
@fragment_of("memory.index")
def inbox():
    """The review inbox alone: its own poll, and its refresh after a change."""
    return render_template("memory/_inbox.html", **_inbox_context())


@pages.get("/memories/<int:memory_id>/review")
@fragment_of("memory.detail")
def review_edit(memory_id: int):
    return _edit_form("memory/_inbox_edit.html", _get(memory_id), review.EDIT_FIELDS)


@pages.get("/memories/<int:memory_id>/inbox-row")
@fragment_of("memory.detail")
def inbox_row(memory_id: int):
    return render_template("memory/_inbox_row.html", memory=_get(memory_id))


@pages.post("/memories/<int:memory_id>/approve")
def approve(memory_id: int):
    """Approve, with the edit form's fields when it sent them, those edited
    in it as the row's edit form saves them (``update``). A table row's
    Approve edits nothing, whatever else its request carries."""
    memory = _get(memory_id, change=True)
    if request.form.get("view") == "table":
        return _decide(memory, "approved", review.approve)
    if memory.status == REJECTED:
        # The inbox shows proposals only: another operator (a tab, the API)
        # rejected it since; approving it over that is a decision of its own.
        return _decided_elsewhere(memory, f"Not approved: memory {memory.id} was rejected elsewhere since the inbox "
                                          "showed it; Approve on its row in the table approves it all the same")
    edits, since = _edits(memory, review.EDIT_FIELDS)
    # Approved meanwhile, it is for the inbox to leave (_decide), edits or not.
    if since and memory.status != APPROVED:
        return _edited_elsewhere("memory/_inbox_edit.html", memory, review.EDIT_FIELDS, edits, since,
                                 "Not approved", "Approve")
    return _decide(memory, "approved", lambda memory: review.approve(memory, **edits),
                   said=lambda memory: _approved_clamped(memory, edits.get("confidence")))


def _approved_clamped(memory: Memory, asked: Optional[str]) -> str:
    clamped = _clamped(asked, memory.confidence) if asked is not None else ""
    return (f"Approved memory #{memory.id} at confidence {format_confidence(memory.confidence)}{clamped}."
            if clamped else "")


@pages.post("/memories/<int:memory_id>/reject")
def reject(memory_id: int):
    return _decide(_get(memory_id, change=True), "rejected",
                   lambda memory: review.reject(memory, request.form.get("reason")))


def _decide(memory: Memory, done: str, decision, said: Callable[[Memory], str] = lambda memory: ""):
    try:
        decision(memory)
    except store.MemoryInputError as exc:
        db.session.rollback()
        return _error(f"Not {done}: {exc}")
    except review.ReviewStateError as exc:
        db.session.rollback()
        return _decided_elsewhere(memory, f"Not {done}: {exc}")
    db.session.commit()
    return _reviewed(memory, said(memory))


def _decided_elsewhere(memory: Memory, message: str):
    """Refused, the memory being decided elsewhere meanwhile: as after a
    decision made here, its inbox row leaves (with whatever was typed in it,
    which would otherwise hold the inbox's refresh back), a table row is
    redrawn as it is now, and the inbox and the table refresh; the message
    says why above the table."""
    response = _refused(_row(memory) if request.form.get("view") == "table" else "", message)
    response.headers["HX-Trigger-After-Swap"] = "memories-changed"
    return response


def _reviewed(memory: Memory, said: str = ""):
    """A row of the table is redrawn in its new state; one of the inbox
    leaves it; ``said``, if anything, goes above the table. Then the inbox
    and the table refresh (after the swap: an inbox row being edited holds
    the inbox's refresh back)."""
    body = _row(memory) if request.form.get("view") == "table" else ""
    response = make_response(body + (render_template("memory/_said_oob.html", message=said) if said else ""))
    # memory-reviewed clears the error area of what an earlier attempt said;
    # what this one says has just replaced it, and would be cleared with it.
    response.headers["HX-Trigger-After-Swap"] = "memories-changed" if said else "memories-changed, memory-reviewed"
    return response


@pages.get("/memories/<int:memory_id>")
def detail(memory_id: int):
    memory = db.session.get(Memory, memory_id)
    history = db.session.scalars(select(MemoryHistory).where(MemoryHistory.memory_id == memory_id)
                                 .order_by(MemoryHistory.id)).all()
    if memory is None and not history:
        abort(404)
    given = db.session.execute(
        select(MemoryInjection.session_id, MemoryInjection.confidence, MemoryInjection.reason, Session.created_at)
        .join(Session, Session.id == MemoryInjection.session_id)
        .where(MemoryInjection.memory_id == memory_id).order_by(MemoryInjection.id.desc()).limit(20)).all()
    return render_template("memory/detail.html", memory=memory, memory_id=memory_id, history=history, given=given)


@pages.get("/memories/preview")
def preview():
    budget = setting("CLAUDEOPS_MEMORY_BUDGET")
    return render_template("memory/preview.html", context=store.preview_next_context(budget), budget=budget)


@pages.get("/memories/export.<fmt>")
def export(fmt: str):
    """A download of every memory: JSON (history included) or Markdown."""
    from plugins.memory import portability
    if fmt == "json":
        # Streamed: a large export is never held whole in the worker.
        body, mimetype = stream_with_context(portability.export_json_chunks()), "application/json"
    elif fmt == "md":
        body, mimetype = portability.export_markdown(), "text/markdown"
    else:
        abort(404)
    response = Response(body, mimetype=mimetype)
    response.headers["Content-Disposition"] = f'attachment; filename="claudeops-memories.{fmt}"'
    return response


@pages.post("/memories/import")
def import_file():
    """An uploaded export, all or nothing; the outcome is flashed on the page."""
    from plugins.memory import portability
    upload = request.files.get("file")
    if upload is None or not upload.filename:
        flash("Import: choose an exported file first.", "error")
        return redirect(url_for("memory.index"))
    named = echoed(upload.filename, quote=False)   # a script may send any name, of any length
    try:
        text = upload.read().decode("utf-8")
        report = portability.import_entries(portability.parse(text, most=portability.MAX_WEB_IMPORT),
                                            source=upload.filename)
    except UnicodeDecodeError:
        flash(f"Nothing imported: {named} is not UTF-8 text.", "error")
    except portability.ImportRefused as exc:
        db.session.rollback()
        flash(f"Nothing imported from {named}: {exc}", "error")
    else:
        db.session.commit()
        counts = report.to_dict()
        flash(f"Imported {named}: " + ", ".join(f"{n} {what}" for what, n in counts.items()) + ".", "info")
    return redirect(url_for("memory.index"))
