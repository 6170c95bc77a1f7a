"""The dashboard in a real browser (Debian's chromium through Playwright)
against the real service (`claudeops serve`: gunicorn + the scheduler) running
the fake CLI: Run now and the live activity log, Stop, the Events page's
filters and polling, escaping of agent and operator text, the polling list.

One service and one browser serve the whole module (the service takes a few
seconds to start). The fake CLI reads its script when a session starts, so
each test rewrites the script before it triggers a session; sessions run one
at a time, and every test leaves the service idle for the next one.
"""
from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from playwright.sync_api import expect

from tests import streamlines as sl
from tests.support.browser import ConfirmGuard, PageGuard, guarded_page, token, trigger, wait_for, write_script
from tests.support.service import Service

pytestmark = pytest.mark.browser

PAYLOAD_SCRIPT = "<script>window.__pwned=1</script>"
PAYLOAD_IMG = '<img src=x onerror="window.__pwned=1">'
PAYLOAD_ATTR = '"><svg onload="alert(document.domain)">'

# Set on a page once it has loaded; still there later means the page was never reloaded.
LOAD_TOKEN = "window.__loadToken = Math.random().toString(36).slice(2)"
UNFINISHED = ("queued", "running")


# ---------------------------------------------------------------- fixtures

@pytest.fixture(scope="module")
def service(browser_service):
    """The real service, shared by this module's tests (see tests/conftest.py)."""
    return browser_service


@pytest.fixture(autouse=True)
def idle_service(service):
    """Every test starts and leaves the service with no session queued or running."""
    settle(service)
    yield
    settle(service)


@pytest.fixture
def guard():
    """Answers the confirm dialogs a test announces; any other fails it."""
    return ConfirmGuard()


@pytest.fixture
def page(browser, service, guard):
    with guarded_page(browser, service.base_url, guard) as page:
        yield page


# ---------------------------------------------------------------- helpers

def settle(svc: Service, timeout: float = 20.0) -> None:
    """Stop whatever is queued or running, and wait until it has ended."""
    def unfinished():
        return [s for s in svc.get("/api/v1/sessions?limit=100")[1]["sessions"] if s["status"] in UNFINISHED]
    for session in unfinished():
        svc.post(f"/api/v1/sessions/{session['id']}/stop")
    try:
        wait_for(lambda: not unfinished(), timeout=timeout, what="service idle")
    except AssertionError:
        raise AssertionError(f"sessions still unfinished: {unfinished()}\n--- service log ---\n{svc.log()[-4000:]}") from None


def session(svc: Service, session_id: int) -> dict:
    status, body = svc.get(f"/api/v1/sessions/{session_id}")
    assert status == 200, body
    return body


def wait_status(svc: Service, session_id: int, *statuses: str, timeout: float = 20.0) -> dict:
    return wait_for(lambda: (lambda s: s if s["status"] in statuses else None)(session(svc, session_id)),
                    timeout=timeout, what=f"session {session_id} {'/'.join(statuses)}")


def mark_loaded(page) -> str:
    return page.evaluate(f"{LOAD_TOKEN}")


def assert_not_reloaded(page, token: str) -> None:
    assert page.evaluate("window.__loadToken") == token, "the page was reloaded"


def event_rows(page) -> list[dict]:
    """The Events table as data: level, service, message per row."""
    return page.eval_on_selector_all("#event-rows tbody tr", """rows => rows
        .filter(r => r.cells.length === 5)
        .map(r => ({level: r.cells[1].textContent.trim(), service: r.cells[2].textContent.trim(),
                    message: r.cells[3].textContent.trim()}))""")


def wait_for_messages(page, tok: str, expected: set[str], timeout: int = 10_000) -> None:
    """Wait until the Events table's rows carrying ``tok`` are exactly ``expected``."""
    page.wait_for_function("""([tok, expected]) => {
        const shown = [...document.querySelectorAll('#event-rows tbody td.message')]
            .map(td => td.textContent.trim()).filter(m => m.includes(tok)).sort();
        return JSON.stringify(shown) === JSON.stringify(expected);
    }""", arg=[tok, sorted(expected)], timeout=timeout)


def wait_for_swap(page, selector: str, timeout_ms: int = 6_000) -> None:
    """Wait for the next htmx swap into ``selector`` (e.g. one polling round) to settle."""
    page.evaluate("""([selector, timeout]) => new Promise((resolve, reject) => {
        const target = document.querySelector(selector);
        const timer = setTimeout(() => reject(new Error(`no htmx swap into ${selector} in ${timeout} ms`)), timeout);
        target.addEventListener("htmx:afterSettle", () => { clearTimeout(timer); resolve(true); }, {once: true});
    })""", [selector, timeout_ms])


