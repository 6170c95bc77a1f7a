"""gunicorn settings file for `claudeops serve` (loaded by path, so the
master never imports the application).

The gunicorn master ends when `claudeops serve` does. serve stops it cleanly
on SIGTERM and Ctrl-C; but if serve is killed outright (SIGKILL, the OOM
killer) the master would go on serving without a scheduler, and keep the
port, so that serve could not start again. The kernel's parent-death signal
sends it SIGTERM instead, its ordinary graceful shutdown. Linux only; on
another system this does nothing.
"""
import ctypes
import os
import signal

PR_SET_PDEATHSIG = 1

# gunicorn would believe X-Forwarded-Proto (and SCRIPT_NAME-style headers)
# from 127.0.0.1, so any local user could pass a plain-http request off as
# https. Which proxies are believed is the application's to say
# (CLAUDEOPS_TRUSTED_PROXIES, through werkzeug's ProxyFix): gunicorn believes none.
forwarded_allow_ips = ""

# gunicorn's default, with the path (%(U)s) for the whole request line (%(r)s)
# and no referrer: a search's words and a filter's values, anything an
# operator typed, stay out of the journal, where redaction does not reach.
access_log_format = '%(h)s %(l)s %(u)s %(t)s "%(m)s %(U)s %(H)s" %(s)s %(b)s "%(a)s"'


def on_starting(server):
    parent = os.getppid()
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        failed = libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0) != 0
    except (OSError, AttributeError):
        failed = True
    if failed:
        server.log.warning("cannot ask to be ended with claudeops serve (pid %s)", parent)
    elif parent == 1:   # serve died before the signal was asked for
        os.kill(os.getpid(), signal.SIGTERM)
