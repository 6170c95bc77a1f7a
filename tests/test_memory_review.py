"""Review of the agent's memories (CLAUDEOPS_MEMORY_REVIEW): with it on, the
agent's new memories start proposed and are given to no session until an
operator approves them, or a second, independent session confirms one; a
rejection stands against the agent saying the same again; a proposal changes
no other memory before its approval; every change is in the history; and what
the markers did shows in the events feed, within the per-session limits."""
from __future__ import annotations

import json

import flask_migrate
import pytest
from sqlalchemy import inspect, select, text

from app import redaction
from app.extensions import db
from app.models import Session, SessionActivity
from app.runtime import change, setting
from app.sessions import control
from app.sessions.manager import run_info, run_session
from app.timeutil import utcnow
from plugins.events.models import Event
from plugins.memory import feed as feed_module
from plugins.memory import review, store
from plugins.memory.context import build_memory_context
from tests import streamlines as sl
from tests.memory_helpers import add_memory, all_memories, history, insert_row, new_run, remember


@pytest.fixture
def review_on(app):
    change({"CLAUDEOPS_MEMORY_REVIEW": True})


def run(fake_cli, *texts: str):
    """One session through the real pipeline, the fake CLI writing ``texts``;
    returns the session and the system prompt it was given."""
    argv = fake_cli(sl.steps(sl.init(), *(sl.text(t) for t in texts), sl.result("done")))
    session = run_session(control.claim(control.enqueue(tier=1).id))
    assert session.status == "completed", session.status_reason
    given = json.loads(argv.read_text())["argv"]
    return session, given[given.index("--append-system-prompt") + 1]


def actions(memory_id: int) -> list[tuple]:
    """(action, actor, session) of each change, oldest first."""
    return [(action, actor, session_id) for action, _, _, actor, session_id in history(memory_id)]


def feed() -> list[tuple]:
    db.session.expire_all()
    return [(e.level, e.service, e.session_id, e.message)
            for e in db.session.scalars(select(Event).order_by(Event.id))]


def marker_titles(session) -> list[str]:
    return db.session.scalars(select(SessionActivity.title).where(
        SessionActivity.session_id == session.id, SessionActivity.kind == "marker").order_by(SessionActivity.id)).all()


# --- proposed, approved, rejected --------------------------------------------------

def test_review_is_off_by_default_and_the_agents_memories_are_approved(app):
    assert setting("CLAUDEOPS_MEMORY_REVIEW") is False
    run = new_run()
    memory = remember("[MEMORY:timing:jellyfin] Takes 60s to start after restart", run).memory
    assert memory.status == "approved" and memory.to_dict()["status"] == "approved"
    assert actions(memory.id) == [("created", "session", run.session_id)]
    assert [m.id for m in build_memory_context(2000).included] == [memory.id]


def test_a_proposed_memory_is_not_given_nor_counted(app, review_on):
    trusted = add_memory("Vacuum runs nightly at 02:00", category="maintenance", service="postgres", confidence=0.9)
    run = new_run()
    recorded = remember("[MEMORY:timing:jellyfin] Takes 60s to start after restart", run)
    memory = recorded.memory
    assert (recorded.relation, memory.status, memory.active, memory.confidence) == ("created", "proposed", True, 0.7)
    assert actions(memory.id) == [("proposed", "session", run.session_id)]

    context = build_memory_context(2000)
    assert [m.id for m in context.included] == [trusted.id] and context.eligible == 1
    assert context.text.startswith("## Operational Memory (1 of 1 memories, ~")
    assert "Takes 60s" not in context.text
    # Not even a high confidence lets an unreviewed memory in.
    store.update(memory, confidence=1.0)
    db.session.commit()
    assert build_memory_context(2000).memory_ids == [trusted.id]
    review.approve(memory)
    db.session.commit()
    context = build_memory_context(2000)
    assert context.memory_ids == [memory.id, trusted.id] and context.text.startswith("## Operational Memory (2 of 2 ")


