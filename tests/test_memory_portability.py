"""`claudeops memories export|import` and /api/v1/memories/export|import:
JSON (everything, history included) and Markdown, lossless both ways, and an
import that reinforces instead of duplicating."""
from __future__ import annotations

import json
import os
import re
import threading
from pathlib import Path

import pytest
from sqlalchemy import delete, func, select

from app.cli import main
from app.extensions import db
from app.runtime import change
from app.models import RUNNING, Session
from app.sessions import control
from plugins.memory import cli as memory_cli, context, portability, store
from plugins.memory.models import Memory, MemoryHistory
from tests.conftest import make_app
from tests.support.database import sqlite_only
from tests.memory_helpers import add_memory, all_memories, new_run, remember

MEMORY_FIELDS = ("service", "category", "observation", "confidence", "active", "pinned", "tier",
                 "created_at", "updated_at", "decayed_weeks")
HISTORY_FIELDS = ("action", "confidence_before", "confidence_after", "actor", "detail", "created_at")


def seed() -> None:
    """Memories in every state: reinforced by a second session, contradicted
    (and linked), pinned, general, inactive."""
    first, second = new_run(), new_run()
    remember("[MEMORY:timing:jellyfin] Takes 60s to start after restart", first)
    remember("[MEMORY:timing:jellyfin] Takes about 60 seconds to start after a restart", second)
    remember("[MEMORY:remediation:nginx] Reload clears the 502 errors", first)
    remember("[MEMORY:remediation:nginx] Reload does not clear the 502 errors", second)
    remember("[MEMORY:remediation:nginx] Reload does not clear the 502 errors at all", second)
    pinned = store.create("maintenance", "postgres", "Vacuum runs Sundays at 03:00", 0.95)
    store.update(pinned, pinned=True)
    store.create("behavior", None, "DNS checks fail during WireGuard reconnects", 0.6)
    store.create("behavior", "jellyfin", "Old transcoder crashed on HEVC", 0.2)   # inactive below 0.3
    db.session.commit()


def comparable(document: dict) -> list[dict]:
    """An export without what is local to one database: ids (a link to
    another memory is compared by that memory's observation), session links,
    and the import's own history rows."""
    by_id = {m["id"]: m for m in document["memories"]}
    rows = []
    for memory in document["memories"]:
        row = {name: memory[name] for name in MEMORY_FIELDS}
        row["contradicts"] = by_id[memory["contradicts_id"]]["observation"] if memory["contradicts_id"] else None
        row["history"] = [{**{name: h[name] for name in HISTORY_FIELDS},
                           "related": by_id[h["related_memory_id"]]["observation"] if h["related_memory_id"] else None}
                          for h in memory["history"] if h["action"] != "imported"]
        rows.append(row)
    return sorted(rows, key=lambda r: (r["service"] or "", r["category"], r["observation"]))


def test_json_round_trip_keeps_everything(app, tmp_path):
    seed()
    exported = portability.export_json()
    assert len(exported["memories"]) == 6
    assert any(m["history"] and m["history"][-1]["action"] == "reinforced" for m in exported["memories"])
    assert any(m["contradicts_id"] for m in exported["memories"])
    # The contradicted memory's history names the memory that contradicted it.
    assert any(h["related_memory_id"] for m in exported["memories"] for h in m["history"])

    other = make_app(tmp_path / "other")
    with other.app_context():
        entries = portability.parse(json.dumps(exported))
        report = portability.import_entries(entries, source="backup.json")
        db.session.commit()
        assert report.to_dict() == {"created": 6, "reinforced": 0, "contradicted": 0, "unchanged": 0}
        again = portability.export_json()
        assert comparable(again) == comparable(exported)
        # Each memory says where it came from, after the history it brought.
        assert all(m["history"][-1]["action"] == "imported" and m["history"][-1]["detail"] == "from backup.json"
                   for m in again["memories"])
        # No session of the other service exists here: links are dropped, not misattributed.
        assert all(m["session_id"] is None for m in again["memories"])


@pytest.mark.parametrize("indent", [True, False])
def test_the_streamed_export_is_the_document_a_batch_at_a_time(app, client, monkeypatch, indent):
    """Memories and their history are read side by side, a few rows at a
    time; a deleted memory's history (kept for the audit trail) is passed
    over, and each memory keeps its own rows in their order."""
    monkeypatch.setattr(portability, "EXPORT_BATCH", 2)
    monkeypatch.setattr(portability, "CHUNK_CHARS", 100)   # a chunk every memory or two
    seed()
    gone = db.session.scalars(select(Memory).order_by(Memory.id)).first()   # ahead of every other's history
    gone_id = gone.id
    db.session.delete(gone)   # its history stays
    db.session.commit()
    assert db.session.scalar(select(func.count()).where(MemoryHistory.memory_id == gone_id)) > 0
    chunks = list(portability.export_json_chunks(indent=indent))
    assert len(chunks) > 3
    text = "".join(chunks)
    document = json.loads(text)
    expected = portability.export_json()
    assert {**document, "exported_at": None} == {**expected, "exported_at": None}
    assert len(document["memories"]) == 5 and gone_id not in {m["id"] for m in document["memories"]}
    histories = db.session.execute(select(MemoryHistory.memory_id, MemoryHistory.action).order_by(MemoryHistory.id))
    by_memory = {}
    for memory_id, action in histories:
        by_memory.setdefault(memory_id, []).append(action)
    assert {m["id"]: [h["action"] for h in m["history"]] for m in document["memories"]} == {
        m["id"]: by_memory.get(m["id"], []) for m in document["memories"]}
    assert text.startswith('{\n  "format": "claudeops-memories",\n' if indent else '{"format":"claudeops-memories",')
    assert text.endswith("\n  ]\n}\n" if indent else "]}\n")
    response = client.get("/api/v1/memories/export")
    assert response.is_streamed and json.loads(response.get_data())["memories"] == expected["memories"]
    download = client.get("/memories/export.json")
    assert download.is_streamed and json.loads(download.get_data())["memories"] == expected["memories"]


@pytest.mark.parametrize("indent", [True, False])
def test_an_export_of_nothing_is_still_a_document(app, indent):
    document = json.loads("".join(portability.export_json_chunks(indent=indent)))
    assert document["memories"] == [] and document["format"] == "claudeops-memories"


def test_restore_into_the_same_database_keeps_session_links(app):
    seed()
    exported = portability.export_json()
    db.session.execute(delete(Memory))
    db.session.commit()
    portability.import_entries(portability.parse_json(exported), source="backup.json")
    db.session.commit()
    restored = {m["observation"]: m["session_id"] for m in portability.export_json()["memories"]}
    original = {m["observation"]: m["session_id"] for m in exported["memories"]}
    assert restored == original and any(original.values())


