"""Outcomes: ``[OUTCOME:<level>:m<id>] note`` scores a memory the session was
given: its confidence moves by the level's setting, the history says so, its
track record counts it; anything else is logged and noted, not stored."""
from __future__ import annotations

import json
import logging
from datetime import timedelta

import jsonschema
import pytest
from sqlalchemy import select

from app.extensions import db
from app.models import SessionActivity
from app.runtime import change
from app.timeutil import utcnow
from plugins.memory import claudeops_prompt_context
from plugins.memory.markers import (MalformedOutcome, MemoryMarker, OutcomeMarker, parse_memory_markers,
                                     parse_outcome_markers)
from plugins.memory.models import Memory, MemoryHistory, MemoryInjection, TrackRecord
from plugins.memory import outcomes
from plugins.memory.outcomes import OutcomeRefused, record_outcome
from tests import streamlines as sl
from tests.conftest import HTMX, make_app
from tests.memory_helpers import add_memory, all_memories, history, new_run, stream_handler, text_line
from tests.support.meanwhile import Meanwhile
from tests.test_memory_spec import memory_section, TIER_PROMPTS


def given(run, *memories):
    """The session was given these memories, as its prompt would have."""
    for position, memory in enumerate(memories):
        db.session.add(MemoryInjection(session_id=run.session_id, memory_id=memory.id, confidence=memory.confidence,
                                       position=position))
    db.session.commit()


def score(memory, level, run, note=""):
    result = record_outcome(memory.id, level, note, run)
    db.session.commit()
    return result


def outcome_history(memory_id):
    return [(h.action, h.confidence_before, h.confidence_after, h.session_id, h.detail)
            for h in db.session.scalars(select(MemoryHistory).where(
                MemoryHistory.memory_id == memory_id, MemoryHistory.action.in_(("outcome", "deactivated")))
                .order_by(MemoryHistory.id))]


# --- the marker ---------------------------------------------------------------------

def test_outcome_markers_are_read_from_the_agents_text():
    text = ("Restarted jellyfin and waited.\n"
            "[OUTCOME:worked:m12] restarted after waiting 60s [EVENT:info:jellyfin] healthy\n"
            "[OUTCOME:failed:7]   the order was the other way round   \n"
            "Also [OUTCOME:unknown:M3]\n"
            "[OUTCOME:great:m4] loved it\n"
            "[OUTCOME:partial] no id\n"
            "[OUTCOME:partial:m5\n")
    assert parse_outcome_markers(text) == [
        OutcomeMarker("worked", 12, "restarted after waiting 60s"),
        OutcomeMarker("failed", 7, "the order was the other way round"),
        OutcomeMarker("unknown", 3, ""),
        MalformedOutcome("[OUTCOME:great:m4]", "unknown outcome 'great' (use worked, partial, failed, unknown)"),
        MalformedOutcome("[OUTCOME:partial]", "no memory id (write it as the memory section shows it, e.g. m12)"),
    ]
    assert parse_outcome_markers("[OUTCOME:worked:m99999999999] ten digits at most")[0].why == \
        "memory id 'm99999999999' names no memory (ten digits at most, as the memory section shows it)"
    assert parse_outcome_markers("[OUTCOME:worked:m00000000012] leading zeros")[0].memory_id == 12
    assert parse_outcome_markers("nothing to see [MEMORY:timing:x] y") == []


@pytest.mark.parametrize("name", TIER_PROMPTS)
def test_every_tier_prompt_teaches_the_outcome_marker(name):
    section = memory_section(name)
    for level in ("worked", "partial", "failed", "unknown"):
        assert f"[OUTCOME:{level}:m12]" in section and f"`{level}`" in section
    example = next(line.strip() for line in section.splitlines() if line.strip().startswith("[OUTCOME:worked"))
    assert parse_outcome_markers(example) == [
        OutcomeMarker("worked", 12, "Waited 60s after the restart; the health check then passed")]


# --- the store ------------------------------------------------------------------------

