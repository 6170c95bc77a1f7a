"""Full-text search over memories (FTS5 on SQLite, PostgreSQL's own text
search there): stemmed, prefix, every word, ranked, kept in step with every
change, in the dashboard, the API, the CLI and the agent's search tool."""
from __future__ import annotations

import flask_migrate
import pytest
from sqlalchemy import text

from app.cli import main
from app.extensions import db
from plugins.memory import search, store
from plugins.memory.queries import memory_query, newest_first
from tests.memory_helpers import add_memory, insert_row, new_run, remember


def found(q: str, **filters) -> list[str]:
    return [m.observation for m in db.session.scalars(newest_first(memory_query(q=q, **filters)))]


@pytest.fixture
def memories(app):
    return {
        "start": add_memory("Takes 60s to start after a restart", confidence=0.9),
        "nfs": add_memory("Needs the NFS mount /media before it starts", category="dependency"),
        "vacuum": add_memory("Vacuum runs Sundays at 03:00", service="postgres", category="maintenance"),
        "dns": add_memory("DNS checks fail during WireGuard reconnects", service=None, category="behavior"),
    }


def test_words_are_stemmed_and_prefixes_match(memories):
    assert found("restarts") == ["Takes 60s to start after a restart"]
    assert sorted(found("starting")) == ["Needs the NFS mount /media before it starts",
                                         "Takes 60s to start after a restart"]
    assert found("wiregu") == ["DNS checks fail during WireGuard reconnects"]
    assert found("RECONNECTING dns") == ["DNS checks fail during WireGuard reconnects"]


def test_any_beginning_of_a_word_finds_it_even_where_it_stems_otherwise(app):
    """"jelly" stems to "jelli" and "play" to "plai"; the words they begin do not."""
    add_memory("Takes 60s to restart after an update", service="jellyfin")
    add_memory("The playbook reboots one host at a time", service="ansible", category="behavior")
    assert found("jelly") == ["Takes 60s to restart after an update"]
    assert found("restarts jelly") == ["Takes 60s to restart after an update"]
    assert found("play") == ["The playbook reboots one host at a time"]
    assert found("jelly play") == []


def test_accents_are_folded_either_way(app):
    """What is typed without its accents finds the word written with them, and
    the other way round, on either database."""
    add_memory("Le proxy du café de Zürich répond lentement", service="proxy", category="behavior")
    add_memory("Resume the naive backup after the cron", service="backup", category="maintenance")
    for q in ("cafe", "zurich", "repond", "CAFÉ", "Zürich répond"):
        assert found(q) == ["Le proxy du café de Zürich répond lentement"], q
    for q in ("résumé", "naïve", "RÉSUMÉ naïve"):
        assert found(q) == ["Resume the naive backup after the cron"], q
    assert found("café backup") == []


def test_without_unaccent_postgresql_search_goes_on_without_folding(app):
    """Where migration 0017 could not create the unaccent extension, the
    indexes stay on `english` and `simple`, and search uses them."""
    if db.engine.dialect.name != "postgresql":
        pytest.skip("SQLite's FTS5 folds accents by itself")
    add_memory("Le proxy du café répond lentement", service="proxy", category="behavior")
    flask_migrate.downgrade(revision="0016_session_results_dir")
    search._pg_configurations.clear()
    try:
        assert search.pg_configurations() == search.PLAIN
        assert found("café répond") == ["Le proxy du café répond lentement"]
        assert found("cafe") == []
    finally:
        db.session.rollback()   # the searches' read locks would hold the index builds back
        flask_migrate.upgrade(revision="heads")
        search._pg_configurations.clear()
    assert search.pg_configurations() == search.FOLDING
    assert found("cafe") == ["Le proxy du café répond lentement"]


def test_every_word_must_match_and_service_and_category_count(memories):
    assert found("nfs restart") == []
    assert found("postgres sundays") == ["Vacuum runs Sundays at 03:00"]
    assert found("jellyfin dependency") == ["Needs the NFS mount /media before it starts"]
    assert found("maintenance", service="jellyfin") == []


def test_best_match_first(app):
    add_memory("Jellyfin logs a warning about transcoding when a client with an old codec connects, then goes on",
               category="behavior")
    add_memory("Transcoding fails; transcoding needs the GPU", category="behavior")
    assert found("transcoding") == ["Transcoding fails; transcoding needs the GPU",
                                    "Jellyfin logs a warning about transcoding when a client with an old codec "
                                    "connects, then goes on"]


