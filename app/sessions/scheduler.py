"""The one scheduler: decides when tier-1 sessions run and runs every session,
one at a time.

APScheduler owns *when*: a one-shot job enqueues the next scheduled tier-1
session, and is re-armed ``CLAUDEOPS_INTERVAL`` seconds after that session
ends, so scheduled runs never overlap or pile up however long one takes. A
single worker thread owns *what runs*: it claims queued sessions (scheduled,
"Run now", API) oldest first and runs them to the end, so two sessions never
run at once. Only ``claudeops serve`` (or ``claudeops scheduler``) starts this,
never the web workers.
"""
from __future__ import annotations

import fcntl
import logging
import os
import threading
from datetime import timedelta
from pathlib import Path

from apscheduler.schedulers.background import BackgroundScheduler
from flask import Flask

from app.extensions import db
from app.sessions import control
from app.sessions.manager import run_session
from app.timeutil import utcnow

log = logging.getLogger(__name__)

SCHEDULED_JOB_ID = "scheduled-tier1"
QUEUE_POLL_SECONDS = 1.0
SCHEDULE_TRIGGER = "schedule"


class SchedulerAlreadyRunning(RuntimeError):
    """Another scheduler holds this state directory."""


class RunnerLock:
    """One process runs sessions per state directory: the scheduler, or a
    foreground `claudeops run`. A second refuses instead of running sessions
    beside the first. The kernel drops the lock if its holder crashes."""

    def __init__(self, state_dir: str):
        self.path = Path(state_dir) / "scheduler.lock"
        self._file = None

    def acquire(self) -> None:
        handle = open(self.path, "a+")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "unknown"
            handle.close()
            raise SchedulerAlreadyRunning(
                f"another Claude Ops process (pid {holder}) is running sessions on {self.path.parent}; "
                "stop it first") from None
        handle.truncate(0)
        handle.write(str(os.getpid()))
        handle.flush()
        self._file = handle

    def release(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


class SessionScheduler:
    def __init__(self, app: Flask):
        self.app = app
        self.interval = app.config["CLAUDEOPS_INTERVAL"]
        self.shutdown_event = threading.Event()
        self._wake = threading.Event()
        # Held while deciding whether to queue or re-arm, so the schedule's
        # job firing and the worker's re-arm check cannot both act.
        self._schedule_lock = threading.Lock()
        self._aps = BackgroundScheduler(timezone="UTC")
        self._worker = threading.Thread(target=self._work, name="session-worker", daemon=True)
        self._lock = RunnerLock(app.config["CLAUDEOPS_STATE_DIR"])

    def start(self) -> None:
        self._lock.acquire()
        with self.app.app_context():
            interrupted = control.mark_interrupted()
        if interrupted:
            log.warning("marked %d session(s) left running by an earlier crash as interrupted", interrupted)
        self._aps.start()
        if self.interval:
            self._arm(delay_seconds=0)
        self._worker.start()
        log.info("scheduler started (interval %s)", f"{self.interval} s" if self.interval else "off: ad-hoc runs only")

    def next_scheduled_run(self):
        job = self._aps.get_job(SCHEDULED_JOB_ID)
        return job.next_run_time if job else None

    def shutdown(self, timeout: float = 30.0) -> None:
        """Stop scheduling, end the running session (recorded as stopped) and wait for it."""
        if self.shutdown_event.is_set():
            return
        self.shutdown_event.set()
        self._wake.set()
        self._aps.shutdown(wait=False)
        self._worker.join(timeout)
        self._lock.release()

    def _arm(self, delay_seconds: float) -> None:
        self._aps.add_job(self._enqueue_scheduled, "date", id=SCHEDULED_JOB_ID, replace_existing=True,
                          run_date=utcnow() + timedelta(seconds=delay_seconds), misfire_grace_time=None)

    def _enqueue_scheduled(self) -> None:
        with self._schedule_lock, self.app.app_context():
            if control.has_pending(SCHEDULE_TRIGGER):
                return  # re-armed when that one ends
            session = control.enqueue(tier=1, trigger=SCHEDULE_TRIGGER)
            log.info("queued scheduled session %s", session.id)
        self._wake.set()

    def _ensure_armed(self) -> None:
        """Re-arm the schedule if its session never ran (stopped while queued)."""
        if not self.interval or self.shutdown_event.is_set():
            return
        with self._schedule_lock:
            if self._aps.get_job(SCHEDULED_JOB_ID):
                return
            with self.app.app_context():
                pending = control.has_pending(SCHEDULE_TRIGGER)
                db.session.remove()
            if not pending:
                self._arm(delay_seconds=self.interval)

    def _work(self) -> None:
        while not self.shutdown_event.is_set():
            try:
                ran = self._run_next()
            except Exception:
                log.exception("scheduler worker failed; retrying")
                ran = False
            if not ran:
                self._ensure_armed()
                self._wake.wait(QUEUE_POLL_SECONDS)
                self._wake.clear()

    def _run_next(self) -> bool:
        with self.app.app_context():
            try:
                session = control.claim_next()
                if session is None:
                    return False
                log.info("running session %s (tier %s, %s)", session.id, session.tier, session.trigger)
                session = run_session(session, self.shutdown_event)
                if session.trigger == SCHEDULE_TRIGGER and self.interval and not self.shutdown_event.is_set():
                    self._arm(delay_seconds=self.interval)
                return True
            finally:
                db.session.remove()