# ---------------------------------------------------------------- tests

def test_run_now_shows_the_session_live_until_it_completes(page, service, tmp_path):
    tok = token()
    steps = (sl.steps(sl.init()) + [{"sleep": 2.0}]
             + sl.steps(sl.text(f"Checking the database.\n[EVENT:warning:postgres] replication lag {tok}"))
             + [{"sleep": 1.5}]
             + sl.steps(sl.tool_use(f"systemctl status postgresql  # {tok}"))
             + [{"sleep": 1.5}]
             + sl.steps(sl.tool_result(f"active (running) {tok}"))
             + [{"sleep": 1.5}]
             + sl.steps(sl.text(f"All checked {tok}.\n[EVENT:info:nginx] proxy healthy"),
                        sl.result("All checked.")))
    write_script(service.script_path, steps)

    page.goto("/sessions")
    page.select_option("select[name=tier]", "2")
    page.fill("textarea[name=prompt]", f"Why is postgres slow? {tok}")
    page.get_by_role("button", name="Run now").click()

    expect(page).to_have_url(re.compile(r"/sessions/\d+$"))
    session_id = int(page.url.rsplit("/", 1)[1])
    expect(page.get_by_role("heading", name=f"Session #{session_id}")).to_be_visible()
    expect(page.locator(".flash")).to_contain_text(f"Session #{session_id} queued")
    loaded = mark_loaded(page)
    navigations = []
    page.on("framenavigated", lambda frame: frame == page.main_frame and navigations.append(frame.url))
    ids_at_load = set(page.locator("#activity > li").evaluate_all("els => els.map(e => e.dataset.id)"))
    status_at_load = page.locator("#session-status").text_content().strip()
    assert status_at_load in UNFINISHED
    assert page.locator("#response-section").inner_text().strip() == ""

    api = session(service, session_id)
    assert (api["tier"], api["trigger"], api["prompt"]) == (2, "dashboard", f"Why is postgres slow? {tok}")

    activity = page.locator("#activity")
    expect(page.locator("#session-status")).to_have_text("running", timeout=10_000)
    marker = activity.locator("li.act-marker", has=page.locator(".badge.marker", has_text="event:warning:postgres"))
    expect(marker).to_be_visible(timeout=10_000)
    expect(marker).to_contain_text(f"replication lag {tok}")
    expect(activity.locator("li.act-text").first).to_contain_text("Checking the database.")
    tool_use = activity.locator("li.act-tool_use")
    expect(tool_use).to_have_count(1, timeout=10_000)
    expect(tool_use.locator(".act-title")).to_have_text("Bash")
    expect(tool_use).to_contain_text(f"systemctl status postgresql  # {tok}")
    expect(activity.locator("li.act-tool_result")).to_contain_text(f"active (running) {tok}", timeout=10_000)
    expect(activity.locator(".badge.marker", has_text="event:info:nginx")).to_be_visible(timeout=10_000)

    expect(page.locator("#session-status")).to_have_text("completed", timeout=10_000)
    response = page.locator("#response-section")
    expect(response.get_by_role("heading", name="Response")).to_be_visible(timeout=5_000)
    expect(response.locator("pre.response")).to_contain_text(f"All checked {tok}.")
    expect(page.locator("dl.meta")).to_contain_text("2 · sonnet")
    expect(page.locator("#stop-button")).to_have_count(0)
    # It polls a moment after the end, for an escalation the session may have asked for.
    expect(page.locator("#live-poller")).not_to_have_attribute("hx-get", re.compile("."), timeout=10_000)

    # Everything above arrived through polling: same document, no navigation.
    assert_not_reloaded(page, loaded)
    assert navigations == []
    ids_now = page.locator("#activity > li").evaluate_all("els => els.map(e => e.dataset.id)")
    # Each entry once, in order: appended poll by poll, never duplicated or reordered.
    kinds = page.locator("#activity > li .act-kind").all_text_contents()
    assert kinds == ["text", "marker", "tool use", "tool result", "text", "marker"], kinds
    assert len(set(ids_now)) == len(ids_now) and ids_now == sorted(ids_now, key=int), ids_now
    assert set(ids_now) - ids_at_load, "no activity arrived after the page loaded"

    api = session(service, session_id)
    assert (api["status"], api["tier"], api["model"]) == ("completed", 2, "sonnet")
    shot = Path(tmp_path) / "session-detail.png"
    page.screenshot(path=str(shot), full_page=True)
    assert shot.stat().st_size > 0


