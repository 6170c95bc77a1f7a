"""The Memories page's own edits (plugins/memory/views.py), through the
Flask client: a row's edit form moves a memory to another service or
category, it and Edit & approve save only what was edited in them and
refuse a field changed elsewhere since they were opened (until saved again),
and Add Memory names a memory the new one restates or contradicts (both are
kept: an operator's memory is stored as given)."""
from __future__ import annotations

import re
from html import unescape as html_unescape

from app.extensions import db
from app.runtime import change
from plugins.memory.models import Memory, MemoryHistory
from tests.conftest import HTMX
from tests.memory_helpers import add_memory, all_memories, new_run, remember


def _said(response) -> str:
    """The text of the message the page shows above the table."""
    assert response.status_code == 200
    assert response.headers["HX-Retarget"] == "#memory-errors"
    return re.sub(r"<[^>]+>", "", response.get_data(as_text=True)).strip()


def _history(memory_id: int) -> list[tuple[str, str]]:
    rows = db.session.query(MemoryHistory).filter_by(memory_id=memory_id).order_by(MemoryHistory.id)
    return [(row.action, row.detail) for row in rows]


def test_a_rows_edit_form_offers_its_service_and_category(app, client):
    memory = add_memory("Takes 60s to start", category="timing", service="jellyfin")
    form = client.get(f"/memories/{memory.id}/edit", headers={"HX-Request": "true"}).get_data(as_text=True)
    assert re.search(r'<input name="service" value="jellyfin"', form)
    assert '<option value="timing" selected>' in form
    assert form.count("<option ") == len(re.findall(r"<option value=\"\w+\"", form)) > 1
    general = add_memory("Backups run at 03:00", category="maintenance", service=None)
    form = client.get(f"/memories/{general.id}/edit", headers=HTMX).get_data(as_text=True)
    assert re.search(r'<input name="service" value=""', form) and 'placeholder="general"' in form


def test_a_rows_edit_moves_a_memory_to_another_service_and_category(app, client):
    memory = add_memory("Evicts keys under memory pressure", category="timing", service="jellyfin",
                        confidence=0.8, age_days=2)
    before = memory.updated_at
    row = client.put(f"/memories/{memory.id}", data={"observation": "Evicts keys under memory pressure",
                                                      "service": "redis", "category": "behavior"})
    assert row.status_code == 200 and "memory-saved" in row.headers["HX-Trigger"]
    html = row.get_data(as_text=True)
    assert '<span class="name">redis</span>' in html and '<span class="badge">behavior</span>' in html
    (memory,) = all_memories()
    assert (memory.service, memory.category, memory.observation, memory.confidence) == (
        "redis", "behavior", "Evicts keys under memory pressure", 0.8)
    assert memory.updated_at > before
    assert _history(memory.id) == [("edited", "category timing → behavior"), ("edited", "service jellyfin → redis")]

    # "general" (or nothing) makes it a general memory.
    client.put(f"/memories/{memory.id}", data={"observation": memory.observation, "service": "",
                                               "category": "behavior"})
    assert all_memories()[0].service is None
    assert _history(memory.id)[-1] == ("edited", "service redis → general")


def test_a_rows_edit_with_a_bad_field_changes_nothing(app, client):
    memory = add_memory("Takes 60s to start", category="timing", service="jellyfin")
    for bad, error in [({"category": "Timing"}, "category must be one of"),
                       ({"service": "two words"}, "service must be 1-100 letters"),
                       ({"observation": "   "}, "observation must not be empty")]:
        fields = {"observation": "Takes 90s to start", "service": "postgres", "category": "behavior", **bad}
        said = _said(client.put(f"/memories/{memory.id}", data=fields))
        assert said.startswith("Not saved: ") and error in said, said
    (memory,) = all_memories()
    assert (memory.service, memory.category, memory.observation) == ("jellyfin", "timing", "Takes 60s to start")
    assert _history(memory.id) == []


