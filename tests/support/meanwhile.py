"""Another process's request, sent while this one is between a read and
its write: a dashboard worker's change racing a session's or the
scheduler's read-modify-write."""
from __future__ import annotations

import threading
from typing import Any, Optional


class Meanwhile:
    """``send()`` sends the request from a thread and waits up to
    ``WAIT_SECONDS`` for it: done at once, unless this process holds the
    database, when it waits for the commit. ``answer()`` is its response,
    once it has one."""

    # Long enough for a loaded machine to answer a request nothing holds
    # back; a held one waits this long.
    WAIT_SECONDS = 3.0

    def __init__(self, client, method: str, url: str, json: Optional[Any] = None):
        self.client, self.method, self.url, self.json = client, method, url, json
        self.thread: Optional[threading.Thread] = None
        self.answers: list = []
        # A worker's first request sets up what the app sets up lazily (its
        # connections, the views' first run), seconds on a busy machine:
        # done now, so that the wait above is the timed request's alone.
        # The health check writes nothing, and on SQLite (WAL) a read waits
        # for no writer.
        client.get("/api/v1/health")

    def send(self) -> None:
        if self.thread is not None:   # once
            return
        self.thread = threading.Thread(target=lambda: self.answers.append(
            getattr(self.client, self.method)(self.url, json=self.json)))
        self.thread.start()
        self.thread.join(timeout=self.WAIT_SECONDS)

    def after(self, function):
        """``function``, sending the request once it has returned (the
        read the request is to race): for ``monkeypatch.setattr``."""
        def then_send(*args, **kwargs):
            result = function(*args, **kwargs)
            self.send()
            return result
        return then_send

    def answer(self):
        assert self.thread is not None, "the request was never sent"
        self.thread.join(timeout=30)
        (answer,) = self.answers
        return answer
