"""The one scheduler: decides when tier-1 sessions run and runs every session,
one at a time.

APScheduler owns *when*: a one-shot job enqueues the next scheduled tier-1
session, and is re-armed ``CLAUDEOPS_INTERVAL`` seconds after that session
ends, so scheduled runs never overlap or pile up however long one takes.
That end is read from the database at start: after a restart within the
interval the next run waits for the rest of it; after a longer pause it runs
at once. A single worker thread owns *what runs*: it claims queued sessions
(scheduled, "Run now", API) oldest first and runs them to the end, so two
sessions never run at once. Only ``claudeops serve`` (or ``claudeops
scheduler``) starts this, never the web workers.

It runs sessions only while it holds the runner lock (runner_lock.py): one
scheduler per state directory and, on PostgreSQL, per database. A thread
of its own checks every second that the database's lock is still held,
taking it again after a lost connection; a scheduler that has lost it to
another process stops, and `claudeops serve` then exits so that an init system
can restart it.

Retention (app/retention.py) runs beside the heartbeat: once at start, then
daily, in its own thread, deleting in small batches so that the running
session's writes go on.
"""
from __future__ import annotations

import logging
import os
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Optional

from apscheduler.schedulers.background import BackgroundScheduler
from flask import Flask
from sqlalchemy import update
from sqlalchemy.exc import OperationalError

from app import dbfaults, process_identity, redaction, retention
from app.batched_delete import stop_pruning_on
from app.extensions import db
from app.models import FAILED, SchedulerState
from app.plugin_types import RunInfo
from app.runtime import setting
from app.sessions import control, escalation, recovery
from app.sessions.clock_watch import ClockWatch
from app.sessions.manager import finish_late, run_session
from app.sessions.runner_lock import CHECK_SECONDS as LOCK_CHECK_SECONDS, RunnerLock
from app.sessions.runner_lock import SchedulerAlreadyRunning  # noqa: F401  (start raises it)
from app.timeutil import isoformat, utcnow

log = logging.getLogger(__name__)

SCHEDULED_JOB_ID = "scheduled-tier1"
QUEUE_POLL_SECONDS = 1.0
# While the worker keeps failing the same way, how often the log says so.
FAILURE_LOG_SECONDS = 60
HEARTBEAT_SECONDS = 15
CLOCK_LOOK_SECONDS = 1.0
# An interval changed on /config is in force everywhere within a second (runtime.py).
INTERVAL_LOOK_SECONDS = 1.0
RETENTION_JOB_ID = "retention"
RETENTION_HOURS = 24
SCHEDULE_TRIGGER = "schedule"
# Why the running session was stopped when the lock went: the service exits
# after it, but no one stopped the service, and it may be running sessions
# elsewhere now.
LOST_LOCK_REASON = (f"the scheduler lost the database's runner lock (another Claude Ops process took it, or the "
                    f"database could not be reached again within {dbfaults.OUTAGE_SECONDS:g} s); the service exits, "
                    "for its init system to start it again")


