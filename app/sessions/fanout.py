"""Fan one text block out to every plugin's ``claudeops_markers``, so that a
plugin that raises loses only its own rows, and nothing is committed (the
stream handler commits in batches).

A savepoint around every plugin call would do, but would cost more than the
markers themselves: there are several plugins, and a text block rarely holds
a marker for any one of them, so most calls write nothing. Instead a
savepoint marks the state after the last call that wrote: before each call,
a new one is taken only if something was written since the last mark. A
call that raises rolls back to the mark, which is exactly the state before
it; with no mark since the last commit, nothing was written since then and
the whole transaction is rolled back. Rows staged for the commit
(app/staged_rows.py) are not in the database yet: their mark is how many
there were before the call, and a call that raises takes back those staged
since, and only those, whichever way the database is rolled back.

Before each commit, ``flush`` calls every plugin's ``claudeops_markers_flush``
the same way: the plugins that record markers a batch at a time write them then.

A plugin that names its markers' tags (``claudeops_marker_tags``) is called
only for the blocks that contain one: most blocks hold no marker at all.
"""
from __future__ import annotations

import logging
import threading
from dataclasses import replace
from typing import Any, Optional

from sqlalchemy import event
from sqlalchemy.engine import Engine
from sqlalchemy.exc import InvalidRequestError
from sqlalchemy.orm import Session, SessionTransaction

from app import marker_queue, staged_rows
from app.dbfaults import passing, storage_fault
from app.extensions import db
from app.plugin_fault_log import log_fault
from app.plugin_types import MarkerRecord, PendingRecords, RunInfo
from app.plugins import of_type, plugin_manager
from app.sessions.marker_tags import installed_tags, tags_by_plugin
from app.sessions.repeats import repeats_counted

log = logging.getLogger(__name__)

HOOK = "claudeops_markers"
FLUSH_HOOK = "claudeops_markers_flush"
RECORD_TYPES = (MarkerRecord, PendingRecords)
_NOT_WRITES = ("SELECT", "PRAGMA", "SAVEPOINT", "RELEASE", "ROLLBACK", "BEGIN", "COMMIT")
# Per thread: a session's fan-out runs in one thread, and only its own writes
# may move the count. Another thread's (the scheduler's heartbeat) would make
# it take a savepoint with nothing written, and on SQLite a savepoint that
# begins a transaction begins a deferred one: its first read pins a snapshot,
# and its first write fails at once if any other connection wrote since.
_writes = threading.local()


@event.listens_for(Engine, "before_cursor_execute")
def _count_writes(conn, cursor, statement, parameters, context, executemany) -> None:
    """Every statement that may change a row, on any connection of this
    thread. Only whether the count moved matters."""
    if not statement.lstrip()[:9].upper().startswith(_NOT_WRITES):
        _writes.count = getattr(_writes, "count", 0) + 1


def _statements_that_write() -> int:
    return getattr(_writes, "count", 0)