def test_importing_what_is_there_changes_nothing(app):
    seed()
    before = [(m.id, m.confidence, m.updated_at) for m in all_memories()]
    history_rows = db.session.scalar(select(func.count()).select_from(MemoryHistory))
    report = portability.import_entries(portability.parse_json(portability.export_json()), source="again")
    db.session.commit()
    assert report.to_dict() == {"created": 0, "reinforced": 0, "contradicted": 0, "unchanged": 6}
    assert [(m.id, m.confidence, m.updated_at) for m in all_memories()] == before
    assert db.session.scalar(select(func.count()).select_from(MemoryHistory)) == history_rows
    # Nor do the same words in another case, spacing or with a full stop: each import reinforced them
    document = portability.export_json()
    for memory in document["memories"]:
        memory["observation"] = "  " + memory["observation"].upper() + " ."
    report = portability.import_entries(portability.parse_json(document), source="shouted")
    db.session.commit()
    assert report.to_dict() == {"created": 0, "reinforced": 0, "contradicted": 0, "unchanged": 6}
    assert [(m.id, m.confidence, m.updated_at) for m in all_memories()] == before


def test_an_export_made_before_the_limit_was_lowered_imports_again_as_unchanged(app, client, tmp_path):
    """The limit holds for new text only: a memory kept from before is
    "unchanged" in its own export, in JSON and Markdown, through the
    function, the API and the CLI; a new text over it refuses the file, and
    nothing of it is written."""
    long_text = "Jellyfin transcodes on the old GPU " * 60   # 2,100 characters
    add_memory(long_text.strip())
    add_memory("Takes 60s to start", service="sonarr")
    change({"CLAUDEOPS_MEMORY_MAX_OBSERVATION_CHARS": 2000})
    unchanged = {"created": 0, "reinforced": 0, "contradicted": 0, "unchanged": 2}
    assert portability.import_entries(portability.parse_json(portability.export_json()), "again").to_dict() == unchanged
    assert portability.import_entries(portability.parse(portability.export_markdown()), "again").to_dict() == unchanged
    db.session.commit()
    assert client.post("/api/v1/memories/import", json=portability.export_json()).get_json() == unchanged
    exported = tmp_path / "export.json"
    exported.write_text(json.dumps(portability.export_json()))
    result = app.test_cli_runner().invoke(main, ["memories", "import", str(exported)])
    assert result.exit_code == 0 and "0 created, 0 reinforced, 0 contradicted, 2 unchanged" in result.output
    # New text over the limit: the whole file is refused, the memory before it in the file unwritten.
    document = portability.export_json()
    document["memories"] = [{"service": "radarr", "category": "timing", "observation": "Fine"},
                            {"service": "radarr", "category": "timing", "observation": "x" * 2001}]
    with pytest.raises(portability.ImportRefused,
                       match=re.escape("memory 2: observation is 2001 characters; the limit is 2000 "
                                       "(CLAUDEOPS_MEMORY_MAX_OBSERVATION_CHARS)")):
        portability.import_entries(portability.parse_json(document), "new")
    db.session.rollback()
    with pytest.raises(portability.ImportRefused, match=re.escape("line 3: observation is 2001 characters")):
        portability.import_entries(portability.parse(
            "## radarr\n- [timing] Fine (confidence: 0.7)\n- [timing] " + "x" * 2001 + " (confidence: 0.7)\n"), "new")
    db.session.rollback()
    assert sorted(m.service for m in all_memories()) == ["jellyfin", "sonarr"]


def test_a_history_confidence_out_of_range_is_stored_clamped_as_the_memorys_is(app):
    document = {"format": "claudeops-memories", "version": 1, "memories": [
        {"service": "web", "category": "timing", "observation": "Slow", "confidence": 7,
         "history": [{"action": "created", "actor": "session", "confidence_before": -2, "confidence_after": 7}]}]}
    portability.import_entries(portability.parse_json(document), "hand-written")
    db.session.commit()
    (memory,) = all_memories()
    rows = db.session.execute(select(MemoryHistory.action, MemoryHistory.confidence_before,
                                     MemoryHistory.confidence_after).where(MemoryHistory.memory_id == memory.id)
                              .order_by(MemoryHistory.id)).all()
    assert memory.confidence == 1.0 and rows[0] == ("created", 0.0, 1.0)


def test_two_memories_of_one_text_both_come_back(app, tmp_path):
    """Only a text here before the import is left alone: a pinned copy, or
    the operator's approved copy of a text the agent proposed and was
    refused, was counted "unchanged" after the first and lost."""
    add_memory("Takes 60s to start after restart", confidence=0.7)
    add_memory("Takes 60s to start after restart", confidence=0.95, pinned=True)
    refused = add_memory("Reload nginx with nginx -s reload", category="remediation", service="nginx",
                         confidence=0.6)
    refused.status = "rejected"
    add_memory("Reload nginx with nginx -s reload", category="remediation", service="nginx", confidence=0.9)
    db.session.commit()
    exported = portability.export_json()

    def states() -> list[tuple]:
        return sorted((m.observation, m.confidence, m.pinned, m.status) for m in all_memories())
    here = states()
    other = make_app(tmp_path / "other")
    with other.app_context():
        report = portability.import_entries(portability.parse_json(exported), source="copy.json")
        db.session.commit()
        assert report.to_dict() == {"created": 4, "reinforced": 0, "contradicted": 0, "unchanged": 0}
        assert states() == here
        again = portability.import_entries(portability.parse_json(exported), source="copy.json")
        assert again.to_dict() == {"created": 0, "reinforced": 0, "contradicted": 0, "unchanged": 4}
        db.session.rollback()
        db.engine.dispose()


def test_a_rejected_or_inactive_entry_changes_no_memory_here(app):
    """A record of what was refused or fell out of use is no evidence: it is
    stored as it is, and reinforces or weakens nothing."""
    known = add_memory("Takes 60s to start after restart", confidence=0.5)
    before = known.updated_at
    markdown = "\n".join([
        "## jellyfin",
        "- [timing] Takes about 60 seconds to start after a restart (confidence: 0.7, rejected)",
        "- [timing] Takes about 60 seconds to start after restart (confidence: 0.05, inactive)",
        "- [timing] Does not take 60s to start after restart (confidence: 0.1, inactive)",
        "- [timing] Does not take 60 seconds to start after a restart (confidence: 0.9, proposed)"])
    report = portability.import_entries(portability.parse(markdown), source="old.md")
    db.session.commit()
    assert report.to_dict() == {"created": 3, "reinforced": 0, "contradicted": 1, "unchanged": 0}
    memory = db.session.get(Memory, known.id)
    assert (memory.confidence, memory.updated_at) == (0.5, before)   # the proposal takes trust once approved
    stored = {m.observation: (m.status, m.active, m.contradicts_id) for m in all_memories() if m.id != known.id}
    assert stored == {
        "Takes about 60 seconds to start after a restart": ("rejected", True, None),
        "Takes about 60 seconds to start after restart": ("approved", False, None),
        "Does not take 60s to start after restart": ("approved", False, None),
        "Does not take 60 seconds to start after a restart": ("proposed", True, known.id)}