def test_stop_button_stops_a_running_session(page, service, guard):
    session_id = trigger(service, sl.steps(sl.init(), sl.text("Starting a long check."))
                         + [{"sleep": 60}] + sl.steps(sl.result("never")))
    page.goto(f"/sessions/{session_id}")
    # Stop while running (while queued it would be "stopped ... before it started").
    expect(page.locator("#session-status")).to_have_text("running", timeout=10_000)
    expect(page.locator("#activity")).to_contain_text("Starting a long check.", timeout=10_000)

    # It asks first, and a No sends nothing: a running remediation cannot be undone.
    question = f"Stop session #{session_id}? The agent is ended where it is."
    guard.expect_confirm(question, accept=False)
    page.get_by_role("button", name="Stop").click()
    page.wait_for_timeout(500)
    expect(page.locator("#session-status")).to_have_text("running")
    assert guard.answered == [(question, False)]

    started = time.monotonic()
    guard.expect_confirm(question, accept=True)
    page.get_by_role("button", name="Stop").click()
    expect(page.locator(".flash")).to_contain_text(f"Stop requested for session #{session_id}.")
    expect(page.locator("#session-status")).to_have_text("stopped", timeout=10_000)
    expect(page.locator("#session-header .reason")).to_have_text("stopped by the operator")
    expect(page.locator("#stop-button")).to_have_count(0)
    assert time.monotonic() - started < 10

    api = session(service, session_id)
    assert (api["status"], api["status_reason"]) == ("stopped", "stopped by the operator")


def test_events_filters_and_live_polling(page, service):
    tok = token()
    seeded = [("info", "nginx", f"{tok} nginx up"), ("warning", "postgres", f"{tok} replication lag"),
              ("critical", "postgres", f"{tok} postgres down"), ("warning", "nginx", f"{tok} nginx slow"),
              ("critical", "nas", f"{tok} disk failing")]
    lines = "\n".join(f"[EVENT:{level}:{svc}] {message}" for level, svc, message in seeded)
    seed = trigger(service, sl.steps(sl.init(), sl.text(lines), sl.result("seeded")))
    wait_status(service, seed, "completed")

    page.goto("/events")
    every = {message for _, _, message in seeded}
    wait_for_messages(page, tok, every, timeout=2_000)
    loaded = mark_loaded(page)

    page.select_option("#event-filters select[name=level]", "warning")
    wait_for_messages(page, tok, {f"{tok} replication lag", f"{tok} nginx slow"})
    expect(page).to_have_url(re.compile(r"/events\?level=warning"))
    rows = event_rows(page)
    assert rows and all(row["level"] == "warning" for row in rows), rows
    assert page.locator("#event-rows").count() == 1   # the polled block replaced, not nested

    page.select_option("#event-filters select[name=service]", "postgres")
    wait_for_messages(page, tok, {f"{tok} replication lag"})
    rows = event_rows(page)
    assert rows and all((row["level"], row["service"]) == ("warning", "postgres") for row in rows), rows

    page.select_option("#event-filters select[name=level]", label="all")
    wait_for_messages(page, tok, {f"{tok} replication lag", f"{tok} postgres down"})
    rows = event_rows(page)
    assert rows and all(row["service"] == "postgres" for row in rows), rows
    assert {row["level"] for row in rows} >= {"warning", "critical"}
    expect(page).to_have_url(re.compile(r"service=postgres"))
    assert_not_reloaded(page, loaded)

    # A running session records a new event: the 5 s poll shows it, with the
    # page's filters still applied (the nginx event must not appear).
    running = trigger(service, sl.steps(sl.init(), sl.text(
        f"[EVENT:critical:postgres] {tok} primary unreachable\n[EVENT:info:nginx] {tok} nginx still fine"))
        + [{"sleep": 30}] + sl.steps(sl.result("never")))

    def recorded():
        events = service.get("/api/v1/events?service=postgres&limit=10")[1]["events"]
        return any(e["message"] == f"{tok} primary unreachable" for e in events)
    wait_for(recorded, timeout=15, what="event recorded")
    recorded_at = time.monotonic()
    new_row = page.locator("#event-rows tbody tr", has_text=f"{tok} primary unreachable")
    expect(new_row).to_be_visible(timeout=7_000)  # one 5 s polling period, plus slack
    assert time.monotonic() - recorded_at < 7
    expect(new_row.locator(".badge")).to_have_text("critical")
    assert session(service, running)["status"] == "running", "the event should show while its session runs"
    wait_for_messages(page, tok, {f"{tok} replication lag", f"{tok} postgres down", f"{tok} primary unreachable"},
                      timeout=1_000)
    assert all(row["service"] == "postgres" for row in event_rows(page))
    assert_not_reloaded(page, loaded)


