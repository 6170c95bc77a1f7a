"""Per-session limits: an agent flooding its markers, or writing a novel as
an observation, fills neither the database nor the next prompt. What is
over a limit is logged and noted in the session's activity log, not
stored; a limit is a runtime setting that takes effect at the next marker."""
from __future__ import annotations

import json
import logging

import pytest
from sqlalchemy import func, select

from app.extensions import db
from app.models import SessionActivity
from app.plugins import plugin_manager
from app.runtime import change
from app.sessions import control
from app.sessions.manager import run_info, run_session
from plugins.cooldowns import gate, store as cooldown_store
from plugins.cooldowns.models import CooldownAction
from plugins.events.models import Event
from plugins.memory import matcher
from plugins.memory.matcher import Candidate
from plugins.memory.models import Memory
from tests import streamlines as sl
from tests.memory_helpers import add_memory


def run(fake_cli, *texts: str):
    fake_cli(sl.steps(sl.init(), *(sl.text(t) for t in texts), sl.result("done")))
    session = run_session(control.claim(control.enqueue(tier=1).id))
    assert session.status == "completed", session.status_reason
    return session


def warnings(session) -> list[tuple[str, str]]:
    return [(a.title, a.body) for a in db.session.scalars(select(SessionActivity).where(
        SessionActivity.session_id == session.id, SessionActivity.kind == "warning").order_by(SessionActivity.id))]


def markers(session) -> list[str]:
    return db.session.scalars(select(SessionActivity.title).where(
        SessionActivity.session_id == session.id, SessionActivity.kind == "marker").order_by(SessionActivity.id)).all()


def test_events_beyond_the_limit_are_logged_and_noted_not_stored(app, fake_cli, caplog):
    caplog.set_level(logging.DEBUG, logger="plugins.events")
    change({"CLAUDEOPS_EVENTS_MAX_PER_SESSION": 3})
    session = run(fake_cli, "[EVENT:info:a] one\n[EVENT:info:b] two",
                  "[EVENT:warning:c] three\n[EVENT:critical:d] four\n[EVENT:info:e] five",
                  "[EVENT:info:f] six")
    assert db.session.scalars(select(Event.message).order_by(Event.id)).all() == ["one", "two", "three"]
    limit_note = "the session reached CLAUDEOPS_EVENTS_MAX_PER_SESSION=3"
    assert warnings(session) == [("event:not stored", f"2 event marker(s) not stored: {limit_note}"),
                                 ("event:not stored", f"1 event marker(s) not stored: {limit_note}")]
    # The service log warns once per session: an agent flooding markers cannot flood it too.
    logged = [(r.levelno, r.getMessage()) for r in caplog.records if limit_note in r.getMessage()]
    assert logged == [(logging.WARNING, f"session {session.id}: 2 event marker(s) not stored: {limit_note} "
                                        "(further ones in this session are noted in its activity log only)"),
                      (logging.DEBUG, f"session {session.id}: 1 event marker(s) not stored: {limit_note}")]
    # The service's own notices are still recorded: they are not the agent's to flood.
    plugin_manager().hook.claudeops_notice(level="warning", message="escalation refused", service=None,
                                           run=run_info(session))
    db.session.commit()
    assert db.session.scalar(select(Event.message).order_by(Event.id.desc()).limit(1)) == "escalation refused"


def test_each_session_and_each_limit_is_warned_of_once_in_the_service_log(app, fake_cli, caplog):
    change({"CLAUDEOPS_EVENTS_MAX_PER_SESSION": 1, "CLAUDEOPS_MEMORY_MAX_PER_SESSION": 1})
    def flood(name: str) -> list[str]:
        return [f"[EVENT:info:a] event {n}\n[MEMORY:timing:{name}{n}] Takes {n}0s to start after a restart"
                for n in range(30)]
    sessions = [run(fake_cli, *flood("web")), run(fake_cli, *flood("db"))]
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and "not stored" in r.getMessage()]
    assert [(m.split(":")[0], "event" in m) for m in warned] == [
        (f"session {session.id}", kind) for session in sessions for kind in (True, False)]
    # The activity log still notes every refusal: each marker is stored or noted there.
    for session in sessions:
        noted = [title for title, _ in warnings(session)]
        stored_events = db.session.scalar(select(func.count()).select_from(Event).where(
            Event.session_id == session.id, Event.message.startswith("event ")))
        created = db.session.scalar(select(func.count()).select_from(Memory).where(Memory.session_id == session.id))
        assert (noted.count("event:not stored") + stored_events, noted.count("memory:not stored") + created) == (30, 30)


