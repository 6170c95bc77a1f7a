"""The dashboard with the keyboard alone, in a real browser (Debian's chromium
through Playwright) against the real service (`claudeops serve` with the fake
CLI): every control is reached with Tab, used with Enter, Space, the arrow
keys or Escape, and after an action keyboard focus is somewhere sensible (the
redrawn row's own control, the next row's, a message), never dropped to
<body>, where the next Tab would start again at the top of the page. What an
action says is announced (role=status / role=alert).

Pages: the skip link and the sidebar's focus ring; Memories (row actions,
inline edit, confidence slider, delete with its confirm, bulk actions, search,
the review inbox's Approve / Edit & approve / Reject, Approve in the table);
Events and Cooldowns (filters, pager); Sessions (Run now, Stop); Config (a
refused value); login and logout on a service with a password.
"""
from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests import streamlines as sl
from tests.conftest import OPERATOR_PASSWORD
from tests.support.browser import (PageGuard, api_memory, delete_all_memories, guarded_page, stop_all, token,
                                   trigger, wait_for, write_script)
from tests.support.service import Service

pytestmark = pytest.mark.browser

CONFIRM_DELETE_ONE = "Delete this memory? This cannot be undone."

ACTIVE = "(() => { const e = document.activeElement; return !e || e === document.body ? 'BODY' : e.outerHTML })()"


# ---------------------------------------------------------------- fixtures

@pytest.fixture(scope="module")
def service(review_browser_service):
    return review_browser_service


@pytest.fixture(autouse=True)
def no_memories(service):
    delete_all_memories(service)


# ---------------------------------------------------------------- helpers

def create_memory(svc: Service, observation: str, confidence: float = 0.7) -> int:
    status, body = svc.post("/api/v1/memories", {"service": "web", "category": "timing",
                                                  "observation": observation, "confidence": confidence})
    assert status == 201, body
    return body["id"]


def import_proposals(svc: Service, *observations: str) -> list[int]:
    status, body = svc.request("POST", "/api/v1/memories/import", {
        "format": "claudeops-memories", "version": 1,
        "memories": [{"service": "web", "category": "behavior", "observation": o, "status": "proposed"}
                     for o in observations]})
    assert status == 201, body
    proposed = svc.get("/api/v1/memories/review")[1]["memories"]
    return [next(m["id"] for m in proposed if m["observation"] == o) for o in observations]


def active(page) -> str:
    return page.evaluate(ACTIVE)


def focus_on(page, selector: str, timeout: int = 5_000) -> None:
    """Wait until keyboard focus is on the element ``selector`` names (not lost to <body>),
    shown as keyboard focus is (:focus-visible)."""
    try:
        page.wait_for_function("s => document.activeElement && document.activeElement.matches(s)"
                               " && document.activeElement.matches(':focus-visible')",
                               arg=selector, timeout=timeout)
    except Exception:
        pytest.fail(f"focus is not on {selector}, but on: {active(page)[:300]}", pytrace=False)


def tab_to(page, selector: str, key: str = "Tab", limit: int = 250) -> None:
    """Press Tab (or Shift+Tab) until focus is on ``selector``: it is reached by keyboard."""
    for _ in range(limit):
        page.keyboard.press(key)
        if page.evaluate("s => !!document.activeElement && document.activeElement.matches(s)", selector):
            return
    pytest.fail(f"{limit} presses of {key} never reached {selector}", pytrace=False)


def announced(page, text: str | re.Pattern) -> None:
    expect(page.locator("#announcer[role=status]")).to_have_text(text)


def luminance(rgb: str) -> float:
    def channel(c: float) -> float:
        c /= 255
        return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4
    r, g, b = (float(n) for n in re.findall(r"[\d.]+", rgb)[:3])
    return 0.2126 * channel(r) + 0.7152 * channel(g) + 0.0722 * channel(b)


def contrast(a: str, b: str) -> float:
    la, lb = sorted((luminance(a), luminance(b)), reverse=True)
    return (la + 0.05) / (lb + 0.05)


# ---------------------------------------------------------------- every page

def test_the_first_tab_offers_to_skip_the_sidebar(page):
    page.goto("/sessions")
    page.keyboard.press("Tab")
    skip = page.get_by_role("link", name="Skip to content")
    expect(skip).to_be_focused()
    box = skip.bounding_box()
    assert box and box["y"] >= 0 and box["width"] > 0, f"the focused skip link is not on screen: {box}"
    page.keyboard.press("Enter")
    page.keyboard.press("Tab")
    focus_on(page, "form.run-now select[name=tier]")