def test_agent_and_operator_text_is_shown_as_text_never_run(page, service, guard):
    tok = token()
    hostile = f"{PAYLOAD_SCRIPT} {PAYLOAD_IMG} {PAYLOAD_ATTR}"
    steps = (sl.steps(sl.init()) + [{"sleep": 2.0}]
             + sl.steps(sl.text(f"Found {tok}: {hostile}\n[EVENT:critical:web] {tok} {hostile}"),
                        sl.tool_use(f"echo '{PAYLOAD_SCRIPT}'"), sl.tool_result(hostile))
             + [{"sleep": 1.0}] + sl.steps(sl.result("done")))
    session_id = trigger(service, steps, prompt=f"{tok} {hostile}")

    # Live: the activity arrives through htmx swaps (which would run <script>s).
    page.goto(f"/sessions/{session_id}")
    assert page.locator("#activity > li").count() == 0, "the activity should arrive after the page loaded"
    expect(page.locator("#session-status")).to_have_text("completed", timeout=15_000)
    expect(page.locator("#response-section pre.response")).to_be_visible()

    def check(where: str) -> None:
        for payload in (PAYLOAD_SCRIPT, PAYLOAD_IMG, PAYLOAD_ATTR):
            assert page.locator("main").get_by_text(payload).count() >= 1, f"{payload!r} not shown as text on {where}"
        assert page.evaluate("typeof window.__pwned") == "undefined", f"injected script ran on {where}"
        assert page.locator("main script, main img, main svg").count() == 0, f"markup injected on {where}"

    check("the live detail page")
    activity = page.locator("#activity")
    expect(activity.locator("li.act-text")).to_contain_text(PAYLOAD_SCRIPT)
    expect(activity.locator("li.act-marker")).to_contain_text(PAYLOAD_IMG)
    expect(activity.locator("li.act-tool_use")).to_contain_text(PAYLOAD_SCRIPT)
    expect(activity.locator("li.act-tool_result")).to_contain_text(PAYLOAD_ATTR)
    expect(page.locator("section", has=page.get_by_role("heading", name="Operator's request"))).to_contain_text(hostile)

    page.reload()  # the same page rendered in full
    expect(page.locator("#session-status")).to_have_text("completed")
    check("the detail page")

    page.goto("/events")
    row = page.locator("#event-rows tbody tr", has_text=tok)
    expect(row.locator("td.message")).to_have_text(f"{tok} {hostile}")
    check("the Events page")

    page.goto("/sessions")
    expect(page.locator("#session-rows td.clip", has_text=tok)).to_have_text(f"{tok} {hostile}")
    check("the Sessions page")
    wait_for_swap(page, "#session-rows")  # the rows the poll swaps in must be inert too
    check("the polled Sessions page")

    assert guard.dialogs == []
    assert not [url for url in guard.requests if url.rstrip("/").endswith("/x")], "an injected <img> loaded"


def test_sessions_list_shows_a_new_session_without_reload(page, service):
    tok = token()
    page.goto("/sessions")
    expect(page.locator("#session-rows table")).to_be_visible()
    loaded = mark_loaded(page)
    row = page.locator("#session-rows tbody tr", has_text=tok)
    expect(row).to_have_count(0)

    session_id = trigger(service, sl.steps(sl.init()) + [{"sleep": 1.0}] + sl.steps(sl.result("ok")),
                         prompt=f"Look at the backups {tok}", start_tier=3)
    created = time.monotonic()
    expect(row).to_have_count(1, timeout=5_000)  # one 3 s polling period, plus slack
    assert time.monotonic() - created < 5
    expect(row.locator("a")).to_have_text(f"#{session_id}")
    expect(row.locator("td").nth(1)).to_have_text("3")
    expect(row.locator("td").nth(2)).to_have_text("api")
    expect(row.locator(".badge")).to_have_text("completed", timeout=10_000)
    assert_not_reloaded(page, loaded)

    row.locator("a").click()
    expect(page).to_have_url(re.compile(rf"/sessions/{session_id}$"))
    expect(page.locator("#session-status")).to_have_text("completed")