def test_importing_an_export_of_a_marker_spaced_oddly_changes_nothing(app):
    """A marker's text is stored as the agent spaced it; an import reads
    text as one line. The two are the same text, not a paraphrase that
    would reinforce the memory at every import."""
    recorded = remember("[MEMORY:timing:jellyfin] Takes  60s\tto start after restart\u00a0(measured)", new_run())
    confidence = recorded.memory.confidence
    for _ in range(2):
        report = portability.import_entries(portability.parse_json(portability.export_json()), source="again")
        db.session.commit()
        assert report.to_dict() == {"created": 0, "reinforced": 0, "contradicted": 0, "unchanged": 1}
    assert [m.confidence for m in all_memories()] == [confidence]


def test_import_goes_through_the_matcher(app):
    known = add_memory("Takes 60s to start after restart", confidence=0.7)
    other = add_memory("Reload clears the 502 errors", service="nginx", category="remediation", confidence=0.7)
    markdown = "\n".join(["## jellyfin", "- [timing] Takes about 60 seconds to start after a restart (confidence: 0.7)",
                          "## nginx", "- [remediation] Reload does not clear the 502 errors (confidence: 0.8)",
                          "## general", "- [behavior] Backups run nightly at 02:00 (confidence: 0.7)"])
    report = portability.import_entries(portability.parse(markdown), source="notes.md")
    db.session.commit()
    assert report.to_dict() == {"created": 1, "reinforced": 1, "contradicted": 1, "unchanged": 0}
    assert len(all_memories()) == 4                    # the paraphrase did not become a second memory
    assert db.session.get(Memory, known.id).confidence == pytest.approx(0.8)
    assert db.session.get(Memory, other.id).confidence == pytest.approx(0.5)
    newer = db.session.scalars(select(Memory).where(Memory.observation.like("Reload does not%"))).one()
    assert newer.contradicts_id == other.id and newer.confidence == 0.8
    reinforced = db.session.scalars(select(MemoryHistory).where(MemoryHistory.memory_id == known.id)
                                    .order_by(MemoryHistory.id.desc())).first()
    assert (reinforced.action, reinforced.actor) == ("reinforced", "operator")
    assert reinforced.detail.startswith("imported from notes.md")


def test_markdown_round_trip(app, tmp_path):
    seed()
    markdown = portability.export_markdown()
    assert "## jellyfin\n\n- [timing] Takes 60s to start after restart (confidence: 0.8)" in markdown
    assert "- [remediation] Reload clears the 502 errors (confidence: 0.5)" in markdown
    assert "- [behavior] Old transcoder crashed on HEVC (confidence: 0.2, inactive)" in markdown
    assert "(confidence: 0.95, pinned)" in markdown
    assert markdown.index("## general") > markdown.index("## postgres")   # general last
    other = make_app(tmp_path / "other")
    with other.app_context():
        portability.import_entries(portability.parse(markdown), source="notes.md")
        db.session.commit()
        again = portability.export_markdown()
    body = lambda text: text.split("\n", 4)[4]  # noqa: E731  (after the title and the dated line)
    assert body(again) == body(markdown)


def test_the_markdown_export_counts_its_memories_in_words(app):
    assert ": 0 memories. Import with" in portability.export_markdown()
    add_memory("Takes 60s to start after restart")
    db.session.commit()
    assert ": 1 memory. Import with" in portability.export_markdown()
    add_memory("Depends on the NAS mount", category="dependency")
    db.session.commit()
    assert ": 2 memories. Import with" in portability.export_markdown()