def test_a_memory_longer_than_a_lowered_limit_can_still_be_moved_and_weighed(app, client):
    """The longest observation is for new text: lowered after a memory was
    stored, it does not stop an edit that sends that memory's text back as
    it is (the row's form always sends it), in the form or through the API."""
    long_text = "Jellyfin transcodes on the old GPU " * 20
    memory = add_memory(long_text.strip(), category="timing", service="jellyfin")
    change({"CLAUDEOPS_MEMORY_MAX_OBSERVATION_CHARS": 500})
    row = client.put(f"/memories/{memory.id}", data={"observation": long_text, "service": "jellyfin",
                                                      "category": "behavior"})
    assert row.status_code == 200 and "memory-saved" in row.headers["HX-Trigger"]
    body = client.put(f"/api/v1/memories/{memory.id}", json={"observation": long_text, "confidence": 0.9,
                                                              "service": "general"}).get_json()
    assert (body["category"], body["service"], body["confidence"]) == ("behavior", None, 0.9)
    assert body["observation"] == long_text.strip()
    assert _history(memory.id) == [("edited", "category timing → behavior"), ("edited", "service jellyfin → general"),
                                   ("edited", "confidence")]
    # New text is held to the limit, and then nothing of the edit is saved.
    said = _said(client.put(f"/memories/{memory.id}", data={"observation": long_text + " now", "service": "",
                                                             "category": "timing"}))
    assert said.startswith("Not saved: observation is 703 characters; the limit is 500"), said
    assert all_memories()[0].category == "behavior"


def test_adding_a_memory_with_a_confidence_beyond_0_to_1_says_it_was_clamped(app, client):
    """As the bulk action and approval say it: the form's own bounds are the browser's to check."""
    response = client.post("/memories", data={"category": "timing", "service": "web", "observation": "Slow",
                                              "confidence": "2"}, headers={"HX-Request": "true"})
    said = response.get_data(as_text=True)
    assert re.search(r"Added memory #\d+ \(web, timing, confidence 1\.0\) \(2 was asked: a confidence is kept "
                     r"from 0 to 1\)\.", said), said


def test_a_confidence_the_forms_do_not_write_as_a_number_is_refused_and_nothing_changes(app, client):
    """float() reads "0_5" as 5 (kept as 1.0, "clamped") and other scripts' digits; a number input sends neither."""
    memory = add_memory("Takes 60s to start", confidence=0.7)
    for typed in ("0_5", "\u0660.\u0665", "1e"):   # Arabic-Indic "0.5"
        said = html_unescape(_said(client.put(f"/memories/{memory.id}/confidence", data={"confidence": typed},
                                              headers=HTMX)))
        assert said == f"Not saved: confidence must be a number, not {typed!r}", said
        said = html_unescape(_said(client.post("/memories/bulk", data={"ids": [str(memory.id)], "action": "confidence",
                                                                        "bulk_confidence": typed})))
        assert said == f"Nothing changed: confidence must be a number, not {typed!r}", said
        said = html_unescape(_said(client.post("/memories", data={"category": "timing", "observation": "Slow",
                                                                   "confidence": typed}, headers=HTMX)))
        assert said.startswith("Memory not added: confidence must be a number"), said
    assert [(m.id, m.confidence) for m in all_memories()] == [(memory.id, 0.7)]
    for typed, kept in ((" .5 ", 0.5), ("5e-1", 0.5), ("-0", 0.0)):
        client.put(f"/memories/{memory.id}/confidence", data={"confidence": typed}, headers=HTMX)
        assert db.session.get(Memory, memory.id, populate_existing=True).confidence == kept, typed


def test_adding_a_memory_that_restates_another_names_it_and_keeps_both(app, client):
    old = add_memory("Takes 60s to start after restart", category="timing", service="jellyfin", confidence=0.7)
    said = _said(client.post("/memories", data={"category": "timing", "service": "jellyfin",
                                                "observation": "Takes about 60 seconds to start after a restart",
                                                "confidence": "0.9"}))
    new = max(all_memories(), key=lambda memory: memory.id)
    assert said == (f"Added memory #{new.id} (jellyfin, timing, confidence 0.9). Memory #{old.id} of the same "
                    "service and category says much the same: “Takes 60s to start after restart”. "
                    "Delete one of the two if they say the same.")
    # Told, not merged: the operator's memory is stored as given, the other is untouched.
    assert len(all_memories()) == 2
    assert db.session.get(Memory, old.id).confidence == 0.7