@pytest.mark.parametrize("level, after", [("worked", 0.8), ("partial", 0.75), ("failed", 0.5), ("unknown", 0.7)])
def test_each_level_moves_confidence_by_its_default(app, level, after):
    memory = add_memory("Takes 60s to start after restart")
    run = new_run()
    given(run, memory)
    assert score(memory, level, run, "waited 60s") == (memory, 0.7)
    assert memory.confidence == after and memory.active
    assert outcome_history(memory.id) == [("outcome", 0.7, after, run.session_id, f"{level}: waited 60s")]
    assert memory.track_record.counts() == {lvl: int(lvl == level) for lvl in ("worked", "partial", "failed", "unknown")}


def test_worked_and_partial_restart_the_staleness_clock_failed_does_not(app):
    worked, failed = add_memory("A", age_days=40), add_memory("B", service="caddy", age_days=40)
    worked.decayed_weeks = failed.decayed_weeks = 1
    db.session.commit()
    stale = failed.updated_at
    run = new_run()
    given(run, worked, failed)
    score(worked, "worked", run)
    score(failed, "failed", run)
    assert worked.updated_at > utcnow() - timedelta(minutes=1) and worked.decayed_weeks == 0
    assert failed.updated_at == stale and failed.decayed_weeks == 1


def test_confidence_stays_within_0_and_1_and_a_failure_below_03_deactivates(app):
    sure, shaky = add_memory("Sure", confidence=0.95), add_memory("Shaky", service="caddy", confidence=0.4)
    run = new_run()
    given(run, sure, shaky)
    score(sure, "worked", run)
    score(shaky, "failed", run, "caddy starts fine without WireGuard now")
    assert sure.confidence == 1.0
    assert (shaky.confidence, shaky.active) == (0.2, False)
    assert outcome_history(shaky.id) == [
        ("outcome", 0.4, 0.2, run.session_id, "failed: caddy starts fine without WireGuard now"),
        ("deactivated", 0.2, 0.2, run.session_id, "outcome below 0.3")]
    low = add_memory("Low", service="nas", confidence=0.05)
    later = new_run()
    given(later, low)
    change({"CLAUDEOPS_MEMORY_OUTCOME_FAILED": -1})
    score(low, "failed", later)
    assert low.confidence == 0.0


def test_the_deltas_are_runtime_settings(app, client):
    memory = add_memory("Takes 60s")
    response = client.put("/api/v1/config", json={"CLAUDEOPS_MEMORY_OUTCOME_WORKED": 0.25,
                                                  "CLAUDEOPS_MEMORY_OUTCOME_UNKNOWN": -0.05})
    assert response.status_code == 200, response.get_json()
    run = new_run()
    given(run, memory)
    score(memory, "worked", run)
    assert memory.confidence == 0.95
    for bad in (1.5, -2, "much", True):
        response = client.put("/api/v1/config", json={"CLAUDEOPS_MEMORY_OUTCOME_FAILED": bad})
        assert response.status_code == 400 and "CLAUDEOPS_MEMORY_OUTCOME_FAILED" in response.get_json()["error"]


def test_only_memories_the_session_was_given_once_each(app):
    mine, other = add_memory("Given"), add_memory("Not given", service="caddy")
    gone = add_memory("Deleted later", service="nas")
    run = new_run()
    given(run, mine, gone)
    elsewhere = new_run()
    given(elsewhere, other)
    with pytest.raises(OutcomeRefused, match=f"memory m{other.id} was not given to this session"):
        score(other, "worked", run)
    score(mine, "worked", run)
    with pytest.raises(OutcomeRefused, match=f"already reported an outcome for m{mine.id}"):
        score(mine, "failed", run)
    db.session.delete(gone)
    db.session.commit()
    for missing in (gone.id, 999, 0, 2**40):
        with pytest.raises(OutcomeRefused, match=f"there is no memory m{missing}"):
            record_outcome(missing, "worked", "", run)
    # The other session may still score its own.
    score(other, "partial", elsewhere)
    db.session.expire_all()
    assert (mine.confidence, other.confidence) == (0.8, 0.75)
    assert mine.track_record.counts()["worked"] == 1 and other.track_record.counts()["partial"] == 1


# --- through a real session ---------------------------------------------------------

