"""gunicorn settings file for the dashboard and API, by `claudeops serve`
or by hand on a dashboard-only host (loaded by path, so the master never
imports the application).

Started by `claudeops serve` (which names itself in SERVE_PID_ENV), the
gunicorn master ends when serve does. serve stops it cleanly on SIGTERM and
Ctrl-C; but if serve is killed outright (SIGKILL, the OOM killer) the master
would go on serving without a scheduler, and keep the port, so that serve
could not start again. The kernel's parent-death signal sends it SIGTERM
instead, its ordinary graceful shutdown. Linux only; on another system this
does nothing. Started otherwise, by systemd or a shell, it is left alone.
Its workers, however started, end with the master (post_fork).
"""
import ctypes
import os
import signal

PR_SET_PDEATHSIG = 1
SERVE_PID_ENV = "CLAUDEOPS_SERVE_PID"   # app/serve.py sets it
# A pipe serve waits on: a byte once the port is bound, or its end (gunicorn
# exited, the port taken), before the scheduler may start a session.
READY_FD_ENV = "CLAUDEOPS_READY_FD"

# gunicorn would believe X-Forwarded-Proto (and SCRIPT_NAME-style headers)
# from 127.0.0.1, so any local user could pass a plain-http request off as
# https. Which proxies are believed is the application's to say
# (CLAUDEOPS_TRUSTED_PROXIES, through werkzeug's ProxyFix): gunicorn believes none.
forwarded_allow_ips = ""

# The longest request line gunicorn reads (its most; the default is 4094):
# a memory search or an API filter of a few thousand characters. A longer
# line is refused by gunicorn itself, with a 414 in plain HTML, before the
# application sees it.
limit_request_line = 8190

# gunicorn's default, with the path (%(U)s) for the whole request line (%(r)s)
# and no referrer: a search's words and a filter's values, anything an
# operator typed, stay out of the journal, where redaction does not reach.
access_log_format = '%(h)s %(l)s %(u)s %(t)s "%(m)s %(U)s %(H)s" %(s)s %(b)s "%(a)s"'


def when_ready(server):
    """The port is bound (called before any worker is made, so none holds the pipe)."""
    ready = os.environ.pop(READY_FD_ENV, None)
    if ready is not None:
        try:
            os.write(int(ready), b"1")
            os.close(int(ready))
        except (OSError, ValueError):
            server.log.warning("cannot tell claudeops serve that the port is bound")


def post_fork(server, worker):
    """A worker ends with its master. Killed outright (SIGKILL, the OOM
    killer), the master cannot end them, and gunicorn's workers notice only
    at their next timeout, up to 30 s later: meanwhile they go on serving the
    dashboard without a scheduler, and keep the port, so that the service
    could not start again. The kernel's parent-death signal sends each its
    ordinary graceful SIGTERM at once instead (Linux only)."""
    # Until the worker sets its own handlers, it has the master's, which
    # only queue a signal for the master's loop: a SIGTERM meanwhile (the
    # master dying now, or the one below) would be lost, and the worker serve on.
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    if not _sigterm_when_parent_dies():
        server.log.warning("cannot ask worker %s to be ended with its master", worker.pid)
    elif os.getppid() != worker.ppid:   # the master died before the signal was asked for
        os.kill(os.getpid(), signal.SIGTERM)


def _sigterm_when_parent_dies() -> bool:
    """Ask the kernel to send this process SIGTERM when its parent dies;
    whether it took the request (Linux only)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def on_starting(server):
    serve = os.environ.pop(SERVE_PID_ENV, None)   # the workers have no use for it
    if serve is None:
        return
    parent = os.getppid()
    if not _sigterm_when_parent_dies():
        server.log.warning("cannot ask to be ended with claudeops serve (pid %s)", parent)
    elif str(parent) != serve:   # serve died before the signal was asked for
        os.kill(os.getpid(), signal.SIGTERM)