def test_malformed_markers_are_warned_of_once_a_session_and_kind(app, fake_cli, caplog):
    """An agent repeating a marker it writes wrong cannot flood the operator's log."""
    caplog.set_level(logging.DEBUG)
    flood = [f"[MEMORY:misc:web] note {n}\n[EVENT:loud:web] shout {n}\n[COOLDOWN:reboot:web] success — {n}"
             for n in range(100)]
    sessions = [run(fake_cli, *flood), run(fake_cli, *flood)]
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and "ignoring" in r.getMessage()]
    assert [m.split(": ignoring ")[0] for m in warned] == [f"session {s.id}" for s in sessions for _ in range(3)]
    assert all(m.endswith("(further ones in this session are noted in its activity log only)") for m in warned)
    repeated = [r for r in caplog.records if r.levelno == logging.DEBUG and "ignoring" in r.getMessage()]
    assert len(repeated) == 2 * (3 * 100 - 3)
    assert [len(warnings(session)) for session in sessions] == [3 * 100, 3 * 100]


def test_each_invalid_category_is_warned_of_once_and_a_flood_of_them_stops_at_a_bound(app, fake_cli, caplog):
    """Each category the agent makes up is a warning of its own, up to
    MOST_NAMED; a flood of them cannot hide the warning of a limit."""
    from app.session_warnings import MOST_NAMED
    caplog.set_level(logging.DEBUG)
    change({"CLAUDEOPS_EVENTS_MAX_PER_SESSION": 1})
    session = run(fake_cli, *[f"[MEMORY:kind{n}:web] note" for n in range(3 * MOST_NAMED)],
                  "[EVENT:info:a] one\n[EVENT:info:b] two")
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and
              ("ignoring" in r.getMessage() or "not stored" in r.getMessage())]
    assert len(warned) == MOST_NAMED + 1
    assert [f"'kind{n}'" in m for n, m in enumerate(warned[:MOST_NAMED])] == [True] * MOST_NAMED
    assert warned[MOST_NAMED - 1].endswith(f"; so are any others of its sort, {MOST_NAMED} having been logged)")
    assert "CLAUDEOPS_EVENTS_MAX_PER_SESSION=1" in warned[-1]   # the limit's own warning still comes
    assert len([w for w in warnings(session) if "invalid category" in w[1]]) == 3 * MOST_NAMED   # each still noted

def test_refused_outcomes_are_warned_of_for_the_first_few_ids_of_each_reason(app, fake_cli, caplog):
    """An outcome for a memory that is not there, or was not given to the
    session, is warned of once for each id, but the ids are the agent's to
    write: past MOST_NAMED of one reason they go to the debug level, so that
    an agent naming thousands of ids cannot flood the service log (each
    used to be a warning of its own). Another reason is still warned of."""
    from app.session_warnings import MOST_NAMED
    caplog.set_level(logging.DEBUG)
    kept = add_memory("Old transcoder crashes on HEVC", confidence=0.2, active=False)   # in no prompt
    missing = [kept.id + 1000 + n for n in range(3 * MOST_NAMED)]
    session = run(fake_cli, "\n".join(f"[OUTCOME:worked:m{n}] fine" for n in missing),
                  f"[OUTCOME:worked:m{kept.id}] fine\n[OUTCOME:worked:m{missing[0]}] again")
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and "outcome:" in r.getMessage()]
    assert [f"m{n} not stored: there is no memory m{n}" in m for n, m in zip(missing, warned[:MOST_NAMED])] == [True] * MOST_NAMED
    assert warned[MOST_NAMED - 1].endswith(f"; so are any others of its sort, {MOST_NAMED} having been logged)")
    assert len(warned) == MOST_NAMED + 1
    assert f"memory m{kept.id} was not given to this session" in warned[-1]
    debug = [r.getMessage() for r in caplog.records if r.levelno == logging.DEBUG and "outcome:" in r.getMessage()]
    assert sum(f"there is no memory m{n} " in m for n in missing[MOST_NAMED:] for m in debug) == 2 * MOST_NAMED
    assert (f"memory:outcome:worked:m{kept.id} not stored",
            f"memory m{kept.id} was not given to this session; only memories in its Operational Memory can be scored") \
        in warnings(session)


