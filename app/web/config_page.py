"""/config and /api/v1/config: the effective configuration (secrets masked)
and the settings an operator may change while the service runs."""
from __future__ import annotations

import json
import os

from flask import Blueprint, flash, redirect, render_template, request, url_for
from sqlalchemy.engine import make_url

from app.config import Setting
from app.database_url import shown_url
from app.echoed import echoed
from app.extensions import db
from app.runtime import SettingError, change, checked, declared, in_force, overrides, refused, runtime_settings
from app.web import direction_controls
from app.web.apiutil import ApiError, json_body
from app.write_lock import lock_for_request

config_page = Blueprint("config", __name__)
config_api = Blueprint("config_api", __name__)

MASK = "(set, hidden)"


def shown(spec: Setting, value) -> str:
    """A setting's value as the operator may see it: secrets never."""
    if spec.secret:
        return MASK if value else ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ",".join(value)
    if isinstance(value, frozenset):   # a set of names (CLAUDEOPS_DISABLE_PLUGINS)
        return ",".join(sorted(value))
    if spec.name == "CLAUDEOPS_DATABASE_URL" and value:
        try:
            return shown_url(make_url(value))
        except Exception:   # not a URL we can parse: show nothing of it
            return MASK
    return "" if value is None else str(value)


def as_json(spec: Setting, value):
    """A setting's value as PUT /api/v1/config takes it back: a number or a
    boolean as itself, anything else as the text shown; a secret as null."""
    if spec.secret or value is None:
        return None
    if isinstance(value, (bool, int, float)):
        return value
    return shown(spec, value)


def describe() -> list[dict]:
    changed = overrides()
    rows = []
    for spec in declared():   # one query for all of them, not one per setting
        stored = changed.get(spec.name) if spec.runtime else None
        value = in_force(spec, stored)
        why = refused(spec, stored)
        source = ("runtime" if stored is not None and why is None else
                  "environment" if spec.name in os.environ else "default")
        rows.append({"name": spec.name, "value": shown(spec, value), "json_value": as_json(spec, value),
                     "default": shown(spec, spec.parse(spec.default)) if not spec.secret else "",
                     "source": source, "runtime": spec.runtime, "help": spec.help,
                     "ignored": _ignored(spec, stored, why, source) if why else None})
    return rows


def _ignored(spec: Setting, stored: str, why: str, source: str) -> str:
    """A stored change this version refuses, and what holds instead: it was
    valid when stored (an earlier version took it), and the operator who
    made it would otherwise see only the value in force, not that theirs is
    ignored."""
    instead = "the environment's value" if source == "environment" else "the default"
    return (f"the stored change {echoed(shown(spec, stored))} is ignored ({why}); {instead} is in force. "
            "Save a value, or reset, to replace it")


def _form(settings: list[dict], status: int = 200):
    """The page; a setting of a boolean schema gets a true/false choice, whatever its value."""
    booleans = {s.name for s in declared() if (s.schema or {}).get("type") == "boolean"}
    return render_template("config.html", settings=settings, booleans=booleans), status


@config_page.get("/config")
def index():
    return _form(describe())


# The hidden field beside each runtime setting's that holds the value the
# page showed it with: see ``update``.
SHOWN_AS = "shown-as."