def test_a_bad_entry_refuses_the_whole_file(app):
    good = {"service": "jellyfin", "category": "timing", "observation": "Takes 60s", "confidence": 0.7}
    cases = [
        ({"format": "claudeops-memories", "version": 1, "memories": [good, good | {"observation": "x"},
                                                                      good | {"category": "misc"}]},
         "memory 3: category must be one of"),
        ({"format": "claudeops-memories", "version": 1, "memories": [good | {"confidence": "high"}]},
         "memory 1: confidence must be a number"),
        # A number in text is Markdown's; in JSON it is refused, as the API refuses it.
        ({"format": "claudeops-memories", "version": 1, "memories": [good | {"confidence": "0.5"}]},
         "memory 1: confidence must be a number, not a string \"0.5\""),
        ({"format": "claudeops-memories", "version": 1,
          "memories": [good | {"history": [{"action": "created", "actor": "session", "confidence_after": "0.7"}]}]},
         "memory 1: history confidence_after must be a number, not a string \"0.7\""),
        ({"format": "claudeops-memories", "version": 1,
          "memories": [good | {"created_at": "2026-01-02T00:00:00Z", "updated_at": "2025-01-01T00:00:00Z"}]},
         "memory 1: updated_at (2025-01-01T00:00:00Z) is before created_at (2026-01-02T00:00:00Z)"),
        ({"format": "claudeops-memories", "version": 1, "memories": [good | {"active": True, "confidence": 0.1}]},
         'memory 1: active with confidence 0.1, below 0.3: give it "active": false, or raise its confidence'),
        # The value sent is named, not the one it was clamped to.
        ({"format": "claudeops-memories", "version": 1, "memories": [good | {"active": True, "confidence": -1}]},
         "memory 1: active with confidence -1, below 0.3"),
        # A key misspelt in a file written by hand is refused, not left out.
        ({"format": "claudeops-memories", "version": 1,
          "memories": [good, {"servce": "jellyfin", "category": "timing", "observation": "x", "confidenc": 0.9}]},
         "memory 2: unknown field(s): confidenc, servce; allowed: id, service, category, observation, confidence,"),
        ({"format": "claudeops-memories", "version": 1,
          "memories": [good | {"history": [{"action": "created", "actor": "session", "when": "today"}]}]},
         "memory 1: a history entry has unknown field(s): when; allowed: action,"),
        # A page shows every history entry: one of megabytes is refused, not shown
        ({"format": "claudeops-memories", "version": 1,
          "memories": [good | {"history": [{"action": "created", "actor": "session", "detail": "x" * 20_001}]}]},
         "memory 1: a history detail is 20001 characters; the limit is 20000"),
        ({"format": "claudeops-memories", "version": 1, "memorys": [], "memories": []},
         "the export has unknown field(s): memorys; allowed: format, version, exported_at, memories"),
        ({"format": "claudeops-memories", "version": 1, "memories": [good | {"created_at": "yesterday"}]},
         "memory 1: 'yesterday' is not an ISO 8601 timestamp"),
        # Beyond these, decay's next date overflows, or its weeks pass what an export may hold.
        ({"format": "claudeops-memories", "version": 1, "memories": [good | {"updated_at": "9999-12-01T00:00:00Z"}]},
         "memory 1: '9999-12-01T00:00:00Z' is out of range"),
        ({"format": "claudeops-memories", "version": 1, "memories": [good | {"created_at": "1800-01-01T00:00:00Z"}]},
         "memory 1: '1800-01-01T00:00:00Z' is out of range"),
        ({"format": "claudeops-memories", "version": 1,
          "memories": [good | {"history": [{"action": "created", "actor": "session",
                                            "created_at": "3000-01-01T00:00:00Z"}]}]},
         "memory 1: '3000-01-01T00:00:00Z' is out of range"),
        ({"format": "claudeops-memories", "version": 1, "memories": [good | {"history": [{"action": "created"}]}]},
         "memory 1: history actor must be one of"),
        # A history row says what the service does to a memory, nothing else.
        ({"format": "claudeops-memories", "version": 1,
          "memories": [good | {"history": [{"action": "bogus", "actor": "session"}]}]},
         "memory 1: each history entry needs an action, one of created, reinforced,"),
        ({"format": "claudeops-memories", "version": 2, "memories": []}, "export version 2 is not supported"),
        # Python takes true for 1.
        ({"format": "claudeops-memories", "version": True, "memories": [good]},
         "export version true is not supported (only 1)"),
        # Links name memories by id: two exports joined by hand would link to the wrong ones.
        ({"format": "claudeops-memories", "version": 1,
          "memories": [good | {"id": 1}, good | {"id": 2, "observation": "x", "contradicts_id": 1},
                       good | {"id": 1, "observation": "y"}]},
         "memory 3: id 1 is that of memory 1 too: an export names each memory by an id of its own"),
        ({"memories": []}, "not a memories export"),
    ]
    for document, message in cases:
        with pytest.raises(portability.ImportRefused, match=re.escape(message)):
            portability.import_entries(portability.parse_json(document), source="x")
    with pytest.raises(portability.ImportRefused, match="line 2: expected"):
        portability.parse("## jellyfin\n- timing: takes 60s\n")
    with pytest.raises(portability.ImportRefused, match="before any '## service' heading"):
        portability.parse("- [timing] Takes 60s (confidence: 0.7)\n")
    with pytest.raises(portability.ImportRefused, match="not valid JSON"):
        portability.parse("{oops")
    with pytest.raises(portability.ImportRefused, match="in the file, the key 'confidence' is given twice in one object"):
        portability.parse('{"format": "claudeops-memories", "version": 1, "memories": [{"service": "web", '
                          '"category": "timing", "observation": "x", "confidence": 0.9, "confidence": 0.2}]}')
    with pytest.raises(portability.ImportRefused, match="nested too deeply"):
        portability.parse('{"a": ' + "[" * 100_000 + "]" * 100_000 + "}")
    # JSON of another shape is refused as JSON, not read as Markdown holding no memories.
    for text in ("[1, 2, 3]", "null", "  42\n", '"memories"'):
        with pytest.raises(portability.ImportRefused, match='not a memories export: expected an object with "format"'):
            portability.parse(text)
    for field in ("id", "session_id", "contradicts_id"):
        for bad in (2**31, 10**30, 0, -1):
            with pytest.raises(portability.ImportRefused, match=f"memory 1: ids must be whole numbers from 1 to {2**31 - 1}"):
                portability.parse_json({"format": "claudeops-memories", "version": 1, "memories": [good | {field: bad}]})
    with pytest.raises(portability.ImportRefused, match="ids must be whole numbers from 1"):
        portability.parse_json({"format": "claudeops-memories", "version": 1, "memories": [
            good | {"history": [{"action": "created", "actor": "session", "session_id": 10**30}]}]})
    assert all_memories() == []


# ------------------------------------------------------------------ the API

def test_a_markdown_refusal_names_the_line_at_fault(app):
    # A bad service is where its heading is, not on the memory's line.
    with pytest.raises(portability.ImportRefused, match=re.escape(
            "line 2: the heading's service must be 1-100 letters, digits, '_' or '-'")):
        portability.parse("# Notes\n## nas.local\n\n- [timing] Scrub takes 9 hours (confidence: 0.7)\n")
    # What a session is given looks like an export, but is not one.
    add_memory("Takes 60s to start after restart", service="jellyfin")
    section = context.build_memory_context(3000)
    assert section.text.startswith("## Operational Memory (1 of 1 memories")
    with pytest.raises(portability.ImportRefused, match=re.escape(
            "line 1: this is the memory section of a session's system prompt, not an export of the memories")):
        portability.parse(section.text)


def test_a_hand_written_entry_below_the_threshold_is_stored_inactive(app):
    """As POST /memories stores it: an entry that does not say whether it
    is active (a JSON file written by hand), or a Markdown line (an export
    marks every inactive memory, and never holds an active one below 0.3)."""
    document = {"format": "claudeops-memories", "version": 1, "memories": [
        {"service": "jellyfin", "category": "timing", "observation": "Takes 60s at boot", "confidence": 0.1},
        {"service": "jellyfin", "category": "timing", "observation": "Transcodes at night", "confidence": 0.9}]}
    markdown = "## nginx\n- [behavior] Reloads drop websockets (confidence: 0.2)\n"
    portability.import_entries(portability.parse_json(document), source="x")
    portability.import_entries(portability.parse(markdown), source="x")
    stored = {memory.observation: (memory.confidence, memory.active) for memory in all_memories()}
    assert stored == {"Takes 60s at boot": (0.1, False), "Transcodes at night": (0.9, True),
                      "Reloads drop websockets": (0.2, False)}


