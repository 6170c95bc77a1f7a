"""Wire the dashboard and the API: host views, plugin pages, the sidebar,
error handling and template helpers."""
from __future__ import annotations

import itertools
import logging
import re
from urllib.parse import urlsplit

import pluggy
from flask import Blueprint, Flask, Response, current_app, flash, redirect, render_template, request
from flask_wtf.csrf import CSRFError
from markupsafe import Markup, escape
from sqlalchemy.exc import SQLAlchemyError
from werkzeug.exceptions import HTTPException, NotFound, RequestEntityTooLarge
from werkzeug.routing import BuildError

from app.dbfaults import storage_fault
from app.extensions import csrf
from app.plugin_types import DashboardPage
from app.plugins import HOST_PLUGINS, PluginError, call_at_startup
from app.timeutil import isoformat
from app.web import direction_controls
from app.web.apiutil import ApiError, json_error, nul_in_query, query_not_utf8
from app.web.headers import register_security_headers
from app.web.htmx import is_htmx
from app.web.ignored_args import ignored
from app.web.refused_forms import page_with_typed_text
from app.web.request_body import MAX_REQUEST_BYTES, FormNotUtf8
from app.web.row_ids import RowIdConverter

log = logging.getLogger(__name__)

API_PREFIX = "/api/v1"


def register_web(app: Flask, pm: pluggy.PluginManager) -> None:
    from app.web.api import api
    from app.web.config_page import config_page
    from app.web.openapi import openapi_api
    from app.web.query_check import body_problem, query_problem

    # Before any rule is added: rules bind their converters when registered.
    app.url_map.converters["int"] = RowIdConverter

    pages = sorted(call_at_startup(pm, "claudeops_dashboard_pages", DashboardPage),
                   key=lambda owned: (owned[1].position, owned[1].label))
    api_blueprints = call_at_startup(pm, "claudeops_api_blueprints", Blueprint)
    _refuse_taken_blueprint_names(app, [config_page, api, openapi_api], _page_blueprints(pages) + api_blueprints)
    for _, blueprint in _page_blueprints(pages):
        app.register_blueprint(blueprint)
    app.extensions["claudeops.nav"] = [page for _, page in pages]
    # Config is the service's own, linked apart at the foot of the sidebar:
    # the pages list stays the agent's work, ending with Cooldowns.
    app.register_blueprint(config_page)

    for blueprint in (api, openapi_api, *(blueprint for _, blueprint in api_blueprints)):
        csrf.exempt(blueprint)
        app.register_blueprint(blueprint, url_prefix=_under_the_api(blueprint))
    _refuse_dead_links(app, pages)
    _refuse_shadowed_routes(app, _page_blueprints(pages) + api_blueprints)

    @app.before_request
    def refuse_queries_no_filter_can_match():
        problem = query_not_utf8() or nul_in_query()   # request.args cannot be read of raw bytes not UTF-8
        if problem is None:
            return None
        if _wants_json():
            raise ApiError(problem)
        return _page_error("Not a valid address", f"Nothing to show: the {problem}.", 400)

    @app.before_request
    def refuse_query_parameters_or_a_body_an_api_operation_does_not_take():
        """(The dashboard's pages are forgiving instead: an unknown value is left out and said,
        app/web/ignored_args.py; an unknown name is only left out.)"""
        if request.path.startswith(API_PREFIX + "/"):
            problem = query_problem() or body_problem()
            if problem is not None:
                raise ApiError(problem)

    register_security_headers(app)
    _register_error_handlers(app)
    _register_template_helpers(app)


def _page_blueprints(pages: list[tuple[str, DashboardPage]]) -> list[tuple[str, Blueprint]]:
    """Each page's blueprint once, with its plugin's name: pages may share one."""
    seen: dict[int, tuple[str, Blueprint]] = {}
    for plugin, page in pages:
        if page.blueprint is not None:
            seen.setdefault(id(page.blueprint), (plugin, page.blueprint))
    return list(seen.values())


def _under_the_api(blueprint: Blueprint) -> str:
    """Where a blueprint of the API is mounted: ``/api/v1``, and under it
    the blueprint's own ``url_prefix`` (``/widgets``), which Flask's option
    would otherwise replace."""
    own = (blueprint.url_prefix or "").strip("/")
    return f"{API_PREFIX}/{own}" if own else API_PREFIX


