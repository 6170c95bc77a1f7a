"""The review of the agent's memories where the operator meets it: the inbox
on the Memories page (CSRF-protected HTMX actions), /api/v1/memories/review,
approve and reject, `claudeops memories review|approve|reject`, the agent's
MCP tools (proposed and rejected memories are never knowledge), the Overview,
and export/import keeping every review state."""
from __future__ import annotations

import json
import re

import pytest
from sqlalchemy import select

from app.cli import main
from app.extensions import db
from app.runtime import change
from plugins.memory import mcp_tools, portability, review
from plugins.memory.models import Memory
from tests.conftest import HTMX, make_app
from tests.memory_helpers import add_memory, all_memories, history, new_run, remember


def proposals(*texts: str) -> list[Memory]:
    """Memories the agent proposed, one session each."""
    change({"CLAUDEOPS_MEMORY_REVIEW": True})
    return [remember(text, new_run()).memory for text in texts]


JELLYFIN = "[MEMORY:timing:jellyfin] Takes 60s to start after restart"
NAS = "[MEMORY:behavior:nas] Scrub slows every share on Sunday night"


# --- the dashboard -----------------------------------------------------------------

@pytest.fixture
def guarded(tmp_path):
    """An app that checks CSRF tokens, as served; its client and the page's token."""
    app = make_app(tmp_path, WTF_CSRF_ENABLED=True)
    with app.app_context():
        client = app.test_client()
        yield app, client


def csrf_headers(client) -> dict:
    page = client.get("/memories").get_data(as_text=True)
    token = re.search(r'"X-CSRFToken": "([^"]+)"', page).group(1)
    return {"X-CSRFToken": token, "HX-Request": "true"}


def test_the_inbox_lists_what_awaits_review(guarded):
    app, client = guarded
    approved = add_memory("Already trusted", service="web")
    first, second = proposals(JELLYFIN, NAS)
    page = client.get("/memories").get_data(as_text=True)
    inbox = page[page.index('<section id="memory-inbox"'):page.index("</section>")]
    assert 'hx-trigger="every 5s, memories-changed from:body"' in inbox
    assert "Review is on (CLAUDEOPS_MEMORY_REVIEW)" in inbox and 'id="memory-inbox-count">2<' in inbox
    assert [int(i) for i in re.findall(r'<tr id="proposed-(\d+)"', inbox)] == [second.id, first.id]
    assert "Already trusted" not in inbox
    assert f'hx-post="/memories/{first.id}/approve"' in inbox and f'hx-post="/memories/{first.id}/reject"' in inbox
    # The table beside it says which rows are proposals.
    table = page[page.index('<div id="memory-table"'):]
    assert f'id="memory-{first.id}" class="memory-row active proposed"' in table
    assert f'id="memory-{approved.id}" class="memory-row active"' in table
    assert table.count('class="badge review-proposed"') == 2

    fragment = client.get("/memories/inbox", headers={"HX-Request": "true"}).get_data(as_text=True)
    assert fragment.lstrip().startswith('<section id="memory-inbox"')
    assert "<html" not in fragment
    # With review off and nothing proposed, the inbox is an empty, polling block.
    db.session.delete(first)
    db.session.delete(second)
    db.session.commit()
    change({"CLAUDEOPS_MEMORY_REVIEW": False})
    empty = client.get("/memories/inbox", headers=HTMX).get_data(as_text=True)
    assert "Review inbox" not in empty and 'hx-get="/memories/inbox"' in empty


