"""Every dashboard page and every piece htmx swaps into one, with data in
them, read as a browser and a screen reader would read their markup, through
the test client (no browser): ids are unique and every id an attribute names
is there; every control has a name a screen reader says; tables, lists and
paragraphs hold only what they may (a browser moves anything else out of
them, away from the row or cell it was written for)."""
from __future__ import annotations

import re
from datetime import timedelta
from html.parser import HTMLParser

import pytest

from app.extensions import db
from app.models import RuntimeSetting, Session, SessionActivity
from app.sessions import control
from app.timeutil import utcnow
from plugins.cooldowns import store as cooldowns
from plugins.events.models import Event
from tests.conftest import HTMX
from tests.memory_helpers import add_memory

VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}
# What each element may hold directly (where the page puts it).
ALLOWED_CHILDREN = {
    "table": {"caption", "colgroup", "thead", "tbody", "tfoot", "tr"},
    "thead": {"tr"}, "tbody": {"tr"}, "tfoot": {"tr"},
    "tr": {"td", "th"},
    "ul": {"li"}, "ol": {"li"},
    "dl": {"dt", "dd", "div"},
    "select": {"option", "optgroup"},
}
# What must stand in one of these (else the browser moves it or makes a parent up).
ALLOWED_PARENTS = {"tr": {"table", "thead", "tbody", "tfoot"}, "td": {"tr"}, "th": {"tr"}, "li": {"ul", "ol"}}
# What a <p> cannot hold: the browser ends the paragraph before it.
ENDS_P = {"address", "article", "aside", "blockquote", "details", "div", "dl", "fieldset", "figure", "footer",
          "form", "h1", "h2", "h3", "h4", "h5", "h6", "header", "hr", "main", "nav", "ol", "p", "pre",
          "section", "table", "ul"}
# Closed by the browser when their parent ends: the templates may leave them open.
IMPLIED_END = {"p", "li", "dt", "dd", "tr", "td", "th", "option", "thead", "tbody", "tfoot"}
ID_REFERENCES = ("aria-describedby", "aria-labelledby", "aria-controls", "for")
CONTROLS = {"input", "select", "textarea"}
UNNAMED_INPUTS = {"hidden", "submit", "button", "reset", "image"}
# A time element without a datetime attribute is read by its text, which must be a date and time.
DATE_TIME = re.compile(r"\d{4}-\d\d-\d\d(?:[T ]\d\d:\d\d(?::\d\d)?Z?)?")


class Markup(HTMLParser):
    """What is wrong with a page's markup: ``problems`` once fed.
    ``inside``: the element a piece is swapped into (a row into a <tbody>)."""

    def __init__(self, inside: str | None = None):
        super().__init__(convert_charrefs=True)
        self.open: list[str] = [inside] if inside else []
        self.problems: list[str] = []
        self.ids: dict[str, int] = {}
        self.referenced: list[tuple[str, str]] = []
        self.labelled_by_for: set[str] = set()
        self.controls: list[dict] = []
        self.buttons: list[list] = []   # [attributes, text]
        self.labels = 0
        self.times: list[list] = []   # [attributes, text]

    def handle_starttag(self, tag, attrs):
        attrs = {name: value or "" for name, value in attrs}
        parent = self.open[-1] if self.open else None
        if parent in ALLOWED_CHILDREN and tag not in ALLOWED_CHILDREN[parent] | {"template", "script"}:
            self.problems.append(f"<{tag}> directly in <{parent}>")
        if tag in ALLOWED_PARENTS and parent not in ALLOWED_PARENTS[tag]:
            self.problems.append(f"<{tag}> in <{parent}>")
        if tag in ENDS_P and "p" in self.open:
            self.problems.append(f"<{tag}> in <p>")
        if tag in ("a", "button") and {"a", "button"} & set(self.open):
            self.problems.append(f"<{tag}> inside a link or button")
        if tag == "form" and "form" in self.open:
            self.problems.append("a form inside a form")
        if "id" in attrs:
            self.ids[attrs["id"]] = self.ids.get(attrs["id"], 0) + 1
        for name in ID_REFERENCES:
            if attrs.get(name) and (name != "for" or tag == "label"):
                self.referenced.extend((name, ref) for ref in attrs[name].split())
        if tag == "label":
            self.labels += 1
            if attrs.get("for"):
                self.labelled_by_for.add(attrs["for"])
        if tag in CONTROLS and attrs.get("type") not in UNNAMED_INPUTS:
            self.controls.append(dict(attrs, tag=tag, in_label=self.labels > 0))
        if tag == "button":
            self.buttons.append([attrs, ""])
        if tag == "time":
            self.times.append([attrs, ""])
        if tag not in VOID:
            self.open.append(tag)

    def handle_startendtag(self, tag, attrs):
        self.handle_starttag(tag, attrs)
        if tag not in VOID:
            self.handle_endtag(tag)

    def handle_endtag(self, tag):
        if tag in VOID:
            return
        if tag not in self.open:
            self.problems.append(f"</{tag}> closes nothing")
            return
        while self.open:
            closed = self.open.pop()
            if closed == "label":
                self.labels -= 1
            if closed == tag:
                break
            if closed not in IMPLIED_END:
                self.problems.append(f"<{closed}> left open at </{tag}>")

    def handle_data(self, data):
        if "button" in self.open and self.buttons:
            self.buttons[-1][1] += data
        if "time" in self.open and self.times:
            self.times[-1][1] += data

    def report(self) -> list[str]:
        problems = list(self.problems)
        problems += [f"id {id_!r} is given {count} times" for id_, count in self.ids.items() if count > 1]
        problems += [f"{name} names id {ref!r}, which is not on the page"
                     for name, ref in self.referenced if ref not in self.ids]
        for c in self.controls:
            # An out-of-band piece takes the place of the labelled one on the page (filter_select.html).
            named = (c["in_label"] or c.get("aria-label") or c.get("aria-labelledby") or "hx-swap-oob" in c
                     or c.get("id") in self.labelled_by_for)
            if not named:
                problems.append(f"<{c['tag']} name={c.get('name')!r}> has no label")
        problems += [f"a button without a name: {attrs}" for attrs, text in self.buttons
                     if not text.strip() and not attrs.get("aria-label")]
        problems += [f"<time>{text}</time> is no date" for attrs, text in self.times
                     if "datetime" not in attrs and not DATE_TIME.fullmatch(text.strip())]
        return problems