def _refuse_taken_blueprint_names(app: Flask, host_blueprints: list[Blueprint],
                                  plugin_blueprints: list[tuple[str, Blueprint]]) -> None:
    """Stop the start when two blueprints share a name: Flask registers one
    blueprint per name, so a plugin's pages would be missing, or the start
    would fail with no word of whose blueprint it was."""
    owners = {name: "the host" for name in app.blueprints}
    owned = [("the host", blueprint) for blueprint in host_blueprints]
    owned += [(f"plugin {plugin}", blueprint) for plugin, blueprint in plugin_blueprints]
    for owner, blueprint in owned:
        if blueprint.name in owners:
            raise PluginError(f"{owners[blueprint.name]} and {owner} both have a blueprint named "
                              f"{blueprint.name!r}; each needs a name of its own")
        owners[blueprint.name] = owner


# A rule's variable, ``<int:memory_id>`` or ``<name>``: two rules that differ
# only in their variables' names answer the same URLs.
_ROUTE_VARIABLE = re.compile(r"<(?:(?P<converter>[A-Za-z_]\w*(?:\([^)]*\))?):)?[A-Za-z_]\w*>")


def _refuse_shadowed_routes(app: Flask, plugin_blueprints: list[tuple[str, Blueprint]]) -> None:
    """Stop the start when two views answer one method and URL: Flask sends
    each request to the rule registered first, so a plugin's page would take
    over the host's (or another plugin's) or never be reached, with no word
    of either."""
    owner_of = {blueprint.name: "the host" if plugin in HOST_PLUGINS else f"plugin {plugin}"
                for plugin, blueprint in plugin_blueprints}
    answered: dict[tuple[str, str], tuple[str, str]] = {}
    for rule in app.url_map.iter_rules():
        owner = owner_of.get(rule.endpoint.rpartition(".")[0], "the host")
        shape = _ROUTE_VARIABLE.sub(lambda match: f"<{match['converter'] or 'default'}>", rule.rule)
        for method in sorted(rule.methods - {"HEAD", "OPTIONS"}):
            first = answered.setdefault((shape, method), (rule.endpoint, owner))
            if first[0] != rule.endpoint:
                raise PluginError(f"{owner} ({rule.endpoint}) and {first[1]} ({first[0]}) both answer {method} "
                                  f"{rule.rule}; only one would ever be reached: give each a URL of its own")


def _refuse_dead_links(app: Flask, pages: list[tuple[str, DashboardPage]]) -> None:
    """Stop the start when a sidebar link points at no view: every page
    draws the sidebar, and a link that cannot be built would fail them all."""
    urls = app.url_map.bind("localhost")
    for plugin, page in pages:
        try:
            urls.build(page.endpoint)
        except BuildError:
            raise PluginError(f"plugin {plugin}: the dashboard page {page.label!r} links to endpoint "
                              f"{page.endpoint!r}, which has no URL (no such view, or it needs arguments)") from None


def _wants_json() -> bool:
    return request.path == API_PREFIX or request.path.startswith(API_PREFIX + "/")


STALE_PAGE = ("This page is out of date ({why}): nothing was changed. Reload the page, then try again.")
# With no credential set there is no login: the key alone can have changed.
STALE_WHY = {True: "you logged in again, or the service's key changed", False: "the service's key changed"}
NOT_FOUND = ("There is nothing at {path}: the address may be mistyped, or what it showed has been "
             "deleted since.")
# Said to whoever asked, signed in or not: what is wrong goes only to the log
# (a PostgreSQL error names the server's address).
DATABASE_UNAVAILABLE = "The database is unavailable just now (the service log says why). Try again in a few seconds."
RETRY_AFTER_S = 5
TOO_LARGE = ("Nothing was done: the request is larger than the {most} MiB this service takes. "
             "A larger memory import goes through `claudeops memories import FILE`.")
OTHER_ADDRESS = ("Nothing was changed: this page was opened at {origin}, but the service sees itself as "
                 "{host}. Behind a reverse proxy, have it pass the Host header the browser sent, with "
                 "CLAUDEOPS_TRUSTED_PROXIES set (see Security in the README).")


def _page_error(title: str, message: str, status: int) -> Response:
    """An error on a dashboard page, within the layout; to htmx, which swaps
    no error response, the message as plain text."""
    if is_htmx():
        return Response(message, status, mimetype="text/plain")
    return Response(render_template("error.html", title=title, message=message), status)


