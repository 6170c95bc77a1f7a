"""The Cooldowns page, ``GET /api/v1/cooldowns``, the Overview card and stats:
the same state the hook enforces."""
from __future__ import annotations

from datetime import timedelta

import pytest

from app.extensions import db
from app.runtime import change
from app.sessions import control
from app.timeutil import utcnow
from plugins.cooldowns import store
from tests.support.pages import message_cells, pager_links

EVIL = '<script>alert("x")</script>'


@pytest.fixture
def seeded(app):
    """jellyfin at its restart limit (one of them reported), a denied third
    attempt, and a redeployment of sonarr the agent reported itself."""
    session = control.claim(control.enqueue(tier=2).id)
    now = utcnow()
    store.record_attempt("restart", "jellyfin", "pending", "docker restart jellyfin", session.id, 2,
                         now=now - timedelta(hours=3))
    store.record_attempt("restart", "jellyfin", "pending", "docker restart jellyfin", session.id, 2,
                         now=now - timedelta(hours=1))
    store.record_outcome("restart", "jellyfin", "failure", f"still crashing {EVIL}", session.id, 2,
                         now=now - timedelta(minutes=50))
    store.record_attempt("restart", "jellyfin", "denied", "docker restart jellyfin", session.id, 2,
                         message="Claude Ops cooldown limit reached", now=now - timedelta(minutes=10))
    store.record_outcome("redeployment", "sonarr", "success", "new image", None, 3, now=now - timedelta(hours=30))
    db.session.commit()
    return session


def test_a_service_past_a_lowered_limit_is_said_to_be_over_it(app, client, seeded):
    change({"CLAUDEOPS_COOLDOWN_RESTART_LIMIT": "1/4h"})
    services = client.get("/cooldowns").get_data(as_text=True).split('id="cooldown-services"')[1]
    jellyfin = services[services.index('data-service="jellyfin"'):]
    jellyfin = jellyfin[:jellyfin.index("</tr>")]
    assert "2 / 1 in 4h" in jellyfin and "over limit" in jellyfin and "at limit" not in jellyfin


def test_api_lists_limits_usage_and_actions(client, seeded):
    body = client.get("/api/v1/cooldowns").get_json()
    assert body["limits"] == {"restart": {"count": 2, "window": "4h", "window_seconds": 14400},
                              "redeployment": {"count": 1, "window": "24h", "window_seconds": 86400}}
    jellyfin = next(s for s in body["services"] if s["service"] == "jellyfin")
    assert jellyfin["restart"]["used"] == 2 and jellyfin["restart"]["at_limit"] is True
    assert jellyfin["restart"]["next_free_at"].endswith("Z") and jellyfin["redeployment"]["used"] == 0
    sonarr = next(s for s in body["services"] if s["service"] == "sonarr")
    assert sonarr["redeployment"]["used"] == 0           # 30 h ago: out of its 24 h window
    assert body["services"][0]["service"] == "jellyfin"   # most constrained first
    assert body["total"] == 4 and [a["outcome"] for a in body["actions"]] == ["denied", "failure", "pending",
                                                                             "success"]
    assert body["total_exact"] is True   # counted up to 10,000, as every list is
    # A service named as the docs say it may be, as the records spell it.
    for spelling in ("jellyfin.service", "Jellyfin", " jellyfin "):
        named = client.get("/api/v1/cooldowns", query_string={"service": spelling}).get_json()
        assert [s["service"] for s in named["services"]] == ["jellyfin"], spelling
        assert named["total"] > 0 and {a["service"] for a in named["actions"]} == {"jellyfin"}, spelling
    denied = body["actions"][0]
    assert denied["counted"] is False and denied["session_id"] == seeded.id and denied["tier"] == 2
    assert body["actions"][3]["source"] == "marker" and body["actions"][3]["tier"] == 3


