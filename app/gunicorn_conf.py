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