def test_api_export_and_import(app, client, tmp_path):
    seed()
    exported = client.get("/api/v1/memories/export")
    assert exported.status_code == 200 and exported.get_json()["format"] == "claudeops-memories"
    markdown = client.get("/api/v1/memories/export?format=markdown")
    assert markdown.mimetype == "text/markdown" and "## jellyfin" in markdown.get_data(as_text=True)
    assert client.get("/api/v1/memories/export?format=csv").status_code == 400

    other = make_app(tmp_path / "other")
    with other.app_context():
        target = other.test_client()
        response = target.post("/api/v1/memories/import", json=exported.get_json())
        assert response.status_code == 201 and response.get_json()["created"] == 6
        response = target.post("/api/v1/memories/import", data=markdown.get_data(),
                               content_type="text/markdown")
        assert response.status_code == 201 and response.get_json()["unchanged"] == 6
        # Plain text is read as Markdown, as the OpenAPI document says.
        response = target.post("/api/v1/memories/import", data=markdown.get_data(), content_type="text/plain")
        assert response.status_code == 201 and response.get_json()["unchanged"] == 6
        taken = target.get("/api/v1/openapi.json").get_json()["paths"]["/memories/import"]["post"]["requestBody"]
        assert set(taken["content"]) == {"application/json", "text/markdown", "text/plain"}
        assert target.post("/api/v1/memories/import", data="x=1",
                           content_type="application/x-www-form-urlencoded").status_code == 415
        refused = target.post("/api/v1/memories/import", json={"format": "claudeops-memories", "version": 1,
                                                               "memories": [{"category": "misc"}]})
        assert refused.status_code == 400 and refused.get_json()["error"].startswith("nothing imported: memory 1")
        # What is wrong, in the terms of what was sent.
        for body, content_type, error in (
                ("{", "application/json", "not valid JSON: Expecting property name enclosed in double quotes: "
                                          "line 1 column 2 (char 1)"),
                ("[" * 100_000 + "]" * 100_000, "application/json", "not an export: nested too deeply"),
                ("null", "application/json", 'not a memories export: expected an object with "format"'),
                ('{"format": "claudeops-memories", "memories": []}', "application/json",
                 'the export names no version: expected "version": 1'),
                (b"- [timing] caf\xe9 (confidence: 0.7)", "text/markdown", "the body is not UTF-8 text (byte 14 is not)")):
            refused = target.post("/api/v1/memories/import", data=body, content_type=content_type)
            assert refused.status_code == 400 and refused.get_json()["error"].startswith(f"nothing imported: {error}"), \
                refused.get_json()
        beyond = exported.get_json()
        beyond["memories"][0]["session_id"] = 2**31
        refused = target.post("/api/v1/memories/import", json=beyond)
        assert refused.status_code == 400 and "memory 1: ids must be whole numbers from 1 to 2147483647" in \
            refused.get_json()["error"]
        future = exported.get_json()
        future["memories"][0]["updated_at"] = "9999-12-01T00:00:00Z"
        refused = target.post("/api/v1/memories/import", json=future)
        assert refused.status_code == 400 and "memory 1: '9999-12-01T00:00:00Z' is out of range" in \
            refused.get_json()["error"]


def test_an_export_saved_with_a_byte_order_mark_imports_as_it_is(app, client, tmp_path):
    """Notepad and PowerShell write UTF-8 with a BOM: the API, the page's
    upload and the CLI read such a file as they read it without one."""
    import io
    seed()
    exported = client.get("/api/v1/memories/export").get_data()
    markdown = client.get("/api/v1/memories/export?format=markdown").get_data()
    other = make_app(tmp_path / "other")
    with other.app_context():
        target = other.test_client()
        response = target.post("/api/v1/memories/import", data=b"\xef\xbb\xbf" + exported,
                               content_type="application/json")
        assert response.status_code == 201 and response.get_json()["created"] == 6, response.get_json()
        response = target.post("/api/v1/memories/import", data=b"\xef\xbb\xbf" + markdown,
                               content_type="text/markdown")
        assert response.status_code == 201 and response.get_json()["unchanged"] == 6, response.get_json()
        for name, body in (("memories.json", exported), ("memories.md", markdown)):
            page = target.post("/memories/import", data={"file": (io.BytesIO(b"\xef\xbb\xbf" + body), name)},
                               content_type="multipart/form-data", follow_redirects=True).get_data(as_text=True)
            assert f"Imported {name}: 0 created, 0 reinforced, 0 contradicted, 6 unchanged" in page
        (tmp_path / "bom.md").write_bytes(b"\xef\xbb\xbf" + markdown)
        result = other.test_cli_runner().invoke(args=["memories", "import", str(tmp_path / "bom.md")])
        assert result.exit_code == 0 and "6 unchanged" in result.output, result.output


# ------------------------------------------------------------------ the CLI

def test_cli_export_and_import(app, tmp_path):
    seed()
    runner = app.test_cli_runner()
    path = tmp_path / "memories.json"
    previous = os.umask(0o022)   # a root shell's: the export is the owner's alone all the same
    try:
        result = runner.invoke(main, ["memories", "export", "-o", str(path)])
    finally:
        os.umask(previous)
    assert result.exit_code == 0, result.output
    assert result.output == f"Exported 6 memories to {path} (json).\n"
    assert len(json.loads(path.read_text())["memories"]) == 6
    assert path.stat().st_mode & 0o777 == 0o600
    markdown = runner.invoke(main, ["memories", "export", "--format", "markdown"])
    assert markdown.exit_code == 0 and "## postgres" in markdown.output
    written = runner.invoke(main, ["memories", "export", "--format", "markdown", "-o", str(tmp_path / "m.md")])
    assert written.output == f"Exported 6 memories to {tmp_path / 'm.md'} (markdown).\n"

    db.session.execute(delete(Memory))
    db.session.commit()
    result = runner.invoke(main, ["memories", "import", str(path)])
    assert result.exit_code == 0, result.output
    assert result.output.strip() == "6 created, 0 reinforced, 0 contradicted, 0 unchanged"
    bad = tmp_path / "bad.md"
    bad.write_text("## jellyfin\n- [misc] Takes 60s (confidence: 0.7)\n")
    result = runner.invoke(main, ["memories", "import", str(bad)])
    assert result.exit_code == 1 and "line 2: category must be one of" in result.output


def test_cli_import_of_a_file_that_is_not_utf8_says_so(app, tmp_path):
    path = tmp_path / "memories.json"
    path.write_bytes(b'{"format": "claudeops-memories", "memories": ["\xff"]}')
    result = app.test_cli_runner().invoke(main, ["memories", "import", str(path)])
    assert result.exit_code == 1 and result.exception.__class__ is SystemExit
    assert f"Error: {path} is not UTF-8 text (byte 47 is not), so not an export" in result.output


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full, whose every write fails")
@pytest.mark.parametrize("fmt", ["json", "markdown"])
def test_cli_export_to_a_file_that_cannot_be_written_says_so(app, fmt):
    seed()
    result = app.test_cli_runner().invoke(main, ["memories", "export", "--format", fmt, "-o", "/dev/full"])
    assert result.exit_code == 1 and result.exception.__class__ is SystemExit
    assert result.output == "Error: cannot write /dev/full: No space left on device\n"


