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
