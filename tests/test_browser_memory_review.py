"""The review inbox on the Memories page in a real browser (Debian's chromium
through Playwright) against the real service (`claudeops serve` with the fake
CLI) and review on: the agent's proposals appear live, Approve, Edit &
approve and Reject (with a reason) act without a reload, the table follows,
polls never destroy an edit or a typed reason, and the Events page tells of
each proposal."""
from __future__ import annotations

import re
import uuid

import pytest
from playwright.sync_api import expect

from tests import streamlines as sl
from tests.support.browser import (PageGuard, api_memory, delete_all_memories, guarded_page, wait_for,
                                   write_script)

pytestmark = pytest.mark.browser

UNFINISHED = ("queued", "running")
INBOX_ROWS = "#memory-inbox tr.proposed-row"


@pytest.fixture(scope="module")
def service(review_browser_service):
    return review_browser_service


@pytest.fixture(autouse=True)
def no_memories(service):
    delete_all_memories(service)


@pytest.fixture
def page(browser, service):
    with guarded_page(browser, service.base_url, PageGuard(), width=1400) as page:
        yield page


def run_session(service, *texts: str) -> int:
    """A session whose agent writes ``texts``; waits until it has ended."""
    write_script(service.script_path, sl.steps(sl.init(), *(sl.text(t) for t in texts), sl.result("done")))
    status, created = service.post("/api/v1/sessions/trigger", {})
    assert status == 201, created
    wait_for(lambda: service.get(f"/api/v1/sessions/{created['id']}")[1]["status"] not in UNFINISHED,
             timeout=20, what="session finished")
    return created["id"]


def import_proposal(service, observation: str) -> None:
    """A proposal without a session: an import that says so."""
    status, body = service.request("POST", "/api/v1/memories/import", {
        "format": "claudeops-memories", "version": 1, "memories": [
            {"service": "web", "category": "behavior", "observation": observation, "status": "proposed"}]})
    assert status == 201, body


def inbox_row(page, text: str):
    return page.locator(INBOX_ROWS, has_text=text)


def test_the_agents_proposals_are_approved_edited_and_rejected_in_the_inbox(page, service):
    tok = uuid.uuid4().hex[:6]
    page.goto("/memories")
    expect(page.locator("#memory-inbox h2")).to_contain_text("Review inbox")
    expect(page.locator("#memory-inbox-empty")).to_have_text("Nothing awaits review.")
    loaded = page.evaluate("window.__loadToken = Math.random().toString(36).slice(2)")

    session_id = run_session(service, f"[MEMORY:timing:jellyfin] Takes 60s to start after restart {tok}\n"
                                      f"[MEMORY:behavior:nas] Scrub slows every share on Sunday {tok}\n"
                                      f"[MEMORY:maintenance:postgres] Vacuum runs nightly at 02:00 {tok}")
    expect(page.locator(INBOX_ROWS)).to_have_count(3, timeout=7_000)   # the inbox's own 5 s poll
    expect(page.locator("#memory-inbox-count")).to_have_text("3")
    first = inbox_row(page, "Takes 60s")
    expect(first.get_by_role("link", name=f"#{session_id}")).to_be_visible()
    ids = {text: int(inbox_row(page, text).get_attribute("data-id")) for text in ("Takes 60s", "Scrub", "Vacuum")}
    expect(page.locator(f"#memory-{ids['Takes 60s']} td.status")).to_have_text("proposed")

    first.get_by_role("button", name="Approve", exact=True).click()
    expect(first).to_have_count(0)
    expect(page.locator("#memory-inbox-count")).to_have_text("2")
    expect(page.locator(f"#memory-{ids['Takes 60s']} td.status")).to_contain_text("active")
    assert api_memory(service, ids["Takes 60s"])["status"] == "approved"

    scrub = inbox_row(page, "Scrub")
    # Escape leaves an edit as Cancel does, the keyboard back on the button that opened it.
    scrub.get_by_role("button", name="Edit & approve").click()
    page.locator(f"#proposed-{ids['Scrub']}.editing textarea[name=observation]").press("Escape")
    expect(page.locator("#memory-inbox tr.editing")).to_have_count(0)
    expect(scrub.get_by_role("button", name="Edit & approve")).to_be_focused()
    assert api_memory(service, ids["Scrub"])["status"] == "proposed"
    scrub.get_by_role("button", name="Edit & approve").click()
    editing = page.locator(f"#proposed-{ids['Scrub']}.editing")
    expect(editing.locator("textarea[name=observation]")).to_have_value(f"Scrub slows every share on Sunday {tok}")
    editing.locator("textarea[name=observation]").fill(f"Scrub slows the shares on Sunday nights {tok}")
    editing.locator("select[name=category]").select_option("timing")
    editing.locator("input[name=service]").fill("")
    editing.locator("input[name=confidence]").fill("0.85")
    editing.get_by_role("button", name="Approve with these changes").click()
    expect(editing).to_have_count(0)
    expect(page.locator("#memory-inbox-count")).to_have_text("1")
    edited = api_memory(service, ids["Scrub"])
    assert (edited["status"], edited["observation"], edited["category"], edited["service"], edited["confidence"]) == (
        "approved", f"Scrub slows the shares on Sunday nights {tok}", "timing", None, 0.85)

    vacuum = inbox_row(page, "Vacuum")
    vacuum.locator("input[name=reason]").fill("autovacuum does it")
    vacuum.get_by_role("button", name="Reject").click()
    expect(vacuum).to_have_count(0)
    expect(page.locator("#memory-inbox-empty")).to_be_visible()
    expect(page.locator(f"#memory-{ids['Vacuum']} td.status")).to_have_text("rejected")
    expect(page.locator(f"#memory-{ids['Vacuum']}")).to_contain_class("rejected")
    assert api_memory(service, ids["Vacuum"])["status"] == "rejected"
    history = service.get(f"/api/v1/memories/{ids['Vacuum']}/history")[1]["history"]
    assert [(h["action"], h["actor"], h["detail"]) for h in history][-1] == (
        "rejected", "operator", "autovacuum does it")
    assert page.evaluate("window.__loadToken") == loaded, "the page was reloaded"

    # The Events page told of each proposal, with its service.
    page.goto("/events")
    for memory_id, where in ((ids["Takes 60s"], "jellyfin"), (ids["Scrub"], "nas"), (ids["Vacuum"], "postgres")):
        expect(page.locator("main")).to_contain_text(f"Proposed memory #{memory_id} [")
    expect(page.locator("main")).to_contain_text("awaiting review")