def activity(session_id, kind):
    return [(a.title, a.body) for a in db.session.scalars(select(SessionActivity).where(
        SessionActivity.session_id == session_id, SessionActivity.kind == kind).order_by(SessionActivity.id))]


def test_outcomes_flow_through_a_session(app, fake_cli, run_session_now, caplog):
    jellyfin = add_memory("Takes 60s to start after restart", confidence=0.7)
    caddy = add_memory("Must start after WireGuard", category="dependency", service="caddy", confidence=0.4)
    retired = add_memory("Old transcoder crashes on HEVC", service="jellyfin", confidence=0.2, active=False)
    argv_file = fake_cli(sl.steps(
        sl.init(),
        sl.text("Restarted jellyfin and waited a minute.\n"
                f"[OUTCOME:worked:m{jellyfin.id}] restarted after waiting 60s; <b>healthy</b>\n"
                f"[OUTCOME:failed:m{caddy.id}] caddy started fine before WireGuard"),
        sl.tool_use(f"echo '[OUTCOME:failed:m{jellyfin.id}] from a tool'"),
        sl.tool_result(f"[OUTCOME:failed:m{jellyfin.id}] from tool output"),
        sl.text(f"[OUTCOME:unknown:m{jellyfin.id}] said twice\n"
                f"[OUTCOME:worked:m{retired.id}] never given\n"
                "[OUTCOME:worked:m4242] no such memory\n"
                f"[OUTCOME:fine:m{jellyfin.id}] no such level"),
        sl.result("done")))
    with caplog.at_level(logging.WARNING):
        session = run_session_now()
    assert session.status == "completed"
    recorded = json.loads(argv_file.read_text())
    system = recorded["argv"][recorded["argv"].index("--append-system-prompt") + 1]
    assert f"(confidence: 0.7) [m{jellyfin.id}]" in system and f"[m{caddy.id}]" in system
    assert "Reporting outcomes" in recorded["prompt"]

    db.session.expire_all()
    jellyfin, caddy, retired = (db.session.get(Memory, m.id) for m in (jellyfin, caddy, retired))
    assert (jellyfin.confidence, jellyfin.active) == (0.8, True)
    assert (caddy.confidence, caddy.active) == (0.2, False)
    assert retired.confidence == 0.2 and retired.track_record is None
    assert history(jellyfin.id)[-1] == ("outcome", 0.7, 0.8, "session", session.id)
    assert outcome_history(caddy.id)[-1] == ("deactivated", 0.2, 0.2, session.id, "outcome below 0.3")
    assert jellyfin.track_record.counts() == {"worked": 1, "partial": 0, "failed": 0, "unknown": 0}
    assert caddy.track_record.counts() == {"worked": 0, "partial": 0, "failed": 1, "unknown": 0}

    assert activity(session.id, "marker") == [
        (f"memory:outcome:worked:m{jellyfin.id}", f"#{jellyfin.id} (0.7 → 0.8) restarted after waiting 60s; "
                                                  "<b>healthy</b>"),
        (f"memory:outcome:failed:m{caddy.id}", f"#{caddy.id} (0.4 → 0.2) caddy started fine before WireGuard")]
    warnings = activity(session.id, "warning")
    assert warnings == [
        (f"memory:outcome:unknown:m{jellyfin.id} not stored",
         f"this session already reported an outcome for m{jellyfin.id}"),
        (f"memory:outcome:worked:m{retired.id} not stored",
         f"memory m{retired.id} was not given to this session; only memories in its Operational Memory can be scored"),
        ("memory:outcome:worked:m4242 not stored", "there is no memory m4242 (deleted, or never recorded)"),
        ("memory:outcome not stored", f"[OUTCOME:fine:m{jellyfin.id}]: unknown outcome 'fine' "
                                      "(use worked, partial, failed, unknown)")]
    for _, why in warnings[:3]:
        assert why in caplog.text
    assert "from tool output" not in caplog.text and "from a tool" not in str(outcome_history(jellyfin.id))


