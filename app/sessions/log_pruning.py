"""Retention of sessions' logs: a finished session that ended more than
``CLAUDEOPS_LOG_RETENTION_DAYS`` ago loses its activity log rows and its run
log files (the ``.ndjson`` and the ``.stderr.log`` beside it).

The session's row is kept (status, cost, prompt, response, escalation links):
events, memories and history point at it. It records when its logs were
removed, which the session page says instead of showing an empty log.
Queued and running sessions are never touched, and no file outside the
results directory is ever deleted, whatever a row's ``log_path`` says. A
session whose run logs went to another results directory (the scheduler's,
on another host: app/sessions/results_dir.py) is left whole to the
retention of the host that has them, for ``LEFT_TO_THEIR_HOST`` past its
retention: a session still there then is no host's (that host is gone, or
its results directory was replaced), and is pruned wherever retention runs.
"""
from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

from flask import current_app
from sqlalchemy import func, or_, select, update

from app.batched_delete import count_rows, delete_in_batches, stopping
from app.extensions import db
from app.models import FINISHED_STATUSES, Session, SessionActivity
from app.runtime import setting
from app.sessions.results_dir import existing_id

log = logging.getLogger(__name__)

LOG_RETENTION = "CLAUDEOPS_LOG_RETENTION_DAYS"
# Sessions handled together: their activity rows are deleted in batches of
# rows, whatever the number of sessions, and then the sessions are marked.
SESSIONS_PER_ROUND = 100
# The scheduler holding a session's run logs prunes daily: a week is ample.
LEFT_TO_THEIR_HOST = timedelta(days=7)


@dataclass
class LogPruning:
    """What was removed (or, in a dry run, would be)."""

    sessions: int = 0
    activity_entries: int = 0
    files: int = 0
    bytes: int = 0
    # Past retention, but their run logs are in another results directory.
    left_to_their_host: int = 0


def prune_session_logs(now: datetime, dry_run: bool, batch_size: int) -> LogPruning | None:
    """Remove the logs of the sessions past retention; ``None`` when
    retention is off (0 keeps every log)."""
    days = setting(LOG_RETENTION)
    if not days:
        return None
    cutoff = now - timedelta(days=days)
    results_dir = Path(current_app.config["CLAUDEOPS_RESULTS_DIR"]).resolve()
    here = existing_id(results_dir)
    old = db.session.execute(old_sessions(cutoff, here)).all()
    done = LogPruning(left_to_their_host=db.session.scalar(
        select(func.count()).select_from(old_sessions(cutoff, here, elsewhere=True).subquery())))
    if done.left_to_their_host:
        log.info("retention: %d sessions past retention keep their logs: their run logs are in another "
                 "results directory (the scheduler's host), whose retention removes them",
                 done.left_to_their_host)
    if not dry_run:
        _clear_system_prompts_left_by_earlier_versions()
    db.session.commit()   # nothing held while files are looked at
    for start in range(0, len(old), SESSIONS_PER_ROUND):
        chunk = old[start:start + SESSIONS_PER_ROUND]
        ids = [session_id for session_id, _ in chunk]
        if dry_run:
            done.sessions += len(chunk)
            done.activity_entries += count_rows(SessionActivity, [SessionActivity.session_id.in_(ids)])
            for session_id, log_path in chunk:
                for path in _run_log_files(session_id, log_path, results_dir)[0]:
                    done.files, done.bytes = done.files + 1, done.bytes + _size(session_id, path)
            continue
        if stopping():   # nothing of these sessions touched yet: they are pruned next time
            break
        files_kept, tried_again = set(), set()
        for session_id, log_path in chunk:
            paths, stays = _run_log_files(session_id, log_path, results_dir)
            if stays:
                files_kept.add(session_id)
            for path in paths:
                size = _size(session_id, path)
                if _remove(session_id, path):
                    done.files, done.bytes = done.files + 1, done.bytes + size
                else:
                    tried_again.add(session_id)
        # The header offers a run log path only while a file of it is left:
        # cleared at once, so that a shutdown before these sessions are
        # marked leaves no path to a file already gone.
        gone = [session_id for session_id in ids if session_id not in files_kept | tried_again]
        db.session.execute(update(Session).where(Session.id.in_(gone)).values(log_path=None))
        db.session.commit()
        # A file that could not be removed (another user's, say) is tried
        # again at the next pruning, and said again, until it goes: marked,
        # the space it holds would never be freed. Until then its session
        # keeps its activity log too: unmarked, its page could not say
        # where an emptied one went.
        pruned = [session_id for session_id in ids if session_id not in tried_again]
        done.activity_entries += delete_in_batches(SessionActivity, [SessionActivity.session_id.in_(pruned)],
                                                   batch_size)
        if stopping():   # some rows may be left: these sessions are not marked, and are finished next time
            break
        # The system prompt goes with them: the largest text a session keeps
        # (its memory section alone up to the memory budget), there only to
        # look back on; the memory plugin prunes which memories it was given.
        db.session.execute(update(Session).where(Session.id.in_(pruned)).values(logs_removed_at=now,
                                                                               system_prompt=None))
        db.session.commit()
        done.sessions += len(chunk) - len(tried_again)
    if here is not None and not stopping():
        _remove_files_left_behind(here, results_dir, dry_run, done)
    return done