def test_focus_on_the_sidebar_is_visible(page):
    page.goto("/events")
    tab_to(page, ".sidebar a[href='/memories']")
    ring = page.evaluate("""() => { const e = document.activeElement, c = getComputedStyle(e);
        return {style: c.outlineStyle, width: parseFloat(c.outlineWidth), color: c.outlineColor,
                ground: getComputedStyle(document.querySelector('.sidebar')).backgroundColor}; }""")
    assert ring["style"] != "none" and ring["width"] >= 2, ring
    assert contrast(ring["color"], ring["ground"]) >= 3, ring


# ---------------------------------------------------------------- memories

def test_row_actions_keep_focus_in_their_row(page, service):
    tok = token()
    other = create_memory(service, f"Other memory {tok}", confidence=0.5)
    mid = create_memory(service, f"Jellyfin is slow to start {tok}", confidence=0.8)
    page.goto("/memories")
    row = f"#memory-{mid}"

    tab_to(page, f"{row} button.pin")
    page.keyboard.press("Enter")
    wait_for(lambda: api_memory(service, mid)["pinned"], timeout=5, what="pinned")
    focus_on(page, f"{row} button.pin")
    expect(page.locator(f"{row} button.pin")).to_have_text("Unpin")

    tab_to(page, f"{row} input[type=range]", key="Shift+Tab")
    page.keyboard.press("ArrowLeft")
    wait_for(lambda: api_memory(service, mid)["confidence"] == pytest.approx(0.79), timeout=5, what="confidence set")
    expect(page.locator(f"{row} output.confidence-value")).to_have_text("0.79")
    focus_on(page, f"{row} input[type=range]")

    tab_to(page, f"{row} button.edit", key="Shift+Tab")
    page.keyboard.press("Enter")
    focus_on(page, f"{row}.editing textarea[name=observation]")
    # The caret is at the end of the text: what is typed at once is added to it.
    assert page.evaluate("(e => [e.selectionStart, e.selectionEnd, e.value.length])(document.activeElement)") == \
        [len(f"Jellyfin is slow to start {tok}")] * 3
    page.keyboard.type(" (60 s)")
    page.keyboard.press("Tab")
    focus_on(page, f"{row} button.save")
    page.keyboard.press("Enter")
    wait_for(lambda: api_memory(service, mid)["observation"] == f"Jellyfin is slow to start {tok} (60 s)", timeout=5,
             what="saved")
    focus_on(page, f"{row}:not(.editing) button.edit")

    # Escape cancels an edit, and focus is back on Edit.
    page.keyboard.press("Enter")
    focus_on(page, f"{row}.editing textarea")
    page.keyboard.press("Escape")
    focus_on(page, f"{row}:not(.editing) button.edit")

    # Enter in the service field saves, as a form's Enter does; in the text box it is a key like any other.
    page.keyboard.press("Enter")
    tab_to(page, f"{row}.editing input[name=service]", key="Shift+Tab")
    page.keyboard.press("Control+a")
    page.keyboard.type(f"jellyfin-{tok}")
    page.keyboard.press("Enter")
    wait_for(lambda: api_memory(service, mid)["service"] == f"jellyfin-{tok}", timeout=5, what="saved by Enter")
    focus_on(page, f"{row}:not(.editing) button.edit")
    assert api_memory(service, other)["confidence"] == pytest.approx(0.5)


def test_delete_confirmed_by_keyboard_moves_to_the_next_row_and_says_what_is_left(page, service, guard):
    tok = token()
    first = create_memory(service, f"First {tok}", confidence=0.9)
    second = create_memory(service, f"Second {tok}", confidence=0.8)
    create_memory(service, f"Third {tok}", confidence=0.7)
    page.goto("/memories")
    tab_to(page, f"#memory-{first} button.delete")
    guard.expect_confirm(CONFIRM_DELETE_ONE, accept=True)
    page.keyboard.press("Enter")
    expect(page.locator(f"#memory-{first}")).to_have_count(0)
    focus_on(page, f"#memory-{second} button.delete")
    announced(page, "2 memories")
    page.keyboard.press("Shift+Tab")   # goes on from there, not from the top of the page
    focus_on(page, f"#memory-{second} a[href='/memories/{second}']")


