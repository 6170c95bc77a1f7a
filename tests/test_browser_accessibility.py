"""Every dashboard page, in its usual states and with data in it, checked
with axe-core (axe-playwright-python, which ships axe-core: nothing is
fetched) in a real browser (Debian's chromium through Playwright) against the
real service (`claudeops serve` with the fake CLI): no violation of impact
"serious" or "critical" (WCAG 2.x A and AA, and axe's best practices).

The pages: Overview, Sessions (list, a session with activity, an escalated
one with its chain, a failed one, a running one with Stop), Events, Memories
(table with every status, the review inbox, Add Memory and Export / Import
open, an inline edit and an inbox edit open), a memory's history, the
preview of the next session's memory, Cooldowns, Config (as it is and with
values it refused), the 404 page, and the login page of a service with a
password (the form, a wrong password, a page with Log out).
"""
from __future__ import annotations

import uuid

import pytest
from axe_playwright_python.sync_playwright import Axe
from playwright.sync_api import expect

from tests import streamlines as sl
from tests.conftest import OPERATOR_PASSWORD
from tests.support.browser import PageGuard, escalation_of, guarded_page, trigger, wait_idle
from tests.support.service import Service

pytestmark = pytest.mark.browser

FAILING_IMPACTS = ("serious", "critical")


# ---------------------------------------------------------------- axe

def axe_violations(page) -> list[dict]:
    """Every violation axe finds on the page as it is now."""
    return Axe().run(page).response["violations"]


def describe(violations: list[dict]) -> str:
    lines = []
    for v in violations:
        lines.append(f"{v['id']} ({v['impact']}): {v['help']} [{len(v['nodes'])} element(s)]")
        for node in v["nodes"][:8]:
            why = (node.get("failureSummary") or "").strip().splitlines()[-1:] or [""]
            lines.append(f"    {' '.join(map(str, node['target']))}: {why[0].strip()}")
    return "\n".join(lines)


def assert_accessible(page, where: str) -> None:
    failing = [v for v in axe_violations(page) if v["impact"] in FAILING_IMPACTS]
    if failing:
        pytest.fail(f"axe on {where}:\n{describe(failing)}", pytrace=False)


# ---------------------------------------------------------------- fixtures

@pytest.fixture(scope="module")
def service(browser_service):
    """The shared service with review on, so the inbox holds the agent's proposals."""
    status, body = browser_service.request("PUT", "/api/v1/config", {"CLAUDEOPS_MEMORY_REVIEW": True})
    assert status == 200, body
    return browser_service


def create_memory(svc: Service, observation: str, service: str | None, category: str, confidence: float) -> int:
    status, body = svc.post("/api/v1/memories", {"service": service, "category": category,
                                                  "observation": observation, "confidence": confidence})
    assert status == 201, body
    return body["id"]


@pytest.fixture(scope="module")
def data(service) -> dict:
    """Something of every kind on every page: memories in every status, an
    escalated session with activity of every kind and markers, a failed one."""
    wait_idle(service)
    tok = uuid.uuid4().hex[:6]
    pinned = create_memory(service, f"Jellyfin takes 60 s to start after a restart {tok}", "jellyfin", "timing", 0.9)
    assert service.request("PUT", f"/api/v1/memories/{pinned}", {"pinned": True})[0] == 200
    create_memory(service, f"The NAS scrub slows every share on Sunday {tok}", "nas", "behavior", 0.6)
    create_memory(service, f"Backups once ran at 03:00 {tok}", None, "maintenance", 0.2)   # inactive

    steps = (sl.steps(sl.init(),
                      sl.text(f"Checking the web stack {tok}.\n"
                              f"[EVENT:warning:postgres] replication lag of 40 s {tok}\n"
                              f"[EVENT:critical:web] 502s from the proxy {tok}\n"
                              f"[EVENT:info:nginx] proxy healthy again {tok}\n"
                              f"[MEMORY:timing:web] The web container needs 20 s to answer after a restart {tok}\n"
                              f"[MEMORY:behavior:postgres] Vacuum runs nightly at 02:00 {tok}\n"
                              f"[COOLDOWN:restart:web] success — restarted the web container {tok}\n"
                              f"[COOLDOWN:redeploy:web] failure — the image would not pull {tok}\n"
                              f"[OUTCOME:worked:m{pinned}] waited the 60 s {tok}\n"
                              f"[ESCALATE] the proxy keeps failing {tok}"),
                      sl.tool_use(f"docker ps --filter name=web  # {tok}"),
                      sl.tool_result(f"web   Up 3 seconds {tok}"),
                      sl.text(f"Restarted web {tok}."),
                      sl.result(f"Restarted the web container; the proxy answers again {tok}.")))
    parent = trigger(service, steps, prompt=f"Why is the web slow? {tok}", start_tier=2)
    child = escalation_of(service, parent)["id"]
    failed = trigger(service, sl.steps(sl.init(), sl.text(f"Looking {tok}")) + [{"stderr": "boom"}, {"exit": 2}])
    wait_idle(service)

    proposed = service.get("/api/v1/memories/review")[1]["memories"]
    assert len(proposed) >= 2, proposed
    rejected = proposed[-1]["id"]
    assert service.post(f"/api/v1/memories/{rejected}/reject", {"reason": "not true"})[0] == 200
    return {"tok": tok, "parent": parent, "child": child, "failed": failed, "pinned": pinned,
            "proposed": proposed[0]["id"]}


