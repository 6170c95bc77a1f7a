"""Untrusted text in a real browser (Debian's chromium through Playwright)
against the real service (`claudeops serve` with the fake CLI): sessions
whose agent text, markers, tool input and output, escalation reason, stderr
and operator request carry script, event handlers, attribute-breaking
quotes, ``javascript:`` links and htmx attributes, and rows whose service
names carry them (as a third-party plugin or an older version could store).

Every page that shows them (Overview, Sessions list and detail with its live
activity, Events with its filter, Memories with the edit form, the review
inbox and its edit form, history and preview, Cooldowns) must show the payloads as text and run nothing: no
``window.__pwned``, no dialog, no request to the probe path or another host,
no element the payloads would create.
"""
from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from playwright.sync_api import expect

from tests import streamlines as sl
from tests.support.browser import PageGuard, escalation_of, guarded_page, trigger, wait_idle
from tests.support.service import Service

pytestmark = pytest.mark.browser

PROBE = "/__xss_probe"     # any request for it means injected markup was live
PAYLOADS = (
    "<script>window.__pwned=1</script>",
    f'<img src="{PROBE}/img" onerror="window.__pwned=1">',
    '"><svg onload="window.__pwned=1">',
    f"'><iframe src='{PROBE}/iframe'></iframe>",
    "</textarea></pre><script>alert(document.domain)</script>",
    '<a id="pwn" href="javascript:window.__pwned=1">click me</a>',
    f'<div hx-get="{PROBE}/htmx" hx-trigger="load">x</div>',
    "{{7*7}}",
)
TEMPLATE = PAYLOADS[-1]     # what a template engine would turn into 49
HOSTILE = " ".join(PAYLOADS)
HOSTILE_SERVICE = f'"><img src={PROBE}/svc onerror=alert(1)>'
# What the payloads would create if they were markup.
INJECTED = ("main script:not([src]), main img, main svg, main iframe, main #pwn, main [hx-trigger=load], "
            "main a[href^='javascript']")
@pytest.fixture(scope="module")
def service(browser_service):
    return browser_service


@pytest.fixture
def guard():
    return PageGuard()


@pytest.fixture
def page(browser, service, guard):
    with guarded_page(browser, service.base_url, guard, width=1400) as page:
        yield page


def store_hostile_service_names(svc: Service, tmp_path, tok: str) -> int:
    """Rows whose service names are hostile, written straight to the
    service's database: the built-in markers refuse such names, but a
    third-party plugin's notice or an older version's rows may hold them.
    Returns the memory's id."""
    from app.extensions import db
    from app.timeutil import utcnow
    from plugins.cooldowns.models import CooldownAction
    from plugins.events.models import Event
    from plugins.memory.models import Memory
    from tests.conftest import make_app
    app = make_app(tmp_path, CLAUDEOPS_STATE_DIR=svc.env["CLAUDEOPS_STATE_DIR"])
    now = utcnow()
    with app.app_context():
        db.session.add(Event(level="warning", service=HOSTILE_SERVICE, message=f"{tok} svc-event", created_at=now))
        memory = Memory(service=HOSTILE_SERVICE, category="behavior", observation=f"{tok} svc-memory",
                        confidence=0.9, active=True, created_at=now, updated_at=now)
        db.session.add(memory)
        db.session.add(Memory(service=HOSTILE_SERVICE, category="timing", observation=f"{tok} proposed {HOSTILE}",
                              created_at=now, updated_at=now, status="proposed"))
        for minutes in (30, 10):   # at the restart limit: the Overview card names it
            db.session.add(CooldownAction(service=HOSTILE_SERVICE, action="restart", outcome="pending", source="hook",
                                          command=f"docker restart x {HOSTILE}", created_at=now - timedelta(minutes=minutes)))
        db.session.commit()
        return memory.id


def assert_inert(page, where: str, *texts: str) -> None:
    main = page.locator("main")
    for text in texts:
        expect(main, f"{text!r} shown as text on {where}").to_contain_text(text)
        if TEMPLATE in text:   # never evaluated as a template (a bare "49" would match ids and clock times)
            expect(main, f"{TEMPLATE} evaluated on {where}").not_to_contain_text(text.replace(TEMPLATE, "49"))
    assert page.evaluate("typeof window.__pwned") == "undefined", f"injected script ran on {where}"
    assert page.locator(INJECTED).count() == 0, f"markup injected on {where}"