class SessionScheduler:
    def __init__(self, app: Flask):
        self.app = app
        self.shutdown_event = threading.Event()
        self._stopped = threading.Event()
        self._wake = threading.Event()
        # Held while deciding whether to queue or re-arm, so the schedule's
        # job firing and the worker's re-arm check cannot both act.
        self._schedule_lock = threading.Lock()
        self._aps = BackgroundScheduler(timezone="UTC")
        self._worker = threading.Thread(target=self._work, name="session-worker", daemon=True)
        # Its own thread: the worker is busy for a whole session, and a clock set back
        # meanwhile would stop the heartbeat until the session ends.
        self._clock_watcher = threading.Thread(target=self._watch_clock, name="clock-watch", daemon=True)
        # Its own thread too, checking every second: at the heartbeat's pace, a
        # second scheduler would have up to 15 s to take a lock lost with its
        # connection.
        self._lock_keeper = threading.Thread(target=self._keep_the_lock, name="runner-lock", daemon=True)
        # And one for the interval: the worker, which also arms the schedule,
        # is busy for a whole session, and an interval changed meanwhile must
        # move the armed run (or remove it, or arm one) before it fires at
        # the old time or the session ends.
        self._interval_watcher = threading.Thread(target=self._follow_interval, name="interval-watch",
                                                  daemon=True)
        self._lock = RunnerLock(app.config["CLAUDEOPS_STATE_DIR"], app.config["SQLALCHEMY_DATABASE_URI"])
        self._lock_held = False
        self._lock_lost = False
        self._started_at = utcnow()
        self._armed_interval: int | None = None
        # Set when the schedule's job is armed, cleared when it runs. APScheduler
        # takes a fired date job out of its store before the job's thread runs
        # it: no job and this set means that run is on its way, not missing.
        self._fire_pending = False
        # Set while the worker runs a scheduled session, until the time it
        # ended is known here: ended in the database only, it is no longer
        # pending, and the schedule must not be armed from when it was queued.
        self._scheduled_running = False
        # The schedule's clock: the next scheduled run is due `interval` after
        # the later of the last time it fired and the end of its last session.
        # Read from the database at start, so that a restart keeps the interval.
        self._last_fired = None
        self._last_ended = None
        # Sessions whose run raised before their end was recorded (the
        # database refusing writes, most likely), with the reason and the
        # time of that end, to record as soon as the database takes it.
        # Session id → its UnfinishedSession.
        self._unfinished: dict[int, UnfinishedSession] = {}
        self._undecided: dict[int, escalation.Undecided] = {}   # escalations the database refused to decide
        # The worker failing again and again (a database that takes no
        # writes): since when, how many times, and when it was last logged.
        self._failing: Optional[WorkerFailures] = None

    def hold_runner_lock(self) -> None:
        """Take the runner lock now (``start`` takes it if this was not
        called): before the migrations, so that a second scheduler started at
        the same moment is refused as one, not by the first one's migrations."""
        if not self._lock_held:
            self._lock.acquire()
            self._lock_held = True

    def start(self) -> None:
        self.hold_runner_lock()
        with self.app.app_context():
            recovery.recover()   # before the worker claims anything
            self._last_fired, self._last_ended = map(_not_after_now, control.last_queued_and_ended(SCHEDULE_TRIGGER))
            interval = self._interval()
            if db.session.get(SchedulerState, 1) is None:   # before any thread can race to create it
                db.session.add(SchedulerState(id=1))
                db.session.commit()
        self._aps.start()
        # However late a loaded machine lets them run, they run (once for
        # all the runs missed): APScheduler would skip a run more than a
        # second late, a day's pruning or a heartbeat the dashboard waits for.
        # Two beats at once: one waiting out SQLite's busy timeout (as long as
        # a beat's period) on a locked database is still running when the
        # next is due, which APScheduler would skip with a warning of its
        # own, a second line for each beat refused.
        self._aps.add_job(self._heartbeat, "interval", seconds=HEARTBEAT_SECONDS, id="heartbeat",
                          next_run_time=utcnow(), misfire_grace_time=None, coalesce=True, max_instances=2)
        self._aps.add_job(self._prune, "interval", hours=RETENTION_HOURS, id=RETENTION_JOB_ID,
                          next_run_time=utcnow(), misfire_grace_time=None, coalesce=True)
        self._ensure_armed()
        self._worker.start()
        self._clock_watcher.start()
        self._lock_keeper.start()
        self._interval_watcher.start()
        log.info("scheduler started (interval %s)", f"{interval} s" if interval else "off: ad-hoc runs only")

    def next_scheduled_run(self):
        job = self._aps.get_job(SCHEDULED_JOB_ID)
        return job.next_run_time if job else None

    def shutdown(self, timeout: float = 30.0) -> None:
        """Stop scheduling, end the running session (recorded as stopped) and wait for it."""
        if self.shutdown_event.is_set():   # already stopping: wait for that instead
            self._stopped.wait(timeout)
            return
        self.shutdown_event.set()
        self._wake.set()
        if self._aps.running:
            self._aps.shutdown(wait=False)
        if self._worker.is_alive():
            self._worker.join(timeout)
        if self._interval_watcher.is_alive():   # or it could publish a next run after the stop
            self._interval_watcher.join(timeout)
        try:
            self._record_last_words()
        finally:
            self._lock.release()
            self._stopped.set()

    def _record_last_words(self) -> None:
        """Once more, what the worker could not record, and that the scheduler
        stopped; a database that takes neither now (locked by another
        writer, full) costs a line in the log each, not the shutdown."""
        try:
            self._record_unfinished()
        except Exception as exc:
            for session_id, end in self._unfinished.items():
                log.warning("session %s is left recorded as running (%s; the database refused that too: %s); the "
                            "next start marks it interrupted", session_id, end.reason, dbfaults.describe(exc))
            for session_id, undecided in self._undecided.items():
                log.error("session %s: the escalation it asked for (%s) is not queued: the database refused it until "
                          "the service stopped (%s); queue it with Run now if it is still wanted", session_id,
                          undecided.reason, dbfaults.describe(exc))
        if self._lock_lost:   # the state is the new holder's to publish
            return
        with self.app.app_context():
            try:
                self._publish(next_run=None, alive=False)
            except Exception as exc:
                log.warning("could not record that the scheduler stopped (%s): the dashboard says it is silent "
                            "once its heartbeat is overdue", dbfaults.describe(exc))
            finally:
                db.session.remove()

    def verify_lock(self) -> bool:
        """Still the one scheduler? If the database's lock was lost to another
        scheduler (or cannot be taken again), stop: the running session ends
        as stopped and nothing more is claimed."""
        if self.shutdown_event.is_set():   # stopping anyway; the lock is being given back
            return False
        if self._lock_lost or self._lock.verify():
            return not self._lock_lost
        if self.shutdown_event.is_set():   # given back by a shutdown while the check waited
            return False
        log.error("this scheduler no longer holds the database's runner lock (another Claude Ops process took it, "
                  "or the database could not be reached again within %g s); it stops running sessions, the running "
                  "one ends as stopped, and the service exits for its init system to start it again: if another "
                  "process holds the lock, that one runs sessions from now on", dbfaults.OUTAGE_SECONDS)
        self._lock_lost = True
        # What the running session's stop is put down to: not the service's stop (manager.shutdown_reason).
        self.shutdown_event.claudeops_reason = LOST_LOCK_REASON
        threading.Thread(target=self.shutdown, name="scheduler-stop", daemon=True).start()
        return False

    def _interval(self) -> int:
        """Read each time: an operator may change it on /config while we run."""
        return setting("CLAUDEOPS_INTERVAL")

    def _enqueue_scheduled(self) -> None:
        with self._schedule_lock, self.app.app_context():
            try:
                self._fire_pending = False
                try:
                    if not control.has_pending(SCHEDULE_TRIGGER):
                        session = control.enqueue(tier=1, trigger=SCHEDULE_TRIGGER)
                        log.info("queued scheduled session %s", session.id)
                except OperationalError as exc:
                    # No wake: the worker's next poll arms it again, a second from now, not at once.
                    log.warning("scheduled session not queued: %s; it is tried again in a moment",
                                _storage_fault_or_raise(exc))
                    return
                # Only once it is queued: a run the database refused is armed
                # again from the last one, so due now, not an interval later.
                self._last_fired = utcnow()
                try:
                    # The job is spent: until its session ends there is no next run,
                    # rather than this one, now past, until the next heartbeat.
                    self._publish(next_run=None)
                except OperationalError as exc:
                    # The session is queued all the same, and is not queued again:
                    # only the time shown as the next run waits for the heartbeat.
                    log.warning("scheduled session queued, but the schedule not published: %s; the next "
                                "heartbeat publishes it", _storage_fault_or_raise(exc))
            finally:
                db.session.remove()
        self._wake.set()

    def _ensure_armed(self) -> None:
        """Keep the schedule's one job in step with the interval in force and
        with the last scheduled run; nothing is armed while a scheduled
        session is queued or running (it is re-armed when that one ends)."""
        if self.shutdown_event.is_set():
            return
        with self._schedule_lock, self.app.app_context():
            try:
                interval = self._interval()
                job = self._aps.get_job(SCHEDULED_JOB_ID)
                if not interval:
                    if job:
                        job.remove()
                        self._publish(next_run=None)   # the dashboard shows no next run at once
                    self._armed_interval = None
                    self._fire_pending = False
                    return
                if self._scheduled_running or control.has_pending(SCHEDULE_TRIGGER):
                    return
                if job is None and self._fire_pending:
                    # Fired, and its run waits for this lock: a second job now
                    # would be skipped by APScheduler ("maximum number of
                    # running instances reached"), with a warning in the log.
                    return
                if job is not None and interval == self._armed_interval:
                    return
                last = max((t for t in (self._last_fired, self._last_ended) if t), default=None)
                due = max(utcnow(), last + timedelta(seconds=interval)) if last else utcnow()
                self._aps.add_job(self._enqueue_scheduled, "date", id=SCHEDULED_JOB_ID, replace_existing=True,
                                  run_date=due, misfire_grace_time=None)
                self._armed_interval = interval
                self._fire_pending = True
                self._publish(next_run=due)
            finally:
                db.session.remove()

    def _keep_the_lock(self) -> None:
        """Take the database's lock again as soon as its connection is lost;
        stop (``verify_lock``) if it went to another process."""
        while not self.shutdown_event.wait(LOCK_CHECK_SECONDS):
            try:
                if not self.verify_lock():
                    return
            except Exception:   # the thread must outlive a failure, or the lock is checked at heartbeats only
                log.exception("checking the database's runner lock failed; it is checked again in a second")

    def _follow_interval(self) -> None:
        logged: Optional[tuple[str, float]] = None   # the failure last logged, and when
        while not self.shutdown_event.wait(INTERVAL_LOOK_SECONDS):
            try:
                self._ensure_armed()
            except Exception as exc:   # the thread must outlive a failure, or no later change is followed
                # A database that refuses it is the worker's to tell, once a
                # minute (not a line a second); a mistake keeps its traceback,
                # and is told as seldom while it repeats: one that fails
                # every look (a table the database user may no longer read,
                # a damaged file) would otherwise write a traceback a second.
                if dbfaults.storage_fault(exc) is not None:
                    continue
                why, now = dbfaults.describe(exc), time.monotonic()
                if logged is None or logged[0] != why or now - logged[1] >= FAILURE_LOG_SECONDS:
                    logged = (why, now)
                    log.exception("following a changed interval failed; it is looked at again in a second")
            else:
                logged = None

    def _watch_clock(self) -> None:
        watch = ClockWatch(self._clock_set_back)
        while not self.shutdown_event.wait(CLOCK_LOOK_SECONDS):
            try:
                watch.look()
            except Exception:   # the thread must outlive a failure, or no later setting back is seen
                log.exception("moving the schedule with the clock failed; the clock is looked at again in a second")

    def _clock_set_back(self, by: timedelta) -> None:
        """Every job, and the times the schedule counts from, moved back as
        far as the clock was: each runs as long from now as it was due to
        before (``ClockWatch``)."""
        log.warning("the clock was set back %s: the schedule, the heartbeat and pruning are moved back with it",
                    timedelta(seconds=round(by.total_seconds())))
        with self._schedule_lock:
            self._last_fired, self._last_ended = (None if when is None else when - by
                                                  for when in (self._last_fired, self._last_ended))
            for job in self._aps.get_jobs():
                if job.next_run_time is not None:
                    job.modify(next_run_time=job.next_run_time - by)
            # A beat now: the dashboard shows the next session's new time at once.
            self._aps.modify_job("heartbeat", next_run_time=utcnow())

    def _heartbeat(self) -> None:
        """A database that takes no write now (locked past the busy timeout by
        a long transaction, a server down) costs this beat only: one line in
        the log, and the next beat tries again."""
        if not self.verify_lock():
            return
        with self.app.app_context():
            try:
                self._publish(next_run=self.next_scheduled_run())
            except OperationalError as exc:
                fault = dbfaults.storage_fault(exc)
                if fault is None:
                    raise
                log.warning("scheduler heartbeat not recorded: %s; the next one tries again in %d s",
                            fault, HEARTBEAT_SECONDS)
            finally:
                db.session.remove()

    def _prune(self) -> None:
        """Remove what is past its retention; a failure is logged and the
        next day's run tries again."""
        if not self.verify_lock():
            return
        with self.app.app_context():
            try:
                stop_pruning_on(self.shutdown_event)
                report = retention.prune()
                if report.anything:
                    log.info("retention removed %s", ", ".join(report.lines()))
            except Exception as exc:
                # A database that takes nothing now (locked, full, a server
                # down) is a line; a mistake keeps its traceback.
                log.error("retention failed (%s); it runs again in %d hours", dbfaults.describe(exc),
                          RETENTION_HOURS, exc_info=dbfaults.storage_fault(exc) is None)
            finally:
                db.session.remove()

    def _publish(self, next_run, alive: bool = True) -> None:
        """Tell the dashboard workers (through the database) that we are alive
        and when the next scheduled session is due."""
        db.session.execute(update(SchedulerState).where(SchedulerState.id == 1).values(
            pid=os.getpid() if alive else None, process=process_identity.own() if alive else None,
            started_at=self._started_at,
            heartbeat_at=utcnow() if alive else None, next_run_at=next_run))
        db.session.commit()

    def _work(self) -> None:
        while not self.shutdown_event.is_set():
            try:
                self._record_unfinished()
                ran = self._run_next()
                # After a session too: the next scheduled one is due an interval after the
                # last one ended, however many other sessions are queued behind it.
                self._ensure_armed()
            except Exception as exc:
                # The worker must outlive a database that refuses it for a while.
                self._failed(exc)
                ran = False
            else:
                self._recovered()
            if not ran:
                self._wake.wait(QUEUE_POLL_SECONDS)
                self._wake.clear()

    def _run_next(self) -> bool:
        if self._lock_lost:
            return False
        with self.app.app_context():
            try:
                escalation.stop_beyond_maximum()
                session_id = control.claim_next_id()
                if session_id is None:
                    return False
                trigger = None
                try:
                    # Read back inside the try: the claim is committed, and a
                    # database that fails this read must not leave it running.
                    session = control.claimed(session_id)
                    trigger = session.trigger
                    self._scheduled_running = trigger == SCHEDULE_TRIGGER
                    log.info("running session %s (tier %s, %s)", session_id, session.tier, trigger)
                    run_session(session, self.shutdown_event)
                except Exception as exc:
                    if (undecided := getattr(exc, "claudeops_undecided", None)) is not None:
                        # Its end is recorded: only its escalation is left to decide, and the worker goes on.
                        self._keep_undecided(undecided, exc)
                        return True
                    # Written by a plain UPDATE, which no flush redacts, and
                    # a driver's message may quote a connection string.
                    status, reason = _unfinished_end(exc)
                    self._unfinished[session_id] = UnfinishedSession(
                        redaction.redactor().redact(reason), utcnow(), status, getattr(exc, "claudeops_run", None))
                    raise
                finally:
                    # Raised or not, it has ended (its end recorded later, if
                    # need be): the next is due an interval after, not at once.
                    if trigger == SCHEDULE_TRIGGER:
                        self._last_ended = utcnow()
                        self._armed_interval = None   # re-arm from this end
                        self._scheduled_running = False
                return True
            finally:
                db.session.remove()

    def _failed(self, exc: Exception) -> None:
        """Log the worker's failure: in full the first time, and when its
        cause changes; then, while it keeps failing the same way (a retry a
        second through an outage), once a minute with the count, so that a
        full disk is not filled further by the log of its own retries. A
        mistake (not the database's fault) keeps its traceback."""
        why = dbfaults.describe(exc)
        failing, now = self._failing, time.monotonic()
        if failing is None or failing.why != why:
            self._failing = WorkerFailures(why, now, now)
            log.error("scheduler worker failed (%s); retrying", why, exc_info=dbfaults.storage_fault(exc) is None)
            return
        failing.count += 1
        if now - failing.logged_at >= FAILURE_LOG_SECONDS:
            failing.logged_at = now
            log.error("scheduler worker still failing (%s): %d times in %.0f s; retrying", why, failing.count,
                      now - failing.since)

    def _recovered(self) -> None:
        failing, self._failing = self._failing, None
        if failing is not None and failing.count > 1:
            log.warning("scheduler worker works again, after failing %d times in %.0f s", failing.count,
                        time.monotonic() - failing.since)

    def _record_unfinished(self) -> None:
        """Record sessions whose run raised as ended (failed, unless it came as
        far as its end), so none stays "running" while nothing runs it, and
        decide the escalations the database refused as their sessions ended;
        retried until the database takes it."""
        if not self._unfinished and not self._undecided:
            return
        with self.app.app_context():
            try:
                for session_id, end in list(self._unfinished.items()):
                    recorded = control.end_running(session_id, end.reason, end.ended_at, end.status)
                    del self._unfinished[session_id]
                    if recorded:
                        log.warning("session %s recorded as %s: %s", session_id, end.status, end.reason)
                        self._tell_late_end(session_id, end)
                for session_id, undecided in list(self._undecided.items()):
                    escalation.consider_again(undecided, self.shutdown_event)
                    del self._undecided[session_id]
                    log.warning("session %s: the database takes writes again, and the escalation it asked for is "
                                "decided", session_id)
            finally:
                db.session.remove()

    def _keep_undecided(self, undecided: escalation.Undecided, exc: Exception) -> None:
        """An escalation the database refused to decide, kept to try again
        with the sessions left unfinished: the agent's request is not dropped
        while the service runs."""
        dbfaults.roll_back()
        self._undecided[undecided.session_id] = undecided
        log.error("session %s: the escalation it asked for (%s) could not be decided (%s); it is tried again until "
                  "the database takes it", undecided.session_id, undecided.reason, dbfaults.describe(exc),
                  exc_info=dbfaults.storage_fault(exc) is None)

    def _tell_late_end(self, session_id: int, end: UnfinishedSession) -> None:
        """Told once, whatever comes of it: the end is recorded by now, and a
        database that still refuses the plugins' writes costs a line in the
        log, not the worker's next session."""
        try:
            finish_late(session_id, end.run, self.shutdown_event)
        except Exception as exc:
            if (undecided := getattr(exc, "claudeops_undecided", None)) is not None:
                self._keep_undecided(undecided, exc)
                return
            log.error("session %s: its end is recorded, but the plugins could not be told of it (%s)", session_id,
                      dbfaults.describe(exc), exc_info=dbfaults.storage_fault(exc) is None)
            dbfaults.roll_back()