def test_the_inbox_edit_takes_a_service_as_the_tables_edit_does(page, service):
    """The same rule, said the same way: letters, digits, _ and - (empty: general)."""
    tok = uuid.uuid4().hex[:6]
    import_proposal(service, f"Answers 302 when healthy {tok}")
    page.goto("/memories")
    inbox_row(page, "Answers 302").get_by_role("button", name="Edit & approve").click()
    page.locator("#memory-table tr.memory-row", has_text=tok).get_by_role("button", name="Edit").click()
    inbox_field = page.locator("#memory-inbox tr.editing input[name=service]")
    table_field = page.locator("#memory-table tr.editing input[name=service]")
    expect(table_field).to_have_attribute("pattern", re.compile(".+"))
    for name in ("pattern", "title", "maxlength", "placeholder"):
        expect(inbox_field).to_have_attribute(name, table_field.get_attribute(name))
    inbox_field.fill("web server")
    assert inbox_field.evaluate("field => field.validity.patternMismatch")
    inbox_field.fill("web_server-2")
    assert inbox_field.evaluate("field => field.validity.valid")


def test_polls_keep_an_edit_and_a_typed_reason(page, service):
    tok = uuid.uuid4().hex[:6]
    import_proposal(service, f"Answers 302 when healthy {tok}")
    import_proposal(service, f"Restarts cleanly under load {tok}")
    page.goto("/memories")
    expect(page.locator(INBOX_ROWS)).to_have_count(2)
    inbox_row(page, "Answers 302").get_by_role("button", name="Edit & approve").click()
    textarea = page.locator("#memory-inbox tr.editing textarea[name=observation]")
    textarea.fill(f"Answers 302, not 200, when healthy {tok}")
    reason = inbox_row(page, "Restarts cleanly").locator("input[name=reason]")
    reason.fill("seen once only")
    page.locator("h1").click()   # focus leaves the inbox: only the unsaved work holds the polls back

    import_proposal(service, f"Logs rotate at midnight {tok}")
    page.wait_for_timeout(6_500)   # more than a polling period
    expect(textarea).to_have_value(f"Answers 302, not 200, when healthy {tok}")
    expect(reason).to_have_value("seen once only")
    expect(page.locator(INBOX_ROWS, has_text="Logs rotate")).to_have_count(0)

    page.locator("#memory-inbox tr.editing").get_by_role("button", name="Cancel").click()
    expect(page.locator("#memory-inbox tr.editing")).to_have_count(0)
    # Approving one row refreshes the inbox, but not over a reason typed in another.
    inbox_row(page, "Answers 302").get_by_role("button", name="Approve", exact=True).click()
    expect(inbox_row(page, "Answers 302")).to_have_count(0)
    page.wait_for_timeout(1_000)
    expect(reason).to_have_value("seen once only")
    inbox_row(page, "Restarts cleanly").get_by_role("button", name="Reject").click()
    expect(page.locator(INBOX_ROWS, has_text="Logs rotate")).to_have_count(1, timeout=7_000)
    expect(page.locator(INBOX_ROWS)).to_have_count(1)
    memories = {m["observation"]: m for m in service.get("/api/v1/memories")[1]["memories"]}
    assert {text: m["status"] for text, m in memories.items()} == {
        f"Answers 302 when healthy {tok}": "approved", f"Restarts cleanly under load {tok}": "rejected",
        f"Logs rotate at midnight {tok}": "proposed"}
    rejected = memories[f"Restarts cleanly under load {tok}"]["id"]
    history = service.get(f"/api/v1/memories/{rejected}/history")[1]["history"]
    assert (history[-1]["action"], history[-1]["detail"]) == ("rejected", "seen once only")


