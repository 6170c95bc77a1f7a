"""The Service filters of the Events, Memories and Cooldowns pages follow
the rows: a poll that finds a service the page did not offer brings the
filter again (out of band), the operator's choice kept; a poll that finds
none brings nothing, so an open list is never closed under the pointer."""
from __future__ import annotations

import html
import json
import re

import pytest

from app.extensions import db
from app.timeutil import utcnow
from plugins.cooldowns.models import CooldownAction
from plugins.events.models import Event
from plugins.memory import store as memory_store


def add_event(service: str) -> None:
    db.session.add(Event(level="info", service=service, message="up", created_at=utcnow()))


def add_memory(service: str) -> None:
    memory_store.create("behavior", service, f"{service} listens on port 8096")


def add_cooldown(service: str) -> None:
    db.session.add(CooldownAction(service=service, action="restart", outcome="success", source="marker",
                                  created_at=utcnow()))


PAGES = {"events": ("/events", "event-service", add_event),
         "memories": ("/memories", "memory-service", add_memory),
         "cooldowns": ("/cooldowns", "cooldown-service", add_cooldown)}


def poll_headers(page: str) -> dict:
    """The headers the page's polled block sends (its hx-headers), as htmx sends them."""
    blocks = [json.loads(html.unescape(found)) for found in re.findall(r"hx-headers='([^']*)'", page)]
    [sent] = [block for block in blocks if "X-Claudeops-Choices" in block]
    return {"HX-Request": "true", **sent}


def service_select(page: str, select_id: str) -> str | None:
    found = re.search(rf'<select name="service" id="{select_id}"[^>]*>.*?</select>', page, re.S)
    return found.group(0) if found else None


def offered(select: str) -> list[str]:
    return re.findall(r'<option value="([^"]*)"', select)


@pytest.mark.parametrize("name", PAGES)
def test_a_poll_that_finds_a_new_service_brings_the_filter_again(client, name):
    url, select_id, add = PAGES[name]
    add("jellyfin")
    db.session.commit()
    page = client.get(f"{url}?service=jellyfin").get_data(as_text=True)
    assert "jellyfin" in offered(service_select(page, select_id))
    headers = poll_headers(page)

    quiet = client.get(f"{url}?service=jellyfin", headers=headers).get_data(as_text=True)
    assert "hx-swap-oob" not in quiet and service_select(quiet, select_id) is None

    add("nextcloud")
    db.session.commit()
    polled = client.get(f"{url}?service=jellyfin", headers=headers).get_data(as_text=True)
    select = service_select(polled, select_id)
    assert select is not None and 'hx-swap-oob="true"' in select
    assert {"jellyfin", "nextcloud"} <= set(offered(select))
    assert re.search(r'<option value="jellyfin" selected>', select)   # the filter in force stays chosen
    # The block it brings sends the new key: the next poll brings nothing.
    assert poll_headers(polled) != headers
    again = client.get(f"{url}?service=jellyfin", headers=poll_headers(polled)).get_data(as_text=True)
    assert service_select(again, select_id) is None


@pytest.mark.parametrize("name", PAGES)
def test_a_request_without_the_key_brings_the_filter_and_a_full_page_has_one(client, name):
    """A filter change or a pager link sends no key: the filter comes along,
    so that the key its block then carries is true."""
    url, select_id, add = PAGES[name]
    add("jellyfin")
    db.session.commit()
    fragment = client.get(url, headers={"HX-Request": "true"}).get_data(as_text=True)
    assert 'hx-swap-oob="true"' in service_select(fragment, select_id)
    full = client.get(url)
    assert full.get_data(as_text=True).count(f'id="{select_id}"') == 1
    assert "hx-swap-oob" not in full.get_data(as_text=True)
    assert "X-Claudeops-Choices" in full.headers["Vary"]