def test_hostile_text_everywhere_is_shown_as_text_and_nothing_runs(page, service, guard, tmp_path):
    wait_idle(service)
    tok = uuid.uuid4().hex[:8]
    svc_memory = store_hostile_service_names(service, tmp_path, tok)
    # A tier-2 session that escalates (the tier-3 child runs the same script;
    # its own request to escalate is refused: the maximum tier is 3).
    steps = (sl.steps(sl.init()) + [{"sleep": 2.0}]
             + sl.steps(sl.text(f"Looked at web {tok}: {HOSTILE}\n"
                                f"[EVENT:critical:web] {tok} {HOSTILE}\n"
                                f"[MEMORY:behavior:web] {tok} {HOSTILE}\n"
                                f"[COOLDOWN:restart:web-{tok}] failure — {tok} {HOSTILE}\n"
                                f"[EVENT:warning:<script>] a service name the marker refuses\n"
                                f"[OUTCOME:worked:m{svc_memory}] {tok} {HOSTILE}\n"
                                f"[ESCALATE] {tok} {HOSTILE}"),
                        sl.tool_use(f"echo '{HOSTILE}'"),
                        sl.tool_result(f"{HOSTILE}\n[EVENT:critical:tool] {HOSTILE}"))
             + [{"sleep": 1.0}] + sl.steps(sl.result(f"done {tok} {HOSTILE}")))
    parent = trigger(service, steps, prompt=f"{tok} {HOSTILE}", start_tier=2)

    # Live: the activity arrives through htmx swaps, which would run <script>s.
    page.goto(f"/sessions/{parent}")
    expect(page.locator("#session-status")).to_have_text("completed", timeout=20_000)
    assert_inert(page, "the live session page", HOSTILE)
    activity = page.locator("#activity")
    for kind in ("text", "marker", "tool_use", "tool_result"):
        expect(activity.locator(f"li.act-{kind}").first).to_contain_text(PAYLOADS[0])

    child = escalation_of(service, parent)
    failed = trigger(service, sl.steps(sl.init(), sl.text(f"{tok} failing")) + [{"stderr": HOSTILE}, {"exit": 2}])
    wait_idle(service)
    assert service.get(f"/api/v1/sessions/{failed}")[1]["status"] == "failed"
    memory = service.get(f"/api/v1/memories?q={tok}&service=web")[1]["memories"][0]
    # The operator edits it: the history keeps old and new text.
    status, _ = service.request("PUT", f"/api/v1/memories/{memory['id']}", {"observation": f"edited {tok} {HOSTILE}"})
    assert status == 200
    # The built-in markers and the API refuse hostile service names.
    assert service.get("/api/v1/events?service=tool")[1]["total"] == 0
    assert not [e for e in service.get("/api/v1/events?limit=500")[1]["events"]
                if e["message"] == "a service name the marker refuses"]
    assert service.post("/api/v1/memories", {"category": "timing", "service": HOSTILE_SERVICE,
                                             "observation": "x"})[0] == 400

    for path, texts in [
        (f"/sessions/{parent}", (HOSTILE,)),                       # request, activity, response
        (f"/sessions/{child['id']}", (HOSTILE,)),                  # escalated from: the reason, the chain
        (f"/sessions/{failed}", (HOSTILE,)),                       # the status reason quotes stderr
        ("/sessions", (f"{tok} {HOSTILE}"[:199] + "…",)),         # the list shows a request's first 200
        ("/events", (f"{tok} {HOSTILE}", HOSTILE_SERVICE)),
        ("/memories", (f"edited {tok} {HOSTILE}", HOSTILE_SERVICE, f"{tok} proposed {HOSTILE}")),
        (f"/memories/{memory['id']}", (f"edited {tok} {HOSTILE}", f"{tok} {HOSTILE} → edited")),
        (f"/memories/{svc_memory}", (f"worked: {tok} {HOSTILE}",)),   # an outcome's note
        ("/memories/preview", (f"edited {tok} {HOSTILE}", HOSTILE_SERVICE)),
        ("/cooldowns", (f"{tok} {HOSTILE}", HOSTILE_SERVICE, f"docker restart x {HOSTILE}")),
        ("/", (HOSTILE_SERVICE,)),                                 # the cooldowns card names it
    ]:
        page.goto(path)
        assert_inert(page, path, *texts)

    # The edit form: the observation inside a <textarea>, swapped in by htmx.
    page.goto(f"/memories?q={tok}")
    row = page.locator(f"#memory-{memory['id']}")
    row.get_by_role("button", name="Edit").click()
    expect(row.locator("textarea")).to_have_value(f"edited {tok} {HOSTILE}")
    assert_inert(page, "the edit form")
    row.get_by_role("button", name="Cancel").click()
    expect(row.locator(".observation-text")).to_have_text(f"edited {tok} {HOSTILE}")
    # The review inbox's edit form: text and service name inside form fields.
    page.locator("#memory-inbox tr.proposed-row", has_text=f"{tok} proposed").get_by_role(
        "button", name="Edit & approve").click()
    editing = page.locator("#memory-inbox tr.editing")
    expect(editing.locator("textarea")).to_have_value(f"{tok} proposed {HOSTILE}")
    expect(editing.locator("input[name=service]")).to_have_value(HOSTILE_SERVICE)
    assert_inert(page, "the inbox's edit form")
    editing.get_by_role("button", name="Cancel").click()
    expect(page.locator("#memory-inbox tr.proposed-row", has_text=f"{tok} proposed")).to_have_count(1)

    # Filtering by the hostile service name: it travels in an <option> value and the URL.
    page.goto("/events")
    page.locator("#event-filters select[name=service]").select_option(label=HOSTILE_SERVICE)
    expect(page.locator("#event-rows td.message")).to_have_text([f"{tok} svc-event"])
    assert_inert(page, "the filtered Events page", HOSTILE_SERVICE)
    page.reload()
    expect(page.locator("#event-filters select[name=service]")).to_have_value(HOSTILE_SERVICE)
    # One polling round of the Events rows, swapped in by htmx.
    page.wait_for_timeout(6_000)
    assert_inert(page, "the polled Events page")

    assert guard.dialogs == []
    assert not [url for url in guard.requests if PROBE in url], "injected markup made a request"