def test_adding_a_memory_that_contradicts_another_names_it(app, client):
    old = add_memory("Must be started after WireGuard", category="dependency", service="caddy", confidence=0.8)
    said = _said(client.post("/memories", data={"category": "dependency", "service": "caddy",
                                                "observation": "Can be started independently of WireGuard",
                                                "confidence": "0.7"}))
    assert said.endswith(f"Memory #{old.id} of the same service and category says otherwise: "
                         "“Must be started after WireGuard”. Delete the one that is wrong."), said
    assert db.session.get(Memory, old.id).confidence == 0.8
    assert {memory.contradicts_id for memory in all_memories()} == {None}


def test_adding_a_memory_like_none_says_only_that_it_was_added(app, client):
    add_memory("Takes 60s to start after restart", category="timing", service="jellyfin")
    add_memory("Takes 60s to start after restart", category="behavior", service="jellyfin")
    add_memory("Takes 60s to start after restart", category="timing", service="plex")
    add_memory("Takes 60s to start after restart", category="timing", service="jellyfin", active=False,
               confidence=0.2)
    said = _said(client.post("/memories", data={"category": "timing", "service": "sonarr",
                                                "observation": "Takes 60s to start after restart"}))
    assert re.fullmatch(r"Added memory #\d+ \(sonarr, timing, confidence 0\.7\)\.", said), said
    said = _said(client.post("/memories", data={"category": "timing", "service": "jellyfin",
                                                "observation": "Serves transcodes from the GPU"}))
    assert re.fullmatch(r"Added memory #\d+ \(jellyfin, timing, confidence 0\.7\)\.", said), said


def test_the_memory_named_is_shown_as_text(app, client):
    old = add_memory("<script>window.__pwned=1</script> restarts slowly", category="timing", service="jellyfin")
    html = client.post("/memories", data={"category": "timing", "service": "jellyfin",
                                          "observation": "<script>window.__pwned=1</script> restarts slowly"}
                       ).get_data(as_text=True)
    assert f"Memory #{old.id}" in html
    assert "<script>" not in html and "&lt;script&gt;window.__pwned=1&lt;/script&gt; restarts slowly" in html


def _opened_with(form_html: str) -> dict[str, str]:
    """The hidden shown-as fields of an edit form: what it was opened with."""
    return {f"shown-as.{name}": html_unescape(value)
            for name, value in re.findall(r'<input type="hidden" name="shown-as\.(\w+)" value="([^"]*)"', form_html)}


def test_a_rows_edit_saved_over_a_change_made_elsewhere_is_refused_until_saved_again(app, client):
    """Two tabs edit the same memory: the second save is not saved over the
    first unseen; it says what the first saved, keeps what was typed, and
    saving again replaces the other change."""
    memory = add_memory("Takes 60s to start", category="timing", service="jellyfin")
    tab_a = _opened_with(client.get(f"/memories/{memory.id}/edit", headers=HTMX).get_data(as_text=True))
    tab_b = dict(tab_a)
    assert tab_a == {"shown-as.observation": "Takes 60s to start", "shown-as.category": "timing",
                     "shown-as.service": "jellyfin"}
    fields = {"service": "jellyfin", "category": "timing"}
    saved = client.put(f"/memories/{memory.id}", data={**tab_a, **fields, "observation": "Tab one <b>text</b>"})
    assert "memory-saved" in saved.headers["HX-Trigger"]

    refused = client.put(f"/memories/{memory.id}", data={**tab_b, **fields, "observation": "Tab two text"})
    assert refused.status_code == 200 and "HX-Trigger" not in refused.headers
    html = refused.get_data(as_text=True)
    # The edit form again, with what was typed, now compared with the memory as the other tab left it.
    assert html.startswith(f'<tr id="memory-{memory.id}" class="memory-row editing')
    assert ">Tab two text</textarea>" in html
    assert _opened_with(html)["shown-as.observation"] == "Tab one <b>text</b>"
    said = re.search(r'<div id="memory-errors" hx-swap-oob="innerHTML">(.*?)</div>', html, re.S).group(1)
    assert "<b>" not in said   # the other change is shown as text
    assert html_unescape(re.sub(r"<[^>]+>", "", said)).strip() == (
        f"Not saved: memory {memory.id} was changed elsewhere since this form was opened (its observation is now "
        "“Tab one <b>text</b>”). Save again to replace that with what you typed.")
    assert all_memories()[0].observation == "Tab one <b>text</b>"

    again = client.put(f"/memories/{memory.id}", data={**_opened_with(html), **fields, "observation": "Tab two text"})
    assert "memory-saved" in again.headers["HX-Trigger"]
    assert all_memories()[0].observation == "Tab two text"


