"""Memory markers recorded a batch at a time (plugins/memory/batch.py) do
exactly what they would do recorded one by one: the same memories, the same
history, the same outcomes; and the candidates of many pairs read in one
statement are those each pair's own query reads."""
from __future__ import annotations

import random

import pytest
from sqlalchemy import select

from app import runtime
from app.extensions import db
from app.models import SessionActivity
from plugins.memory import batch, store
from plugins.memory.candidates import MAX_CANDIDATES, candidates, candidates_of_pairs
from plugins.memory.markers import parse_memory_markers
from plugins.memory.models import DEFAULT_CONFIDENCE, REJECTED, Memory, MemoryHistory
from tests.conftest import make_app
from tests.memory_helpers import add_memory, new_run, stream_handler, text_line
from tests.support.meanwhile import Meanwhile


def test_candidates_of_many_pairs_in_one_statement_are_each_pairs_own(app):
    with app.app_context():
        for n in range(MAX_CANDIDATES + 5):   # more than a marker is compared with
            add_memory(f"jellyfin timing fact {n}", confidence=round(0.3 + (n % 7) / 10, 3))
        add_memory("inactive, never a candidate", active=False, confidence=0.2)
        rejected = add_memory("rejected by the operator", service="postgres", category="behavior")
        rejected.status = REJECTED
        add_memory("live postgres behavior", service="postgres", category="behavior")
        add_memory("a general remediation", service=None, category="remediation")
        add_memory("a general timing", service=None, category="timing")
        db.session.commit()
        pairs = [("timing", "jellyfin"), ("behavior", "postgres"), ("remediation", None), ("timing", None),
                 ("dependency", "nowhere"), ("maintenance", None)]
        together = candidates_of_pairs(pairs)
        assert set(together) == set(pairs)
        for category, service in pairs:
            assert together[category, service] == candidates(category, service, rejected=True), (category, service)
        assert len(together["timing", "jellyfin"][0]) == MAX_CANDIDATES
        assert [c.observation for c in together["behavior", "postgres"][1]] == ["rejected by the operator"]


def test_candidates_of_more_pairs_than_one_statement_takes(app):
    with app.app_context():
        pairs = [("timing", f"service-{n}") for n in range(150)] + [("behavior", None)]
        for category, service in pairs[::10]:
            add_memory(f"{service} starts slowly", category=category, service=service)
        db.session.commit()
        together = candidates_of_pairs(pairs)
        assert together == {(c, s): candidates(c, s, rejected=True) for c, s in pairs}
        assert sum(len(live) for live, _ in together.values()) == len(pairs[::10])


MARKERS = """\
[MEMORY:behavior:nas] Rejected claim about the NAS fans
[MEMORY:timing:jellyfin] Jellyfin takes 60s to start after a restart
[MEMORY:timing:jellyfin] Jellyfin takes about 60 seconds to start after restart
[MEMORY:behavior:postgres] Postgres vacuum runs nightly at 02:00
[MEMORY:behavior:postgres] Postgres vacuum does not run nightly at 02:00
[MEMORY:timing:jellyfin] Jellyfin transcoding is slow on the old GPU
[MEMORY:remediation] DNS checks fail during WireGuard reconnects; retry once
[MEMORY:remediation] DNS checks fail during WireGuard reconnects; retry once before escalating
[MEMORY:behavior:nas] The NAS scrubs its pool on Sundays
[MEMORY:dependency:nextcloud] Nextcloud needs redis to be up
[MEMORY:dependency:nextcloud] Nextcloud needs postgres to be up
[MEMORY:timing:backup] Backups finish within 1 hour
[MEMORY:timing:backup] Backups finish over 3 hours
"""


def _seed() -> None:
    add_memory("Postgres vacuum runs nightly at 02:00 and takes 10 minutes", service="postgres",
               category="behavior", session_id=None)
    rejected = add_memory("Rejected claim about the NAS fans", service="nas", category="behavior")
    rejected.status = REJECTED
    add_memory("Backups finish within 1 hour", service="backup", category="timing", confidence=0.9)
    db.session.commit()


def _state():
    memories = db.session.execute(select(Memory.id, Memory.category, Memory.service, Memory.observation,
                                         Memory.confidence, Memory.active, Memory.status, Memory.contradicts_id,
                                         Memory.session_id).order_by(Memory.id)).all()
    history = db.session.execute(select(MemoryHistory.memory_id, MemoryHistory.action,
                                        MemoryHistory.confidence_before, MemoryHistory.confidence_after,
                                        MemoryHistory.detail, MemoryHistory.related_memory_id)
                                 .order_by(MemoryHistory.memory_id, MemoryHistory.id)).all()
    return memories, history


LIMITLESS = 10**6


