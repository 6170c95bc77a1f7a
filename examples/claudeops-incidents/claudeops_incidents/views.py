"""The Incidents page (filters, 5 s polling) and ``GET /api/v1/incidents``."""
from __future__ import annotations

from pathlib import Path

from flask import Blueprint, request
from sqlalchemy import func, select

from app.extensions import db
from app.web.apiutil import ApiError, page, pagination
from app.web.htmx import render_page
from claudeops_incidents.markers import SEVERITIES
from claudeops_incidents.models import OPEN, STATUSES, Incident
from claudeops_incidents.store import SEVERITY_ORDER

pages = Blueprint("incidents", __name__, template_folder=str(Path(__file__).resolve().parent / "templates"))
api = Blueprint("incidents_api", __name__)

PAGE_SIZE = 100


def _filtered(status: str | None, severity: str | None, service: str | None):
    query = select(Incident)
    if status:
        query = query.where(Incident.status == status)
    if severity:
        query = query.where(Incident.severity == severity)
    if service:
        query = query.where(Incident.service == service)
    return query


def _ordered(query):
    # Open ones first, most severe first; then the newest.
    return query.order_by((Incident.status != OPEN), SEVERITY_ORDER, Incident.id.desc())


def _choice(name: str, allowed: tuple[str, ...], strict: bool) -> str | None:
    raw = (request.args.get(name) or "").strip().lower()
    if not raw:
        return None
    if raw not in allowed:
        if strict:
            raise ApiError(f"{name} must be one of {', '.join(allowed)}, not {raw!r}")
        return None
    return raw


@pages.get("/incidents")
def index():
    status = _choice("status", STATUSES, strict=False)
    severity = _choice("severity", SEVERITIES, strict=False)
    service = request.args.get("service", "").strip() or None
    incidents = db.session.scalars(_ordered(_filtered(status, severity, service)).limit(PAGE_SIZE)).all()
    # Sorted here, not by ORDER BY: PostgreSQL's collation may order text otherwise than SQLite.
    services = sorted(db.session.scalars(select(Incident.service).distinct()))
    return render_page("incidents/index.html", "incidents/_rows.html", incidents=incidents,
                       statuses=STATUSES, severities=SEVERITIES, services=services,
                       status=status, severity=severity, service=service, page_size=PAGE_SIZE)


@api.get("/incidents")
def list_incidents():
    limit, offset = pagination()
    query = _filtered(_choice("status", STATUSES, strict=True), _choice("severity", SEVERITIES, strict=True),
                      request.args.get("service") or None)
    total = db.session.scalar(select(func.count()).select_from(query.subquery()))
    rows = db.session.scalars(_ordered(query).limit(limit).offset(offset)).all()
    return page([i.to_dict() for i in rows], total, limit, offset, key="incidents")


@api.get("/incidents/<int:incident_id>")
def get_incident(incident_id: int):
    incident = db.session.get(Incident, incident_id)
    if incident is None:
        raise ApiError(f"incident {incident_id} not found", 404)
    return incident.to_dict()