def test_a_rows_edit_saves_only_what_was_edited_in_it(app, client):
    """A field left as the form showed it is not saved: a change made to it
    elsewhere meanwhile stays. One typed the same as that change is no conflict."""
    memory = add_memory("Takes 60s to start", category="timing", service="jellyfin")
    opened = _opened_with(client.get(f"/memories/{memory.id}/edit", headers=HTMX).get_data(as_text=True))
    client.put(f"/api/v1/memories/{memory.id}", json={"category": "behavior", "service": "plex"})
    saved = client.put(f"/memories/{memory.id}", data={**opened, "observation": "Takes 90s to start",
                                                        "category": "timing", "service": "plex"})
    assert "memory-saved" in saved.headers["HX-Trigger"]
    (memory,) = all_memories()
    assert (memory.observation, memory.category, memory.service) == ("Takes 90s to start", "behavior", "plex")


def test_edit_and_approve_over_a_change_made_elsewhere_is_refused_until_approved_again(app, client):
    change({"CLAUDEOPS_MEMORY_REVIEW": True})
    memory = remember("[MEMORY:timing:jellyfin] Takes 60s to start", new_run()).memory
    db.session.commit()
    form = client.get(f"/memories/{memory.id}/review", headers=HTMX).get_data(as_text=True)
    opened = _opened_with(form)
    assert opened == {"shown-as.observation": "Takes 60s to start", "shown-as.category": "timing",
                      "shown-as.service": "jellyfin", "shown-as.confidence": "0.7"}
    client.put(f"/api/v1/memories/{memory.id}", json={"confidence": 0.4})
    typed = {"observation": "Takes 60s to start", "category": "timing", "service": "jellyfin", "confidence": "0.9"}
    refused = client.post(f"/memories/{memory.id}/approve", data={**opened, **typed})
    html = refused.get_data(as_text=True)
    assert html.startswith(f'<tr id="proposed-{memory.id}" class="proposed-row editing"')
    assert 'name="confidence" min="0" max="1"' in html and 'value="0.9"' in html
    assert f"Not approved: memory {memory.id} was changed elsewhere since this form was opened (its confidence is " \
           "now 0.4). Approve again to replace that with what you typed." in html
    assert (all_memories()[0].status, all_memories()[0].confidence) == ("proposed", 0.4)

    approved = client.post(f"/memories/{memory.id}/approve", data={**_opened_with(html), **typed})
    assert approved.get_data(as_text=True) == "" and "memory-reviewed" in approved.headers["HX-Trigger-After-Swap"]
    assert (all_memories()[0].status, all_memories()[0].confidence) == ("approved", 0.9)


def test_a_confidence_typed_is_held_to_no_step(app, client):
    """The service takes any confidence from 0 to 1 (0.33, say): no field
    that types one refuses it for not being a step of 0.05."""
    memory = add_memory("Takes 60s to start", confidence=0.33)
    change({"CLAUDEOPS_MEMORY_REVIEW": True})
    proposal = remember("[MEMORY:timing:jellyfin] Needs a warm cache", new_run()).memory
    db.session.commit()
    html = client.get("/memories").get_data(as_text=True) + \
        client.get(f"/memories/{proposal.id}/review", headers=HTMX).get_data(as_text=True)
    fields = re.findall(r'<input type="number" name="(\w+)"[^>]*>', html)
    assert sorted(fields) == ["bulk_confidence", "confidence", "confidence"]
    assert re.findall(r'<input type="number"[^>]* step="([^"]+)"', html) == ["any"] * 3
    assert client.put(f"/memories/{memory.id}/confidence", data={"confidence": "0.67"}).status_code == 200
    assert db.session.get(Memory, memory.id).confidence == 0.67