@pytest.mark.parametrize("q", ['"', "'", "*", "(", "NEAR(", "a OR", "-x", "\\", "%_", "^", "🙂", "x" * 500])
def test_any_typed_text_is_a_search_never_an_error(memories, q):
    assert found(q) == []  # nothing here has such a word, and punctuation alone matches nothing


def test_the_index_follows_every_change(memories):
    memory = memories["vacuum"]
    store.update(memory, observation="Autovacuum handles it since version 16")
    db.session.commit()
    assert found("sundays") == [] and found("autovacuum") == ["Autovacuum handles it since version 16"]
    store.delete(memory)
    db.session.commit()
    assert found("autovacuum") == []
    remember("[MEMORY:timing:grafana] Dashboards load within 2s after a warm cache", new_run())
    assert found("dashboards warm") == ["Dashboards load within 2s after a warm cache"]


def test_search_in_the_dashboard_api_cli_and_tool(app, client, memories):
    page = client.get("/memories?q=restarting").get_data(as_text=True)
    assert "Takes 60s to start after a restart" in page and "Vacuum runs" not in page
    api = client.get("/api/v1/memories?q=sundays").get_json()
    assert [m["observation"] for m in api["memories"]] == ["Vacuum runs Sundays at 03:00"] and api["total"] == 1
    cli = app.test_cli_runner().invoke(main, ["memories", "list", "-q", "wireguard"])
    assert "DNS checks fail" in cli.output and "Takes 60s" not in cli.output
    from plugins.memory.mcp_tools import search_memories
    assert "Needs the NFS mount" in search_memories("nfs")


def test_memories_from_before_the_index_are_searchable(app):
    """The revision indexes what is already there."""
    flask_migrate.downgrade(revision="0006_read_indexes")
    insert_row("Cold start takes 40s")
    flask_migrate.upgrade(revision="heads")
    search._fts5_index.clear()
    assert found("cold") == ["Cold start takes 40s"]


def test_without_fts5_words_still_match(app, memories):
    if db.engine.dialect.name != "sqlite":
        pytest.skip("the fallback is for an SQLite built without FTS5")
    for statement in [f"DROP TRIGGER {table}_{change}" for table in ("memories_fts", "memories_words_fts")
                      for change in ("insert", "update", "delete")] + \
            ["DROP TABLE memories_fts", "DROP TABLE memories_words_fts"]:
        db.session.execute(text(statement))
    db.session.commit()
    search._fts5_index.clear()
    try:
        assert found("wireguard") == ["DNS checks fail during WireGuard reconnects"]
        assert found("%") == []
    finally:
        search._fts5_index.clear()


def test_a_memory_s_reference_finds_that_memory_alone(memories, client):
    """#12 as the table, notices and messages name a memory: the memory, not
    every text holding "12"."""
    vacuum = memories["vacuum"]
    add_memory(f"Port {vacuum.id} is closed on the firewall")   # its id as a word
    add_memory(f"Built for the m{vacuum.id} board")
    for q in (f"#{vacuum.id}", f"  #{vacuum.id} "):
        assert found(q) == ["Vacuum runs Sundays at 03:00"], q
    assert found(f"{vacuum.id}") == [f"Port {vacuum.id} is closed on the firewall"]   # digits alone are text
    assert found(f"m{vacuum.id}") == [f"Built for the m{vacuum.id} board"]   # as is the prompt's m12
    assert found(f"#{vacuum.id}", category="timing") == []   # the other filters still hold
    for q in ("#007", "m99999", f"#{2**31}", "#" + "9" * 19, "#" + "9" * 5000, "#١٢"):
        assert found(q) == [], q
    api = client.get(f"/api/v1/memories?q=%23{vacuum.id}").get_json()
    assert [m["id"] for m in api["memories"]] == [vacuum.id]
    assert client.get("/api/v1/memories?q=%23" + "9" * 5000).status_code in (200, 400)
    page = client.get(f"/memories?q=%23{vacuum.id}").get_data(as_text=True)
    assert "Vacuum runs Sundays" in page and "Takes 60s to start" not in page
    assert f'<span class="memory-id card-detail">#{vacuum.id}</span>' in page   # as the row shows it