def test_approve_edit_and_approve_and_reject_from_the_inbox(guarded):
    app, client = guarded
    first, second, third = proposals(JELLYFIN, NAS, "[MEMORY:maintenance:postgres] Vacuum runs nightly")
    headers = csrf_headers(client)
    assert client.post(f"/memories/{first.id}/approve", headers={"HX-Request": "true"}).status_code == 400   # no token

    approved = client.post(f"/memories/{first.id}/approve", headers=headers)
    assert approved.status_code == 200 and approved.get_data(as_text=True) == ""   # the inbox row goes
    assert approved.headers["HX-Trigger-After-Swap"] == "memories-changed, memory-reviewed"

    form = client.get(f"/memories/{second.id}/review", headers=HTMX).get_data(as_text=True)
    assert 'class="proposed-row editing"' in form and 'name="category"' in form and 'name="service"' in form
    assert client.get(f"/memories/{second.id}/inbox-row", headers=HTMX).get_data(as_text=True).count("Edit &amp; approve") == 1
    edited = client.post(f"/memories/{second.id}/approve", headers=headers, data={
        "observation": "Scrub slows the shares on Sunday nights", "category": "timing", "service": "",
        "confidence": "0.85"})
    assert edited.status_code == 200 and edited.get_data(as_text=True) == ""   # nothing more to say

    refused = client.post(f"/memories/{third.id}/approve", headers=headers, data={"category": "misc"})
    assert refused.headers["HX-Retarget"] == "#memory-errors"
    assert "Not approved: category must be one of" in refused.get_data(as_text=True)
    # Every refused field at once: the operator corrects the form once.
    refused = client.post(f"/memories/{third.id}/approve", headers=headers,
                          data={"category": "misc", "service": "two words", "confidence": "high"})
    assert ("Not approved: category must be one of timing, dependency, behavior, remediation, maintenance, "
            "not &#39;misc&#39;; service must be 1-100 letters, digits, &#39;_&#39; or &#39;-&#39; "
            "(memories of &#39;two words&#39; are kept under &#39;two-words&#39;); "
            "confidence must be a number, not &#39;high&#39;") in refused.get_data(as_text=True)
    rejected = client.post(f"/memories/{third.id}/reject", headers=headers, data={"reason": "one-off"})
    assert rejected.status_code == 200
    again = client.post(f"/memories/{third.id}/reject", headers=headers).get_data(as_text=True)
    assert f"Not rejected: memory {third.id} is rejected" in again
    assert client.post("/memories/999/approve", headers=headers).status_code == 404

    first, second, third = all_memories()
    assert [(m.status, m.observation, m.category, m.service, m.confidence) for m in (first, second, third)] == [
        ("approved", "Takes 60s to start after restart", "timing", "jellyfin", 0.7),
        ("approved", "Scrub slows the shares on Sunday nights", "timing", None, 0.85),
        ("rejected", "Vacuum runs nightly", "maintenance", "postgres", 0.7)]
    assert [h[0] for h in history(second.id)] == ["proposed", "edited", "edited", "edited", "edited", "approved"]
    assert [(h[0], h[3]) for h in history(third.id)] == [("proposed", "session"), ("rejected", "operator")]
    assert "Nothing awaits review." in client.get("/memories/inbox", headers=HTMX).get_data(as_text=True)

    # From the table, a rejected memory's row can be approved after all, and is redrawn;
    # whatever else the request carries (the page's filters) edits nothing.
    row = client.post(f"/memories/{third.id}/approve", headers=headers, data={
        "view": "table", "service": "", "category": "timing", "q": "vacuum"}).get_data(as_text=True)
    assert row.startswith(f'<tr id="memory-{third.id}" class="memory-row active"') and "review-" not in row
    db.session.expire_all()
    assert (third.service, third.category, third.status) == ("postgres", "maintenance", "approved")