@pytest.mark.parametrize("blocks", ["one", "two"])
def test_an_outcome_meets_the_memory_as_the_markers_before_it_in_the_stream_left_it(app, blocks):
    """Markers are applied in the order they were written, whether one text
    block holds them or two of one batch. Before, the outcome was scored as
    its block was read and the memory marker at the batch's end: the failed
    outcome took a memory at 0.35 below 0.3 first, and the reinforcement
    written before it then found nothing to reinforce and made a duplicate."""
    memory = add_memory("Takes 60s to start after restart", category="behavior", confidence=0.35)
    run = new_run()
    given(run, memory)
    handler = stream_handler(run)
    said = [f"[MEMORY:behavior:jellyfin] Takes 60s to start after restart\n"
            f"Restarted it and waited. [OUTCOME:failed:m{memory.id}] still down after 60s",
            "[MEMORY:timing:jellyfin] Jellyfin is slow on Sundays"]
    if blocks == "one":
        handler.handle_line(text_line("\n".join(said)))
    else:
        first, _, second = said[0].partition("Restarted")
        for text in (first, "Restarted" + second, said[1]):
            handler.handle_line(text_line(text))
    handler.close()
    db.session.expire_all()
    assert [(m.observation, m.confidence, m.active) for m in all_memories()] == [
        ("Takes 60s to start after restart", 0.25, False), ("Jellyfin is slow on Sundays", 0.7, True)]
    assert [(action, before, after) for action, before, after, *_ in history(memory.id)] == [
        ("reinforced", 0.35, 0.45), ("outcome", 0.45, 0.25), ("deactivated", 0.25, 0.25)]
    assert activity(run.session_id, "marker") == [
        ("memory:behavior:jellyfin reinforced", f"#{memory.id} (0.45) Takes 60s to start after restart"),
        (f"memory:outcome:failed:m{memory.id}", f"#{memory.id} (0.45 → 0.25) still down after 60s"),
        ("memory:timing:jellyfin created", f"#{memory.id + 1} (0.7) Jellyfin is slow on Sundays")]


# --- what the operator sees --------------------------------------------------------

def scored_memory():
    memory = add_memory("Takes 60s to start after restart")
    for level, note in (("worked", "waited 60s <script>alert(1)</script>"), ("worked", ""), ("failed", "too slow")):
        run = new_run()
        given(run, memory)
        score(memory, level, run, note)
    return memory


def test_the_dashboard_shows_the_track_record(app, client):
    memory = scored_memory()
    untried = add_memory("Never used", service="caddy")
    row = client.get("/memories").get_data(as_text=True)
    assert "2 worked</span> · <span class=\"outcome-partial\">0 partial</span> · " in row
    assert "1 failed" in row
    detail = client.get(f"/memories/{memory.id}").get_data(as_text=True)
    assert 'id="memory-track-record"' in detail and "2 worked" in detail and "0 unknown" in detail
    assert "worked: waited 60s &lt;script&gt;alert(1)&lt;/script&gt;" in detail and "<script>alert" not in detail
    assert "failed: too slow" in detail
    assert "no outcome reported yet" in client.get(f"/memories/{untried.id}").get_data(as_text=True)
    # The row alone (after an edit) carries it too.
    assert "2 worked" in client.get(f"/memories/{memory.id}/row", headers=HTMX).get_data(as_text=True)


def test_the_api_exposes_the_track_record_as_documented(app, client):
    memory = scored_memory()
    add_memory("Never used", service="caddy")
    body = client.get(f"/api/v1/memories/{memory.id}").get_json()
    assert body["outcomes"] == {"worked": 2, "partial": 0, "failed": 1, "unknown": 0}
    listed = client.get("/api/v1/memories").get_json()["memories"]
    assert [m["outcomes"]["worked"] for m in listed] == [0, 2]
    changes = client.get(f"/api/v1/memories/{memory.id}/history").get_json()["history"]
    assert [c["detail"] for c in changes if c["action"] == "outcome"] == [
        "worked: waited 60s <script>alert(1)</script>", "worked", "failed: too slow"]
    doc = client.get("/api/v1/openapi.json").get_json()
    for path, answer in ((f"/api/v1/memories/{memory.id}", "~1memories~1{memory_id}/get"),
                         ("/api/v1/memories", "~1memories/get"),
                         (f"/api/v1/memories/{memory.id}/history", "~1memories~1{memory_id}~1history/get")):
        schema = {**doc, "$ref": f"#/paths/{answer}/responses/200/content/application~1json/schema"}
        jsonschema.Draft202012Validator(schema).validate(client.get(path).get_json())
    assert "[OUTCOME:" in json.dumps(doc["components"]["schemas"]["Memory"]["properties"]["outcomes"])