def markup_problems(html: str, inside: str | None = None) -> list[str]:
    parser = Markup(inside)
    parser.feed(html)
    parser.close()
    return parser.report()


@pytest.fixture
def seeded(app, client):
    """Something of every kind on every page: an escalated session and the
    running one it started (activity of every kind), events of every level,
    memories in every status (one proposal contradicting an approved one),
    cooldowns used, at their limit and denied, and a stored setting this
    version ignores; memory review on."""
    now = utcnow()
    parent = Session(tier=1, trigger="api", status="escalated", created_at=now, started_at=now, ended_at=now,
                     prompt="Why is the web slow?", response="Restarted it.", system_prompt="You are ...",
                     log_path="/var/log/claudeops/1.log")
    db.session.add(parent)
    db.session.commit()
    child = Session(tier=2, trigger="escalation", status="running", created_at=now, started_at=now,
                    parent_id=parent.id, escalation_reason="the proxy keeps failing")
    queued = Session(tier=1, trigger="api", status="queued", created_at=now)
    db.session.add_all([child, queued])
    db.session.commit()
    for session in (parent, child):
        for kind, title, body in (("text", None, "Checking"), ("tool_use", "Bash", '{"command": "ls"}'),
                                  ("tool_result", None, "web Up"), ("marker", "event:info:web", "up"),
                                  ("warning", "limit", "too many")):
            db.session.add(SessionActivity(session_id=session.id, kind=kind, title=title, body=body, created_at=now))
    for level in ("info", "warning", "critical"):
        db.session.add(Event(level=level, service="web", message=f"{level} news", session_id=parent.id,
                             created_at=now))
    db.session.add(Event(level="info", service=None, message="general news", created_at=now))
    db.session.add(RuntimeSetting(name="CLAUDEOPS_MAX_TIER", value="7", updated_at=now))
    db.session.commit()
    approved = add_memory("Jellyfin takes 60 s to start", pinned=True, session_id=parent.id)
    add_memory("Backups ran at 03:00", active=False, service=None, category="maintenance")
    proposed = add_memory("Jellyfin starts at once")
    proposed.status, proposed.contradicts_id = "proposed", approved.id
    add_memory("Vacuum runs at 02:00", service="postgres").status = "proposed"
    add_memory("The NAS is slow on Sundays", service="nas").status = "rejected"
    db.session.commit()
    run = control.claim(control.enqueue(tier=2).id)
    for minutes, outcome in ((180, "pending"), (60, "pending"), (10, "denied")):
        cooldowns.record_attempt("restart", "jellyfin", outcome, "docker restart jellyfin", run.id, 2,
                                 now=now - timedelta(minutes=minutes))
    cooldowns.record_outcome("restart", "jellyfin", "failure", "still crashing", run.id, 2,
                             now=now - timedelta(minutes=50))
    cooldowns.record_outcome("redeployment", "sonarr", "success", "new image", None, 3, now=now - timedelta(hours=30))
    db.session.commit()
    assert client.put("/api/v1/config", json={"CLAUDEOPS_MEMORY_REVIEW": True}).status_code == 200
    return {"parent": parent.id, "child": child.id, "queued": queued.id, "approved": approved.id,
            "proposed": proposed.id}