def test_a_block_of_many_refused_markers_notes_the_first_ten_of_each_plugin_and_counts_the_rest(app, fake_cli):
    """One row of the activity log for each refused marker would let a
    runaway agent store many times the text it writes."""
    flood = "".join(f"[MEMORY:misc:web] note {n}\n[EVENT:loud:web] shout {n}\n[COOLDOWN:reboot:web] success\n"
                    for n in range(1000))
    session = run(fake_cli, flood, "[EVENT:loud:web] once more")
    noted = warnings(session)
    for kind in ("memory", "event", "cooldown"):
        of_kind = [body for title, body in noted if title == f"{kind}:not stored"]
        assert len(of_kind) == 10 + 1 + (kind == "event")
        assert of_kind[10] == (f"990 more {kind} markers not stored in this text block, not shown one by one; "
                               "the service log has the first of each reason")
    # The next block's refusals are noted again, from the first
    assert noted[-1] == ("event:not stored", "ignoring event marker with unknown level 'loud' "
                                             "(use one of info, warning, critical)")


def test_a_block_repeating_one_memory_notes_three_repeats_and_counts_the_rest(app, fake_cli, caplog):
    """Said again in the same session, a memory changes nothing: 1,000 times
    in one block were 1,000 rows of the activity log and 1,000 lines of the
    service log."""
    caplog.set_level(logging.DEBUG, logger="plugins.memory.store")
    session = run(fake_cli, "[MEMORY:timing:web] Takes 60s to start\n" * 1000)
    (memory,) = db.session.scalars(select(Memory)).all()
    same = f"#{memory.id} (0.7) Takes 60s to start"
    rows = db.session.execute(select(SessionActivity.title, SessionActivity.body).where(
        SessionActivity.session_id == session.id, SessionActivity.kind == "marker").order_by(SessionActivity.id)).all()
    assert rows == [("memory:timing:web created", same)] + [("memory:timing:web repeated", same)] * 3 + [
        ("memory:timing:web repeated", "996 more the same in this text block, not shown one by one")]
    told = [r for r in caplog.records if "repeated memory" in r.getMessage()]
    assert [r.levelno for r in told] == [logging.INFO] + [logging.DEBUG] * 998


def test_notices_another_process_writes_for_the_session_count_from_the_next_batch(tmp_path):
    """The cooldown hook runs in the CLI's process and writes its denials'
    notices there: they count against the session's events as the
    session's own do, from the stream's next batch."""
    from tests.conftest import make_app
    from tests.memory_helpers import stream_handler, text_line
    app = make_app(tmp_path)
    hook = make_app(tmp_path)   # another process: its own connection and commits
    with app.app_context():
        change({"CLAUDEOPS_EVENTS_MAX_PER_SESSION": 10})
        handler = stream_handler()
        handler.handle_line(text_line("[EVENT:info:web] one"))
        handler.commit()
        with hook.app_context():
            for n in range(3):
                db.session.add(Event(session_id=handler.session_id, tier=1, level="warning", service="pgx",
                                     message=f"Cooldown: a restart of pgx was denied ({n})"))
            db.session.commit()
        handler.handle_line(text_line("\n".join(f"[EVENT:info:web] more {n}" for n in range(15))))
        handler.close()
        messages = db.session.scalars(select(Event.message).where(Event.session_id == handler.session_id)
                                      .order_by(Event.id)).all()
        assert len(messages) == 10 and messages[-1] == "more 5"


def test_an_event_limit_counts_per_session(app, fake_cli):
    change({"CLAUDEOPS_EVENTS_MAX_PER_SESSION": 1})
    first = run(fake_cli, "[EVENT:info:a] one\n[EVENT:info:a] two")
    second = run(fake_cli, "[EVENT:info:a] three")
    assert [(e.session_id, e.message) for e in db.session.scalars(select(Event).order_by(Event.id))] == [
        (first.id, "one"), (second.id, "three")]
    assert warnings(second) == []