def _record(way: str, markers, limit: int):
    """Record ``markers`` for a new session ``way`` ("batch" or "one by one",
    within the session's ``limit`` of new memories): what each did, and then
    every memory and history row."""
    run = new_run()
    if way == "batch":
        outcomes = batch.record_all(markers, run)
    else:
        outcomes, created = [], 0
        for marker in markers:
            outcome = store.record_observation(marker.category, marker.service, marker.observation, run,
                                               may_create=created < limit)
            created += outcome.relation in (store.CREATED, store.CONTRADICTED)
            outcomes.append(outcome)
    relations = [(o.relation, o.memory.id if o.memory else None, o.approved) for o in outcomes]
    db.session.commit()
    return relations, _state()


@pytest.mark.parametrize("review", ["false", "true"])
@pytest.mark.parametrize("limit", [3, 100])
def test_a_batch_records_what_one_by_one_records(tmp_path, review, limit):
    markers = parse_memory_markers(MARKERS)
    results = {}
    for way in ("one by one", "batch"):
        app = make_app(tmp_path / way.replace(" ", "-"))
        with app.app_context():
            runtime.change({"CLAUDEOPS_MEMORY_REVIEW": review, "CLAUDEOPS_MEMORY_MAX_PER_SESSION": limit})
            _seed()
            results[way] = _record(way, markers, limit)
    assert results["batch"] == results["one by one"]
    relations = [relation for relation, _, _ in results["batch"][0]]
    # The stream covers every path: a new memory, a repeat of it, a contradiction,
    # a reinforcement, what the operator rejected, and (at 3) the limit.
    assert {store.CREATED, store.REPEATED, store.CONTRADICTED, store.REINFORCED, store.ALREADY_REJECTED} <= \
        set(relations)
    assert (store.REFUSED in relations) == (limit == 3)


@pytest.mark.parametrize("limit", [3, 100])
def test_markers_said_again_and_again_record_what_one_by_one_records_reading_once_per_change(
        tmp_path, monkeypatch, limit):
    """A pair's candidates are read again after a marker changed them, and
    then kept while the markers after it change nothing (a repeat, a
    refusal, a rejected memory said again). Before, a memory said 60,000
    times in one text block read them 60,000 times (some 10 s)."""
    markers = parse_memory_markers(MARKERS)
    stream = [marker for marker in markers for _ in range(3)] + markers + [markers[0]] * 500
    reads = []

    def counted(pairs):
        reads.append(len(pairs))
        return candidates_of_pairs(pairs)

    results = {}
    for way in ("one by one", "batch"):
        app = make_app(tmp_path / way.replace(" ", "-"))
        with app.app_context():
            runtime.change({"CLAUDEOPS_MEMORY_MAX_PER_SESSION": limit})
            _seed()
            if way == "batch":
                monkeypatch.setattr(batch, "candidates_of_pairs", counted)
            results[way] = _record(way, stream, limit)
    assert results["batch"] == results["one by one"]
    relations = [relation for relation, _, _ in results["batch"][0]]
    changes = sum(relation in batch.CHANGES_CANDIDATES for relation in relations)
    assert len(set(relations[-500:])) == 1 and relations[-1] not in batch.CHANGES_CANDIDATES   # said again: no change
    # The first read of every pair, then at most one for each change.
    assert len(reads) <= 1 + changes and reads[0] == len({(m.category, m.service) for m in markers})


def test_what_a_failed_session_left_queued_is_dropped_when_it_finishes(app):
    """Markers queued after the stream's last commit (the database refused it)
    are never written: the host drops them as the session ends, for memory and cooldowns."""
    import plugins.cooldowns as cooldowns
    import plugins.memory as memory
    from app.marker_queue import drop_session
    with app.app_context():
        run = new_run()
        assert memory.claudeops_markers("[MEMORY:timing:web] Starts in 40s", run)
        assert cooldowns.claudeops_markers("[COOLDOWN:restart:web] success", run)
        drop_session(run.session_id)
        assert batch.QUEUE.take(run) == [] and cooldowns.QUEUE.take(run) == []
        memory.claudeops_markers_flush(run)
        cooldowns.claudeops_markers_flush(run)
        db.session.commit()
        assert db.session.scalars(select(Memory)).all() == []