def test_cli_export_that_fails_midway_leaves_no_part_of_a_file(tmp_path):
    """Half an export would pass for an export of fewer memories."""
    import subprocess
    from tests.support.faults import files_of_at_most
    from tests.test_cli import CLAUDEOPS, claudeops_env

    env = claudeops_env(tmp_path)
    subprocess.run([str(CLAUDEOPS), "db", "upgrade", "heads"], env=env, capture_output=True, check=True, timeout=60)
    path = tmp_path / "export.json"
    path.write_text(json.dumps(big_export(1000)))   # an export of them is some 200 KB
    subprocess.run([str(CLAUDEOPS), "memories", "import", str(path)], env=env, capture_output=True, check=True,
                   timeout=60)
    out = tmp_path / "out.json"
    result = subprocess.run([str(CLAUDEOPS), "memories", "export", "-o", str(out)], env=env, capture_output=True,
                            text=True, timeout=60, preexec_fn=files_of_at_most(65536))
    assert (result.returncode, result.stderr) == (1, f"Error: cannot write {out}: File too large\n")
    assert not out.exists()
    assert [path.name for path in tmp_path.iterdir() if "partial" in path.name] == []

    # Replacing an older export: a failure leaves it whole.
    out.write_text("the older export")
    result = subprocess.run([str(CLAUDEOPS), "memories", "export", "-o", str(out), "--force"], env=env,
                            capture_output=True, text=True, timeout=60, preexec_fn=files_of_at_most(65536))
    assert (result.returncode, result.stderr) == (1, f"Error: cannot write {out}: File too large\n")
    assert out.read_text() == "the older export"


def test_cli_export_replaces_a_file_only_when_asked(app, tmp_path):
    seed()
    runner = app.test_cli_runner()
    path = tmp_path / "memories.json"
    path.write_text("notes of my own")
    refused = runner.invoke(main, ["memories", "export", "-o", str(path)])
    assert refused.exit_code == 1
    assert refused.output == f"Error: {path} already exists: name a new file, or pass --force to replace it\n"
    assert path.read_text() == "notes of my own"
    replaced = runner.invoke(main, ["memories", "export", "-o", str(path), "--force"])
    assert replaced.exit_code == 0, replaced.output
    assert len(json.loads(path.read_text())["memories"]) == 6


def test_cli_export_never_writes_over_a_file_the_service_keeps(app):
    """Not even with --force: an export over the cookie's key logged every
    browser out at the next start, and made the key a 40 KB secret to redact."""
    from pathlib import Path as P
    seed()
    key = P(app.config["CLAUDEOPS_STATE_DIR"]) / "secret_key"
    key.write_text("k" * 64)
    result = app.test_cli_runner().invoke(main, ["memories", "export", "-o", str(key), "--force"])
    assert result.exit_code == 1
    assert f"Error: {key} is in the service's state directory (beside its database" in result.output
    assert key.read_text() == "k" * 64
    # A new file there is the operator's to make
    fresh = P(app.config["CLAUDEOPS_STATE_DIR"]) / "export.json"
    assert app.test_cli_runner().invoke(main, ["memories", "export", "-o", str(fresh)]).exit_code == 0
    assert len(json.loads(fresh.read_text())["memories"]) == 6


@sqlite_only("the database is a file only on SQLite")
@pytest.mark.parametrize("suffix", ["", "-wal", "-journal"])
def test_cli_export_never_writes_over_the_database(app, suffix):
    """Not even with --force: an export over claudeops.db was the end of
    every session, event and history row, with exit status 0."""
    from app.backup import database_file
    seed()
    target = Path(f"{database_file(db.engine)}{suffix}")
    existed = target.exists() and target.read_bytes()
    result = app.test_cli_runner().invoke(main, ["memories", "export", "-o", str(target), "--force"])
    assert result.exit_code == 1
    assert f"Error: {target} is the service's database or a file SQLite keeps beside it" in result.output
    if suffix != "-wal":   # the live WAL changes as the database is used
        assert (target.exists() and target.read_bytes()) == existed
    db.session.remove()
    assert db.session.scalar(select(func.count()).select_from(Memory)) == 6


@pytest.mark.skipif(not Path("/proc/self/mem").exists(), reason="needs /proc/self/mem, whose first page cannot be read")
def test_cli_import_of_a_file_that_cannot_be_read_says_so(app):
    result = app.test_cli_runner().invoke(main, ["memories", "import", "/proc/self/mem"])
    assert result.exit_code == 1 and result.exception.__class__ is SystemExit
    assert result.output == "Error: cannot read /proc/self/mem: Input/output error\n"


# ------------------------------------------------------------ the dashboard

def test_dashboard_download_and_upload(app, client):
    seed()
    page = client.get("/memories").get_data(as_text=True)
    assert 'href="/memories/export.json"' in page and 'enctype="multipart/form-data"' in page
    download = client.get("/memories/export.md")
    assert download.headers["Content-Disposition"] == 'attachment; filename="claudeops-memories.md"'
    assert client.get("/memories/export.csv").status_code == 404
    exported = client.get("/memories/export.json").get_data()

    db.session.execute(delete(Memory))
    db.session.commit()
    from io import BytesIO
    response = client.post("/memories/import", data={"file": (BytesIO(exported), "backup.json")},
                           content_type="multipart/form-data", follow_redirects=True)
    assert "Imported backup.json: 6 created, 0 reinforced, 0 contradicted, 0 unchanged." in response.get_data(as_text=True)
    assert len(all_memories()) == 6
    response = client.post("/memories/import", data={"file": (BytesIO(b"\xff\xfe"), "x.md")},
                           content_type="multipart/form-data", follow_redirects=True)
    assert "Nothing imported: x.md is not UTF-8 text." in response.get_data(as_text=True)
    response = client.post("/memories/import", data={"file": (BytesIO(b"## a\n- [misc] x (confidence: 0.7)\n"), "x.md")},
                           content_type="multipart/form-data", follow_redirects=True)
    assert "Nothing imported from x.md: line 2: category must be one of" in response.get_data(as_text=True)
    deep = b'{"format": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    response = client.post("/memories/import", data={"file": (BytesIO(deep), "deep.json")},
                           content_type="multipart/form-data", follow_redirects=True)
    assert response.status_code == 200
    assert "Nothing imported from deep.json: not an export: nested too deeply" in response.get_data(as_text=True)
    assert len(all_memories()) == 6


def test_a_markdown_file_without_memories_is_refused(app):
    with pytest.raises(portability.ImportRefused, match="no memories found"):
        portability.parse("# Notes\n\nNothing to see here.\n", "markdown")


@pytest.mark.parametrize("fmt", ["auto", "json", "markdown"])
def test_an_empty_file_is_refused_as_empty_in_any_format(app, fmt):
    """Not in Markdown's terms for an empty .json file, nor JSON's for an empty .md."""
    for text in ("", " \n\t\n", "\ufeff"):
        with pytest.raises(portability.ImportRefused, match="^the file is empty"):
            portability.parse(text, fmt)


def test_an_export_of_no_memories_imports_as_nothing(app):
    """An export made before anything was learned is an export, not the wrong file."""
    empty = portability.export_markdown()
    assert portability.parse(empty, "markdown") == []
    report = portability.import_entries(portability.parse(empty, "markdown"), source="empty.md")
    assert (report.created, report.reinforced, report.contradicted, report.unchanged) == (0, 0, 0, 0)