def test_bulk_actions_by_keyboard_say_what_came_of_them(page, service):
    tok = token()
    ids = [create_memory(service, f"Bulk {n} {tok}", confidence=0.7) for n in range(3)]
    page.goto("/memories")

    tab_to(page, "#memory-bulk-bar .bulk-confidence button")
    page.keyboard.press("Enter")
    expect(page.locator("#memory-errors[role=alert]")).to_have_text("Select at least one memory first.")
    focus_on(page, "#memory-bulk-bar .bulk-confidence button")

    for mid in ids[:2]:
        tab_to(page, f"#memory-{mid} input[name=ids]")
        page.keyboard.press("Space")
    tab_to(page, "#memory-bulk-bar input[name=bulk_confidence]", key="Shift+Tab")
    page.keyboard.press("Control+a")
    page.keyboard.type("0.4")
    page.keyboard.press("Tab")
    page.keyboard.press("Enter")
    wait_for(lambda: [api_memory(service, m)["confidence"] for m in ids] == [0.4, 0.4, 0.7], timeout=5,
             what="bulk confidence")
    expect(page.locator("#memory-errors")).to_have_text("Set the confidence of 2 memories to 0.4.")
    announced(page, "3 memories")
    focus_on(page, "#memory-bulk-bar .bulk-confidence button")


def test_search_and_filters_announce_how_many_rows_they_left(page, service):
    tok = token()
    create_memory(service, f"Needle {tok}")
    create_memory(service, f"Haystack {tok}")
    page.goto("/memories")
    tab_to(page, "#memory-q")
    page.keyboard.type(f"Needle {tok}")
    expect(page.locator("#memory-table tr.memory-row")).to_have_count(1)
    announced(page, "1 memory")
    focus_on(page, "#memory-q")

    page.goto("/cooldowns")
    tab_to(page, "#cooldown-filters select[name=outcome]")
    page.keyboard.press("ArrowDown")
    expect(page).to_have_url(re.compile(r"outcome="))
    announced(page, re.compile(r"^\d+ actions?"))
    focus_on(page, "#cooldown-filters select[name=outcome]")


def test_the_review_inbox_by_keyboard(page, service):
    tok = token()
    a, b, c = import_proposals(service, f"Proposal A {tok}", f"Proposal B {tok}", f"Proposal C {tok}")
    page.goto("/memories")
    order = page.locator("#memory-inbox tr.proposed-row").evaluate_all("rows => rows.map(r => +r.dataset.id)")
    assert sorted(order) == sorted([a, b, c])
    first, second, third = order

    tab_to(page, f"#proposed-{first} button.approve")
    page.keyboard.press("Enter")
    wait_for(lambda: api_memory(service, first)["status"] == "approved", timeout=5, what="approved")
    expect(page.locator(f"#proposed-{first}")).to_have_count(0)
    focus_on(page, f"#proposed-{second} button.approve")

    page.keyboard.press("Tab")
    focus_on(page, f"#proposed-{second} button.edit-approve")
    page.keyboard.press("Enter")
    # As the table's Edit: on the observation, the caret at the end of its text.
    focus_on(page, f"#proposed-{second}.editing textarea[name=observation]")
    assert page.evaluate("(e => [e.selectionStart, e.selectionEnd, e.value.length])(document.activeElement)") == \
        [len(f"Proposal B {tok}")] * 3
    page.keyboard.press("Escape")
    focus_on(page, f"#proposed-{second}:not(.editing) button.edit-approve")

    page.keyboard.press("Enter")
    focus_on(page, f"#proposed-{second}.editing textarea[name=observation]")
    page.keyboard.type(" (edited)")
    tab_to(page, f"#proposed-{second} button.save")
    page.keyboard.press("Enter")
    wait_for(lambda: api_memory(service, second)["status"] == "approved", timeout=5, what="approved with edits")
    assert api_memory(service, second)["observation"].endswith("(edited)")
    focus_on(page, f"#proposed-{third} button.edit-approve")

    # Enter in the reason rejects, as the Reject button after it does.
    tab_to(page, f"#proposed-{third} input[name=reason]")
    page.keyboard.type("not true")
    page.keyboard.press("Enter")
    wait_for(lambda: api_memory(service, third)["status"] == "rejected", timeout=5, what="rejected")
    history = service.get(f"/api/v1/memories/{third}/history")[1]["history"]
    assert (history[-1]["action"], history[-1]["detail"]) == ("rejected", "not true")
    # The inbox is empty: it takes focus itself, and says so.
    focus_on(page, "#memory-inbox")
    expect(page.locator("#memory-inbox-empty")).to_have_text("Nothing awaits review.")
    page.keyboard.press("Tab")
    focus_on(page, "#memory-bulk-bar button")