def test_a_confidence_beyond_0_to_1_approved_from_the_inbox_is_clamped_and_said_so(guarded):
    """SPEC-0015 clamps an operator's confidence; the edit form's number is
    outside any form the browser checks, so the operator is told."""
    app, client = guarded
    (proposal,) = proposals(JELLYFIN)
    approved = client.post(f"/memories/{proposal.id}/approve", headers=csrf_headers(client),
                           data={"confidence": "5"})
    assert approved.status_code == 200
    said = approved.get_data(as_text=True)
    assert '<div id="memory-errors" hx-swap-oob="innerHTML">' in said
    assert (f"Approved memory #{proposal.id} at confidence 1.0 (5 was asked: a confidence is kept from 0 to 1)."
            in said)
    # Not memory-reviewed, which clears the error area after the swap: it would clear what is said here.
    assert approved.headers["HX-Trigger-After-Swap"] == "memories-changed"
    db.session.expire_all()
    assert (proposal.status, proposal.confidence) == ("approved", 1.0)


def test_a_confidence_within_0_and_1_approved_is_not_said_to_be_clamped(guarded):
    app, client = guarded
    (proposal,) = proposals(JELLYFIN)
    approved = client.post(f"/memories/{proposal.id}/approve", headers=csrf_headers(client),
                           data={"confidence": "0.8888"})
    assert approved.status_code == 200
    assert "was asked" not in approved.get_data(as_text=True)
    db.session.expire_all()
    assert (proposal.status, proposal.confidence) == ("approved", 0.889)


def test_a_decision_refused_as_made_elsewhere_meanwhile_takes_the_row_away_and_refreshes(guarded):
    """Approved or rejected in another tab (or the API) since the inbox was
    loaded: the refusal is shown above the table, and the row leaves the inbox
    (a reason typed in it with it) or is redrawn in the table as it is now;
    the inbox and the table refresh."""
    app, client = guarded
    first, second = proposals(JELLYFIN, NAS)
    headers = csrf_headers(client)
    review.approve(first)
    review.approve(second)
    db.session.commit()
    oob = '<div id="memory-errors" hx-swap-oob="innerHTML">'
    for path, data, said in (
            (f"/memories/{first.id}/approve", {}, f"Not approved: memory {first.id} is already approved"),
            (f"/memories/{second.id}/reject", {"reason": "seen once only"},
             f"Not rejected: memory {second.id} is approved: only a proposed memory can be rejected")):
        refused = client.post(path, headers=headers, data=data)
        html = refused.get_data(as_text=True)
        assert html.startswith(oob) and said in html, html   # nothing before it: the inbox row goes
        # Not memory-reviewed: that clears the message.
        assert refused.headers["HX-Trigger-After-Swap"] == "memories-changed"
    row = client.post(f"/memories/{first.id}/approve", headers=headers, data={"view": "table"}).get_data(as_text=True)
    assert row.startswith(f'<tr id="memory-{first.id}" class="memory-row active"') and "review-proposed" not in row
    assert oob in row and f"Not approved: memory {first.id} is already approved" in row
    # Rejected elsewhere: the inbox's Approve (or Edit & approve) does not overturn that unseen; the
    # table's Approve, a decision made with the rejection in view, does.
    rejected, = proposals("[MEMORY:behavior:redis] Evicts keys under memory pressure")
    review.reject(rejected, "not ours")
    db.session.commit()
    for data in ({}, {"observation": "Evicts keys under pressure", "shown-as.observation": rejected.observation}):
        refused = client.post(f"/memories/{rejected.id}/approve", headers=headers, data=data).get_data(as_text=True)
        assert refused.startswith(oob) and (f"Not approved: memory {rejected.id} was rejected elsewhere since the "
                                            "inbox showed it; Approve on its row in the table approves it all the "
                                            "same") in refused
    db.session.expire_all()
    assert (rejected.status, rejected.observation) == ("rejected", "Evicts keys under memory pressure")
    row = client.post(f"/memories/{rejected.id}/approve", headers=headers, data={"view": "table"})
    assert row.status_code == 200 and "Not approved" not in row.get_data(as_text=True)
    db.session.expire_all()
    assert rejected.status == "approved"
    # A value the form cannot take is the operator's to correct: the row stays, and nothing refreshes.
    third, = proposals("[MEMORY:maintenance:postgres] Vacuum runs nightly")
    bad = client.post(f"/memories/{third.id}/approve", headers=headers, data={"confidence": "high"})
    assert bad.headers["HX-Retarget"] == "#memory-errors" and "HX-Trigger-After-Swap" not in bad.headers


