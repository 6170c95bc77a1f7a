"""Wire the dashboard and the API: host views, plugin pages, the sidebar,
error handling and template helpers."""
from __future__ import annotations

import logging
from urllib.parse import urlsplit

import pluggy
from flask import Flask, Response, flash, redirect, request
from flask_wtf.csrf import CSRFError
from werkzeug.exceptions import HTTPException

from app.extensions import csrf
from app.plugin_types import DashboardPage
from app.plugins import flatten
from app.timeutil import isoformat
from app.web.apiutil import ApiError, json_error, reject_nul_in_query
from app.web.headers import register_security_headers
from app.web.htmx import is_htmx
from app.web.row_ids import RowIdConverter

log = logging.getLogger(__name__)

API_PREFIX = "/api/v1"


def register_web(app: Flask, pm: pluggy.PluginManager) -> None:
    from app.web.api import api
    from app.web.config_page import config_page
    from app.web.openapi import openapi_api

    # Before any rule is added: rules bind their converters when registered.
    app.url_map.converters["int"] = RowIdConverter

    pages = sorted((p for p in flatten(pm.hook.claudeops_dashboard_pages()) if isinstance(p, DashboardPage)),
                   key=lambda p: (p.position, p.label))
    for page in pages:
        if page.blueprint is not None and page.blueprint.name not in app.blueprints:
            app.register_blueprint(page.blueprint)
    app.extensions["claudeops.nav"] = pages
    # Config is the service's own, linked apart at the foot of the sidebar:
    # the pages list stays the agent's work, ending with Cooldowns.
    app.register_blueprint(config_page)

    for blueprint in (api, openapi_api, *flatten(pm.hook.claudeops_api_blueprints())):
        csrf.exempt(blueprint)
        app.register_blueprint(blueprint, url_prefix=API_PREFIX)

    @app.before_request
    def refuse_nul_in_api_queries():
        if _wants_json():
            reject_nul_in_query()

    register_security_headers(app)
    _register_error_handlers(app)
    _register_template_helpers(app)


def _wants_json() -> bool:
    return request.path == API_PREFIX or request.path.startswith(API_PREFIX + "/")


STALE_PAGE = ("This page is out of date (you logged in again, or the service's key changed): "
              "nothing was changed. Reload the page, then try again.")
OTHER_ADDRESS = ("Nothing was changed: this page was opened at {origin}, but the service sees itself as "
                 "{host}. Behind a reverse proxy, have it pass the Host header the browser sent, with "
                 "CLAUDEOPS_TRUSTED_PROXIES set (see Security in the README).")


def _register_error_handlers(app: Flask) -> None:
    from app.auth import page_of   # app.auth imports this package

    @app.errorhandler(CSRFError)
    def stale_page(exc: CSRFError):
        """A form or button from a page whose CSRF token no longer holds: say
        what to do, instead of a bare 400 (the API takes no token)."""
        if "referrer" in (exc.description or ""):
            # Over TLS Flask-WTF wants the Referer on this host: a proxy that hides
            # the host the browser used fails every form, which is a setup to fix.
            origin = urlsplit(request.referrer or "").netloc or "no address"
            message = OTHER_ADDRESS.format(origin=origin, host=request.host)
            log.warning("refused %s %s: %s (Referer %s, Host %s)", request.method, request.path,
                        exc.description, request.referrer, request.host)
        else:
            message = STALE_PAGE
            log.info("refused %s %s: %s", request.method, request.path, exc.description)
        if is_htmx():
            return Response(message, 400, mimetype="text/plain")
        flash(message, "error")
        return redirect(page_of(request.referrer), 303)

    @app.errorhandler(ApiError)
    def api_error(exc: ApiError):
        return json_error(exc.message, exc.status)

    @app.errorhandler(HTTPException)
    def http_error(exc: HTTPException):
        if _wants_json():
            response = json_error(exc.description or exc.name, exc.code or 500)
            # Keep what the exception says besides its body: a 405's Allow
            # header lists the methods the path does offer (RFC 9110).
            for name, value in exc.get_headers():
                if name.lower() != "content-type":
                    response.headers[name] = value
            return response
        return exc

    @app.errorhandler(Exception)
    def unexpected(exc: Exception):
        log.exception("unhandled error on %s %s", request.method, request.path)
        if _wants_json():
            return json_error("internal error; see the service log", 500)
        return "Internal error; see the service log.", 500


def _register_template_helpers(app: Flask) -> None:
    app.add_template_filter(isoformat, "ts")

    @app.template_filter("duration")
    def duration(ms):
        if ms is None:
            return "—"
        seconds = ms / 1000
        return f"{seconds:.1f} s" if seconds < 120 else f"{seconds / 60:.1f} min"

    @app.template_filter("cost")
    def cost(usd):
        return "—" if usd is None else f"${usd:.4f}"

    @app.context_processor
    def navigation():
        return {"nav_pages": app.extensions["claudeops.nav"]}
