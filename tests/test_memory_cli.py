"""`claudeops memories list|add|edit|delete|context`."""
from __future__ import annotations

import click
from sqlalchemy import select

from app.cli import main
from app.extensions import db
from plugins.memory.models import MemoryHistory, TrackRecord
from tests.conftest import make_app
from tests.memory_helpers import add_memory, all_memories
from tests.support.meanwhile import Meanwhile


def invoke(app, *args, input=None):
    return app.test_cli_runner().invoke(main, ["memories", *args], input=input)


def test_add_list_edit_delete(app):
    result = invoke(app, "add", "--category", "maintenance", "--service", "postgres", "--confidence", "0.9",
                    "Needs manual VACUUM FULL weekly")
    assert result.exit_code == 0, result.output
    assert "postgres" in result.output and "0.9" in result.output
    (memory,) = all_memories()
    assert (memory.session_id, memory.active, memory.confidence) == (None, True, 0.9)

    result = invoke(app, "list", "--service", "postgres")
    assert result.exit_code == 0 and "Needs manual VACUUM FULL weekly" in result.output
    assert "1 of 1 memory" in result.output
    assert "Needs manual" not in invoke(app, "list", "--category", "timing").stdout

    result = invoke(app, "edit", str(memory.id), "--observation", "Needs VACUUM FULL every Sunday", "--pin")
    assert result.exit_code == 0 and "pinned" in result.output
    result = invoke(app, "edit", str(memory.id), "--confidence", "0.1")
    assert "inactive" in result.output
    assert all_memories()[0].observation == "Needs VACUUM FULL every Sunday"

    result = invoke(app, "delete", str(memory.id), input="n\n")
    assert result.exit_code == 1 and len(all_memories()) == 1     # declined
    result = invoke(app, "delete", str(memory.id), str(memory.id), input="y\n")   # the same id twice: one memory
    assert result.exit_code == 0 and all_memories() == []
    assert result.output == (f"#{memory.id:<5} postgres       maintenance   0.1 inactive, pinned  Needs VACUUM FULL every Sunday\n"
                             f"Delete 1 memory? [y/N]: y\ndeleted #{memory.id}\n")


def test_edit_moves_a_memory_to_another_service_and_category(app):
    """As the page and the API can: "general" makes it a general memory, and
    the history says what it was."""
    memory = add_memory("Restarts cleanly after an upgrade", service="postgres", category="behavior")
    result = invoke(app, "edit", str(memory.id), "--service", "pgbouncer", "--category", "remediation")
    assert result.exit_code == 0, result.output
    assert "pgbouncer" in result.output and "remediation" in result.output
    db.session.expire_all()
    (memory,) = all_memories()
    assert (memory.service, memory.category) == ("pgbouncer", "remediation")
    details = db.session.scalars(select(MemoryHistory.detail).where(MemoryHistory.memory_id == memory.id)).all()
    assert "service postgres → pgbouncer" in details and "category behavior → remediation" in details

    result = invoke(app, "edit", str(memory.id), "--service", "general")
    assert result.exit_code == 0 and "general" in result.output
    db.session.expire_all()
    assert all_memories()[0].service is None

    result = invoke(app, "edit", str(memory.id), "--service", "bad service", "--category", "timing")
    assert result.exit_code == 1 and "service must be" in result.output
    db.session.expire_all()
    assert (all_memories()[0].service, all_memories()[0].category) == (None, "remediation")   # nothing changed
    result = invoke(app, "edit", str(memory.id), "--category", "misc")
    assert result.exit_code == 2 and "'misc' is not one of" in result.output


def test_a_category_or_status_is_taken_in_any_case_as_the_api_takes_it(app):
    memory = add_memory("Restarts cleanly after an upgrade", service="postgres", category="behavior")
    result = invoke(app, "list", "--category", "BEHAVIOR", "--status", "Active")
    assert result.exit_code == 0 and "Restarts cleanly" in result.output, result.output
    result = invoke(app, "edit", str(memory.id), "--category", "Timing")
    assert result.exit_code == 0, result.output
    db.session.expire_all()
    assert all_memories()[0].category == "timing"


def test_errors_are_clear(app):
    result = invoke(app, "add", "--category", "timing", "--service", "bad service", "x")
    assert result.exit_code == 1 and "service must be" in result.output
    result = invoke(app, "add", "--category", "misc", "x")
    assert result.exit_code == 2 and "'misc' is not one of" in result.output
    assert "memory 42 not found" in invoke(app, "edit", "42", "--pin").output
    memory = add_memory("Kept")
    assert "nothing to change" in invoke(app, "edit", str(memory.id)).output
    result = invoke(app, "delete", str(memory.id), "77", "--yes")
    assert result.exit_code == 1 and "memory 77 not found" in result.output and len(all_memories()) == 1