def test_pin_sets_the_state_the_button_showed_so_two_tabs_agree(app, client):
    """Two tabs showing Pin: both clicks pin it (turning it over each time
    left it unpinned, with its staleness clock reset by the unpin)."""
    memory = add_memory("Jellyfin takes 60s to start", service="jellyfin", category="timing")
    row = client.get("/memories", headers=HTMX).get_data(as_text=True)
    assert f'hx-post="/memories/{memory.id}/pin"\n            hx-vals=\'{{"pinned": "true"}}\'' in row
    for _ in range(2):
        answer = client.post(f"/memories/{memory.id}/pin", data={"pinned": "true"}, headers=HTMX)
        assert answer.status_code == 200 and ">Unpin</button>" in answer.get_data(as_text=True)
    db.session.expire_all()
    assert db.session.get(Memory, memory.id).pinned
    assert [action for action, _ in _history(memory.id)].count("pinned") == 1
    assert ">Pin</button>" in client.post(f"/memories/{memory.id}/pin", data={"pinned": "false"},
                                          headers=HTMX).get_data(as_text=True)
    refused = client.post(f"/memories/{memory.id}/pin", data={"pinned": "yes"}, headers=HTMX)
    assert "Not saved: pinned must be true or false, not &#39;yes&#39;" in refused.get_data(as_text=True)
    # A page from before the button said which: the pin is turned over.
    client.post(f"/memories/{memory.id}/pin", headers=HTMX)
    db.session.expire_all()
    assert db.session.get(Memory, memory.id).pinned


# "Restart db" that a browser would lay out reversed, while the agent reads it in this order.
OVERRIDDEN = "Restart \u202edb\u202c after backups"
SPELT = "Restart ⟨U+202E⟩db⟨U+202C⟩ after backups"


def test_a_direction_control_in_a_memory_is_shown_as_its_code_point(app, client):
    memory = add_memory(OVERRIDDEN)
    for html in (client.get("/memories").get_data(as_text=True),
                 client.get(f"/memories/{memory.id}/edit", headers=HTMX).get_data(as_text=True)):
        assert SPELT in html and "\u202e" not in html and "\u202c" not in html
    # The data keeps what was written: the API gives it, and the agent reads it.
    assert client.get(f"/api/v1/memories/{memory.id}").get_json()["observation"] == OVERRIDDEN


def test_an_edit_form_showing_a_direction_control_spelt_out_saves_only_what_was_edited(app, client):
    memory = add_memory(OVERRIDDEN, category="timing")
    form = client.get(f"/memories/{memory.id}/edit", headers=HTMX).get_data(as_text=True)
    shown = {name: html_unescape(value) for name, value in re.findall(r'name="shown-as\.(\w+)" value="([^"]*)"', form)}
    assert shown["observation"] == SPELT
    # Saved as the form showed it, with another category: not taken for a change made elsewhere.
    kept = client.put(f"/memories/{memory.id}", data={"observation": SPELT, "category": "behavior", "service": "jellyfin",
                                                      **{f"shown-as.{name}": value for name, value in shown.items()}})
    assert "memory-saved" in kept.headers["HX-Trigger"]
    (saved,) = all_memories()
    assert (saved.observation, saved.category) == (OVERRIDDEN, "behavior")
    # The observation edited: saved as typed, the controls as the operator saw them.
    client.put(f"/memories/{memory.id}", data={"observation": SPELT + " weekly", "category": "behavior",
                                               "service": "jellyfin",
                                               **{f"shown-as.{name}": value for name, value in shown.items()},
                                               "shown-as.category": "behavior"})
    assert all_memories()[0].observation == SPELT + " weekly"
