"""Drive Debian's chromium through Playwright (sync API) for the browser tests.

No browser is ever downloaded: chromium comes from ``CLAUDEOPS_TEST_CHROMIUM``
(bin/test sets it to the path of ``chromium``). The machine has no internet, so
chromium's own background traffic (updates, sync, QUIC probes) is switched off.

``PageGuard`` records what a page did that a test should never see: requests
to another host, dialogs (``alert``/``confirm``, e.g. from injected script),
JavaScript errors, console errors (htmx logs failed swaps there) and HTTP
errors answered to the page.
"""
from __future__ import annotations

import json
import os
import uuid
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tests.support.waiting import wait_for

CHROMIUM_ENV = "CLAUDEOPS_TEST_CHROMIUM"

# headless=True makes Playwright pass --headless, which is the new headless mode
# in chromium since version 132.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

ALLOWED_HOST = "127.0.0.1"


def chromium_path() -> str:
    """The chromium to drive, or skip the test when none was provided."""
    path = os.environ.get(CHROMIUM_ENV)
    if not path:
        pytest.skip(f"{CHROMIUM_ENV} is not set; run the suite through bin/test, which installs "
                    "Debian's chromium and exports its path")
    if not Path(path).exists():
        pytest.skip(f"{CHROMIUM_ENV}={path!r} does not exist")
    return path


def launch(playwright):
    return playwright.chromium.launch(executable_path=chromium_path(), headless=True, args=CHROMIUM_ARGS)


@dataclass
class PageGuard:
    """What a browser context did that the tests forbid; ``problems()`` lists it."""
    requests: list[str] = field(default_factory=list)
    dialogs: list[str] = field(default_factory=list)
    page_errors: list[str] = field(default_factory=list)
    console_errors: list[str] = field(default_factory=list)
    http_errors: list[str] = field(default_factory=list)

    def watch_context(self, context) -> None:
        context.on("request", lambda request: self.requests.append(request.url))
        context.on("response", self._on_response)

    def watch_page(self, page) -> None:
        page.on("dialog", self._on_dialog)
        page.on("pageerror", lambda error: self.page_errors.append(str(error)))
        page.on("console", self._on_console)

    def _on_dialog(self, dialog) -> None:
        self.dialogs.append(f"{dialog.type}: {dialog.message}")
        dialog.dismiss()

    def _on_console(self, message) -> None:
        if message.type == "error":
            self.console_errors.append(message.text)

    def _on_response(self, response) -> None:
        if response.status >= 400:
            self.http_errors.append(f"{response.status} {response.request.method} {response.url}")

    def foreign_requests(self) -> list[str]:
        return [url for url in self.requests
                if urlsplit(url).scheme not in ("http", "https") or urlsplit(url).hostname != ALLOWED_HOST]

    def problems(self) -> list[str]:
        found = []
        found += [f"request to another host: {url}" for url in self.foreign_requests()]
        found += [f"dialog opened: {text}" for text in self.dialogs]
        found += [f"JavaScript error: {text}" for text in self.page_errors]
        found += [f"console error: {text}" for text in self.console_errors]
        found += [f"HTTP error: {text}" for text in self.http_errors]
        return found


@contextmanager
def guarded_page(browser, base_url: str, guard: PageGuard, width: int = 1280):
    """A fresh browser context and page, watched by ``guard``; fails the test
    afterwards if the page did anything the guard forbids."""
    context = browser.new_context(base_url=base_url, viewport={"width": width, "height": 900})
    context.set_default_timeout(10_000)
    guard.watch_context(context)
    page = context.new_page()
    guard.watch_page(page)
    yield page
    context.close()
    assert guard.requests, "the page made no requests at all"
    assert not guard.problems(), "\n".join(guard.problems())


def write_script(path: Path, steps: list[dict]) -> None:
    """Replace the fake CLI's script in one step, so a CLI starting meanwhile
    reads either the old script or the new one, never half a file."""
    draft = path.with_name(path.name + ".draft")
    draft.write_text(json.dumps(steps))
    os.replace(draft, path)


@dataclass
class ConfirmGuard(PageGuard):
    """PageGuard that answers the confirm dialogs a test announced with
    ``expect_confirm`` (in order, message matched exactly); any other dialog
    is dismissed and recorded as a problem, as PageGuard does."""
    expected: list[tuple[str, bool]] = field(default_factory=list)
    answered: list[tuple[str, bool]] = field(default_factory=list)

    def expect_confirm(self, message: str, accept: bool) -> None:
        self.expected.append((message, accept))

    def _on_dialog(self, dialog) -> None:
        if dialog.type == "confirm" and self.expected and self.expected[0][0] == dialog.message:
            message, accept = self.expected.pop(0)
            self.answered.append((message, accept))
            dialog.accept() if accept else dialog.dismiss()
            return
        super()._on_dialog(dialog)


def trigger(svc, steps: list[dict], **body) -> int:
    """A session of the fake CLI running ``steps``, queued through the API; its id."""
    write_script(svc.script_path, steps)
    status, created = svc.post("/api/v1/sessions/trigger", body)
    assert status == 201, created
    return created["id"]


UNFINISHED = ("queued", "running")


def sessions(svc) -> list[dict]:
    return svc.get("/api/v1/sessions?limit=100")[1]["sessions"]


def unfinished(svc) -> list[dict]:
    return [s for s in sessions(svc) if s["status"] in UNFINISHED]


def wait_idle(svc) -> None:
    wait_for(lambda: not unfinished(svc), timeout=40, what="service idle")


def stop_all(svc, timeout: float = 30.0) -> None:
    """Stop whatever session is queued or running, and wait until it has ended."""
    for session in unfinished(svc):
        svc.post(f"/api/v1/sessions/{session['id']}/stop")
    wait_for(lambda: not unfinished(svc), timeout=timeout, what="service idle")


def token() -> str:
    """A word no other test wrote: what a test looks for is its own."""
    return uuid.uuid4().hex[:8]


def api_memory(svc, memory_id: int) -> dict:
    status, body = svc.get(f"/api/v1/memories/{memory_id}")
    assert status == 200, body
    return body


def escalation_of(svc, parent: int) -> dict:
    """The session ``parent`` escalated to, once it has run. It is queued
    just after ``parent`` is recorded as ended: an idle service before
    then does not mean there is none."""
    def child():
        return next((s for s in sessions(svc) if s["parent_id"] == parent), None)
    wait_for(child, timeout=40, what=f"the escalation of session {parent} queued")
    wait_idle(svc)
    return child()


def delete_all_memories(svc) -> None:
    while True:
        status, body = svc.get("/api/v1/memories?limit=500")
        assert status == 200, body
        ids = [m["id"] for m in body["memories"]]
        if not ids:
            return
        status, body = svc.post("/api/v1/memories/bulk-delete", {"ids": ids})
        assert status == 200, body