def test_export_and_import_keep_the_track_record(app, client):
    memory = scored_memory()
    exported = client.get("/api/v1/memories/export").get_json()
    assert exported["memories"][0]["outcomes"] == {"worked": 2, "partial": 0, "failed": 1, "unknown": 0}
    client.post("/api/v1/memories/bulk-delete", json={"ids": [memory.id]})
    assert db.session.scalar(select(TrackRecord)) is None    # gone with its memory; the history stays
    assert client.post("/api/v1/memories/import", json=exported).status_code == 201
    (restored,) = all_memories()
    assert restored.track_record.counts() == {"worked": 2, "partial": 0, "failed": 1, "unknown": 0}
    exported["memories"][0]["outcomes"] = {"worked": -1}
    response = client.post("/api/v1/memories/import", json=exported)
    assert response.status_code == 400 and "worked must be a whole number" in response.get_json()["error"]


def test_the_prompt_context_records_what_can_be_scored(app):
    memory = add_memory("Takes 60s")
    run = new_run()
    claudeops_prompt_context(run)
    db.session.commit()
    score(memory, "worked", run)
    assert memory.confidence == 0.8


def _operator_meanwhile(tmp_path, action: str):
    """A memory given to a new session, its stream handler, and the
    operator's deletion or edit of it (to confidence 0.5), from another
    process's view of the same database, ready to be sent."""
    worker = make_app(tmp_path).test_client()
    memory = add_memory("Jellyfin takes 60s to start after a restart")
    run = new_run()
    given(run, memory)
    operator = Meanwhile(worker, "delete", f"/api/v1/memories/{memory.id}") if action == "delete" else \
        Meanwhile(worker, "put", f"/api/v1/memories/{memory.id}", {"confidence": 0.5})
    return memory.id, stream_handler(run), operator


@pytest.mark.parametrize("action", ["delete", "edit confidence"])
def test_an_operators_change_between_an_outcomes_read_and_its_write_is_neither_lost_nor_losing(
        tmp_path, monkeypatch, action):
    """A dashboard worker deletes or edits the memory an outcome marker
    scores, after the marker has read it and before it writes: either comes
    first, whole. The operator's confidence is not overwritten by one worked
    out from what the marker read before it, and a memory deleted meanwhile
    costs the block none of its other markers."""
    app = make_app(tmp_path)
    with app.app_context():
        memory_id, handler, operator = _operator_meanwhile(tmp_path, action)
        monkeypatch.setattr(outcomes, "lock_for_writing", operator.after(outcomes.lock_for_writing))
        handler.handle_line(text_line(f"[OUTCOME:worked:m{memory_id}] Waited; it came up\n"
                                      "[MEMORY:behavior:postgres] Postgres vacuum runs nightly at 02:00"))
        handler.close()
        answer = operator.answer()
        assert answer.status_code == 200
        db.session.expire_all()
        logged = db.session.scalars(select(SessionActivity.title).where(SessionActivity.kind != "text")).all()
        assert logged == [f"memory:outcome:worked:m{memory_id}", "memory:behavior:postgres created"]
        after = db.session.get(Memory, memory_id)
        assert after is None if action == "delete" else after.confidence == 0.5