def test_a_decision_made_elsewhere_meanwhile_is_said_and_the_inbox_follows(page, service):
    """Decided through the API (another tab, say) after the inbox was loaded:
    Reject, a reason typed, and Approve are refused with why; the row leaves
    the inbox, the count follows, the table shows the memory as it is now,
    and the inbox goes on polling."""
    tok = uuid.uuid4().hex[:6]
    import_proposal(service, f"Answers 302 when healthy {tok}")
    import_proposal(service, f"Restarts cleanly under load {tok}")
    page.goto("/memories")
    expect(page.locator("#memory-inbox-count")).to_have_text("2")
    answers, restarts = inbox_row(page, "Answers 302"), inbox_row(page, "Restarts cleanly")
    answers_id, restarts_id = int(answers.get_attribute("data-id")), int(restarts.get_attribute("data-id"))

    def approve_elsewhere(memory_id: int) -> None:
        status, body = service.post(f"/api/v1/memories/{memory_id}/approve", {})
        assert status == 200, body

    answers.locator("input[name=reason]").fill("seen once only")   # which holds the inbox's polls back
    approve_elsewhere(answers_id)
    answers.get_by_role("button", name="Reject").click()
    expect(page.locator("#memory-errors")).to_have_text(
        f"Not rejected: memory {answers_id} is approved: only a proposed memory can be rejected; "
        "deactivate or delete an approved one instead")
    expect(answers).to_have_count(0)
    expect(page.locator("#memory-inbox-count")).to_have_text("1")
    expect(page.locator(f"#memory-{answers_id} td.status")).to_contain_text("active")

    restarts.locator("input[name=reason]").fill("not sure")   # the polls held back again
    approve_elsewhere(restarts_id)
    restarts.get_by_role("button", name="Approve", exact=True).click()
    expect(page.locator("#memory-errors")).to_have_text(f"Not approved: memory {restarts_id} is already approved")
    expect(restarts).to_have_count(0)
    expect(page.locator("#memory-inbox-empty")).to_be_visible()
    expect(page.locator(f"#memory-{restarts_id} td.status")).to_contain_text("active")

    import_proposal(service, f"Logs rotate at midnight {tok}")
    expect(inbox_row(page, "Logs rotate")).to_have_count(1, timeout=7_000)   # the inbox's own poll
    expect(page.locator("#memory-errors")).to_have_text(f"Not approved: memory {restarts_id} is already approved")
    assert api_memory(service, answers_id)["status"] == "approved"