def test_a_change_that_works_clears_an_earlier_error(guarded):
    app, client = guarded
    kept = add_memory("Trusted one", service="web", confidence=0.6)
    saved = client.put(f"/memories/{kept.id}/confidence", headers=csrf_headers(client), data={"confidence": "1"})
    assert saved.headers["HX-Trigger"] == "memory-saved"   # memories.js empties the error area



def test_status_filter_on_the_page(guarded):
    app, client = guarded
    add_memory("Trusted one", service="web")
    add_memory("Faded one", service="web", confidence=0.2, active=False)
    proposed, rejected = proposals(JELLYFIN, NAS)
    review.reject(rejected)
    db.session.commit()

    def shown(status):
        html = client.get(f"/memories?status={status}", headers={"HX-Request": "true"}).get_data(as_text=True)
        return re.findall(r'<span class="observation-text"[^>]*>([^<]+)</span>', html)
    assert shown("active") == ["Trusted one"]
    assert shown("inactive") == ["Faded one"]
    assert shown("proposed") == ["Takes 60s to start after restart"]
    assert shown("rejected") == ["Scrub slows every share on Sunday night"]
    assert len(shown("")) == 4


def test_the_overview_and_stats_count_what_awaits_review(app, client):
    add_memory("Trusted one", service="web")
    proposals(JELLYFIN)
    card = client.get("/").get_data(as_text=True)
    assert "1 active" in card and "1 awaiting review; 2 in all" in card
    stats = client.get("/api/v1/stats").get_json()
    assert (stats["active_memories"], stats["proposed_memories"]) == (1, 1)


# --- the API -----------------------------------------------------------------------

def test_api_inbox_approve_and_reject(app, client):
    trusted = add_memory("Already trusted", service="web")
    first, second, third = proposals(JELLYFIN, NAS, "[MEMORY:maintenance:postgres] Vacuum runs nightly")
    inbox = client.get("/api/v1/memories/review?limit=2").get_json()
    assert [m["id"] for m in inbox["memories"]] == [third.id, second.id]
    assert (inbox["total"], inbox["total_exact"], inbox["limit"], inbox["offset"]) == (3, True, 2, 0)
    assert all(m["status"] == "proposed" for m in inbox["memories"])
    listed = client.get("/api/v1/memories?status=proposed").get_json()
    assert listed["total"] == 3 and trusted.id not in [m["id"] for m in listed["memories"]]

    approved = client.post(f"/api/v1/memories/{first.id}/approve")   # no body at all
    assert approved.status_code == 200 and approved.get_json()["status"] == "approved"
    edited = client.post(f"/api/v1/memories/{second.id}/approve",
                         json={"observation": "Scrub slows the shares", "service": "general", "category": None,
                               "confidence": 1.7})
    assert edited.status_code == 200
    assert {k: edited.get_json()[k] for k in ("observation", "service", "category", "confidence", "status")} == {
        "observation": "Scrub slows the shares", "service": None, "category": "behavior", "confidence": 1.0,
        "status": "approved"}
    rejected = client.post(f"/api/v1/memories/{third.id}/reject", json={"reason": "not ours"})
    assert rejected.status_code == 200 and rejected.get_json()["status"] == "rejected"
    change_log = client.get(f"/api/v1/memories/{third.id}/history").get_json()["history"]
    assert [(h["action"], h["actor"], h["detail"]) for h in change_log][-1] == ("rejected", "operator", "not ours")
    assert client.get("/api/v1/memories/review").get_json()["total"] == 0

    for method, path, body, status, message in (
            ("approve", first.id, None, 409, f"memory {first.id} is already approved"),
            ("reject", first.id, None, 409, "only a proposed memory can be rejected; deactivate or delete"),
            ("reject", third.id, {}, 409, f"memory {third.id} is rejected"),
            ("approve", 424242, None, 404, "memory 424242 not found"),
            ("approve", first.id, {"category": "misc"}, 400, "category must be one of"),
            ("approve", first.id, {"pinned": True}, 400, "unknown field(s): pinned"),
            ("reject", third.id, {"reason": 5}, 400, "reason must be text"),
            ("approve", first.id, [], 400, "the body must be a JSON object")):
        response = client.post(f"/api/v1/memories/{path}/{method}", json=body) if body is not None else \
            client.post(f"/api/v1/memories/{path}/{method}")
        assert (response.status_code, message in response.get_json()["error"]) == (status, True), response.get_json()
    wrong_type = client.post(f"/api/v1/memories/{first.id}/approve", data="x", content_type="text/plain")
    assert wrong_type.status_code == 415
    assert client.get("/api/v1/memories?status=pending").status_code == 400