def test_overview_cards_follow_a_session_without_reload(page, service):
    """The cards poll every 5 s: a session that starts, then ends, shows on
    them while the page stays open."""
    page.goto("/")
    sessions_card = page.locator("main .card", has_text="Sessions").first.locator(".card-value")
    running_card = page.locator("main .card", has_text="Running / queued").locator(".card-detail")
    before = int(sessions_card.text_content())
    expect(running_card).to_have_text("idle")
    loaded = mark_loaded(page)

    session_id = trigger(service, sl.steps(sl.init()) + [{"sleep": 8.0}] + sl.steps(sl.result("ok")))
    wait_status(service, session_id, "running")
    expect(sessions_card).to_have_text(str(before + 1), timeout=7_000)   # one polling period, plus slack
    expect(running_card).to_have_text("a session is running", timeout=7_000)
    wait_status(service, session_id, "completed")
    expect(running_card).to_have_text("idle", timeout=7_000)
    expect(page.locator("main .card", has_text="Last session")).to_contain_text(f"#{session_id}")
    assert_not_reloaded(page, loaded)


@pytest.mark.parametrize("path, block", [("/sessions", "#session-rows"), ("/events", "#event-rows"),
                                         ("/", "#overview-cards")])
def test_polls_keep_the_keyboard_focus_on_a_link_in_the_polled_block(page, service, path, block):
    """While focus is on a link inside a polled block, its polls wait: a swap
    would replace the link and drop focus to <body>. Once focus leaves, the
    block polls again and shows what changed meanwhile."""
    tok = token()
    seed = trigger(service, sl.steps(sl.init(), sl.text(f"[EVENT:warning:web] focus {tok}"), sl.result("ok")))
    wait_status(service, seed, "completed")
    page.goto(path)
    link = page.locator(f"{block} a").first
    link.focus()
    page.evaluate("document.activeElement.dataset.focusedByTest = '1'")
    later = trigger(service, sl.steps(sl.init(), sl.text(f"[EVENT:warning:web] later {tok}"), sl.result("ok")))
    wait_status(service, later, "completed")
    page.wait_for_timeout(6_500)   # more than a polling period (3 s for Sessions, 5 s for the others)
    focused = page.evaluate("[document.activeElement.tagName, document.activeElement.dataset.focusedByTest, "
                            "document.activeElement.isConnected]")
    assert focused == ["A", "1", True], focused

    page.locator("h1").click()   # focus leaves the block: its polls go on
    expect(page.locator(f"{block} [data-focused-by-test]")).to_have_count(0, timeout=7_000)   # swapped since


def test_sessions_list_fits_a_1024_px_window_with_a_long_request(browser, service):
    """The Request cell clips its text (one line, an ellipsis) instead of
    widening the table past the window."""
    trigger(service, sl.steps(sl.init(), sl.result("ok")), prompt="Check " + "x" * 300)
    with guarded_page(browser, service.base_url, PageGuard(), width=1024) as page:
        page.goto("/sessions")
        request = page.locator("#session-rows td.clip").first
        expect(request).to_contain_text("Check xxx")
        widths = page.evaluate("[document.documentElement.scrollWidth, document.documentElement.clientWidth]")
        assert widths[0] <= widths[1], widths
        box = request.bounding_box()
        assert box["x"] + box["width"] <= widths[1], (box, widths)


PHONE = 390


def test_every_page_fits_a_phone_and_a_long_service_name_fits_the_memories_table(browser, service):
    """At a phone's width the sidebar is a bar of links above the page and a
    wide table scrolls by itself: no page is wider than the screen, and its
    links are all in view; an event's message keeps room for its words. A
    service's name of 100 characters wraps in a column of its own width, at
    any width: it once took the observation's room. (Its event was once
    stopped before it ran, and the session page, whose marker badge did not
    wrap, was 800 pixels wide with it.)"""
    tok = token()
    long_service = "s" * 90 + tok
    status, memory = service.post("/api/v1/memories", {
        "service": long_service, "category": "timing", "observation": f"Slow to start after an upgrade {tok}"})
    assert status == 201, memory
    settle(service)   # what earlier tests left queued, then this one's session, whose event the pages show
    session_id = trigger(service, sl.steps(sl.init(), sl.text(f"[EVENT:warning:{long_service}] disk at 91% {tok}"),
                                           sl.result("ok")))
    wait_status(service, session_id, "completed")
    pages = ["/", "/sessions", f"/sessions/{session_id}", "/events", "/memories", f"/memories/{memory['id']}",
             "/cooldowns", "/config"]
    with guarded_page(browser, service.base_url, PageGuard(), width=PHONE) as page:
        for path in pages:
            page.goto(path)
            widths = page.evaluate("[document.documentElement.scrollWidth, document.documentElement.clientWidth]")
            assert widths == [PHONE, PHONE], (path, widths)
            for link in page.locator("nav.sidebar a").all():
                box = link.bounding_box()
                assert box["x"] >= 0 and box["x"] + box["width"] <= PHONE, (path, link.text_content(), box)
            if path == "/events":   # a message keeps room for its words; the table scrolls
                message = page.locator("#events-table td.message").first.bounding_box()
                assert message["width"] >= 200, message
    with guarded_page(browser, service.base_url, PageGuard(), width=1280) as page:
        page.goto(f"/memories?q={tok}")
        row = page.locator(f"#memory-{memory['id']}")
        expect(row).to_be_visible()
        widths = page.evaluate("[document.documentElement.scrollWidth, document.documentElement.clientWidth]")
        assert widths[0] <= widths[1], widths
        service_cell, observation = row.locator("td.service").bounding_box(), row.locator("td.observation").bounding_box()
        # Uncapped, the name's column was 901 px wide and the observation's 118.
        assert service_cell["width"] < 200 and observation["width"] > 150, (service_cell, observation)