def test_api_filters_and_pages(client, seeded):
    only = client.get("/api/v1/cooldowns?service=Jellyfin&action=restart&outcome=denied").get_json()
    assert [s["service"] for s in only["services"]] == ["jellyfin"]
    assert [(a["service"], a["outcome"]) for a in only["actions"]] == [("jellyfin", "denied")]
    assert client.get("/api/v1/cooldowns?action=redeploy").get_json()["total"] == 1
    page = client.get("/api/v1/cooldowns?limit=1&offset=1").get_json()
    assert (page["total"], page["limit"], page["offset"], len(page["actions"])) == (4, 1, 1, 1)


@pytest.mark.parametrize("query, message", [
    ("action=reboot", "action must be one of restart, redeployment, not 'reboot'"),
    ("outcome=maybe", "outcome must be one of pending, success, failure, denied, not 'maybe'"),
    ("limit=0", "limit must be at least 1"),
])
def test_api_rejects_bad_filters(client, query, message):
    response = client.get(f"/api/v1/cooldowns?{query}")
    assert response.status_code == 400 and response.get_json() == {"error": message}


def test_page_shows_usage_actions_and_denials_escaped(client, seeded):
    html = client.get("/cooldowns").get_data(as_text=True)
    assert "<h1>Cooldowns</h1>" in html and "2 restarts per 4h, 1 redeployment per 24h" in html
    services = html[html.index('id="cooldown-services"'):html.index('id="cooldown-actions"')]
    assert 'data-service="jellyfin"' in services and "2 / 2 in 4h" in services and "at limit" in services
    assert "next allowed" in services
    actions = html[html.index('id="cooldown-actions"'):]
    assert "denied" in actions and "not counted" in actions and "reported by the agent" in actions
    assert f'href="/sessions/{seeded.id}"' in actions
    assert EVIL not in html and "still crashing &lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;" in html
    assert 'hx-trigger="every 5s"' in html


def test_page_polls_a_fragment_and_keeps_filters(client, seeded):
    response = client.get("/cooldowns?outcome=denied&action=bogus", headers={"HX-Request": "true"})
    html = response.get_data(as_text=True)
    assert "HX-Request" in response.headers["Vary"]
    assert "<html" not in html and 'id="cooldown-actions"' in html
    rows = html[html.index('id="cooldown-actions"'):]
    assert rows.count('class="outcome-') == 1 and "outcome-denied" in rows   # an unknown action is ignored


def test_page_pages_through_the_actions_and_its_poll_keeps_the_page(client):
    now = utcnow()
    for n in range(1, 231):
        store.record_outcome("restart", "web" if n % 2 else "db", "success", f"a{n}", None, 1,
                             now=now - timedelta(minutes=300 - n))
    db.session.commit()

    first = client.get("/cooldowns").get_data(as_text=True)
    assert message_cells(first) == [f"a{n}" for n in range(230, 130, -1)]
    assert "230 actions, page 1 of 3" in first and pager_links(first) == {"older →": "/cooldowns?page=2"}
    second = client.get("/cooldowns?page=2").get_data(as_text=True)
    assert message_cells(second) == [f"a{n}" for n in range(130, 30, -1)]
    assert 'hx-get="/cooldowns?page=2"' in second   # its 5 s poll
    assert pager_links(second) == {"← newer": "/cooldowns", "older →": "/cooldowns?page=3"}
    third = client.get("/cooldowns?page=3").get_data(as_text=True)
    assert message_cells(third) == [f"a{n}" for n in range(30, 0, -1)] and "older →" not in third

    web = client.get("/cooldowns?service=web").get_data(as_text=True)
    assert message_cells(web) == [f"a{n}" for n in range(229, 29, -2)]
    assert pager_links(web) == {"older →": "/cooldowns?service=web&page=2"}
    assert message_cells(client.get("/cooldowns?service=web&page=2").get_data(as_text=True)) == \
        [f"a{n}" for n in range(29, 0, -2)]
    for edited in ("page=x", "page=-3", "page=99999999999999999999"):
        assert client.get(f"/cooldowns?{edited}").status_code == 200, edited