# --- the CLI -----------------------------------------------------------------------

def invoke(app, *args):
    return app.test_cli_runner().invoke(main, ["memories", *args])


def test_cli_review_approve_and_reject(app):
    first, second, third = proposals(JELLYFIN, NAS, "[MEMORY:maintenance:postgres] Vacuum runs nightly")
    result = invoke(app, "review")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert [int(line.split()[0][1:]) for line in lines] == [third.id, second.id, first.id]
    assert all(" proposed  " in line for line in lines) and "3 of 3 memories" in result.stderr

    result = invoke(app, "approve", str(first.id))
    assert result.exit_code == 0 and " active  Takes 60s" in result.output
    result = invoke(app, "approve", str(second.id), "--category", "timing", "--service", "general",
                    "--confidence", "0.9", "--observation", "Scrub slows the shares")
    assert result.exit_code == 0 and "general" in result.output and "timing" in result.output
    result = invoke(app, "reject", str(third.id), "--reason", "not ours")
    assert result.exit_code == 0 and " rejected  Vacuum runs nightly" in result.output
    assert [m.status for m in all_memories()] == ["approved", "approved", "rejected"]
    assert "rejected" in invoke(app, "list", "--status", "rejected").stdout
    assert invoke(app, "list", "--status", "proposed").stdout == ""

    for args, message in ((("approve", str(first.id)), f"memory {first.id} is already approved"),
                          (("reject", str(third.id)), "only a proposed memory can be rejected"),
                          (("approve", "4242"), "memory 4242 not found"),
                          (("approve", str(third.id), "--service", "two words"), "service must be")):
        result = invoke(app, *args)
        assert result.exit_code == 1 and message in result.output, result.output
    change({"CLAUDEOPS_MEMORY_REVIEW": False})
    assert "CLAUDEOPS_MEMORY_REVIEW is off" in invoke(app, "review").stderr


# --- the agent's tools ---------------------------------------------------------------

def test_the_agents_tools_never_give_unreviewed_memories_as_knowledge(app):
    trusted = add_memory("Jellyfin takes 60s to start after a restart", confidence=0.9)
    proposed, rejected = proposals("[MEMORY:behavior:jellyfin] Jellyfin transcodes slowly after a restart",
                                   "[MEMORY:maintenance:jellyfin] Jellyfin library rescans after a restart")
    review.reject(rejected)
    db.session.commit()
    for listing in (mcp_tools.search_memories("restart"), mcp_tools.search_memories("restart", include_inactive=True),
                    mcp_tools.list_service_memories("jellyfin", include_inactive=True)):
        assert f"#{trusted.id} " in listing and f"#{proposed.id} " not in listing and f"#{rejected.id} " not in listing
    entries = mcp_tools.get_memories([trusted.id, proposed.id, rejected.id]).split("\n\n")
    assert not entries[0].startswith("NOT TRUSTED")
    assert entries[1].startswith("NOT TRUSTED: proposed, and not yet reviewed by the operator")
    assert entries[2].startswith("NOT TRUSTED: rejected by the operator")