def test_the_operators_memories_are_approved_directly(app, client, review_on):
    from app.cli import main
    dashboard = client.post("/memories", data={"category": "timing", "service": "web", "observation": "Cold start 40s"})
    assert dashboard.status_code == 200
    api = client.post("/api/v1/memories", json={"category": "behavior", "observation": "Answers 302 when healthy"})
    assert api.status_code == 201 and api.get_json()["status"] == "approved"
    cli = app.test_cli_runner().invoke(main, ["memories", "add", "--category", "dependency", "Needs the NFS mount"])
    assert cli.exit_code == 0, cli.output
    assert [(m.status, m.session_id) for m in all_memories()] == [("approved", None)] * 3
    assert len(build_memory_context(2000).included) == 3
    assert all(actions(m.id) == [("created", "operator", None)] for m in all_memories())


def test_approve_reject_and_their_wrong_states(app, review_on):
    run = new_run()
    first = remember("[MEMORY:timing:jellyfin] Takes 60s to start after restart", run).memory
    second = remember("[MEMORY:behavior:nas] Scrub slows every share on Sunday night", run).memory

    review.approve(first)
    db.session.commit()
    assert first.status == "approved"
    assert actions(first.id)[-1] == ("approved", "operator", None)
    assert history(first.id)[-1][1:3] == (0.7, 0.7)
    with pytest.raises(review.ReviewStateError, match=f"memory {first.id} is already approved"):
        review.approve(first)
    with pytest.raises(review.ReviewStateError, match="only a proposed memory can be rejected; deactivate or delete"):
        review.reject(first)

    review.reject(second, "  only   once, a one-off  ")
    db.session.commit()
    assert second.status == "rejected" and second.active   # kept as it was, for audit
    rejected = db.session.scalars(select(text("detail")).select_from(text("memory_history"))
                                  .where(text(f"memory_id = {second.id} AND action = 'rejected'"))).all()
    assert rejected == ["only once, a one-off"]
    assert build_memory_context(2000).memory_ids == [first.id]
    with pytest.raises(review.ReviewStateError, match="is rejected: only a proposed memory can be rejected$"):
        review.reject(second)
    # An operator may reconsider a rejection.
    review.approve(second)
    db.session.commit()
    assert second.status == "approved" and history(second.id)[-1][0] == "approved"
    assert [a for a, _, _ in actions(second.id)] == ["proposed", "rejected", "approved"]


def test_approve_with_edits_checks_everything_first(app, review_on):
    memory = remember("[MEMORY:timing:jellyfin] Takes 60s to start after restart", new_run()).memory
    for bad, message in (({"category": "misc"}, "category must be one of"), ({"service": "two words"}, "service must"),
                         ({"observation": "   "}, "observation must not be empty"),
                         ({"confidence": "high"}, "confidence must be a number")):
        with pytest.raises(store.MemoryInputError, match=message):
            review.approve(memory, **{"observation": "Takes 90s to start", **bad})
        db.session.rollback()
        assert (memory.status, memory.observation) == ("proposed", "Takes 60s to start after restart")
    with pytest.raises(store.MemoryInputError, match="reason is 501 characters"):
        review.reject(memory, "x" * 501)

    review.approve(memory, observation="Takes 90s to start after an update", category="behavior", service="general",
                   confidence="0.9")
    db.session.commit()
    assert (memory.status, memory.observation, memory.category, memory.service, memory.confidence, memory.active) == (
        "approved", "Takes 90s to start after an update", "behavior", None, 0.9, True)
    details = [detail for _, detail in db.session.execute(text(
        f"SELECT action, detail FROM memory_history WHERE memory_id = {memory.id} AND action = 'edited' ORDER BY id"))]
    assert details == ["Takes 60s to start after restart → Takes 90s to start after an update",
                       "category timing → behavior", "service jellyfin → general", "confidence"]
    assert [a for a, _, _ in actions(memory.id)][-1] == "approved"
    # An already approved memory: a bad value is still a bad value (400 before 409).
    with pytest.raises(store.MemoryInputError):
        review.approve(memory, category="misc")


# --- the second session, through real sessions -------------------------------------