def test_a_page_past_the_last_one_says_so_and_leads_to_the_last_page(client):
    """An edited or stale link (records pruned since) past the end: the page
    says there are actions, and "newer" goes to the last page with any, not
    to the page before, as empty as this one. Its count names no page ("page
    9 of 2"): there is no such page."""
    now = utcnow()
    for n in range(1, 131):
        store.record_outcome("restart", "web", "success", f"a{n}", None, 1, now=now - timedelta(minutes=300 - n))
    db.session.commit()
    for headers in ({}, {"HX-Request": "true"}):   # the page, and its poll
        far = " ".join(client.get("/cooldowns?page=9", headers=headers).get_data(as_text=True).split())
        assert message_cells(far) == [] and "No actions." not in far
        assert "No actions on this page (there are 130)." in far
        assert pager_links(far) == {"← newer": "/cooldowns?page=2"}
        assert '<span class="card-detail" id="cooldown-count" data-announce>130 actions</span>' in far
    last = client.get("/cooldowns?page=2").get_data(as_text=True)
    assert message_cells(last) == [f"a{n}" for n in range(30, 0, -1)] and "130 actions, page 2 of 2" in last
    alone = client.get("/cooldowns?service=db&page=3").get_data(as_text=True)
    assert "No actions match these filters." in alone and pager_links(alone) == {"← newer": "/cooldowns?service=db"}


def test_page_without_any_action(client):
    html = client.get("/cooldowns").get_data(as_text=True)
    assert "No restart or redeployment in the last days" in html and "No actions." in html


def test_sidebar_lists_cooldowns_last_of_the_built_ins(client):
    html = client.get("/").get_data(as_text=True)
    nav = html[html.index('<nav class="sidebar"'):html.index("</nav>")]
    labels = [label for label in ("Overview", "Sessions", "Events", "Memories", "Cooldowns") if label in nav]
    assert labels == ["Overview", "Sessions", "Events", "Memories", "Cooldowns"]
    assert nav.index("Memories") < nav.index("Cooldowns")


def test_overview_card_names_services_at_their_limit(client, seeded):
    html = client.get("/").get_data(as_text=True)
    cards = html[html.index('<section id="overview-cards" class="cards"'):]
    card = cards[cards.index('<a href="/cooldowns">Cooldowns</a>'):]
    card = card[:card.index("</article>")]
    assert "1 at limit" in card and "at the limit: jellyfin" in card


def test_overview_card_when_all_is_calm(client):
    html = client.get("/").get_data(as_text=True)
    assert "0 at limit" in html and "no service is at its restart or redeployment limit" in html


def test_stats_count_services_at_limit_and_denials(client, seeded):
    stats = client.get("/api/v1/stats").get_json()
    assert stats["cooldown_services_at_limit"] == 1 and stats["cooldown_denials_24h"] == 1


def test_limits_can_be_changed_on_the_config_api_and_are_validated(client, seeded):
    bad = client.put("/api/v1/config", json={"CLAUDEOPS_COOLDOWN_RESTART_LIMIT": "often"})
    assert bad.status_code == 400 and "CLAUDEOPS_COOLDOWN_RESTART_LIMIT='often': must be <count>/<window>" in \
        bad.get_json()["error"]
    huge = client.put("/api/v1/config", json={"CLAUDEOPS_COOLDOWN_RESTART_LIMIT": "1/99999999999999999999d"})
    assert huge.status_code == 400 and "the window must be at most 366d" in huge.get_json()["error"]
    assert client.put("/api/v1/config", json={"CLAUDEOPS_COOLDOWN_RESTART_LIMIT": "3/4h"}).status_code == 200
    body = client.get("/api/v1/cooldowns?service=jellyfin").get_json()
    assert body["limits"]["restart"]["count"] == 3
    assert body["services"][0]["restart"]["remaining"] == 1 and body["services"][0]["restart"]["at_limit"] is False
