"""The Cooldowns page (5 s polling) and ``GET /api/v1/cooldowns``: the same
state the agent is told and the hook enforces."""
from __future__ import annotations

from pathlib import Path

from flask import Blueprint, request

from app.echoed import echoed
from app.extensions import db
from app.listing import count_up_to
from app.timeutil import utcnow
from app.web.apiutil import ApiError, page, pagination
from app.web.filter_options import choices_state
from app.web.htmx import render_page
from app.web.ignored_args import ignore
from app.web.paging import page_number
from plugins.cooldowns import store
from plugins.cooldowns.commands import normalise_service
from plugins.cooldowns.limits import ACTIONS, current_limits, describe, format_window, normalise_action
from plugins.cooldowns.models import OUTCOMES

pages = Blueprint("cooldowns", __name__, template_folder=str(Path(__file__).parent / "templates"))
api = Blueprint("cooldowns_api", __name__)

PAGE_SIZE = 100


def _filters(strict: bool) -> tuple[str | None, str | None, str | None]:
    """service, action and outcome from the query string. The page ignores a
    value it does not know (a stale link), and says so; the API refuses it."""
    raw_service = (request.args.get("service") or "").strip()
    # One spelling per service, as the records have it: "Jellyfin", "jellyfin.service".
    service = (normalise_service(raw_service) or raw_service.lower()) if raw_service else None
    raw_action = (request.args.get("action") or "").strip()
    action = normalise_action(raw_action) if raw_action else None
    raw_outcome = (request.args.get("outcome") or "").strip()
    outcome = raw_outcome.lower() or None
    if raw_action and action is None:
        if strict:
            raise ApiError(f"action must be one of {', '.join(ACTIONS)}, not {echoed(raw_action)}")
        ignore(f"the action {raw_action[:40]!r}, none of {', '.join(ACTIONS)}: every action is shown")
    if outcome not in (None, *OUTCOMES):
        if strict:
            raise ApiError(f"outcome must be one of {', '.join(OUTCOMES)}, not {echoed(raw_outcome)}")
        ignore(f"the outcome {raw_outcome[:40]!r}, none of {', '.join(OUTCOMES)}: every outcome is shown")
        outcome = None
    return service, action, outcome


@pages.get("/cooldowns")
def index():
    service, action, outcome = _filters(strict=False)
    now = utcnow()
    limits = current_limits()
    query = store.recent(service, action, outcome)
    page = page_number(PAGE_SIZE)
    services = store.services()
    # One row more than a page says whether an older page exists, whatever the total.
    actions = db.session.scalars(query.limit(PAGE_SIZE + 1).offset((page - 1) * PAGE_SIZE)).all()
    return render_page("cooldowns/index.html", "cooldowns/_state.html",
                       status=store.status(now, service), actions=actions[:PAGE_SIZE],
                       has_older=len(actions) > PAGE_SIZE, page=page, page_size=PAGE_SIZE,
                       total=count_up_to(query), rules=[describe(a, limits[a]) for a in ACTIONS],
                       action_names=ACTIONS, outcomes=OUTCOMES, services=services, service=service,
                       action=action, outcome=outcome, format_window=format_window, **choices_state(services))


@api.get("/cooldowns")
def list_cooldowns():
    limit, offset = pagination()
    service, action, outcome = _filters(strict=True)
    now = utcnow()
    query = store.recent(service, action, outcome)
    rows = db.session.scalars(query.limit(limit).offset(offset)).all()
    return {
        "limits": {name: value.to_dict() for name, value in current_limits().items()},
        "services": [{"service": next(iter(row.values())).service,
                      **{name: u.to_dict() for name, u in row.items()}}
                     for row in store.status(now, service)],
        **page([r.to_dict() for r in rows], count_up_to(query), limit, offset, key="actions"),
    }