def test_back_after_filtering_restores_the_whole_events_page(page, service):
    """On a history-cache miss htmx re-fetches the page with HX-Request set; it
    must get the whole page back, not the rows fragment."""
    page.goto("/events")
    page.select_option("#event-filters select[name=level]", "warning")
    expect(page).to_have_url(re.compile(r"level=warning"))
    page.select_option("#event-filters select[name=level]", "critical")
    expect(page).to_have_url(re.compile(r"level=critical"))
    # htmx keeps snapshots of the last 10 URLs only (htmx.config.historyCacheSize);
    # drop them, as after more filter changes than that.
    page.evaluate("sessionStorage.removeItem('htmx-history-cache')")
    page.go_back()
    expect(page).to_have_url(re.compile(r"level=warning"))
    expect(page.locator("nav.sidebar")).to_be_visible(timeout=3_000)
    expect(page.locator("#event-filters select[name=level]")).to_have_value("warning", timeout=1_000)


def test_back_and_forward_show_the_filters_of_the_page_they_return_to(page, service):
    """A snapshot of the page would hold the filters' first values: the form
    would say "all" over warning rows, and the next poll would send "all"."""
    page.goto("/events")
    level = page.locator("#event-filters select[name=level]")
    page.select_option("#event-filters select[name=level]", "warning")
    expect(page).to_have_url(re.compile(r"level=warning"))
    page.select_option("#event-filters select[name=level]", "critical")
    expect(page).to_have_url(re.compile(r"level=critical"))
    page.go_back()
    expect(page).to_have_url(re.compile(r"level=warning"))
    expect(level).to_have_value("warning")
    # Back loaded the page again; Forward is handled once its scripts have run.
    page.wait_for_load_state("load")
    page.go_forward()
    expect(page).to_have_url(re.compile(r"level=critical"))
    expect(level).to_have_value("critical")


def test_events_pager_keeps_its_page_while_new_events_arrive(page, service):
    """An older page of the log is held by id: its polls show the same rows
    while a session records more, and Newest shows them."""
    tok = token()
    for batch in (range(1, 61), range(61, 121)):   # the default per-session limit is 100
        lines = "\n".join(f"[EVENT:info:pager] {tok} e{n}" for n in batch)
        wait_status(service, trigger(service, sl.steps(sl.init(), sl.text(lines), sl.result("seeded"))), "completed")

    def shown() -> list[str]:
        return [row["message"] for row in event_rows(page) if tok in row["message"]]

    page.goto("/events?service=pager")
    expect(page.locator("#event-rows tbody tr")).to_have_count(100)
    assert shown() == [f"{tok} e{n}" for n in range(120, 20, -1)]
    loaded = mark_loaded(page)
    page.get_by_role("link", name="older →").click()
    expect(page).to_have_url(re.compile(r"/events\?service=pager&before=\d+$"))
    expect(page.locator("#event-rows tbody tr")).to_have_count(20)
    assert shown() == [f"{tok} e{n}" for n in range(20, 0, -1)]
    expect(page.locator("#event-filters select[name=service]")).to_have_value("pager")

    wait_status(service, trigger(service, sl.steps(sl.init(), sl.text(f"[EVENT:info:pager] {tok} late"),
                                                    sl.result("late"))), "completed")
    # Two polls: the first may have been asked before the late event was stored.
    page.evaluate("""() => new Promise((resolve, reject) => {
        let polls = 0;
        setTimeout(() => reject(new Error(`${polls} polls of the rows in 15 s`)), 15000);
        document.body.addEventListener("htmx:afterSettle", e => {
            if (e.target.id === "event-rows" && ++polls === 2) resolve(true);
        });
    })""")
    assert shown() == [f"{tok} e{n}" for n in range(20, 0, -1)]
    assert_not_reloaded(page, loaded)

    page.get_by_role("link", name="← newest").click()
    expect(page).to_have_url(re.compile(r"/events\?service=pager$"))
    expect(page.locator("#event-rows tbody td.message").first).to_have_text(f"{tok} late")
    assert_not_reloaded(page, loaded)