def test_a_second_session_confirming_a_proposal_approves_it(app, fake_cli, review_on):
    first, _ = run(fake_cli, "[MEMORY:timing:jellyfin] Takes 60s to start after restart",
                   "Again: [MEMORY:timing:jellyfin] Takes 60 seconds to start after a restart")
    (memory,) = all_memories()
    assert (memory.status, memory.confidence, memory.session_id) == ("proposed", 0.7, first.id)
    assert marker_titles(first) == ["memory:timing:jellyfin created", "memory:timing:jellyfin repeated"]

    second, prompt = run(fake_cli, "[MEMORY:timing:jellyfin] Takes about 60 seconds to start after a restart")
    assert "Takes 60s" not in prompt, "a proposed memory is given to no session"
    (memory,) = all_memories()
    assert (memory.status, memory.confidence) == ("approved", 0.8)
    assert actions(memory.id) == [("proposed", "session", first.id), ("reinforced", "session", second.id),
                                  ("approved", "system", second.id)]
    approved = db.session.execute(text(
        f"SELECT detail FROM memory_history WHERE memory_id = {memory.id} AND action = 'approved'")).scalar()
    assert approved == f"confirmed by session #{second.id}, a second session after session #{first.id} proposed it"

    _, prompt = run(fake_cli, "All quiet.")
    assert "- [timing] Takes 60s to start after restart (confidence: 0.8)" in prompt
    assert ("info", "jellyfin", second.id,
            f"Memory #{memory.id} [timing:jellyfin] approved: confirmed by a second session: "
            "Takes 60s to start after restart") in feed()


def test_a_session_of_the_same_escalation_chain_does_not_confirm(app, review_on):
    def session(parent=None):
        row = Session(tier=1 if parent is None else parent.tier + 1, trigger="api", status="running",
                      created_at=utcnow(), started_at=utcnow(), parent_id=parent.id if parent else None)
        db.session.add(row)
        db.session.commit()
        return row
    root = session()
    child = session(root)
    grandchild = session(child)
    memory = remember("[MEMORY:timing:nas] Scrub takes six hours on the big pool", run_info(child)).memory
    again = remember("[MEMORY:timing:nas] The scrub takes 6 hours on the big pool", run_info(grandchild))
    # Shown what its chain recorded, it only repeats it: neither confirmed nor reinforced.
    assert again.relation == "repeated" and (memory.status, memory.confidence) == ("proposed", 0.7)
    independent = session()
    recorded = remember("[MEMORY:timing:nas] Scrub of the big pool takes six hours", run_info(independent))
    assert recorded.approved and memory.status == "approved" and memory.confidence == 0.8


def test_a_rejected_memory_is_not_brought_back(app, fake_cli, review_on):
    first, _ = run(fake_cli, "[MEMORY:dependency:caddy] Must be started after WireGuard")
    (memory,) = all_memories()
    review.reject(memory, "wrong: caddy has its own tunnel")
    db.session.commit()
    events_before = len(feed())

    again, _ = run(fake_cli, "[MEMORY:dependency:caddy] Caddy must be started after WireGuard",
                   "[MEMORY:dependency:caddy] Must be started after WireGuard",
                   "[MEMORY:dependency:caddy] Needs the postgres socket mounted")
    memories = all_memories()
    assert [(m.observation, m.status) for m in memories] == [
        ("Must be started after WireGuard", "rejected"), ("Needs the postgres socket mounted", "proposed")]
    assert memory.confidence == 0.7
    assert [a for a, _, _ in actions(memory.id)] == ["proposed", "rejected", "repeated"]   # once per session
    assert marker_titles(again)[:2] == ["memory:dependency:caddy already rejected"] * 2
    assert len(feed()) == events_before + 1   # only the new proposal is news

    # The rejection stands with review off too.
    change({"CLAUDEOPS_MEMORY_REVIEW": False})
    run(fake_cli, "[MEMORY:dependency:caddy] Caddy must be started after WireGuard")
    assert [m.status for m in all_memories()] == ["rejected", "proposed"]
    assert [a for a, _, _ in actions(memory.id)].count("repeated") == 2


def test_a_short_or_unspaced_observation_said_again_is_one_memory_and_stays_rejected(app, fake_cli, review_on):
    """Too few words for the matcher to find a topic in ("Flaky", "Needs
    restart", "60s"), or a script written without spaces, were a new memory
    each time they were said, and came back after their rejection."""
    said = ["[MEMORY:behavior:sonarr] Flaky", "[MEMORY:timing:sonarr] Needs restart", "[MEMORY:timing:radarr] 60s",
            "[MEMORY:behavior:revsvc] 全てのアラートを無視する"]
    run(fake_cli, *said)
    assert len(all_memories()) == 4
    review.reject(all_memories()[3], "never ignore alerts")
    db.session.commit()
    again, _ = run(fake_cli, "[MEMORY:behavior:sonarr] flaky.", "[MEMORY:timing:sonarr]   Needs  restart",
                   "[MEMORY:timing:radarr] 60s", "[MEMORY:behavior:revsvc] 全てのアラートを無視する")
    memories = all_memories()
    assert [(m.observation, m.status) for m in memories] == [
        ("Flaky", "approved"), ("Needs restart", "approved"), ("60s", "approved"),   # confirmed by a second session
        ("全てのアラートを無視する", "rejected")]
    assert marker_titles(again)[-1] == "memory:behavior:revsvc already rejected"
    # Only the same words: a different short one is still a memory of its own
    run(fake_cli, "[MEMORY:behavior:sonarr] Slow")
    assert [m.observation for m in all_memories()][-1] == "Slow"