FOCUS_WATCH = """() => {
  // At the end of every task that changed <main> (a swap), where is keyboard focus?
  window.focusSeenOnBody = 0;
  new MutationObserver(() => {
    if (document.activeElement === document.body) window.focusSeenOnBody++;
  }).observe(document.querySelector("main"), {childList: true, subtree: true});
}"""


def test_focus_is_back_before_a_key_pressed_after_a_swap_could_be_handled(page, service):
    # A key handled while focus is on <body> (between a swap and focus put
    # back) goes on from where the replaced block was: a Tab lands past it.
    # Focus must be back by the end of the task that swapped, for a block
    # redrawn (a refresh) and for a row removed (Approve) alike.
    tok = token()
    first, second = import_proposals(service, f"Watched A {tok}", f"Watched B {tok}")
    page.goto("/memories")
    order = page.locator("#memory-inbox tr.proposed-row").evaluate_all("rows => rows.map(r => +r.dataset.id)")
    tab_to(page, f"#proposed-{order[0]} button.approve")
    page.evaluate(FOCUS_WATCH)

    page.evaluate("() => { document.getElementById('memory-inbox').dataset.old = '1';"
                  " htmx.trigger(document.body, 'memories-changed'); }")
    expect(page.locator("#memory-inbox[data-old]")).to_have_count(0)   # redrawn
    focus_on(page, f"#proposed-{order[0]} button.approve")
    assert page.evaluate("window.focusSeenOnBody") == 0, "focus was on <body> after the inbox was redrawn"

    page.keyboard.press("Enter")
    wait_for(lambda: api_memory(service, order[0])["status"] == "approved", timeout=5, what="approved")
    expect(page.locator(f"#proposed-{order[0]}")).to_have_count(0)
    focus_on(page, f"#proposed-{order[1]} button.approve")
    assert sorted(order) == sorted([first, second])
    assert page.evaluate("window.focusSeenOnBody") == 0, "focus was on <body> after the row was removed"


def test_approve_in_the_table_keeps_focus_in_the_row(page, service):
    (proposed,) = import_proposals(service, f"Proposed in the table {token()}")
    page.goto("/memories")
    row = f"#memory-table #memory-{proposed}"
    tab_to(page, f"{row} button.approve")
    page.keyboard.press("Enter")
    wait_for(lambda: api_memory(service, proposed)["status"] == "approved", timeout=5, what="approved")
    expect(page.locator(f"{row} button.approve")).to_have_count(0)
    focus_on(page, f"{row} button.pin")


# ---------------------------------------------------------------- events

def test_events_pager_and_filter_by_keyboard(page, service):
    tok = token()
    stop_all(service)
    for batch in (range(1, 61), range(61, 111)):   # the default per-session limit is 100
        lines = "\n".join(f"[EVENT:info:kbd-{tok}] {tok} e{n}" for n in batch)
        seeded = trigger(service, sl.steps(sl.init(), sl.text(lines), sl.result("seeded")))
        wait_for(lambda: service.get(f"/api/v1/sessions/{seeded}")[1]["status"] == "completed", timeout=30,
                 what="events recorded")
    page.goto(f"/events?service=kbd-{tok}")
    expect(page.locator("#event-rows tbody tr")).to_have_count(100)

    tab_to(page, "#event-rows nav.pager a[href*='before=']")
    page.keyboard.press("Enter")
    expect(page.locator("#event-rows tbody tr")).to_have_count(10)
    focus_on(page, "#event-rows nav.pager a")
    announced(page, "110 events")
    page.keyboard.press("Enter")   # ← newest
    expect(page.locator("#event-rows tbody tr")).to_have_count(100)
    focus_on(page, "#event-rows nav.pager a[href*='before=']")

    tab_to(page, "#event-filters select[name=level]", key="Shift+Tab")
    page.keyboard.press("ArrowDown")   # "info"
    expect(page).to_have_url(re.compile(r"level=info"))
    announced(page, "110 events")
    focus_on(page, "#event-filters select[name=level]")