@config_page.post("/config")
def update():
    """What the operator edited on the page, and only that: a field left as
    the page showed it is not saved, whatever it holds now. Another tab, the
    API or another operator may have changed it since the page was loaded
    (dry run turned on, say), and saving the page's old value would undo
    that without a word. A field edited here that was also changed elsewhere
    since is not saved either: the form comes back saying so, and saving it
    again replaces the other change."""
    lock_for_request()   # what is compared is what the save replaces, whoever saves at the same moment
    rows = [row for row in describe() if row["runtime"]]
    # As the page showed them: a direction control is spelt out there (app/web/direction_controls.py).
    current = {row["name"]: direction_controls.shown(row["value"]) for row in rows}
    wanted = {name: request.form[name].strip() for name in current if name in request.form}
    # A form without the hidden fields (a script's POST) is compared with what is in force.
    shown_as = {name: request.form.get(SHOWN_AS + name, current[name]) for name in wanted}
    asked_to_reset = request.form.getlist("reset")
    edited = {name for name, value in wanted.items() if value != shown_as[name] and name not in asked_to_reset}
    # A setting with no change stored is reset already (another tab did it, or
    # this form was sent twice): what the operator asked for is in force.
    stored = {row["name"] for row in rows if row["source"] == "runtime" or row["ignored"]}
    resets = [name for name in asked_to_reset if name in stored]
    values = {name: wanted[name] for name in edited if wanted[name] != current[name]}
    since = {name: f"changed to {current[name]!r} elsewhere since this page was loaded; "
                   f"save again to replace that with what you typed"
             for name in values if current[name] != shown_as[name]}
    # A reset replaces what is in force as surely as a value typed.
    since.update({name: f"changed to {current[name]!r} elsewhere since this page was loaded; "
                        f"reset it again to replace that with its default"
                  for name in resets if name in current and request.form.get(SHOWN_AS + name, current[name])
                  != current[name]})
    if since:
        db.session.rollback()   # nothing to write: the lock is not held while the page is drawn
        flash(f"Nothing saved: {_settings(len(since))} changed elsewhere meanwhile.", "error")
        return _form_again(wanted, edited, current, since, 409)
    values.update({name: None for name in resets})
    if not values:
        flash("Nothing changed.", "info")
        return redirect(url_for("config.index"))
    try:
        change(values)
    except SettingError as exc:
        db.session.rollback()
        flash(f"Nothing saved: {len(exc.problems)} value{'s are' if len(exc.problems) > 1 else ' is'} not valid.",
              "error")
        # Correct them, save them all: what was typed stays, each value it
        # cannot take marked with why.
        return _form_again(wanted, edited, shown_as, exc.problems, 400)
    flash("Saved: " + ", ".join(sorted(values)) + ". In force now, and after a restart.", "info")
    return redirect(url_for("config.index"))


def _settings(count: int) -> str:
    return "1 setting was" if count == 1 else f"{count} settings were"


def _form_again(wanted: dict[str, str], edited: set[str], shown_as: dict[str, str], problems: dict[str, str],
                status: int):
    """The form again: each field the operator edited with what was typed
    (and compared, when saved again, with ``shown_as``), the others as they
    are in force now."""
    rows = [dict(row, value=wanted[row["name"]], shown_as=shown_as[row["name"]], problem=problems.get(row["name"]))
            if row["runtime"] and row["name"] in edited else dict(row, problem=problems.get(row["name"]))
            for row in describe()]
    return _form(rows, status)


# For each JSON Schema "type" a setting may declare: the Python types of
# the JSON values it takes, and how to say so.
JSON_TYPES = {"integer": ((int,), "a whole number (a JSON integer)"),
              "number": ((int, float), "a number"),
              "string": ((str,), "text (a JSON string)"),
              "boolean": ((bool,), "true or false (a JSON boolean)")}
SCALARS = ((str, int, float, bool), "a string, number or boolean")


def _json_type_problem(name: str, value) -> str | None:
    """A runtime setting's JSON value must be of the type its schema names
    (``null`` removes the change); a setting without a schema takes any
    scalar. Unknown names are left to ``checked()``, which lists the known ones."""
    spec = next((s for s in runtime_settings() if s.name == name), None)
    if spec is None or value is None:
        return None
    allowed, what = JSON_TYPES.get((spec.schema or {}).get("type"), SCALARS)
    # bool is an int in Python, never in JSON.
    if not isinstance(value, allowed) or (isinstance(value, bool) and bool not in allowed):
        return f"{name} must be {what}, or null to remove the change; not {json.dumps(value)[:200]}"
    return None


@config_api.get("/config")
def get_config():
    return {"settings": describe()}


@config_api.put("/config")
def put_config():
    """``{"CLAUDEOPS_INTERVAL": 600, "CLAUDEOPS_DRY_RUN": true}``; ``null``
    removes a change, so the environment's value holds again."""
    body = json_body()
    if not body:
        raise ApiError("send the settings to change, e.g. {\"CLAUDEOPS_INTERVAL\": 600}")
    # Every problem in one answer, in the body's order: a client corrects them in one go.
    problems = {name: problem for name, value in body.items() if (problem := _json_type_problem(name, value))}
    try:
        checked({name: value for name, value in body.items() if name not in problems})
    except SettingError as exc:
        problems.update(exc.problems)
    if problems:
        raise ApiError("; ".join(problems[name] for name in body if name in problems))
    change(body)
    return {"settings": describe()}