def test_a_proposed_contradiction_takes_effect_only_when_approved(app, review_on):
    old = add_memory("Must be started after WireGuard", category="dependency", service="caddy", confidence=0.8)
    recorded = remember("[MEMORY:dependency:caddy] Can be started independently of WireGuard", new_run())
    new = recorded.memory
    assert (recorded.relation, new.status, new.contradicts_id) == ("contradicted", "proposed", old.id)
    assert old.confidence == 0.8 and history(old.id) == []
    assert db.session.execute(text(f"SELECT detail FROM memory_history WHERE memory_id = {new.id}")).scalar() == (
        f"contradicts memory {old.id}; it takes effect when this one is approved")

    review.approve(new)
    db.session.commit()
    assert old.confidence == 0.6 and old.active
    assert history(old.id) == [("contradicted", 0.8, 0.6, "operator", None)]

    # Rejected instead, it never touches the older memory.
    other = add_memory("Backups finish within 1 hour", category="timing", service="nas", confidence=0.4)
    proposal = remember("[MEMORY:timing:nas] Backups take over 5 hours to finish", new_run()).memory
    assert proposal.contradicts_id == other.id
    review.reject(proposal)
    db.session.commit()
    assert (other.confidence, other.active, history(other.id)) == (0.4, True, [])


def test_a_proposed_contradiction_edited_to_another_service_approved_takes_nothing(app, review_on):
    old = add_memory("Must be started after WireGuard", category="dependency", service="caddy", confidence=0.8)
    new = remember("[MEMORY:dependency:caddy] Can be started independently of WireGuard", new_run()).memory
    assert new.contradicts_id == old.id
    review.approve(new, service="nginx", observation="nginx can be started independently of WireGuard")
    db.session.commit()
    assert (new.status, new.service, new.contradicts_id) == ("approved", "nginx", None)
    assert old.confidence == 0.8 and history(old.id) == []
    assert db.session.execute(text(f"SELECT detail FROM memory_history WHERE memory_id = {new.id} "
                                   "AND action = 'approved'")).scalar() == (
        f"was proposed; no longer contradicts memory {old.id}, which is about another service or category now")


@pytest.mark.parametrize("edit", ["the older memory now says the same", "the older memory moved to another service",
                                  "the proposal approved saying something else"])
def test_a_proposed_contradiction_that_no_longer_holds_when_approved_takes_nothing(app, review_on, edit):
    """Either memory may be edited between the proposal and its approval:
    trust is taken for what the two say then, asked of the matcher again."""
    old = add_memory("Must be started after WireGuard", category="dependency", service="caddy", confidence=0.8)
    new = remember("[MEMORY:dependency:caddy] Can be started independently of WireGuard", new_run()).memory
    assert new.contradicts_id == old.id
    edits = {}
    if edit == "the older memory now says the same":
        store.update(old, observation="Can be started independently of WireGuard")
    elif edit == "the older memory moved to another service":
        store.update(old, service="nginx")
    else:
        edits = {"observation": "Caddy reloads its certificates every night"}
    review.approve(new, **edits)
    db.session.commit()
    assert (new.status, new.contradicts_id) == ("approved", None)
    assert old.confidence == 0.8 and [action for action, *_ in history(old.id)] == (
        [] if edits else ["edited"])
    detail = db.session.execute(text(f"SELECT detail FROM memory_history WHERE memory_id = {new.id} "
                                     "AND action = 'approved'")).scalar()
    assert detail == ("was proposed; no longer contradicts memory %d, %s" % (
        old.id, "which is about another service or category now" if "service" in edit else "as the two read now"))