class MarkerFanOut:
    def __init__(self, run: RunInfo, tags: Optional[dict[str, tuple[str, ...]]] = None):
        """``tags``: each plugin's marker tags, as the session asked for them
        (``tags_by_plugin``); asked for here unless given."""
        # The plugins are fixed while the service runs: look them up once, not per text block.
        hooks = plugin_manager().hook
        tags = tags_by_plugin() if tags is None else tags
        # As the session's RunInfo has them, however it was made: a marker's
        # text ends at the next marker of an installed plugin, not at any "[WORD:".
        self.run = replace(run, marker_tags=installed_tags(tags))
        self.impls = [(impl, tags.get(impl.plugin_name))
                      for impl in reversed(getattr(hooks, HOOK).get_hookimpls())
                      if not (impl.hookwrapper or impl.wrapper)]  # wrappers need pluggy's own call loop
        self.flushes = [impl for impl in reversed(getattr(hooks, FLUSH_HOOK).get_hookimpls())
                        if not (impl.hookwrapper or impl.wrapper)]
        self.savepoint: Optional[SessionTransaction] = None
        self.marked_at: Optional[int] = None   # write count when the state was last marked
        # What each plugin's markers left to fill since the last flush.
        self.pending: dict[str, list[PendingRecords]] = {}
        self.committed()

    def committed(self) -> None:
        """The caller committed: that is the mark now."""
        self.savepoint = None
        self.marked_at = _statements_that_write()

    def __call__(self, text: str) -> list[Any]:
        """Every plugin's records for ``text``, flattened, in pluggy's order;
        anything else a plugin returned is logged and left out."""
        holds = text.__contains__
        due = [impl for impl, tags in self.impls if tags is None or any(map(holds, tags))]
        if not due:
            return []
        kwargs = {"text": text, "run": self.run}
        session = db.session()
        session.flush()   # the caller's own changes are no plugin's to lose
        results = []
        for impl in due:
            self._mark_if_written(session)
            staged = staged_rows.mark()
            try:
                with marker_queue.recording() as queued:
                    result = impl.function(*(kwargs[name] for name in impl.argnames))
                # Its rows reach the database in its own turn: one the database
                # refuses is this plugin's failure, not the next one's.
                session.flush()
            except Exception as exc:
                if storage_fault(exc) or passing(exc):
                    raise   # the database's failure, not this plugin's: the stream handler's to meet
                log_fault(log, impl.plugin_name, HOOK, type(exc).__name__, "plugin %s failed in %s",
                          impl.plugin_name, HOOK, exc_info=True)
                self._undo(session, staged)
                marker_queue.take_back(queued)   # what it queued before it raised, as its rows
                # Said where the agent wrote the markers, as a flush that fails is.
                results.append(MarkerRecord("markers", "lost", f"plugin {impl.plugin_name} failed on this text "
                                            f"block ({type(exc).__name__}); nothing it read in it was stored; "
                                            "see the service log", stored=False))
                continue
            if result is not None:
                records = of_type(impl.plugin_name, HOOK, result, RECORD_TYPES)
                self.pending.setdefault(impl.plugin_name, []).extend(
                    record for record in records if isinstance(record, PendingRecords))
                results.extend(repeats_counted(records))
        return results

    def flush(self) -> None:
        """Before the batch is committed: every plugin writes what its
        markers deferred, each marked and undone on failure as in a text
        block's fan-out. (A savepoint is never the transaction's first
        statement: on SQLite it would begin a deferred transaction whose
        reads pin a snapshot, and its first write would then fail at once
        if a dashboard worker had written since.)"""
        pending, self.pending = self.pending, {}
        if not self.flushes:
            return
        session = db.session()
        session.flush()
        kwargs = {"run": self.run}
        for impl in self.flushes:
            self._mark_if_written(session)
            staged = staged_rows.mark()
            try:
                impl.function(*(kwargs[name] for name in impl.argnames))
                session.flush()
            except Exception as exc:
                if storage_fault(exc) or passing(exc):
                    raise
                log_fault(log, impl.plugin_name, FLUSH_HOOK, type(exc).__name__, "plugin %s failed in %s",
                          impl.plugin_name, FLUSH_HOOK, exc_info=True)
                self._undo(session, staged)
                # Records it filled before it failed name rows just rolled back.
                for records in pending.get(impl.plugin_name, ()):
                    records.records = None

    def _mark_if_written(self, session: Session) -> None:
        if self.savepoint is not None and not self.savepoint.is_active:
            self.committed()   # a plugin committed on its own: that is the mark
        if _statements_that_write() == self.marked_at:
            return
        if self.savepoint is not None:
            self.savepoint.commit()   # RELEASE: one savepoint at a time is enough
        self.savepoint = session.begin_nested()
        self.marked_at = _statements_that_write()

    def _undo(self, session: Session, staged: int) -> None:
        """Back to the state before the failed call: the database to the mark,
        and of the rows staged for the commit (app/staged_rows.py), those
        staged since ``staged``."""
        try:
            if self.savepoint is None:
                raise InvalidRequestError("no mark since the last commit")
            # Also when the failed flush has deactivated the savepoint (it does
            # on PostgreSQL, where the failed statement aborts the transaction
            # up to it): rolling it back returns to the mark, not to the last commit.
            self.savepoint.rollback()
            staged_rows.undo(staged)
        except InvalidRequestError:   # no mark, or a plugin closed it by committing
            with staged_rows.kept_through_rollback(staged):
                session.rollback()
        # Whatever the failed call left, the next one starts from a fresh mark.
        self.savepoint = None
        self.marked_at = None

