"""Throwaway databases of a chosen size.

Each is a real state directory with a SQLite file migrated by the real
Alembic revisions, filled with bulk inserts (Core ``insert`` with
executemany, never the ORM one row at a time) so that a million events take
seconds. The rows look like a service that has run for a year: many
services, every level and category, confidences all over the range, and
memories already decayed as far as their age asks (as each session start
leaves them).
"""
from __future__ import annotations

import random
from datetime import timedelta
from pathlib import Path

import flask_migrate
from flask import Flask
from sqlalchemy import func, insert, select

from app import create_app
from app.extensions import db
from app.timeutil import utcnow
from plugins.events.models import Event
from plugins.memory import store
from plugins.memory.models import ACTIVE_THRESHOLD, CATEGORIES, Memory, next_decay_due

CHUNK_ROWS = 20_000
SERVICES = tuple(
    "jellyfin postgres nginx traefik redis grafana prometheus loki minio gitea nextcloud vaultwarden "
    "homeassistant mosquitto zigbee2mqtt pihole unbound wireguard syncthing immich paperless sonarr "
    "radarr prowlarr qbittorrent plex navidrome authelia keycloak mariadb mongodb rabbitmq kafka "
    "elasticsearch kibana jenkins drone registry portainer backup".split())
SUBJECTS = ("Takes", "Needs", "Fails", "Recovers", "Restarts", "Reports", "Holds", "Drops", "Loses", "Serves")
DETAILS = ("60s to start after restart", "its database before the web tier", "health checks during backups",
           "connections when the disk is over 90% full", "the lock file after an unclean stop",
           "stale DNS answers for 5 minutes", "a full reindex after upgrades", "memory slowly until restarted",
           "requests while the certificate renews", "a second attempt after WireGuard reconnects",
           "within 2s once the cache is warm", "its queue when the broker restarts")
EVENT_MESSAGES = ("Health check passed", "Slow queries over 2s", "Disk usage at 91%", "Container restarted",
                  "Certificate expires in 12 days", "Backup finished in 14 minutes", "Replication lag 40s",
                  "Upstream returned 502 for 3 minutes", "Memory usage back to normal", "Unreachable from the LAN")
LEVELS = ("info",) * 14 + ("warning",) * 5 + ("critical",)


def make_app(state_dir: Path) -> Flask:
    """An application on its own state directory, migrated to the newest revision."""
    app = create_app({
        "CLAUDEOPS_STATE_DIR": str(state_dir),
        "CLAUDEOPS_DATABASE_URL": "",
        "CLAUDEOPS_RESULTS_DIR": "",
        "CLAUDEOPS_WORKDIR": "",
        "CLAUDEOPS_SECRET_KEY": "benchmark",
        "CLAUDEOPS_LOG_LEVEL": "WARNING",
        # Only the built-in plugins: the figures describe this code, not
        # whatever else is installed in the environment.
        "CLAUDEOPS_LOAD_ENTRY_POINTS": False,
    })
    with app.app_context():
        flask_migrate.upgrade(revision="heads")
    return app


def _insert_in_chunks(table, rows) -> None:
    chunk = []
    for row in rows:
        chunk.append(row)
        if len(chunk) == CHUNK_ROWS:
            db.session.execute(insert(table), chunk)
            chunk = []
    if chunk:
        db.session.execute(insert(table), chunk)
    db.session.commit()


def memory_rows(count: int, seed: int = 15):
    """``count`` memories spread over the last 180 days."""
    rng = random.Random(seed)
    now = utcnow()
    for _ in range(count):
        updated = now - timedelta(seconds=rng.randrange(180 * 86400))
        pinned = rng.random() < 0.02
        weeks_due = 0 if pinned else store.weeks_of_decay_due(updated, now)
        confidence = round(rng.randrange(2, 21) * 0.05, 2)
        yield {
            "service": None if rng.random() < 0.1 else rng.choice(SERVICES),
            "category": rng.choice(CATEGORIES),
            "observation": f"{rng.choice(SUBJECTS)} {rng.choice(DETAILS)} (case {rng.randrange(10**6)})",
            "confidence": confidence,
            "active": confidence >= ACTIVE_THRESHOLD,
            "created_at": updated - timedelta(days=rng.randrange(30)),
            "updated_at": updated,
            "tier": rng.choice((1, 1, 1, 2, 3)),
            "pinned": pinned,
            "decayed_weeks": weeks_due,
            "decay_due_at": next_decay_due(updated, weeks_due),
        }


def event_rows(count: int, seed: int = 20):
    """``count`` events, oldest first, over the last 365 days (ids follow time, as they do live)."""
    rng = random.Random(seed)
    start = utcnow() - timedelta(days=365)
    step = timedelta(days=365) / max(count, 1)
    for n in range(count):
        yield {
            "level": rng.choice(LEVELS),
            "service": None if rng.random() < 0.05 else rng.choice(SERVICES),
            "message": f"{rng.choice(EVENT_MESSAGES)} (check {n})",
            "tier": 1,
            "created_at": start + step * n,
        }


def fill(app: Flask, memories: int = 0, events: int = 0) -> None:
    with app.app_context():
        _insert_in_chunks(Memory.__table__, memory_rows(memories))
        _insert_in_chunks(Event.__table__, event_rows(events))


def counts(app: Flask) -> tuple[int, int]:
    with app.app_context():
        return (db.session.scalar(select(func.count()).select_from(Memory)),
                db.session.scalar(select(func.count()).select_from(Event)))