# ------------------------------------------------- large files, and the cap

@pytest.mark.parametrize("named_live", [None, 0])
def test_an_import_is_compared_with_what_was_there_never_with_itself(app, monkeypatch, named_live):
    """Whether the import names a pair's live memories (few of them) or
    leaves out its own (many): the same outcome."""
    if named_live is not None:
        monkeypatch.setattr(portability, "NAMED_LIVE", named_live, raising=False)
    known = add_memory("Takes 60s to start after restart", confidence=0.7)
    weak = add_memory("Reload clears the 502 errors", service="nginx", category="remediation", confidence=0.4)
    markdown = "\n".join([
        "## jellyfin",
        "- [timing] Backups stall the transcoder at night (confidence: 0.7)",
        "- [timing] Backups stall the transcoder every night (confidence: 0.7)",   # would reinforce the one above
        "- [timing] Takes about 60 seconds to start after a restart (confidence: 0.7)",
        "- [timing] Backups stall the transcoder at night (confidence: 0.7)",      # the same text: a memory too
        "## nginx",
        "- [remediation] Reload does not clear the 502 errors (confidence: 0.8)",  # deactivates the one there
        "- [remediation] Reload clears the 502 errors quickly (confidence: 0.7)"])  # so nothing to compare with
    report = portability.import_entries(portability.parse(markdown), source="notes.md")
    db.session.commit()
    assert report.to_dict() == {"created": 4, "reinforced": 1, "contradicted": 1, "unchanged": 0}
    assert db.session.get(Memory, known.id).confidence == pytest.approx(0.8)
    assert not db.session.get(Memory, weak.id).active
    assert len(all_memories()) == 2 + 5


def test_a_memory_the_import_contradicts_makes_room_for_the_next_most_trusted(app, monkeypatch):
    """The import reads a pair's candidates among its most trusted memories
    (NAMED_LIVE of them); once it has contradicted enough of those, a memory
    beyond them can be a candidate, and is."""
    from plugins.memory import candidates
    monkeypatch.setattr(candidates, "MAX_CANDIDATES", 1)
    monkeypatch.setattr(portability, "NAMED_LIVE", 1, raising=False)
    add_memory("Reload clears the 502 errors", service="nginx", category="remediation", confidence=0.6)
    next_one = add_memory("Restart fixes the disk quota warnings", service="nginx", category="remediation",
                          confidence=0.5)
    markdown = "\n".join([
        "## nginx",
        "- [remediation] Reload does not clear the 502 errors (confidence: 0.7)",   # 0.6 -> 0.4
        "- [remediation] Restart clears the disk quota warnings (confidence: 0.7)"])  # now the most trusted
    report = portability.import_entries(portability.parse(markdown), source="notes.md")
    db.session.commit()
    assert report.to_dict() == {"created": 0, "reinforced": 1, "contradicted": 1, "unchanged": 0}
    assert db.session.get(Memory, next_one.id).confidence == pytest.approx(0.6)


def test_an_imports_statements_do_not_grow_with_the_file(app, monkeypatch):
    """Each entry is compared with what was there before the import, not with
    the import's own memories; a statement that named every one of those
    grew with the file (quadratic, and past SQLite's limit of bound
    parameters for a large one)."""
    from sqlalchemy import event
    add_memory("Takes 60s to start after restart")   # few live memories: named
    for number in range(3):                           # more than NAMED_LIVE: the import's own left out
        add_memory(f"Reload number {number} clears the 502 errors", service="nginx", category="remediation")
    monkeypatch.setattr(portability, "NAMED_LIVE", 2, raising=False)
    largest = []

    def count(conn, cursor, statement, parameters, context, executemany):
        rows = parameters if executemany else [parameters]
        largest.append(max((len(row) for row in rows), default=0))
    markdown = "\n".join(["## jellyfin", *(f"- [timing] Thing{n} restarts nightly{n} (confidence: 0.7)"
                                           for n in range(150)),
                          "## nginx", *(f"- [remediation] Cache{n} purges weekly{n} (confidence: 0.7)"
                                        for n in range(150))])
    entries = portability.parse(markdown)
    event.listen(db.engine, "before_cursor_execute", count)
    try:
        report = portability.import_entries(entries, source="big.md")
    finally:
        event.remove(db.engine, "before_cursor_execute", count)
    db.session.commit()
    assert report.created == 300
    assert max(largest) < 30


def test_an_imports_history_is_written_in_one_statement_and_redacted(app):
    """An export may hold hundreds of thousands of history rows: one
    statement for all of them, every row's text redacted as a flush would
    redact it, a text that recurs in each row it is in."""
    from sqlalchemy import event
    history = [{"action": "reinforced", "actor": "session", "confidence_before": 0.5, "confidence_after": 0.6,
                "detail": "logged in with password=hunter2 to check", "created_at": "2026-01-02T03:04:05+00:00"}
               for _ in range(40)]
    document = {"format": "claudeops-memories", "version": 1,
                "memories": [{"category": "timing", "service": f"svc{n}", "observation": f"Takes {n}0s to start",
                              "history": history} for n in range(1, 4)]}
    statements = []

    def record(conn, cursor, statement, parameters, context, executemany):
        if statement.lstrip().upper().startswith("INSERT INTO MEMORY_HISTORY"):
            statements.append(len(parameters) if executemany else 1)
    event.listen(db.engine, "before_cursor_execute", record)
    try:
        report = portability.import_entries(portability.parse(json.dumps(document)), source="big.json")
    finally:
        event.remove(db.engine, "before_cursor_execute", record)
    db.session.commit()
    assert report.created == 3
    assert statements == [3 * 41]   # each memory's 40 rows and its "imported" one
    details = db.session.scalars(select(MemoryHistory.detail).where(MemoryHistory.action == "reinforced")).all()
    assert len(details) == 120 and set(details) == {"logged in with password=[redacted] to check"}
    for memory in db.session.scalars(select(Memory)):
        rows = db.session.scalars(select(MemoryHistory).where(MemoryHistory.memory_id == memory.id)
                                  .order_by(MemoryHistory.id)).all()
        assert [r.action for r in rows] == ["reinforced"] * 40 + ["imported"]
        assert rows[0].created_at.year == 2026 and rows[0].confidence_after == 0.6


def big_export(count: int) -> dict:
    return {"format": "claudeops-memories", "version": 1,
            "memories": [{"category": "timing", "service": "bulk", "observation": f"bulk {n} about thing{n}"}
                         for n in range(count)]}