@pytest.mark.parametrize("action", ["delete", "edit"])
def test_an_operators_change_before_an_outcome_takes_the_write_lock_is_what_it_scores(tmp_path, monkeypatch, action):
    """The checks that may refuse an outcome read without the write lock; a
    change the operator makes between them and the lock is what the outcome
    then meets: a memory deleted is refused as gone, an edited one is scored
    from the operator's confidence."""
    app = make_app(tmp_path)
    with app.app_context():
        memory_id, handler, operator = _operator_meanwhile(tmp_path, action)   # at 0.7
        monkeypatch.setattr(outcomes, "_scored", operator.after(outcomes._scored))
        handler.handle_line(text_line(f"[OUTCOME:worked:m{memory_id}] Waited; it came up"))
        handler.close()
        assert operator.answer().status_code == 200
        db.session.expire_all()
        logged = db.session.execute(select(SessionActivity.title, SessionActivity.body)
                                    .where(SessionActivity.kind != "text")).all()
        if action == "delete":
            assert logged == [(f"memory:outcome:worked:m{memory_id} not stored",
                               f"there is no memory m{memory_id} (deleted, or never recorded)")]
            assert db.session.get(Memory, memory_id) is None
        else:
            assert [title for title, _ in logged] == [f"memory:outcome:worked:m{memory_id}"]
            assert db.session.get(Memory, memory_id).confidence == pytest.approx(0.6)   # 0.5 + worked's 0.1


def test_an_outcome_repeated_in_a_block_is_settled_once(tmp_path):
    """A runaway agent's thousand outcome markers for one memory score it
    once and are refused without a read each; each refusal is not a row of
    its own in the activity log either."""
    app = make_app(tmp_path)
    with app.app_context():
        memory = add_memory("Jellyfin takes 60s to start after a restart")
        run = new_run()
        given(run, memory)
        handler = stream_handler(run)
        reads = []
        original = outcomes._scored

        def scored(*args):
            reads.append(args)
            return original(*args)

        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(outcomes, "_scored", scored)
            handler.handle_line(text_line(f"[OUTCOME:worked:m{memory.id}] ok\n" * 1000
                                          + "[OUTCOME:worked:m999999] gone\n" * 1000))
            handler.close()
        assert len(reads) == 1
        db.session.expire_all()
        titles = db.session.scalars(select(SessionActivity.title).where(SessionActivity.kind != "text")).all()
        assert titles[0] == f"memory:outcome:worked:m{memory.id}"
        assert len(titles) == 1 + 10 + 1   # scored, the first ten refusals, and a count of the rest
        assert titles[-1] == "memory:not stored"
        body = db.session.scalar(select(SessionActivity.body).where(SessionActivity.title == "memory:not stored"))
        assert body.startswith("1989 more memory markers not stored in this text block")
        assert db.session.get(Memory, memory.id).confidence == pytest.approx(0.8)


def test_an_outcome_marker_left_without_its_bracket_does_not_take_the_next_one_with_it():
    text = "[OUTCOME:worked:m12 held up [OUTCOME:failed:m7] wrong port"
    assert parse_outcome_markers(text) == [OutcomeMarker("failed", 7, "wrong port")]


def test_a_memory_marker_left_without_its_bracket_does_not_take_the_next_one_with_it():
    text = "[MEMORY:timing:db on port 5432 [MEMORY:timing:web] Takes 60s to start"
    assert parse_memory_markers(text) == [MemoryMarker("timing", "web", "Takes 60s to start")]


def test_an_outcomes_level_is_read_in_any_case_as_an_events_is():
    assert parse_outcome_markers("[OUTCOME:Worked:m2] came up [OUTCOME:FAILED:M3]") == [
        OutcomeMarker("worked", 2, "came up"), OutcomeMarker("failed", 3, "")]
    # Only ASCII letters fold: a dotted capital I is no i
    for level in ("fa\u0130led", "wor\u212aed"):   # a dotted capital I, a Kelvin sign
        (refused,) = parse_outcome_markers(f"[OUTCOME:{level}:m3]")
        assert isinstance(refused, MalformedOutcome) and refused.why.startswith("unknown outcome"), refused


def test_a_memory_category_in_capitals_is_refused_with_the_spelling_that_works(caplog):
    """SPEC-0015's marker takes the categories as it lists them; the agent is told how to write it."""
    assert parse_memory_markers("[MEMORY:Timing:sonarr] Takes 60s to start") == []
    assert "ignoring memory marker with category 'Timing': write it in lower case, 'timing'" in caplog.text