def _clear_system_prompts_left_by_earlier_versions() -> None:
    """Sessions whose logs an earlier version removed still hold their
    system prompt: it goes now, as it would have with them. Found by a
    read, which takes no lock: the search reads every pruned session (no
    index holds whether a prompt is there), and as one UPDATE it would hold
    the write lock over that scan at every pruning, seconds once years of
    sessions are off the page cache. Cleared by id, some sessions per
    transaction, as their logs are."""
    left = db.session.scalars(select(Session.id).where(Session.logs_removed_at.is_not(None),
                                                       Session.system_prompt.is_not(None))).all()
    db.session.commit()
    for start in range(0, len(left), SESSIONS_PER_ROUND):
        db.session.execute(update(Session).where(Session.id.in_(left[start:start + SESSIONS_PER_ROUND]))
                           .values(system_prompt=None))
        db.session.commit()


def _remove_files_left_behind(here: str, results_dir: Path, dry_run: bool, done: LogPruning) -> None:
    """The run logs in this results directory of sessions another host
    pruned: one that holds no such file leaves them where they are, and no
    longer looks for the session (its logs are marked removed), so the host
    that has them removes them now, as it would have."""
    left = db.session.execute(select(Session.id, Session.log_path).where(
        Session.results_dir_id == here, Session.logs_removed_at.is_not(None), Session.log_path.is_not(None))).all()
    db.session.commit()   # nothing held while files are looked at
    for session_id, log_path in left:
        # A run log recorded outside this directory was named once, when its session was pruned here.
        if not Path(log_path).parent.resolve().is_relative_to(results_dir):
            continue
        paths, _ = _run_log_files(session_id, log_path, results_dir)
        removed = True
        for path in paths:
            size = _size(session_id, path)
            if dry_run or _remove(session_id, path):
                done.files, done.bytes = done.files + 1, done.bytes + size
            else:
                removed = False
        if removed and not dry_run:
            db.session.execute(update(Session).where(Session.id == session_id).values(log_path=None))
            db.session.commit()


def sessions_pruned(now: datetime, dry_run: bool):
    """The ids of the sessions whose logs are removed; in a dry run, also
    those a pruning ``now`` would remove: what a plugin prunes with them."""
    removed = select(Session.id).where(Session.logs_removed_at.is_not(None))
    days = setting(LOG_RETENTION)
    if not (dry_run and days):
        return removed
    here = existing_id(Path(current_app.config["CLAUDEOPS_RESULTS_DIR"]).resolve())
    return removed.union(old_sessions(now - timedelta(days=days), here).with_only_columns(Session.id).order_by(None))


def old_sessions(cutoff: datetime, here: str | None = None, elsewhere: bool = False):
    """The finished sessions that ended before ``cutoff`` and still have their
    logs (by ix_sessions_logs_removed_at_ended_at): id and run log path; of
    them, those this host prunes: their run logs went to the results
    directory ``here`` names (or to none recorded), or no host pruned them
    in ``LEFT_TO_THEIR_HOST``; with ``elsewhere`` the others."""
    recorded_here = or_(Session.results_dir_id.is_(None), Session.ended_at < cutoff - LEFT_TO_THEIR_HOST)
    if here is not None:
        recorded_here = or_(recorded_here, Session.results_dir_id == here)
    return (select(Session.id, Session.log_path)
            .where(Session.logs_removed_at.is_(None), Session.ended_at < cutoff,
                   Session.status.in_(FINISHED_STATUSES), ~recorded_here if elsewhere else recorded_here)
            .order_by(Session.ended_at))


def _run_log_files(session_id: int, log_path: str | None, results_dir: Path) -> tuple[list[Path], bool]:
    """The session's run log and stderr log to remove, and whether a file of
    them stays: one outside the results directory is logged and left alone,
    and a missing run log is logged."""
    if not log_path:
        return [], False
    run_log = Path(log_path)
    found, stays = [], False
    for path in (run_log, run_log.with_suffix(".stderr.log")):
        if not os.path.lexists(path):
            # A session ended by a crash has no stderr log: the stderr it
            # gathered in a temporary file went with the process.
            if path == run_log:
                log.warning("retention: session %s: %s is already gone", session_id, path)
            continue
        try:
            # Where the name is that unlink removes: a link named outside is
            # outside, whatever it points at.
            inside = path.parent.resolve().is_relative_to(results_dir)
        except (OSError, RuntimeError) as exc:   # a symlink loop, a path the system refuses
            log.warning("retention: session %s: cannot resolve %s (%s)", session_id, path, exc)
            inside = False
        if inside:
            found.append(path)
        else:
            log.warning("retention: session %s: %s is not inside the results directory %s; left alone",
                        session_id, path, results_dir)
            stays = True
    return found, stays


def _size(session_id: int, path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError as exc:
        log.warning("retention: session %s: cannot read the size of %s (%s)", session_id, path,
                    exc.strerror or exc)
        return 0


def _remove(session_id: int, path: Path) -> bool:
    try:
        path.unlink()
    except FileNotFoundError:
        return True
    except OSError as exc:
        log.warning("retention: session %s: cannot remove %s (%s); it is tried again at the next pruning",
                    session_id, path, exc.strerror or exc)
        return False
    return True
