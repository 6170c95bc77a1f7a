"""A service is one name whatever its case: the agent writes "Jellyfin" in
one session and "jellyfin" in the next, and it is one service, for memories
and events alike (as the cooldowns plugin and the memory relevance already
take it)."""
from __future__ import annotations

from flask_migrate import downgrade, upgrade
from sqlalchemy import select, text

from app.extensions import db
from plugins.events.markers import parse_event_markers
from plugins.events.models import Event
from tests.memory_helpers import all_memories, new_run, remember


def test_markers_naming_a_service_in_another_case_reinforce_one_memory(app):
    remember("[MEMORY:timing:Jellyfin] Takes 60s to start after restart", new_run())
    again = remember("[MEMORY:timing:jellyfin] Takes 60s to start after restart", new_run())
    third = remember("[MEMORY:timing:JELLYFIN] Takes 60s to start after restart", new_run())
    assert (again.relation, third.relation) == ("reinforced", "reinforced")
    assert [(m.service, m.confidence) for m in all_memories()] == [("jellyfin", 0.9)]


def test_the_operator_names_a_service_in_any_case(app, client):
    created = client.post("/api/v1/memories", json={"category": "timing", "service": "JellyFin",
                                                    "observation": "Takes 60s to start after restart"})
    assert created.status_code == 201 and created.json["service"] == "jellyfin"
    client.post("/api/v1/memories", json={"category": "timing", "observation": "DNS flaps on reconnect"})
    assert [m["service"] for m in client.get("/api/v1/memories?service=JELLYFIN").json["memories"]] == ["jellyfin"]
    assert [m["observation"] for m in client.get("/api/v1/memories?service=General").json["memories"]] == [
        "DNS flaps on reconnect"]
    edited = client.put(f"/api/v1/memories/{created.json['id']}", json={"service": "Plex"})
    assert edited.json["service"] == "plex"


def test_the_upgrade_folds_the_services_of_memories_and_events_kept_from_before(app):
    downgrade(revision="0018_rate_limit_windows")
    db.session.execute(text(
        "INSERT INTO memories (service, category, observation, confidence, active, created_at, updated_at, tier, "
        "decay_due_at, status, pinned, decayed_weeks) VALUES ('Jellyfin', 'timing', 'Slow start', 0.7, true, "
        "'2026-11-01 10:00:00', '2026-11-01 10:00:00', 1, '2026-12-01 10:00:00', 'approved', false, 0)"))
    db.session.execute(text(
        "INSERT INTO events (level, service, message, created_at) VALUES "
        "('warning', 'NAS', 'Scrub overdue', '2026-11-01 10:00:00'), ('info', NULL, 'All well', '2026-11-01 10:00:00')"))
    db.session.commit()
    upgrade(revision="heads")
    assert [m.service for m in all_memories()] == ["jellyfin"]
    assert db.session.scalars(select(Event.service).order_by(Event.id)).all() == ["nas", None]
    assert remember("[MEMORY:timing:JELLYFIN] Slow start", new_run()).relation == "reinforced"


def test_event_markers_and_notices_name_a_service_in_lower_case(app, client):
    assert [m.service for m in parse_event_markers("[EVENT:warning:NAS] Scrub overdue\n[EVENT:info:Nas.Local/zfs] ok")] \
        == ["nas", "nas.local/zfs"]
    app.extensions["claudeops.plugins"].hook.claudeops_notice(
        level="warning", message="Backups are late", service="NAS", run=None)
    db.session.add(Event(level="info", service="nas", message="Scrub done"))
    db.session.commit()
    assert [e["message"] for e in client.get("/api/v1/events?service=NAS").get_json()["events"]] == [
        "Scrub done", "Backups are late"]
    page = client.get("/events?service=Nas").get_data(as_text=True)
    assert "Scrub done" in page and "Backups are late" in page
    assert '<option value="nas" selected>nas</option>' in page   # one service in the filter, chosen