def test_a_batchs_bulk_inserts_are_redacted_as_a_flush_would_redact_them(tmp_path, monkeypatch):
    """New memories and history rows of a batch skip the flush, and so the
    redaction listener: they are redacted on their way in all the same."""
    secret = "vault-Zq8-batch-secret-7d1f"
    monkeypatch.setenv("BACKUP_SERVICE_TOKEN", secret)   # caught by the default pattern *_TOKEN
    app = make_app(tmp_path)
    with app.app_context():
        rejected = add_memory(f"Backups use key {secret} for the offsite copy", service="backup",
                              category="behavior")
        rejected.observation = "Backups use the offsite key"   # as an operator edited it
        rejected.status = REJECTED
        db.session.commit()
        markers = parse_memory_markers(f"[MEMORY:timing:backup] Backups with key {secret} take 2 hours\n"
                                       f"[MEMORY:behavior:backup] Backups use the offsite key {secret}")
        outcomes = batch.record_all(markers, new_run())
        db.session.commit()
        assert [o.relation for o in outcomes] == [store.CREATED, store.ALREADY_REJECTED]
        stored = db.session.scalars(select(Memory.observation).order_by(Memory.id)).all()
        history = db.session.scalars(select(MemoryHistory.detail).where(MemoryHistory.detail.is_not(None))).all()
        assert len(stored) == 2 and any("take 2 hours" in text for text in stored)
        assert history and any("said again after its rejection" in text for text in history)
        assert not [text for text in stored + history if secret in text]


def test_a_contradiction_then_a_confirmed_proposal_against_the_same_memory_as_one_by_one(tmp_path):
    """The contradiction takes its trust at once, as it would alone: the
    confirmed proposal that contradicts the same memory then finds it
    inactive and takes nothing more."""
    markers = parse_memory_markers("[MEMORY:behavior:postgres] Postgres vacuum does not run nightly at 02:00\n"
                                   "[MEMORY:timing:web] Web answers within 30s after a deploy")
    results = {}
    for way in ("one by one", "batch"):
        app = make_app(tmp_path / way.replace(" ", "-"))
        with app.app_context():
            target = add_memory("Postgres vacuum runs nightly at 02:00", service="postgres", category="behavior",
                                confidence=0.4)
            proposer = new_run()
            proposal = add_memory("Web answers within 30s after a deploy", service="web", category="timing",
                                  session_id=proposer.session_id)
            proposal.status, proposal.contradicts_id = "proposed", target.id
            db.session.commit()
            results[way] = _record(way, markers, LIMITLESS)
    assert results["batch"] == results["one by one"]
    relations, (memories, history) = results["batch"]
    assert [(relation, approved) for relation, _, approved in relations] == [(store.CONTRADICTED, False),
                                                                            (store.REINFORCED, True)]
    target_row = next(m for m in memories if m.observation == "Postgres vacuum runs nightly at 02:00")
    assert (target_row.confidence, target_row.active) == (0.2, False)
    assert [h.action for h in history if h.memory_id == target_row.id] == ["contradicted", "deactivated"]


# A long stream of markers over a few services and categories, drawn so
# that every path is taken many times and in every order: a pair with more
# live memories than a marker is compared with (so which memories are the
# candidates shifts as confidences move), repeats of memories the same
# batch created, contradictions of them, rejected memories said again, and
# proposals a second session confirms.
THINGS = ("cache", "queue", "mount", "certificate", "replica", "index", "cron job", "socket")
ACTIONS = ("expires", "drains", "resyncs", "rebuilds", "restarts", "stalls")
PAIRS = (("timing", "web"), ("behavior", "web"), ("timing", None), ("dependency", "nas"))


def _observation(rng, service) -> str:
    """Of 48 topics; one in four negated, and one of three durations: a
    repeat, a contradiction or a new topic, each often."""
    negated = "never " if rng.random() < 0.25 else ""
    return (f"{(service or 'the proxy').capitalize()} {rng.choice(THINGS)} {negated}{rng.choice(ACTIONS)} "
            f"after {rng.choice((5, 30, 90))} minutes")


def _random_markers(rng, count: int, restated: list[Memory]) -> str:
    """``count`` markers, and each of ``restated`` said again somewhere among them."""
    said = [(category, service, _observation(rng, service)) for category, service in
            (rng.choice(PAIRS) for _ in range(count))]
    for memory in restated:
        said.insert(rng.randrange(len(said) + 1), (memory.category, memory.service, memory.observation))
    return "\n".join(f"[MEMORY:{category}:{service or 'general'}] {text}" for category, service, text in said)