def test_an_id_is_digits_as_the_list_shows_them(app):
    """int() reads "1_2" as 12 and Arabic-Indic digits as theirs: a typo
    must not delete or approve another memory."""
    memories = [add_memory(f"Memory {n}") for n in range(12)]
    twelfth = memories[11]
    assert twelfth.id == 12
    for odd in ("1_2", "\u0661\u0662", "12.0", " 12", "0x0c"):
        for command in (["delete", odd, "--yes"], ["edit", odd, "--pin"], ["approve", odd], ["reject", odd]):
            result = invoke(app, *command)
            assert result.exit_code == 2, (command, result.output)
            assert f"{odd!r} is not a memory id" in result.output
    assert len(all_memories()) == 12 and not db.session.get(type(twelfth), 12).pinned
    result = invoke(app, "delete", "#12", "--yes")   # as `memories list` writes it
    assert result.exit_code == 0 and result.output == "deleted #12\n"


def test_context_prints_the_next_sessions_memory_section(app):
    result = invoke(app, "context")
    assert result.exit_code == 0 and result.stdout == "" and "no memory section" in result.output
    memory = add_memory("Takes 60s to start after restart", confidence=0.9)
    result = invoke(app, "context")
    text = result.stdout.rstrip("\n")
    assert text.splitlines() == [
        f"## Operational Memory (1 of 1 memories, ~{-(-len(text) // 4)} tokens)", "", "### jellyfin",
        f"- [timing] Takes 60s to start after restart (confidence: 0.9) [m{memory.id}]"]


def test_list_shows_each_memorys_track_record(app):
    scored, fresh = add_memory("Takes 60s to start after restart"), add_memory("Needs the NFS mount")
    scored.track_record = TrackRecord(worked=1, partial=2, failed=0, unknown=0)
    db.session.commit()
    lines = invoke(app, "list").stdout.splitlines()
    (scored_line,) = [line for line in lines if line.startswith(f"#{scored.id} ")]
    (fresh_line,) = [line for line in lines if line.startswith(f"#{fresh.id} ")]
    assert "active, 1 worked, 2 partial  Takes 60s to start after restart" in scored_line
    assert "worked" not in fresh_line and fresh_line.endswith("active  Needs the NFS mount")


def test_delete_does_not_hold_the_database_while_it_asks(tmp_path, monkeypatch):
    """The operator may leave the question unanswered for minutes: meanwhile
    a session's batch, a dashboard worker or the cooldowns hook must still
    be able to write (on SQLite they would wait past the busy timeout and
    fail, ending the session)."""
    app = make_app(tmp_path)
    worker = make_app(tmp_path).test_client()   # a dashboard worker: another process
    with app.app_context():
        doomed, other = add_memory("Doomed"), add_memory("Other", service="postgres")
        db.session.commit()
        doomed_id, other_id = doomed.id, other.id
    asked = []
    real_confirm = click.confirm

    def confirm(*args, **kwargs):
        operator = Meanwhile(worker, "put", f"/api/v1/memories/{other_id}", {"confidence": 0.5})
        operator.send()
        asked.append(not operator.thread.is_alive())   # done while the question waits
        operator.answer()
        return real_confirm(*args, **kwargs)

    monkeypatch.setattr(click, "confirm", confirm)
    result = invoke(app, "delete", str(doomed_id), input="y\n")
    assert result.exit_code == 0, result.output
    assert asked == [True]
    with app.app_context():
        assert [(m.id, m.confidence) for m in all_memories()] == [(other_id, 0.5)]
    with app.app_context():
        assert [(m.id, m.confidence) for m in all_memories()] == [(other_id, 0.5)]


def test_a_confidence_is_shown_cut_to_two_places_never_rounded_past_the_active_threshold(app):
    """0.299 is inactive (under 0.3): rounded, it would show as 0.3 beside
    "inactive"; cut, as 0.29."""
    from plugins.memory.context import format_confidence
    assert [format_confidence(c) for c in (0.299, 0.3, 0.1 + 0.2, 0.29, 0.333, 0.7, 0.95, 1.0, 0.999)] == \
        ["0.29", "0.3", "0.3", "0.29", "0.33", "0.7", "0.95", "1.0", "0.99"]
    add_memory("Just under the threshold", confidence=0.299, active=False)   # as the store keeps it
    add_memory("At the threshold", confidence=0.3)
    lines = invoke(app, "list").output.splitlines()
    (shown_below,) = [line for line in lines if "Just under" in line]
    (shown_at,) = [line for line in lines if "At the threshold" in line]
    assert "0.29 inactive" in shown_below and "0.3 active" in shown_at