def test_approve_in_the_table_keeps_the_memory_as_it_is_under_any_filter(page, service):
    """The table includes the page's filters in its polls; its rows' buttons
    must not send them too, or Approve takes them as edits."""
    tok = uuid.uuid4().hex[:6]
    import_proposal(service, f"Answers 302 when healthy {tok}")
    page.goto(f"/memories?category=behavior&q={tok}")
    table_row = page.locator("#memory-table tr.memory-row", has_text=tok)
    table_row.get_by_role("button", name="Approve").click()
    expect(table_row.locator(".badge.review-proposed")).to_have_count(0)
    expect(page.locator("#memory-errors")).to_be_empty()
    (memory,) = service.get(f"/api/v1/memories?q={tok}")[1]["memories"]
    assert (memory["status"], memory["service"], memory["category"]) == ("approved", "web", "behavior")
    history = service.get(f"/api/v1/memories/{memory['id']}/history")[1]["history"]
    actions = [entry["action"] for entry in history]
    assert actions[-1] == "approved" and "edited" not in actions, actions


@pytest.mark.parametrize("width", [1024, 1280])
def test_the_memories_page_fits_the_window_with_long_text(browser, service, width):
    """Long agent text (a 300-character word, a long URL) wraps in its cell,
    and every row's actions, in the inbox and in the table, are in view
    without scrolling sideways, in a 1280 px window and in a 1024 px one; so
    is an inbox row opened for Edit & approve."""
    tok = uuid.uuid4().hex[:6]
    url = "https://grafana.example.com/d/" + "abc-def_ghi/" * 30
    import_proposal(service, f"Proposed {tok} " + "x" * 300)
    import_proposal(service, f"Slow after restart {tok}, see {url}")
    with guarded_page(browser, service.base_url, PageGuard(), width=width) as page:
        page.goto("/memories")
        expect(page.locator(INBOX_ROWS)).to_have_count(2)
        widths = page.evaluate("[document.documentElement.scrollWidth, document.documentElement.clientWidth]")
        assert widths[0] <= widths[1], widths
        inbox_actions = page.locator("#memory-inbox td.actions").locator("button, a")
        table_actions = page.locator("#memory-table td.actions").locator("button, a")
        assert inbox_actions.count() == 2 * 4 and table_actions.count() == 2 * 5
        for action in inbox_actions.all() + table_actions.all():
            box = action.bounding_box()
            assert box["x"] >= 0 and box["x"] + box["width"] <= widths[1], (action.text_content(), box, widths)

        inbox_row(page, "Slow after restart").get_by_role("button", name="Edit & approve").click()
        editing = page.locator("#memory-inbox tr.editing")
        expect(editing).to_have_count(1)
        widths = page.evaluate("[document.documentElement.scrollWidth, document.documentElement.clientWidth]")
        assert widths[0] <= widths[1], ("editing", widths)
        for action in editing.locator("td.actions button").all():
            box = action.bounding_box()
            assert box["x"] >= 0 and box["x"] + box["width"] <= widths[1], (action.text_content(), box, widths)


def test_an_inbox_refresh_landing_while_an_edit_form_is_on_its_way_leaves_it_to_open(page, service):
    """Approve refreshes the inbox. Should that refresh land while the next
    row's Edit & approve is still fetching its form, it is not swapped in:
    it would replace the row the form is for, and the form would be lost."""
    tok = uuid.uuid4().hex[:8]
    import_proposal(service, f"Answers 302 when healthy {tok}")
    import_proposal(service, f"Restarts cleanly under load {tok}")
    page.goto("/memories")
    first, second = page.locator(INBOX_ROWS).evaluate_all("rows => rows.map(r => +r.dataset.id)")
    refreshes, forms = [], []
    # Each held until released below.
    page.route(re.compile(r"/memories/inbox$"), lambda route: refreshes.append(route))
    page.route(re.compile(rf"/memories/{second}/review$"), lambda route: forms.append(route))

    page.locator(f"#proposed-{first} button.approve").click()
    expect(page.locator(f"#proposed-{first}")).to_have_count(0)
    wait_for(lambda: (page.wait_for_timeout(50), refreshes)[1], timeout=10, what="the inbox's refresh sent")
    page.locator(f"#proposed-{second} button.edit-approve").click()
    wait_for(lambda: (page.wait_for_timeout(50), forms)[1], timeout=10, what="the edit form asked for")
    for refresh in refreshes:   # the refresh lands first
        refresh.fallback()
    page.wait_for_timeout(500)
    forms[0].fallback()
    expect(page.locator(f"#proposed-{second}.editing textarea[name=observation]")).to_be_visible()
    page.unroute(re.compile(r"/memories/inbox$"))
    page.unroute(re.compile(rf"/memories/{second}/review$"))
    assert api_memory(service, first)["status"] == "approved"
    assert api_memory(service, second)["status"] == "proposed"