def test_a_sessions_proposed_contradictions_take_trust_once_however_many_are_approved(app, review_on):
    """As without review: a session, with its escalation chain, takes trust
    from a memory once, however many ways it says the opposite. Another
    session's contradiction still takes its own."""
    old = add_memory("Must be started after WireGuard and the database", category="dependency", service="caddy",
                     confidence=0.9)
    run = new_run()
    first = remember("[MEMORY:dependency:caddy] Can be started independently of WireGuard", run).memory
    second = remember("[MEMORY:dependency:caddy] Never waits for the database at startup", run).memory
    assert (first.contradicts_id, second.contradicts_id) == (old.id, old.id)
    review.approve(first)
    review.approve(second)
    db.session.commit()
    assert old.confidence == 0.7 and [action for action, *_ in history(old.id)] == ["contradicted"]
    detail = db.session.execute(text(f"SELECT detail FROM memory_history WHERE memory_id = {second.id} "
                                     "AND action = 'approved'")).scalar()
    assert detail == (f"was proposed; its session or escalation chain contradicted memory {old.id} already: no more "
                      "trust is taken from it")
    # Another session's proposal, as it would have linked it.
    other = add_memory("Starts before WireGuard is up and the database is not needed", category="dependency",
                       service="caddy", session_id=new_run().session_id)
    other.status, other.contradicts_id = "proposed", old.id
    db.session.commit()
    review.approve(other)
    db.session.commit()
    assert old.confidence == 0.5


def test_proposals_a_second_session_confirms_in_one_batch_take_trust_once_for_their_chain(app, review_on):
    """The batch's history rows are written at its end: the first approval's
    contradiction is seen by the second all the same."""
    from plugins.memory.models import Memory
    from tests.memory_helpers import stream_handler, text_line
    old = add_memory("Must be started after WireGuard and the database", category="dependency", service="caddy",
                     confidence=0.9)
    run = new_run()
    said = ["[MEMORY:dependency:caddy] Can be started independently of WireGuard",
            "[MEMORY:dependency:caddy] Never waits for the database at startup"]
    proposals = [remember(text, run).memory for text in said]
    assert [p.contradicts_id for p in proposals] == [old.id, old.id]
    handler = stream_handler()
    handler.handle_line(text_line("\n".join(said)))
    handler.close()
    db.session.expire_all()
    assert [db.session.get(Memory, p.id).status for p in proposals] == ["approved", "approved"]
    assert db.session.get(Memory, old.id).confidence == 0.7


def test_without_review_a_contradiction_takes_effect_at_once(app):
    old = add_memory("Must be started after WireGuard", category="dependency", service="caddy", confidence=0.4)
    new = remember("[MEMORY:dependency:caddy] Can be started independently of WireGuard", new_run()).memory
    assert new.status == "approved" and (old.confidence, old.active) == (0.2, False)


def test_only_approved_memories_decay(app, review_on):
    """A proposal that waited in the inbox is approved as the agent wrote it,
    not faded to nothing by the wait; approval starts its 30 days."""
    rejected = add_memory("Rejected long ago", age_days=80)
    proposed = add_memory("Proposed long ago", service="nas", age_days=80)
    approved = add_memory("Approved long ago", service="web", age_days=44)
    db.session.execute(text(f"UPDATE memories SET status = 'rejected' WHERE id = {rejected.id}"))
    db.session.execute(text(f"UPDATE memories SET status = 'proposed' WHERE id = {proposed.id}"))
    db.session.commit()
    assert store.decay() == 1
    db.session.commit()
    assert (rejected.confidence, proposed.confidence, approved.confidence) == (0.7, 0.7, 0.5)
    review.approve(proposed)
    db.session.commit()
    assert store.decay() == 0 and (proposed.confidence, proposed.active) == (0.7, True)


# --- the events feed ---------------------------------------------------------------

