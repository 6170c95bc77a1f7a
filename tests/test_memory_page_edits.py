"""The Memories page's own edits (plugins/memory/views.py), through the
Flask client: a row's edit form moves a memory to another service or
category, and Add Memory names a memory the new one restates or
contradicts (both are kept: an operator's memory is stored as given)."""
from __future__ import annotations

import re

from app.extensions import db
from app.runtime import change
from plugins.memory.models import Memory, MemoryHistory
from tests.conftest import HTMX
from tests.memory_helpers import add_memory, all_memories


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