def test_new_memories_beyond_the_limit_are_refused_reinforcing_still_counts(app, fake_cli, caplog):
    change({"CLAUDEOPS_MEMORY_MAX_PER_SESSION": 2})
    known = add_memory("Takes 60s to start after restart", service="jellyfin")
    session = run(fake_cli,
                  "[MEMORY:timing:nas] Disk scrub runs every Sunday night\n"
                  "[MEMORY:dependency:web] Needs redis to be up before it starts",
                  "[MEMORY:behavior:mail] Queue drains slowly after a restart\n"
                  "[MEMORY:timing:jellyfin] Takes 60 seconds to start after a restart")
    created = db.session.scalars(select(Memory.service).where(Memory.session_id == session.id)
                                 .order_by(Memory.id)).all()
    assert created == ["nas", "web"]
    db.session.refresh(known)
    assert known.confidence == 0.8, "reinforcing an existing memory is not limited"
    limit_note = "1 new memory marker(s) not stored: the session reached CLAUDEOPS_MEMORY_MAX_PER_SESSION=2"
    assert warnings(session) == [("memory:not stored", limit_note)]
    assert markers(session) == ["memory:timing:nas created", "memory:dependency:web created",
                                "memory:timing:jellyfin reinforced"]
    assert limit_note in caplog.text


def test_a_contradiction_over_the_limit_changes_nothing(app, fake_cli):
    change({"CLAUDEOPS_MEMORY_MAX_PER_SESSION": 1})
    known = add_memory("Backups finish within 1 hour", category="timing", service="nas")
    assert matcher.match("Backups take over 5 hours to finish", [Candidate(known.id, known.observation)]).relation \
        == "contradict"
    session = run(fake_cli, "[MEMORY:behavior:web] Restarts cleanly under load\n"
                            "[MEMORY:timing:nas] Backups take over 5 hours to finish")
    db.session.refresh(known)
    assert known.confidence == 0.7 and known.active
    assert db.session.scalar(select(Memory.id).where(Memory.contradicts_id == known.id)) is None
    assert [title for title, _ in warnings(session)] == ["memory:not stored"]


def test_an_observation_over_the_length_limit_is_not_stored_and_says_why(app, fake_cli, caplog):
    change({"CLAUDEOPS_MEMORY_MAX_OBSERVATION_CHARS": 40})
    long_one = "Needs the shared NFS mount before it can start its workers"
    session = run(fake_cli, f"[MEMORY:dependency:web] {long_one}\n[MEMORY:timing:web] Starts in 10s")
    assert db.session.scalars(select(Memory.observation)).all() == ["Starts in 10s"]
    why = f"observation of {len(long_one)} characters not stored: CLAUDEOPS_MEMORY_MAX_OBSERVATION_CHARS=40"
    assert warnings(session) == [("memory:dependency:web not stored", why)]
    assert why in caplog.text


def test_an_operators_observation_over_the_length_limit_is_refused(app, client):
    change({"CLAUDEOPS_MEMORY_MAX_OBSERVATION_CHARS": 40})
    response = client.post("/api/v1/memories", json={"category": "timing", "observation": "x" * 41})
    assert response.status_code == 400
    assert response.get_json() == {
        "error": "observation is 41 characters; the limit is 40 (CLAUDEOPS_MEMORY_MAX_OBSERVATION_CHARS)"}
    assert client.post("/api/v1/memories", json={"category": "timing", "observation": "x" * 40}).status_code == 201
    page = client.get("/memories").get_data(as_text=True)
    assert 'name="observation" rows="2" maxlength="40"' in page


def test_cooldown_records_beyond_the_limit_are_not_stored(app, fake_cli, caplog):
    change({"CLAUDEOPS_COOLDOWN_MAX_PER_SESSION": 2})
    session = run(fake_cli, "[COOLDOWN:restart:web] success — restarted\n"
                            "[COOLDOWN:restart:mail] success — restarted\n"
                            "[COOLDOWN:restart:nas] failure — did not come back")
    rows = db.session.scalars(select(CooldownAction.service).where(CooldownAction.session_id == session.id)
                              .order_by(CooldownAction.id)).all()
    assert rows == ["web", "mail"]
    note = "1 cooldown marker(s) not stored: the session reached CLAUDEOPS_COOLDOWN_MAX_PER_SESSION=2"
    assert warnings(session) == [("cooldown:not stored", note)]
    assert note in caplog.text