# --- export and import ---------------------------------------------------------------

def test_export_and_import_keep_every_review_state(app, tmp_path):
    old = add_memory("Must be started after WireGuard", category="dependency", service="caddy", confidence=0.8)
    first, contra, rejected = proposals(JELLYFIN, "[MEMORY:dependency:caddy] Can be started independently of WireGuard",
                                        NAS)
    review.reject(rejected, "one-off")
    db.session.commit()
    exported = portability.export_json()
    assert [m["status"] for m in exported["memories"]] == ["approved", "proposed", "proposed", "rejected"]

    other = make_app(tmp_path / "other")
    with other.app_context():
        report = portability.import_entries(portability.parse(json.dumps(exported)), source="export.json")
        db.session.commit()
        assert report.to_dict() == {"created": 4, "reinforced": 0, "contradicted": 0, "unchanged": 0}
        again = portability.export_json()
        strip = ("id", "session_id", "contradicts_id", "history")
        assert [{k: v for k, v in m.items() if k not in strip} for m in again["memories"]] == \
            [{k: v for k, v in m.items() if k not in strip} for m in exported["memories"]]
        assert [[h["action"] for h in m["history"]][:-1] for m in again["memories"]] == \
            [[h["action"] for h in m["history"]] for m in exported["memories"]]
        # The pending contradiction came along, and still waits for the approval.
        imported_old, _, imported_contra, _ = all_memories()
        assert imported_contra.contradicts_id == imported_old.id and imported_old.confidence == 0.8
        review.approve(imported_contra)
        db.session.commit()
        assert imported_old.confidence == 0.6

    markdown = portability.export_markdown()
    assert "- [timing] Takes 60s to start after restart (confidence: 0.7, proposed)" in markdown
    assert "(confidence: 0.7, rejected)" in markdown
    third = make_app(tmp_path / "third")
    with third.app_context():
        portability.import_entries(portability.parse(markdown), source="export.md")
        db.session.commit()
        assert sorted((m.observation, m.status) for m in all_memories()) == sorted(
            (m.observation, m.status) for m in (old, first, contra, rejected))


def test_an_export_from_before_review_imports_as_approved_and_a_bad_status_is_refused(app):
    document = {"format": "claudeops-memories", "version": 1, "memories": [
        {"service": "web", "category": "timing", "observation": "Cold start takes 40s", "confidence": 0.7}]}
    portability.import_entries(portability.parse_json(document), source="old.json")
    db.session.commit()
    assert [m.status for m in all_memories()] == ["approved"]
    document["memories"][0]["status"] = "pending"
    with pytest.raises(portability.ImportRefused, match="memory 1: status must be one of approved, proposed, rejected"):
        portability.parse_json(document)
    assert db.session.scalar(select(Memory.id).where(Memory.status != "approved")) is None


def test_a_memorys_page_names_its_review_state_as_the_list_does(app, client):
    """A rejected memory keeps its active flag (for an approval later) but is
    given to no session: its page says rejected, not "active"."""
    rejected, proposed = proposals(JELLYFIN, NAS)
    review.reject(rejected, "not true here")
    approved = add_memory("Needs its database before the web tier", service="gitea")
    db.session.commit()

    def status(memory: Memory) -> str:
        page = client.get(f"/memories/{memory.id}").get_data(as_text=True)
        return re.search(r"<dt>Status</dt><dd>(.*?)</dd>", page).group(1)

    assert status(rejected) == "rejected: kept for audit, given to no session"
    assert status(proposed) == "proposed: awaiting review, given to no session until approved"
    assert status(approved) == "active"
    approved.active = False
    db.session.commit()
    assert status(approved) == "inactive: given to no session"