def test_a_new_service_joins_the_events_filter_without_a_reload(page, service):
    tok = token()
    first, later = f"svc-a-{tok}", f"svc-b-{tok}"
    wait_status(service, trigger(service, sl.steps(sl.init(), sl.text(f"[EVENT:info:{first}] {tok} up"),
                                                   sl.result("done"))), "completed")
    page.goto(f"/events?service={first}")
    loaded = mark_loaded(page)
    select = page.locator("#event-filters select[name=service]")
    assert later not in select.locator("option").all_text_contents()

    wait_status(service, trigger(service, sl.steps(sl.init(), sl.text(f"[EVENT:warning:{later}] {tok} slow"),
                                                   sl.result("done"))), "completed")
    expect(select.locator(f"option[value='{later}']")).to_have_count(1, timeout=7_000)   # one poll, plus slack
    expect(select).to_have_value(first)   # the filter in force stays chosen, and in force
    assert page.locator("#event-filters select[name=service]").count() == 1
    wait_for_messages(page, tok, {f"{tok} up"}, timeout=1_000)

    select.select_option(later)   # the filter brought by the poll works as the first one did
    wait_for_messages(page, tok, {f"{tok} slow"})
    expect(page).to_have_url(re.compile(rf"service={later}"))
    assert_not_reloaded(page, loaded)


def test_cooldowns_filter_replaces_the_polled_block_and_its_polls_keep_the_filter(page, service):
    tok = token()
    lines = "\n".join((f"[COOLDOWN:restart:cd-a-{tok}] success — {tok} a restarted",
                       f"[COOLDOWN:restart:cd-b-{tok}] failure — {tok} b still down"))
    wait_status(service, trigger(service, sl.steps(sl.init(), sl.text(lines), sl.result("done"))), "completed")

    def shown() -> list[str]:
        return [m.strip() for m in page.locator("#cooldown-actions td.message").all_text_contents() if tok in m]

    page.goto("/cooldowns")
    loaded = mark_loaded(page)
    assert sorted(shown()) == [f"{tok} a restarted", f"{tok} b still down"]
    page.select_option("#cooldown-filters select[name=service]", f"cd-b-{tok}")
    expect(page).to_have_url(re.compile(rf"service=cd-b-{tok}"))
    expect(page.locator("#cooldown-actions td.message")).to_have_text([f"{tok} b still down"])
    assert page.locator("#cooldown-state").count() == 1   # replaced, not nested
    wait_for_swap(page, "body")
    expect(page.locator("#cooldown-actions td.message")).to_have_text([f"{tok} b still down"])
    assert_not_reloaded(page, loaded)


@pytest.mark.parametrize("width", [PHONE, 1024, 1280])
def test_cooldown_messages_keep_room_for_their_words(browser, service, width):
    """Beside the Command column (40% of the table) a message was squeezed
    to some 70 px, a few letters to a line. It keeps room for its words at
    any width, without widening the page: on a phone the table scrolls."""
    tok = token()
    lines = "\n".join((f"[COOLDOWN:restart:cd-m-{tok}] failure — {tok} db would not come up",
                       f"[COOLDOWN:restart:cd-m-{tok}] failure — {tok} " + "D" * 300))
    wait_status(service, trigger(service, sl.steps(sl.init(), sl.text(lines), sl.result("done"))), "completed")
    with guarded_page(browser, service.base_url, PageGuard(), width=width) as page:
        page.goto(f"/cooldowns?service=cd-m-{tok}")
        messages = page.locator("#cooldown-actions td.message")
        expect(messages).to_have_count(2)
        widths = page.evaluate("[document.documentElement.scrollWidth, document.documentElement.clientWidth]")
        assert widths[0] <= widths[1], widths
        for message in messages.all():
            assert message.bounding_box()["width"] >= 220, (message.text_content()[:40], message.bounding_box())
        if width > PHONE:   # not at the command's cost: it keeps a tenth of the table
            command = page.locator("#cooldown-actions td.clip").first.bounding_box()
            assert command["width"] >= 80, command