PAGES = ["/", "/sessions", "/sessions/{parent}", "/sessions/{child}", "/sessions/{queued}", "/events",
         "/events?level=warn1ng", "/memories", "/memories?status=proposed", "/memories/{approved}",
         "/memories/{proposed}", "/memories/preview", "/cooldowns", "/config", "/no-such-page"]

# A piece htmx swaps in, and the element it lands in.
PIECES = [("/", "main"), ("/sessions", "div"), ("/sessions/{child}/live?after=0", "div"), ("/events", "main"),
          ("/memories", "main"), ("/memories/inbox", "main"), ("/cooldowns", "main"),
          ("/memories/{approved}/row", "tbody"), ("/memories/{approved}/edit", "tbody"),
          ("/memories/{proposed}/review", "tbody"), ("/memories/{proposed}/inbox-row", "tbody")]


@pytest.mark.parametrize("path", PAGES)
def test_every_page_reads_as_written(client, seeded, path):
    page = client.get(path.format(**seeded)).get_data(as_text=True)
    assert "<main" in page and markup_problems(page) == []


@pytest.mark.parametrize("path, inside", PIECES)
def test_every_piece_htmx_swaps_in_reads_as_written(client, seeded, path, inside):
    response = client.get(path.format(**seeded), headers=HTMX)
    assert response.status_code == 200 and markup_problems(response.get_data(as_text=True), inside) == []


def test_pages_with_what_a_form_refused_read_as_written(client, seeded):
    config = client.post("/config", data={"CLAUDEOPS_INTERVAL": "soon", "CLAUDEOPS_MEMORY_BUDGET": "-1"})
    assert config.status_code == 400 and markup_problems(config.get_data(as_text=True)) == []
    run_now = client.post("/sessions/run", data={"tier": "9", "prompt": "x"})
    assert run_now.status_code == 400 and markup_problems(run_now.get_data(as_text=True)) == []


def test_the_checks_find_what_they_look_for():
    assert markup_problems('<p id="a"></p><p id="a"></p>') == ["id 'a' is given 2 times"]
    assert markup_problems('<input name="q" aria-describedby="gone">') == [
        "aria-describedby names id 'gone', which is not on the page", "<input name='q'> has no label"]
    assert markup_problems('<label>Q <input name="q"></label><button type="button"></button>') == [
        "a button without a name: {'type': 'button'}"]
    assert markup_problems("<table><tr><form></form></tr></table>") == ["<form> directly in <tr>"]
    assert markup_problems("<tr><td></td></tr>", "div") == ["<tr> in <div>"]
    assert markup_problems("<p><div></div></p>") == ["<div> in <p>"]
    assert markup_problems("<dd><time>—</time></dd>") == ["<time>—</time> is no date"]


def test_the_chain_names_the_session_shown_as_this_page(client, seeded):
    """Its row is in bold, which a screen reader does not say: its link is
    the current page's (aria-current), as the sidebar's is."""
    page = client.get(f"/sessions/{seeded['child']}").get_data(as_text=True)
    chain = page[page.index("Escalation chain"):]
    assert f'<a href="/sessions/{seeded["child"]}" aria-current="page">#{seeded["child"]}</a>' in chain
    assert f'<a href="/sessions/{seeded["parent"]}">#{seeded["parent"]}</a>' in chain
    assert chain.count('aria-current="page"') == 1


def test_a_stored_change_ignored_is_said_with_its_field_and_each_reset_names_its_setting(client, seeded):
    client.put("/api/v1/config", json={"CLAUDEOPS_INTERVAL": 900})
    page = client.get("/config").get_data(as_text=True)
    assert re.search(r'<input name="CLAUDEOPS_MAX_TIER" [^>]*aria-describedby="ignored-CLAUDEOPS_MAX_TIER"', page)
    assert '<p class="field-error" id="ignored-CLAUDEOPS_MAX_TIER">The stored change &#39;7&#39; is ignored' in page
    assert ('<input type="checkbox" name="reset" value="CLAUDEOPS_MAX_TIER"> reset'
            '<span class="visually-hidden"> CLAUDEOPS_MAX_TIER</span></label>') in page
    assert '<span class="visually-hidden"> CLAUDEOPS_INTERVAL</span></label>' in page
    # Refused as well, the field is said with both.
    page = client.post("/config", data={"CLAUDEOPS_MAX_TIER": "9"}).get_data(as_text=True)
    assert re.search(r'<input name="CLAUDEOPS_MAX_TIER" [^>]*aria-invalid="true" '
                     r'aria-describedby="problem-CLAUDEOPS_MAX_TIER ignored-CLAUDEOPS_MAX_TIER"', page)


def test_a_session_not_yet_started_shows_a_dash_not_a_time(client, seeded):
    page = client.get(f"/sessions/{seeded['queued']}").get_data(as_text=True)
    assert "<dt>Started</dt><dd>—</dd>" in page and "<dt>Ended</dt><dd>—</dd>" in page