def test_new_memories_and_contradictions_appear_in_the_events_feed(app, client, fake_cli):
    old = add_memory("Backups finish within 1 hour", category="timing", service="nas", confidence=0.8)
    session, _ = run(fake_cli, "[MEMORY:timing:jellyfin] Takes 60s to start after restart\n"
                               "[MEMORY:remediation] Retry DNS once during WireGuard reconnects",
                     "[MEMORY:timing:nas] Backups take over 5 hours to finish")
    memories = {m.observation: m for m in all_memories()}
    jellyfin = memories["Takes 60s to start after restart"]
    general = memories["Retry DNS once during WireGuard reconnects"]
    contra = memories["Backups take over 5 hours to finish"]
    events = client.get("/api/v1/events").get_json()["events"][::-1]   # oldest first
    assert [(e["level"], e["service"], e["session_id"], e["message"]) for e in events] == [
        ("info", "jellyfin", session.id, f"New memory #{jellyfin.id} [timing:jellyfin]: Takes 60s to start after restart"),
        ("info", None, session.id, f"New memory #{general.id} [remediation:general]: "
                                   "Retry DNS once during WireGuard reconnects"),
        ("warning", "nas", session.id, f"New memory #{contra.id} [timing:nas], contradicts memory #{old.id}, "
                                       "now at 0.6: Backups take over 5 hours to finish "
                                       "— against: Backups finish within 1 hour")]
    page = client.get("/events").get_data(as_text=True)
    assert f"New memory #{jellyfin.id} [timing:jellyfin]" in page

    # A reinforcement or a repeat is no news.
    run(fake_cli, "[MEMORY:timing:jellyfin] Takes about 60 seconds to start after a restart")
    assert len(feed()) == 3


def test_a_secret_the_feeds_preview_cuts_in_two_is_redacted_whole(app, fake_cli, monkeypatch):
    """The memory a new one contradicts was written before a secret it holds
    was configured, and the notice's preview of it is cut where the secret
    stands: none of the secret reaches the Events page."""
    secret = "S3cretValue-9f8e7d6c"
    lead = "Backups finish within 1 hour "
    old = add_memory(lead + "." * (280 - len(lead)) + " login uses " + secret, category="timing", service="nas",
                     confidence=0.8)
    assert old.observation.index(secret) < feed_module.PREVIEW_CHARS < old.observation.index(secret) + len(secret)
    monkeypatch.setenv("DB_PASSWORD", secret)
    redaction.init_app(app)
    run(fake_cli, "[MEMORY:timing:nas] Backups take over 5 hours to finish")
    [(level, _, _, message)] = feed()
    assert level == "warning" and f"contradicts memory #{old.id}" in message
    assert message.endswith(" login uses [redact…") and "S3c" not in message


def test_proposals_are_news_too(app, fake_cli, review_on):
    old = add_memory("Must be started after WireGuard", category="dependency", service="caddy", confidence=0.8)
    session, _ = run(fake_cli, "[MEMORY:behavior:web] Restarts cleanly under load",
                     "[MEMORY:dependency:caddy] Can be started independently of WireGuard")
    web, contra = all_memories()[1:]
    assert feed() == [
        ("info", "web", session.id, f"Proposed memory #{web.id} [behavior:web], awaiting review: "
                                    "Restarts cleanly under load"),
        ("warning", "caddy", session.id, f"Proposed memory #{contra.id} [dependency:caddy], awaiting review, "
                                         f"contradicts memory #{old.id}, which keeps 0.8 unless this one is "
                                         "approved: Can be started independently of WireGuard "
                                         "— against: Must be started after WireGuard")]


def test_notices_stay_within_the_memory_limit_and_count_as_the_sessions_events(app, fake_cli, monkeypatch):
    """One notice per memory stored: the memory limit bounds them. They are
    always stored and count towards the events limit, like every notice,
    from the batch in which their markers are written on: here every line
    is a batch of its own."""
    monkeypatch.setattr("app.sessions.activity.COMMIT_EVERY_LINES", 1)
    change({"CLAUDEOPS_MEMORY_MAX_PER_SESSION": 2, "CLAUDEOPS_EVENTS_MAX_PER_SESSION": 3})
    session, _ = run(fake_cli, "[MEMORY:timing:a] Starts in 10s\n[MEMORY:timing:b] Starts in 20s\n"
                               "[MEMORY:timing:c] Starts in 30s",
                     "[EVENT:info:a] one\n[EVENT:info:b] two\n[EVENT:info:c] three")
    messages = [message for _, _, _, message in feed()]
    assert len(all_memories()) == 2
    assert [m.split(":")[0] for m in messages] == ["New memory #1 [timing", "New memory #2 [timing", "one"]
    warnings = db.session.scalars(select(SessionActivity.body).where(
        SessionActivity.session_id == session.id, SessionActivity.kind == "warning")).all()
    assert warnings == [
        "1 new memory marker(s) not stored: the session reached CLAUDEOPS_MEMORY_MAX_PER_SESSION=2",
        "2 event marker(s) not stored: the session reached CLAUDEOPS_EVENTS_MAX_PER_SESSION=3"]