def _random_seed(rng, proposer_session_id: int) -> list[Memory]:
    """The memories the stream starts from; returns the proposed ones."""
    # Most at the confidence a new memory starts with, past the most a marker
    # is compared with: where a new one goes among equals decides which are
    # the candidates.
    for _ in range(MAX_CANDIDATES + 20):
        add_memory(_observation(rng, "web"), service="web", category="timing",
                   confidence=rng.choice((0.5, DEFAULT_CONFIDENCE, DEFAULT_CONFIDENCE, DEFAULT_CONFIDENCE, 0.9)))
    proposed = []
    for category, service in PAIRS:
        for status in (REJECTED, "proposed", "approved"):
            memory = add_memory(_observation(rng, service), service=service, category=category,
                                confidence=round(rng.uniform(0.3, 0.9), 2))
            memory.status = status
            if status == "proposed":
                memory.session_id = proposer_session_id
                proposed.append(memory)
    db.session.commit()
    return proposed


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_a_long_random_batch_records_what_one_by_one_records(tmp_path, seed):
    results = {}
    for way in ("one by one", "batch"):
        rng = random.Random(seed)
        app = make_app(tmp_path / way.replace(" ", "-"))
        with app.app_context():
            runtime.change({"CLAUDEOPS_MEMORY_REVIEW": "true" if seed % 2 else "false",
                            "CLAUDEOPS_MEMORY_MAX_PER_SESSION": LIMITLESS})
            proposer = new_run()
            proposed = _random_seed(rng, proposer.session_id)
            markers = parse_memory_markers(_random_markers(rng, 150, proposed))
            results[way] = _record(way, markers, LIMITLESS)
    assert results["batch"] == results["one by one"]
    relations = [relation for relation, _, _ in results["batch"][0]]
    assert {store.CREATED, store.REPEATED, store.CONTRADICTED, store.REINFORCED, store.ALREADY_REJECTED} <= \
        set(relations), relations
    assert any(approved for _, _, approved in results["batch"][0]), "no proposal was confirmed"


# --- an operator's change while a session's batch records ---------------------

OPERATOR_ACTIONS = {
    # What a dashboard worker sends.
    "delete": lambda m: ("delete", f"/api/v1/memories/{m}", None),
    "edit confidence": lambda m: ("put", f"/api/v1/memories/{m}", {"confidence": 0.5}),
    "reject": lambda m: ("post", f"/api/v1/memories/{m}/reject", {"reason": "wrong"}),
    "approve": lambda m: ("post", f"/api/v1/memories/{m}/approve", None),
}


@pytest.mark.parametrize("action", list(OPERATOR_ACTIONS))
def test_an_operators_change_between_a_batchs_read_and_its_write_is_neither_lost_nor_losing(
        tmp_path, monkeypatch, action):
    """A dashboard worker changes the memory a session's batch reinforces,
    after the batch has read it and before the batch writes. Either comes
    first, whole: the operator's change is not overwritten by what the batch
    read before it (nor refused for a reason that is no longer true), and
    the batch loses none of its markers for it."""
    app = make_app(tmp_path)
    worker = make_app(tmp_path).test_client()   # another process's view of the same database
    with app.app_context():
        runtime.change({"CLAUDEOPS_MEMORY_REVIEW": "true"})
        older = add_memory("Jellyfin takes 60s to start after a restart")
        proposer = new_run()
        proposal = store.record_observation("timing", "jellyfin", "Jellyfin does not take 60s to start after a restart",
                                            proposer).memory
        db.session.commit()
        target = proposal.id
        handler = stream_handler()
        operator = Meanwhile(worker, *OPERATOR_ACTIONS[action](target))
        # Right after the batch has read the memories its markers name.
        monkeypatch.setattr(batch, "_ask_matcher", operator.after(batch._ask_matcher))
        handler.handle_line(text_line("[MEMORY:timing:jellyfin] Jellyfin does not take 60 seconds to start after restart\n"
                                       "[MEMORY:behavior:postgres] Postgres vacuum runs nightly at 02:00"))
        handler.close()
        answer = operator.answer()
        db.session.expire_all()
        logged = db.session.execute(select(SessionActivity.kind, SessionActivity.title)
                                    .where(SessionActivity.kind != "text")).all()
        assert [title for _, title in logged] == ["memory:timing:jellyfin reinforced", "memory:behavior:postgres created"]
        assert db.session.scalar(select(Memory).where(Memory.service == "postgres")) is not None
        memory = db.session.get(Memory, target)
        if action == "delete":
            assert answer.status_code == 200 and memory is None
        elif action == "edit confidence":
            assert answer.status_code == 200 and memory.confidence == 0.5
        elif action == "reject":
            # The batch confirmed the proposal first: the operator is told so.
            assert memory.status == ("rejected" if answer.status_code == 200 else "approved")
            assert answer.status_code == 409 and "is approved" in answer.get_json()["error"]
        else:
            assert answer.status_code == 409 and memory.status == "approved"
        # The older memory the proposal contradicts loses its 0.2 once, whoever approved it.
        contradicted = db.session.scalars(select(MemoryHistory).where(
            MemoryHistory.memory_id == older.id, MemoryHistory.action == "contradicted")).all()
        assert len(contradicted) == 1
        # Every change in the history starts from where the one before it left the memory.
        rows = db.session.scalars(select(MemoryHistory).where(MemoryHistory.memory_id == target)
                                  .order_by(MemoryHistory.id)).all()
        assert all(later.confidence_before == earlier.confidence_after for earlier, later in zip(rows, rows[1:])
                   if later.confidence_before is not None), [(r.action, r.confidence_before, r.confidence_after)
                                                             for r in rows]