@pytest.fixture
def guard():
    return PageGuard()


@pytest.fixture
def page(browser, service, guard):
    with guarded_page(browser, service.base_url, guard, width=1400) as page:
        yield page


# ---------------------------------------------------------------- pages

PAGES = {
    "overview": lambda d: "/",
    "sessions": lambda d: "/sessions",
    "session with activity": lambda d: f"/sessions/{d['parent']}",
    "escalated session": lambda d: f"/sessions/{d['child']}",
    "failed session": lambda d: f"/sessions/{d['failed']}",
    "events": lambda d: "/events",
    "memories": lambda d: "/memories",
    "memory history": lambda d: f"/memories/{d['pinned']}",
    "memory preview": lambda d: "/memories/preview",
    "cooldowns": lambda d: "/cooldowns",
    "config": lambda d: "/config",
}


@pytest.mark.parametrize("name", PAGES)
def test_page_has_no_serious_violations(page, data, name):
    page.goto(PAGES[name](data))
    expect(page.locator("main h1")).to_be_visible()
    assert_accessible(page, name)


def test_memories_with_forms_and_edits_open(page, data):
    page.goto("/memories")
    page.locator("#add-memory summary").click()
    page.locator("#memory-portability summary").click()
    expect(page.locator("#memory-add")).to_be_visible()
    assert_accessible(page, "memories with Add Memory and Export / Import open")

    row = page.locator(f"#memory-{data['pinned']}")
    row.get_by_role("button", name="Edit").click()
    expect(row.locator("textarea")).to_be_visible()
    inbox = page.locator(f"#proposed-{data['proposed']}")
    inbox.get_by_role("button", name="Edit & approve").click()
    expect(inbox.locator("textarea")).to_be_visible()
    assert_accessible(page, "memories with an inline edit and an inbox edit open")


def test_each_memory_action_is_described_by_its_memory(page, data):
    """Every row has the same buttons: a screen reader tells them apart by the
    observation that describes each (aria-describedby)."""
    page.goto("/memories")
    row = page.locator(f"#memory-{data['pinned']}")
    observation = row.locator(".observation-text").inner_text()
    assert data["tok"] in observation
    for name in ("Edit", "Unpin", "History", "Delete"):
        expect(row.get_by_role("link" if name == "History" else "button", name=name, exact=True)) \
            .to_have_accessible_description(observation)
    proposal = page.locator(f"#proposed-{data['proposed']}")
    proposed_text = proposal.locator(".observation-text").inner_text()
    for role, name in (("button", "Approve"), ("button", "Edit & approve"), ("link", "History"), ("button", "Reject")):
        expect(proposal.get_by_role(role, name=name, exact=True)).to_have_accessible_description(proposed_text)
    # The same proposal in the table is described by the table's own copy of it.
    in_table = page.locator(f"#memory-{data['proposed']}")
    expect(in_table.get_by_role("button", name="Reject", exact=True)).to_have_accessible_description(proposed_text)


def test_config_with_values_it_refused(page, guard, data):
    page.goto("/config")
    page.fill("input[name=CLAUDEOPS_INTERVAL]", "often")
    page.fill("input[name=CLAUDEOPS_LOG_RETENTION_DAYS]", "-5")
    with page.expect_response(lambda r: r.url.endswith("/config") and r.request.method == "POST"):
        page.get_by_role("button", name="Save changes").click()
    expect(page.locator(".field-error")).to_have_count(2)
    assert_accessible(page, "config with refused values")
    guard.http_errors.clear()   # the 400 is the state under test
    guard.console_errors.clear()


def test_a_running_session_with_stop(page, service, data):
    running = trigger(service, sl.steps(sl.init(), sl.text("Looking at the disks.")) + [{"sleep": 30}])
    try:
        page.goto(f"/sessions/{running}")
        expect(page.locator("#session-status")).to_have_text("running", timeout=15_000)
        expect(page.locator("#activity li").first).to_be_visible(timeout=10_000)
        assert_accessible(page, "a running session")
    finally:
        service.post(f"/api/v1/sessions/{running}/stop")
        wait_idle(service)


def test_not_found_page(browser, service):
    guard = PageGuard()
    with guarded_page(browser, service.base_url, guard) as page:
        page.goto("/no/such/page")
        expect(page.locator("main h1")).to_have_text("Not found")
        assert_accessible(page, "the 404 page")
        guard.http_errors.clear()   # the 404 is the page under test
        guard.console_errors.clear()


# ---------------------------------------------------------------- login

def test_login_page_and_a_page_with_log_out(browser, locked_browser_service):
    guard = PageGuard()
    with guarded_page(browser, locked_browser_service.base_url, guard) as page:
        page.goto("/login")
        assert_accessible(page, "the login page")

        page.fill("input[name=password]", "not it")
        with page.expect_response(lambda r: r.url.endswith("/login") and r.request.method == "POST"):
            page.click("button[type=submit]")
        expect(page.get_by_role("alert")).to_have_text("Wrong password.")
        assert_accessible(page, "the login page after a wrong password")
        guard.http_errors.clear()   # the 401 is the state under test
        guard.console_errors.clear()

        page.fill("input[name=password]", OPERATOR_PASSWORD)
        page.click("button[type=submit]")
        expect(page.get_by_role("button", name="Log out")).to_be_visible()
        assert_accessible(page, "the Overview when logged in")