def pre_tool_use(command: str) -> str:
    return json.dumps({"tool_name": "Bash", "cwd": "/", "tool_input": {"command": command}})


def test_a_denial_beyond_the_limit_still_denies_but_is_not_recorded(app, caplog):
    change({"CLAUDEOPS_COOLDOWN_MAX_PER_SESSION": 3, "CLAUDEOPS_COOLDOWN_RESTART_LIMIT": "1/4h"})
    session = control.claim(control.enqueue(tier=3).id)
    caller = gate.Caller(session.id, 3)
    assert gate.check(pre_tool_use("docker restart web"), caller) is None          # allowed, pending
    for _ in range(4):
        assert "cooldown limit reached" in gate.check(pre_tool_use("docker restart web"), caller)
    outcomes = db.session.scalars(select(CooldownAction.outcome).order_by(CooldownAction.id)).all()
    assert outcomes == ["pending", "denied", "denied"]
    assert caplog.text.count(f"session {session.id} reached CLAUDEOPS_COOLDOWN_MAX_PER_SESSION; denial of "
                             "restart of web not recorded") == 2
    # The notices went with the records: two, not four.
    assert db.session.scalar(select(Event.id).where(Event.message.like("%was denied%")).offset(2)) is None
    # A restart the hook lets run is always recorded: the window must count it.
    change({"CLAUDEOPS_COOLDOWN_RESTART_LIMIT": None})
    db.session.execute(CooldownAction.__table__.delete().where(CooldownAction.outcome == "pending"))
    db.session.commit()
    assert gate.check(pre_tool_use("docker restart mail"), caller) is None
    assert cooldown_store.usage("mail", "restart").used == 1


@pytest.mark.parametrize("name", ["CLAUDEOPS_EVENTS_MAX_PER_SESSION", "CLAUDEOPS_MEMORY_MAX_PER_SESSION",
                                  "CLAUDEOPS_MEMORY_MAX_OBSERVATION_CHARS", "CLAUDEOPS_COOLDOWN_MAX_PER_SESSION"])
def test_limits_are_validated_runtime_settings(app, name):
    from app.runtime import SettingError, setting
    with pytest.raises(SettingError, match=f"{name}='0': must be from 1 to 2147483647"):
        change({name: 0})
    change({name: 7})
    assert setting(name) == 7


def test_a_marker_that_cannot_be_read_is_noted_where_the_agent_wrote_it(app, fake_cli, caplog):
    """Not only in the service log: the operator reading the session sees
    why a marker it wrote was not stored, beside the ones that were."""
    caplog.set_level(logging.DEBUG)
    session = run(fake_cli,
                  "[MEMORY:bogus:x] bad category\n[MEMORY:timing:x] Takes 60s to start",
                  "[EVENT:purple:web] odd level\n[EVENT:info:web] fine",
                  "[COOLDOWN:reboot:web] success — rebooted",
                  "[MEMORY:misc] again")
    assert [m.observation for m in db.session.scalars(select(Memory))] == ["Takes 60s to start"]
    assert db.session.scalars(select(Event.message).where(Event.level == "info", Event.service == "web")).all() == [
        "fine"]
    noted = warnings(session)
    assert [title for title, _ in noted] == ["memory:not stored", "event:not stored", "cooldown:not stored",
                                             "memory:not stored"]
    assert "invalid category 'bogus'" in noted[0][1] and "invalid category 'misc'" in noted[3][1]
    assert "unknown level 'purple'" in noted[1][1]
    assert "unknown action 'reboot'" in noted[2][1]
    # Still in stream order among what was stored.
    assert markers(session) == ["memory:timing:x created", "event:info:web"]
    # The service log: the first of each kind as a warning (each invalid category its own), the rest at debug level.
    categories = [r.levelno for r in caplog.records if "invalid category" in r.getMessage()]
    assert categories == [logging.WARNING, logging.WARNING]