def test_over_http_an_import_holds_at_most_max_web_import(app, client):
    over = portability.MAX_WEB_IMPORT + 1
    message = (f"{over} memories in one file; at most {portability.MAX_WEB_IMPORT} through the API or the "
               "dashboard: import a larger file with `claudeops memories import FILE`")
    refused = client.post("/api/v1/memories/import", json=big_export(over))
    assert (refused.status_code, refused.get_json()) == (400, {"error": f"nothing imported: {message}"})
    markdown = "## bulk\n" + "".join(f"- [timing] bulk {n} about thing{n} (confidence: 0.7)\n" for n in range(over))
    refused = client.post("/api/v1/memories/import", data=markdown, content_type="text/markdown")
    assert (refused.status_code, refused.get_json()) == (400, {"error": f"nothing imported: {message}"})
    from io import BytesIO
    for name, body in (("many.json", json.dumps(big_export(over)).encode()), ("many.md", markdown.encode())):
        response = client.post("/memories/import", data={"file": (BytesIO(body), name)},
                               content_type="multipart/form-data", follow_redirects=True)
        assert response.status_code == 200
        assert f"Nothing imported from {name}: {message}" in response.get_data(as_text=True)
    assert all_memories() == []
    from app.config import PROJECT_ROOT
    readme = (PROJECT_ROOT / "README.md").read_text()
    assert f"more than {portability.MAX_WEB_IMPORT:,} memories" in readme
    assert f"at most {portability.MAX_WEB_IMPORT:,} memories at a time" in readme


def test_the_cli_imports_more_than_http_may(app, tmp_path, monkeypatch):
    monkeypatch.setattr(portability, "MAX_WEB_IMPORT", 2)
    assert app.test_client().post("/api/v1/memories/import", json=big_export(3)).status_code == 400
    path = tmp_path / "many.json"
    path.write_text(json.dumps(big_export(3)))
    result = app.test_cli_runner().invoke(main, ["memories", "import", str(path)])
    assert result.exit_code == 0, result.output
    assert len(all_memories()) == 3


def test_the_cli_refuses_a_large_import_while_a_session_runs_unless_asked(app, tmp_path, monkeypatch):
    """It would hold the write lock past what the session waits for, and end it."""
    monkeypatch.setattr(portability, "MAX_WEB_IMPORT", 2)
    path = tmp_path / "many.json"
    path.write_text(json.dumps(big_export(3)))
    running = control.claim(control.enqueue(tier=1).id)
    refused = app.test_cli_runner().invoke(main, ["memories", "import", str(path)])
    assert refused.exit_code == 1
    assert refused.output == (f"Error: session #{running.id} is running, and an import of 3 memories may hold the "
                              "database longer than it waits to write (15 s), which would end it: import when no "
                              "session runs, or pass --while-a-session-runs\n")
    assert all_memories() == []
    small = tmp_path / "few.json"
    small.write_text(json.dumps(big_export(2)))
    assert app.test_cli_runner().invoke(main, ["memories", "import", str(small)]).exit_code == 0
    anyway = app.test_cli_runner().invoke(main, ["memories", "import", "--while-a-session-runs", str(path)])
    assert anyway.exit_code == 0, anyway.output
    # A few memories with a long history hold the database as long.
    monkeypatch.setattr(memory_cli, "HISTORY_ROWS_WHILE_A_SESSION_RUNS", 4)
    long_history = big_export(1)
    long_history["memories"][0].update(observation="one with a past", history=[
        {"action": "reinforced", "confidence_before": 0.5, "confidence_after": 0.6, "actor": "session",
         "created_at": "2026-11-01T00:00:00Z"}] * 5)
    path.write_text(json.dumps(long_history))
    refused = app.test_cli_runner().invoke(main, ["memories", "import", str(path)])
    assert refused.exit_code == 1 and "an import of 1 memories with 5 history rows may hold" in refused.output
    db.session.get(Session, running.id).status = "completed"
    db.session.commit()
    assert len(all_memories()) == 3


@sqlite_only("a session waits only so long (15 s) for SQLite's write lock; on PostgreSQL it waits for the import")
def test_a_session_the_scheduler_claims_while_a_large_import_starts_waits_for_it(app, tmp_path, monkeypatch):
    """The scheduler (another process: a thread with its own connection here)
    claims a queued session between the import's look for a running one and
    the import itself: the session must not run while the import holds the
    database; its claim waits for the import's commit instead."""
    monkeypatch.setattr(portability, "MAX_WEB_IMPORT", 2)
    path = tmp_path / "many.json"
    path.write_text(json.dumps(big_export(3)))
    queued = control.enqueue(tier=1).id
    db.session.commit()
    flask_app = app

    def the_scheduler():
        with flask_app.app_context():
            control.claim(queued)

    def running_now() -> bool:
        found = []

        def look():
            with flask_app.app_context():
                found.append(db.session.scalar(select(Session.status).where(Session.id == queued)) == RUNNING)

        reader = threading.Thread(target=look)
        reader.start()
        reader.join(timeout=30)
        return found[0]

    scheduler = threading.Thread(target=the_scheduler)
    real_import = portability.import_entries
    seen = []

    def the_scheduler_then_the_import(entries, source):
        scheduler.start()
        scheduler.join(timeout=1)   # at once, unless the import's command holds the database
        seen.append(running_now())
        return real_import(entries, source)

    monkeypatch.setattr(portability, "import_entries", the_scheduler_then_the_import)
    result = app.test_cli_runner().invoke(main, ["memories", "import", str(path)])
    scheduler.join(timeout=30)
    assert result.exit_code == 0, result.output
    assert seen == [False]   # no session ran while the import held the database
    assert len(all_memories()) == 3
    assert running_now()   # claimed once the import was done


def test_an_export_reads_everything_as_of_one_moment(app):
    """Its track records, history and memories are read in several
    statements: what is recorded between them (an outcome, say) is in none
    of them, not in the history alone."""
    from sqlalchemy import event, text
    memory = add_memory("Jellyfin takes 60s to start", service="jellyfin", category="timing")
    memory_id = memory.id
    engine = db.engine
    written = []

    def outcome_recorded_meanwhile(conn, cursor, statement, parameters, context, executemany):
        if "memory_track_records" in statement and not written:
            written.append(True)
            with engine.begin() as other:   # another connection, as a session's batch would be
                other.execute(text(
                    "INSERT INTO memory_history (memory_id, action, confidence_before, confidence_after, actor, "
                    "created_at) VALUES (:id, 'outcome', 0.7, 0.75, 'session', '2026-11-29 10:00:00')"),
                    {"id": memory_id})

    db.session.commit()
    event.listen(engine, "after_cursor_execute", outcome_recorded_meanwhile)
    try:
        (exported,) = portability.export_json()["memories"]
    finally:
        event.remove(engine, "after_cursor_execute", outcome_recorded_meanwhile)
    assert written
    assert "outcome" not in [row["action"] for row in exported["history"]]
    db.session.rollback()
    assert db.session.scalar(select(func.count()).select_from(MemoryHistory).where(
        MemoryHistory.memory_id == memory_id, MemoryHistory.action == "outcome")) == 1   # it was written