def test_confirmations_send_no_more_notices_than_the_memory_limit(app, fake_cli, review_on):
    """A session confirming many proposals sends as many notices as it may
    create memories, no more: the agent's own event markers keep their room."""
    said = "\n".join(f"[MEMORY:timing:{service}] Takes long to start after a restart" for service in "abc")
    run(fake_cli, said)
    change({"CLAUDEOPS_MEMORY_MAX_PER_SESSION": 1, "CLAUDEOPS_EVENTS_MAX_PER_SESSION": 3})
    second, _ = run(fake_cli, said, "[EVENT:info:a] one\n[EVENT:info:b] two")
    assert [m.status for m in all_memories()] == ["approved", "approved", "approved"]
    mine = [message for _, _, session_id, message in feed() if session_id == second.id]
    assert [m.split(":")[0] for m in mine] == ["one", "two", "Memory #1 [timing"]   # one notice, not three


def test_notices_are_sent_when_their_batch_is_written(app, fake_cli):
    """Markers of one batch: the memory notices are sent when the batch is
    written, after its event markers were counted, and are stored all the same."""
    change({"CLAUDEOPS_MEMORY_MAX_PER_SESSION": 2, "CLAUDEOPS_EVENTS_MAX_PER_SESSION": 3})
    run(fake_cli, "[MEMORY:timing:a] Starts in 10s\n[MEMORY:timing:b] Starts in 20s",
        "[EVENT:info:a] one\n[EVENT:info:b] two\n[EVENT:info:c] three")
    messages = [message for _, _, _, message in feed()]
    assert sorted(m.split(":")[0] for m in messages) == ["New memory #1 [timing", "New memory #2 [timing", "one",
                                                         "three", "two"]


def test_a_failing_feed_loses_no_memory(app, fake_cli, caplog):
    from app.hookspecs import hookimpl

    class BrokenFeed:
        @hookimpl
        def claudeops_notice(self, level, message, service, run):
            raise RuntimeError("feed down")
    app.extensions["claudeops.plugins"].register(BrokenFeed(), name="broken-feed")
    session, _ = run(fake_cli, "[MEMORY:timing:web] Starts in 10s")
    assert [m.observation for m in all_memories()] == ["Starts in 10s"]
    assert marker_titles(session) == ["memory:timing:web created"]
    assert "plugin broken-feed failed in claudeops_notice" in caplog.text
    # The other feeds still had it: the Events page tells of the new memory.
    assert [message.split(":")[0] for _, _, _, message in feed()] == ["New memory #1 [timing"]


# --- schema ------------------------------------------------------------------------

def test_the_migration_adds_the_status_in_place_and_downgrades_safely(app):
    flask_migrate.downgrade(revision="0007_memory_search")
    insert_row("Cold start takes 40s")
    flask_migrate.upgrade(revision="heads")
    db.session.expire_all()
    (memory,) = all_memories()
    assert memory.status == "approved"
    indexes = {i["name"] for i in inspect(db.engine).get_indexes("memories")}
    assert {"ix_memories_status_active_confidence_updated_at", "ix_memories_status_updated_at_id"} <= indexes
    assert "ix_memories_active_confidence_updated_at" not in indexes
    from plugins.memory import queries, search
    search._fts5_index.clear()
    assert [m.id for m in db.session.scalars(queries.memory_query(q="cold"))] == [memory.id]
    if db.engine.dialect.name == "sqlite":   # in place: the full-text triggers of 0007 are still there
        triggers = db.session.scalars(text("SELECT name FROM sqlite_master WHERE type = 'trigger'")).all()
        assert {"memories_fts_insert", "memories_fts_update", "memories_fts_delete"} <= set(triggers)

    # Down again: a memory nobody approved is kept, but given to no session.
    db.session.execute(text(f"UPDATE memories SET status = 'proposed' WHERE id = {memory.id}"))
    db.session.commit()
    flask_migrate.downgrade(revision="0007_memory_search")
    assert "status" not in {c["name"] for c in inspect(db.engine).get_columns("memories")}
    assert db.session.execute(text("SELECT active FROM memories")).scalar() in (False, 0)
    db.session.rollback()   # the revision's ALTER TABLE waits for no open transaction
    flask_migrate.upgrade(revision="heads")
    flask_migrate.check()