@pytest.mark.parametrize("path, choice, block", [
    ("/events?level=warn1ng", ("#event-filters select[name=level]", "warning"), "#event-rows"),
    ("/memories?status=activ", ("#memory-filters select[name=status]", "active"), "#memory-table"),
    ("/cooldowns?outcome=sucess", ("#cooldown-filters select[name=outcome]", "success"), "#cooldown-state"),
])
def test_a_notice_of_an_ignored_filter_goes_once_another_filter_is_shown(page, path, choice, block):
    """"Ignored the level 'warn1ng'…" says what the page shows of its
    address; once a filter or a page is chosen, it no longer does. Its
    polls keep it: they show the same address."""
    page.goto(path)
    notice = page.locator("main [data-ignored]")
    expect(notice).to_have_count(1)
    with page.expect_response(lambda r: r.request.headers.get("hx-trigger") == block[1:], timeout=7_000):
        pass   # a poll of the block
    page.wait_for_timeout(300)
    expect(notice).to_have_count(1)
    select, value = choice
    page.select_option(select, value)
    expect(page).to_have_url(re.compile(rf"={value}(&|$)"))
    expect(notice).to_have_count(0)


def test_config_page_fits_the_window_with_every_meaning_in_view(page):
    """The longest values (the redaction patterns, a list without spaces)
    wrap in their cells instead of pushing the Meaning column off the page."""
    page.goto("/config")
    widths = page.evaluate("[document.documentElement.scrollWidth, document.documentElement.clientWidth]")
    assert widths[0] <= widths[1], widths
    meaning = page.locator("tr", has=page.locator("code", has_text="CLAUDEOPS_REDACT_ENV")).locator("td").last
    box = meaning.bounding_box()
    assert box["x"] + box["width"] <= widths[1]


def test_config_setting_names_break_only_at_underscores(page):
    """A long name (CLAUDEOPS_COOLDOWN_REDEPLOYMENT_LIMIT) may take two lines,
    but each of its words stays whole: no "CLAUDEOPS_TIER1_MODE / L"."""
    page.goto("/config")
    split = page.evaluate("""() => {
        const split = [];
        document.querySelectorAll("#runtime-settings tbody td:first-child code").forEach(code => {
            for (const node of code.childNodes) {
                if (node.nodeType !== Node.TEXT_NODE) continue;
                const range = document.createRange();
                range.selectNodeContents(node);
                if (range.getClientRects().length > 1) split.push(node.textContent);
            }
        });
        return [document.querySelectorAll("#runtime-settings tbody td:first-child code").length, split];
    }""")
    assert split[0] > 30 and split[1] == [], split


# ---------------------------------------------------------------- the service gone and back

def test_a_page_says_while_its_polls_fail_and_recovers_on_its_own(browser, tmp_path_factory):
    """The service stopped under an open page (a restart, an upgrade): the page
    says that what it shows may be out of date, keeps polling, and drops the
    warning at the first poll answered once the service is back."""
    from tests.conftest import FAKE_CLAUDE
    root = tmp_path_factory.mktemp("restarted")
    script = root / "script.json"
    write_script(script, sl.steps(sl.init(), sl.result("idle")))
    restarted = Service(root / "state", {"CLAUDEOPS_INTERVAL": "0", "CLAUDEOPS_CLAUDE_BIN": str(FAKE_CLAUDE),
                                         "FAKE_CLAUDE_SCRIPT": str(script)}, workers=1)
    restarted.start()
    guard = PageGuard()
    try:
        with guarded_page(browser, restarted.base_url, guard) as page:
            page.goto("/events")
            trouble = page.locator("#poll-trouble")
            expect(trouble).to_be_hidden()
            restarted.terminate()
            # The events page polls every 5 s.
            expect(trouble).to_be_visible(timeout=15_000)
            expect(trouble).to_have_text("Lost contact with the service: what this page shows may be out of date. "
                                         "Trying again every few seconds.")
            expect(trouble).to_have_attribute("role", "alert")
            restarted.start()
            expect(trouble).to_be_hidden(timeout=15_000)
            expect(trouble).to_have_text("")
            # The browser's line for each refused connection, and htmx's for each failed
            # poll, are the state under test.
            expected = ("net::ERR_CONNECTION_REFUSED", "htmx:sendError", "htmx:afterRequest")
            assert any("ERR_CONNECTION_REFUSED" in line for line in guard.console_errors)
            assert all(any(part in line for part in expected) for line in guard.console_errors), guard.console_errors
            guard.console_errors.clear()
    finally:
        restarted.terminate()