def _register_error_handlers(app: Flask) -> None:
    from app.auth import credentials_configured, page_of   # app.auth imports this package

    @app.errorhandler(CSRFError)
    def stale_page(exc: CSRFError):
        """A form or button from a page whose CSRF token no longer holds: say
        what to do, instead of a bare 400 (the API takes no token)."""
        if "referrer" in (exc.description or ""):
            # Over TLS Flask-WTF wants the Referer on this host: a proxy that hides
            # the host the browser used fails every form, which is a setup to fix.
            # Scheme and host both: either may be what differs (a proxy that says http).
            referrer = urlsplit(request.referrer or "")
            origin = f"{referrer.scheme}://{referrer.netloc}" if referrer.netloc else "no address"
            message = OTHER_ADDRESS.format(origin=origin, host=f"{request.scheme}://{request.host}")
            # The page's address without its query: a search's words stay out of the log.
            came_from = urlsplit(request.referrer or "")._replace(query="", fragment="").geturl() or "none"
            log.warning("refused %s %s: %s (Referer %s, Host %s)", request.method, request.path,
                        exc.description, came_from, request.host)
        else:
            message = STALE_PAGE.format(why=STALE_WHY[credentials_configured(current_app.config)])
            log.info("refused %s %s: %s", request.method, request.path, exc.description)
        if is_htmx():
            return Response(message, 400, mimetype="text/plain")
        try:
            again = page_with_typed_text(message)
        except SQLAlchemyError as exc:   # the page is drawn from the database, unavailable just now
            return database_error(exc)
        if again is not None:
            return again
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

    @app.errorhandler(NotFound)
    def not_found(exc: NotFound):
        """A dashboard page within the layout, with the sidebar to go on from,
        instead of Werkzeug's bare page; the API keeps its JSON error.
        (htmx swaps no error response; the page's script says what it
        means where it matters: memories.js, the memory is gone.)"""
        if _wants_json():
            return http_error(exc)
        return _page_error("Not found", NOT_FOUND.format(path=request.path), 404)

    @app.errorhandler(FormNotUtf8)
    def form_not_utf8(exc: FormNotUtf8):
        log.info("refused %s %s: %s", request.method, request.path, exc.description)
        return _page_error("Not UTF-8", exc.description, 400)

    @app.errorhandler(RequestEntityTooLarge)
    def too_large(exc: RequestEntityTooLarge):
        size = f"{request.content_length} bytes" if request.content_length is not None else "no stated size"
        log.warning("refused %s %s: a body of %s, over %s bytes", request.method, request.path, size,
                    MAX_REQUEST_BYTES)
        message = TOO_LARGE.format(most=MAX_REQUEST_BYTES // (1024 * 1024))
        if _wants_json():
            return json_error(message, 413)
        return _page_error("Too large", message, 413)

    @app.errorhandler(SQLAlchemyError)
    def database_error(exc: SQLAlchemyError):
        """A database that takes nothing (locked past the busy timeout, disk
        full, a PostgreSQL server gone) is a 503 to retry, with one line in
        the log rather than a traceback for every request and every poll."""
        fault = storage_fault(exc)
        if fault is None:
            return unexpected(exc)
        log.warning("%s %s answered 503: %s", request.method, request.path, fault)
        if _wants_json():
            response = json_error(DATABASE_UNAVAILABLE, 503)
        else:
            response = _page_error("Database unavailable", DATABASE_UNAVAILABLE, 503)
        response.headers["Retry-After"] = str(RETRY_AFTER_S)
        return response

    @app.errorhandler(Exception)
    def unexpected(exc: Exception):
        log.exception("unhandled error on %s %s", request.method, request.path)
        if _wants_json():
            return json_error("internal error; see the service log", 500)
        return "Internal error; see the service log.", 500


def _register_template_helpers(app: Flask) -> None:
    # Set before any template is compiled: the compiler writes it into each one.
    app.jinja_env.finalize = direction_controls.shown
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

    @app.template_filter("inline_code")
    def inline_code(text) -> Markup:
        """A help text's `code` spans (written for the README) as <code>, the rest escaped."""
        parts = str(text).split("`")
        if len(parts) % 2 == 0:   # a lone backtick: no spans to trust
            return escape(text)
        return Markup("").join(Markup("<code>%s</code>") % part if odd else escape(part)
                               for odd, part in zip(itertools.cycle((False, True)), parts))

    @app.context_processor
    def navigation():
        return {"nav_pages": app.extensions["claudeops.nav"], "ignored_args": ignored}
