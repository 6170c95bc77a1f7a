"""Settings an operator may change while the service runs.

Declared with ``runtime=True`` (the host's interval, tier models, maximum
tier and dry run; plugins' own, such as the memory budget). A change made on
/config or through ``PUT /api/v1/config`` is stored in the database, so every
process (the web workers and the scheduler) sees it within a second and it
survives a restart; until then the environment's value holds.
"""
from __future__ import annotations

import logging
import time
from typing import Any, Optional

from flask import current_app
from sqlalchemy import select

from app.config import Setting
from app.echoed import echoed
from app.extensions import db
from app.models import RuntimeSetting
from app.timeutil import utcnow
from app.write_lock import lock_for_writing

log = logging.getLogger(__name__)


class SettingError(ValueError):
    """Changes /config cannot take; the message names each setting and what
    is wrong with it, ``problems`` the same by setting."""

    def __init__(self, problems: dict[str, str]):
        super().__init__("; ".join(problems.values()))
        self.problems = problems


def declared() -> tuple[Setting, ...]:
    return current_app.extensions["claudeops.settings"]


def runtime_settings() -> list[Setting]:
    return [s for s in declared() if s.runtime]


# A stored change is read at most this often per process: plugins ask for
# their limits on every marker of a busy stream, and a query each time would
# cost more than the markers themselves. A change made here is seen at once
# (change() forgets what was read); one made by another process, within this.
CACHE_SECONDS = 1.0
CACHE_KEY = "claudeops.runtime_cache"
RUNTIME_BY_NAME = "claudeops.runtime_settings_by_name"


_UNPARSED = object()


def setting(name: str) -> Any:
    """The value in force: the operator's runtime change if any, else the
    configuration. A change made in any process takes effect everywhere
    within ``CACHE_SECONDS``."""
    spec = _runtime(name)
    if spec is None:
        return current_app.config[name]
    raw, value = _stored(spec)
    return value if value is not _UNPARSED else in_force(spec, raw)


def _stored(spec: Setting) -> tuple[Optional[str], Any]:
    """The stored change, if any, and its value once parsed (kept with it:
    parsing on every marker would cost as much as reading). ``_UNPARSED``
    when there is none or it no longer parses: ``in_force`` then says why,
    and the configuration, which a test or the app factory may change at
    any time, is read each time."""
    cache = current_app.extensions.setdefault(CACHE_KEY, {})
    now = time.monotonic()
    hit = cache.get(spec.name)
    if hit is not None and hit[0] > now:
        return hit[1], hit[2]
    raw = db.session.scalar(select(RuntimeSetting.value).where(RuntimeSetting.name == spec.name))
    value = _UNPARSED
    if raw is not None:
        try:
            value = spec.parse(raw)
        except ValueError:
            pass
    cache[spec.name] = (now + CACHE_SECONDS, raw, value)
    return raw, value


def forget_cached() -> None:
    current_app.extensions.pop(CACHE_KEY, None)


# The stored changes already logged as ignored, each once per application
# (a process has one): the scheduler asks for a setting every second while
# markers arrive.
IGNORED_LOGGED = "claudeops.runtime_ignored_logged"


def in_force(spec: Setting | str, raw: str | None) -> Any:
    """The value given the stored change ``raw`` (or None): the change if it
    still parses, else the configuration."""
    name = spec if isinstance(spec, str) else spec.name
    if raw is not None and not isinstance(spec, str):
        try:
            return spec.parse(raw)
        except ValueError:   # valid when stored; a later version may take less
            why = refused(spec, raw)
        logged = current_app.extensions.setdefault(IGNORED_LOGGED, set())
        if (name, raw) not in logged:
            logged.add((name, raw))
            log.warning("ignoring stored %s=%s (%s); using the configured value", name,
                        "(set, hidden)" if spec.secret else echoed(raw), why)
    return current_app.config[name]


def refused(spec: Setting, raw: str | None) -> Optional[str]:
    """Why the stored change ``raw`` is not in force, or None if it is (or
    there is none). Each was valid when stored; a later version may take
    less (a lower maximum, say), and then the configuration holds."""
    if raw is None:
        return None
    try:
        spec.parse(raw)
    except ValueError as exc:
        # A plugin's parser may put the value in its words: a secret's are not shown.
        return "not valid for this version" if spec.secret else str(exc)
    return None


def overrides() -> dict[str, str]:
    return dict(db.session.execute(select(RuntimeSetting.name, RuntimeSetting.value)).all())


def change(values: dict[str, Any]) -> None:
    """Validate every change first; store all or nothing. ``None`` removes a
    change (the environment's value holds again)."""
    parsed = checked(values)
    # Read once no one else can write: two saves of one setting at once (two
    # workers) would both find no row and insert it, or update one the
    # other had just removed.
    lock_for_writing()
    for name, text in parsed.items():
        row = db.session.get(RuntimeSetting, name, populate_existing=True)
        if text is None:
            if row is not None:
                db.session.delete(row)
        elif row is None:
            db.session.add(RuntimeSetting(name=name, value=text, updated_at=utcnow()))
        else:
            row.value, row.updated_at = text, utcnow()
    db.session.commit()
    forget_cached()


def checked(values: dict[str, Any]) -> dict[str, str | None]:
    """Each change as stored (its text, or ``None`` to remove it), once
    every one is valid; ``SettingError`` naming every one that is not."""
    parsed: dict[str, str | None] = {}
    problems: dict[str, str] = {}   # every one, so that a form is corrected in one go
    for name, raw in values.items():
        spec = _runtime(name)
        if spec is None:
            known = ", ".join(s.name for s in runtime_settings())
            what = ("cannot be changed at run time" if any(s.name == name for s in declared())
                    else "is no setting of this service (nor of its plugins)")
            problems[name] = f"{echoed(name, quote=False)} {what}; these can be changed at run time: {known}"
            continue
        if raw is None:
            parsed[name] = None
            continue
        text = str(raw).lower() if isinstance(raw, bool) else str(raw)
        if "\x00" in text:   # it would reach a process's argv or environment, which cannot hold one
            problems[name] = f"{name} must not contain NUL characters"
            continue
        try:
            spec.parse(text)
        except ValueError as exc:   # a secret's value is never shown back, as in the configuration's errors
            problems[name] = f"{name}={'(set, hidden)' if spec.secret else echoed(text)}: {exc}"
            continue
        parsed[name] = text
    if problems:
        raise SettingError(problems)
    return parsed


def _runtime(name: str) -> Setting | None:
    # By name, built once per app: asked for on every marker of a stream.
    by_name = current_app.extensions.get(RUNTIME_BY_NAME)
    if by_name is None:
        by_name = current_app.extensions[RUNTIME_BY_NAME] = {s.name: s for s in runtime_settings()}
    return by_name.get(name)
