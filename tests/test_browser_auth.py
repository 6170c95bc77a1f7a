"""Logging in to the real service (`claudeops serve` on 0.0.0.0 with a
password and an API token) in a real browser, and the API beside it."""
from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.conftest import OPERATOR_PASSWORD, OPERATOR_TOKEN
from tests.support.browser import PageGuard, guarded_page, wait_for

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def service(locked_browser_service):
    return locked_browser_service


def test_login_then_run_now_then_logout(browser, service):
    guard = PageGuard()
    with guarded_page(browser, service.base_url, guard) as page:
        page.goto("/sessions")
        expect(page).to_have_url(f"{service.base_url}/login?next=/sessions")
        page.fill("input[name=password]", OPERATOR_PASSWORD)
        page.click("button[type=submit]")
        expect(page).to_have_url(f"{service.base_url}/sessions")
        # The login cookie is out of reach of any script on the page.
        assert "claudeops_session" not in page.evaluate("document.cookie")
        cookie = next(c for c in page.context.cookies() if c["name"] == "claudeops_session")
        assert cookie["httpOnly"] and cookie["sameSite"] == "Lax"

        page.fill("textarea[name=prompt]", "check the disks")
        page.click("form.run-now button[type=submit]")
        expect(page.locator(".badge.status-completed")).to_be_visible(timeout=20_000)

        page.click("form.logout button")
        expect(page).to_have_url(f"{service.base_url}/login")
        page.goto("/")
        expect(page).to_have_url(f"{service.base_url}/login?next=/")
    status, sessions = service.get("/api/v1/sessions", headers={"Authorization": f"Bearer {OPERATOR_TOKEN}"})
    assert status == 200 and sessions["sessions"][0]["prompt"] == "check the disks"


def test_a_wrong_password_shows_an_error(browser, service):
    guard = PageGuard()
    with guarded_page(browser, service.base_url, guard) as page:
        page.goto("/login")
        page.fill("input[name=password]", "not it")
        with page.expect_response(lambda r: r.url.endswith("/login") and r.request.method == "POST"):
            page.click("button[type=submit]")
        expect(page.get_by_role("alert")).to_have_text("Wrong password.")
        # The 401 is the point of this test, not a problem of the page.
        guard.http_errors.clear()
        guard.console_errors.clear()


def test_the_api_answers_only_with_the_token(service):
    assert service.get("/api/v1/sessions")[0] == 401
    assert service.get("/api/v1/sessions", headers={"Authorization": "Bearer wrong"})[0] == 401
    assert service.post("/api/v1/sessions/trigger", {"prompt": "x"})[0] == 401
    status, body = service.post("/api/v1/sessions/trigger", {"prompt": "from the API"},
                                headers={"Authorization": f"Bearer {OPERATOR_TOKEN}"})
    assert status == 201
    wait_for(lambda: service.get(f"/api/v1/sessions/{body['id']}",
                                 headers={"Authorization": f"Bearer {OPERATOR_TOKEN}"})[1]["status"] == "completed",
             what="the API's session completed")


def test_a_login_ended_in_another_tab_leaves_what_was_typed_and_offers_the_login_page(browser, service):
    """Log out in one tab while another holds a half-written memory: that
    tab's polls are refused, and it stays where it is, text and all, saying
    so; once logged in again (in a new tab), the notice goes and Add works."""
    guard = PageGuard()
    with guarded_page(browser, service.base_url, guard) as page:
        page.goto("/login?next=/memories")
        page.fill("input[name=password]", OPERATOR_PASSWORD)
        page.click("button[type=submit]")
        expect(page).to_have_url(f"{service.base_url}/memories")
        page.locator("#add-memory summary").click()
        form = page.locator("#memory-add")
        form.locator("input[name=service]").fill("nas")
        form.locator("textarea[name=observation]").fill("Scrub takes 9 hours; half typed when the login ended")

        other = page.context.new_page()
        other.goto("/")
        other.click("form.logout button")
        expect(other).to_have_url(f"{service.base_url}/login")

        banner = page.locator("#poll-trouble")
        expect(banner).to_be_visible(timeout=15_000)   # at the next poll
        expect(banner).to_contain_text("Your login has ended")
        link = banner.get_by_role("link", name="Log in again in a new tab")
        assert link.get_attribute("href") == "/login?next=/memories" and link.get_attribute("target") == "_blank"
        expect(page).to_have_url(f"{service.base_url}/memories")
        expect(form.locator("textarea[name=observation]")).to_have_value(
            "Scrub takes 9 hours; half typed when the login ended")

        form.get_by_role("button", name="Add").click()   # refused, and said where the form is
        expect(page.locator("#memory-errors")).to_contain_text("Not done: your login has ended")
        expect(form.locator("input[name=service]")).to_have_value("nas")

        with page.context.expect_page() as opened:
            link.click()
        login_tab = opened.value
        login_tab.fill("input[name=password]", OPERATOR_PASSWORD)
        login_tab.click("button[type=submit]")
        expect(login_tab).to_have_url(f"{service.base_url}/memories")
        expect(banner).to_be_hidden(timeout=15_000)   # the next poll is answered

        form.get_by_role("button", name="Add").click()
        expect(page.locator("#memory-errors")).to_contain_text("Added memory #")
        # The refused polls and the refused Add are the point of this test.
        guard.http_errors[:] = [e for e in guard.http_errors if not e.startswith("401 ")]
        guard.console_errors[:] = [e for e in guard.console_errors if "401" not in e]