@dataclass
class UnfinishedSession:
    """A session whose run raised, to be recorded as ended once the database takes it."""
    reason: str
    ended_at: datetime
    status: str
    run: Optional[RunInfo]   # if the plugins were told it began


@dataclass
class WorkerFailures:
    why: str
    since: float
    logged_at: float
    count: int = 1


def _unfinished_end(exc: Exception) -> tuple[str, str]:
    """The status and reason of a session whose run raised: the end it
    meant to record, if it came that far, and why that could not be
    recorded then; else failed, saying why."""
    end = getattr(exc, "claudeops_session_end", None)
    if end is None:
        return FAILED, f"the session could not be finished: {dbfaults.describe(exc)}"
    status, meant = end
    late = f"its end could not be recorded then: {dbfaults.describe(exc)}"
    return status, f"{meant} ({late})" if meant else late


def _storage_fault_or_raise(exc: OperationalError) -> str:
    """What is wrong with the database, for one line in the log; a fault
    that is not the database's (a mistake) is raised again, with its traceback."""
    fault = dbfaults.storage_fault(exc)
    if fault is None:
        raise exc
    return fault


def _not_after_now(when: Optional[datetime]) -> Optional[datetime]:
    """A scheduled session's time as the schedule counts from it: never
    later than now. A time to come was written by a clock that was ahead (a
    machine that booted before NTP set it back): counted from it, the next
    scheduled session would wait until the clock catches up with it."""
    now = utcnow()
    if when is None or when <= now:
        return when
    log.warning("a scheduled session is recorded at %s, %s from now (the clock was ahead then, or is behind "
                "now): the interval counts from now", isoformat(when), when - now)
    return now