# ---------------------------------------------------------------- sessions

def test_a_refused_run_now_says_why_below_the_request_which_takes_the_focus(page, service, guard):
    page.goto("/sessions")
    page.fill("form.run-now textarea[name=prompt]", "x" * 20_001)
    page.focus("form.run-now button[type=submit]")
    page.keyboard.press("Enter")
    page.wait_for_url(re.compile(r"/sessions/run$"))
    problem = page.locator("#run-now-problem")
    expect(problem).to_have_text("Not queued: prompt is 20001 characters; the limit is 20000")
    expect(page.locator("form.run-now textarea[name=prompt]")).to_be_focused()
    expect(page.locator("form.run-now textarea[name=prompt]")).to_have_attribute("aria-describedby", "run-now-problem")
    expect(page.locator("main [data-flash]")).to_have_count(0)
    # The 400 is the point of this test, not a problem of the page.
    assert guard.http_errors == [f"400 POST {service.base_url}/sessions/run"]
    guard.http_errors.clear()
    guard.console_errors.clear()


def test_run_now_and_stop_by_keyboard(page, service, guard):
    stop_all(service)
    write_script(service.script_path, sl.steps(sl.init(), sl.text("Looking at the disks.")) + [{"sleep": 30}])
    try:
        page.goto("/sessions")
        tab_to(page, "form.run-now textarea[name=prompt]")
        page.keyboard.type("Check the disks")
        page.keyboard.press("Tab")
        focus_on(page, "form.run-now button[type=submit]")
        page.keyboard.press("Enter")
        page.wait_for_url(re.compile(r"/sessions/\d+$"))
        # The outcome is read first, and the next Tab goes on from it.
        focus_on(page, "main [role=status]")
        expect(page.locator("main [role=status]")).to_have_text(re.compile(r"Session #\d+ queued"))
        expect(page.locator("#session-status")).to_have_text("running", timeout=15_000)
        tab_to(page, "#stop-button")
        page.wait_for_timeout(2_500)   # a poll of the page redraws the header, Stop included
        focus_on(page, "#stop-button")
        session_id = re.search(r"/sessions/(\d+)$", page.url).group(1)
        guard.expect_confirm(f"Stop session #{session_id}? The agent is ended where it is.", accept=True)
        page.keyboard.press("Enter")
        page.wait_for_load_state("load")
        focus_on(page, "main [role=status]")
        expect(page.locator("main [role=status]")).to_have_text(re.compile(r"Stop requested for session #\d+"))
    finally:
        stop_all(service)


# ---------------------------------------------------------------- config

def test_a_refused_config_value_takes_focus_with_its_reason(page, guard):
    page.goto("/config")
    tab_to(page, "input[name=CLAUDEOPS_INTERVAL]")
    page.keyboard.press("Control+a")
    page.keyboard.type("often")
    page.keyboard.press("Enter")
    page.wait_for_load_state("load")
    expect(page.get_by_role("alert")).to_have_text(re.compile("Nothing saved"))
    focus_on(page, "input[name=CLAUDEOPS_INTERVAL][aria-invalid=true]")
    expect(page.locator("input[name=CLAUDEOPS_INTERVAL]")).to_have_accessible_description(re.compile(".+"))
    guard.http_errors.clear()   # the 400 is the state under test
    guard.console_errors.clear()


# ---------------------------------------------------------------- login

def test_login_and_logout_by_keyboard(browser, locked_browser_service):
    guard = PageGuard()
    with guarded_page(browser, locked_browser_service.base_url, guard) as page:
        page.goto("/memories")
        focus_on(page, "input[name=password]")
        page.keyboard.type("not it")
        page.keyboard.press("Enter")
        expect(page.get_by_role("alert")).to_have_text("Wrong password.")
        focus_on(page, "input[name=password]")
        guard.http_errors.clear()   # the 401 is the state under test
        guard.console_errors.clear()
        page.keyboard.type(OPERATOR_PASSWORD)
        page.keyboard.press("Enter")
        page.wait_for_url(re.compile(r"/memories$"))
        tab_to(page, ".sidebar form.logout button")
        page.keyboard.press("Enter")
        page.wait_for_url(re.compile(r"/login"))
        expect(page.get_by_role("alert")).to_have_text("Logged out.")
        focus_on(page, "input[name=password]")
