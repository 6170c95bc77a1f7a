"""Who may use the dashboard and the API.

Two modes, decided by configuration alone:

- **Open** (neither ``CLAUDEOPS_PASSWORD`` nor ``CLAUDEOPS_API_TOKEN`` set):
  for a service bound to loopback. ``claudeops serve`` refuses any other
  address, and a request that nevertheless arrives from a non-loopback client
  (gunicorn started by hand on 0.0.0.0, say) is answered 403; so is one that
  names the service by another name than a loopback one, or that would
  change something from another site (``_refuse_other_sites``).
- **Closed** (either one set): every dashboard page needs a login with the
  password (a signed session cookie naming a login recorded in the database,
  app/logins.py, so that logging out ends it), every ``/api/v1`` call needs the bearer
  token. Setting one credential never leaves the other door open: without a
  password nobody can log in to the dashboard, without a token the API
  answers 401. Open are only the login page, static files and the health
  check.

The API never accepts the dashboard's cookie: it is exempt from CSRF checks
(its clients are scripts), so a cookie there would let any site a logged-in
operator visits make calls on their behalf.
"""
from __future__ import annotations

import hashlib
import hmac
import ipaddress
import logging
import time
from typing import Optional
from urllib.parse import urlsplit

from flask import (Blueprint, Flask, current_app, flash, make_response, redirect, render_template, request, session, url_for)
from flask_wtf.csrf import generate_csrf
from limits import parse as parse_limit
from sqlalchemy.exc import SQLAlchemyError
from werkzeug.wrappers import Response

from app import known_browsers, logins
from app.extensions import client_network, limiter
from app.web.apiutil import json_error
from app.web.origins import origin_host

log = logging.getLogger(__name__)

auth = Blueprint("auth", __name__)

# Endpoints anyone may reach. Static files are the package's own assets; the
# health check tells a load balancer or monitor only whether the service and
# its database answer.
# Logging out needs no login (one that has ended may still be in the cookie);
# its form's CSRF token still guards it.
OPEN_ENDPOINTS = frozenset({"auth.login", "auth.logout", "static", "api.health"})
API_PREFIX = "/api/v1"
SESSION_KEY = "operator"
# When the login was made (Unix seconds): it lasts CLAUDEOPS_LOGIN_HOURS from
# then, however often the pages poll. The cookie's own signature is renewed
# whenever the session changes (a flash message, a CSRF token), so its age
# says nothing of the login's.
LOGGED_IN_AT_KEY = "logged_in_at"
# The login's token (app/logins.py): logging out ends it for every copy of the cookie.
LOGIN_TOKEN_KEY = "login"
LOGGED_IN_ENVIRON = "claudeops.logged_in"
# Per client address, or per browser once it has logged in (app/known_browsers.py),
# across every worker (app/limit_store.py); enough for a person who mistypes.
LOGIN_ATTEMPTS = "10 per minute"
# Wrong bearer tokens, counted the same way: a token is a password a script
# holds, and must not be guessed at network speed either. Only wrong ones
# count (a script with the right token makes any number of calls); once
# over, the address is answered 429 whatever it sends, the right token
# included, or the answer would still tell a right guess from a wrong one.
BEARER_FAILURES = parse_limit("10 per minute")


def credentials_configured(config) -> bool:
    return bool(config.get("CLAUDEOPS_PASSWORD") or config.get("CLAUDEOPS_API_TOKEN"))


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an address to bind or a client address) is this machine only."""
    host = host.strip().strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # another name: it may resolve to anything
        return False


def secrets_equal(given: str, expected: str) -> bool:
    """Constant-time comparison. Both sides are hashed first so that not even
    the length of the secret leaks through timing."""
    return hmac.compare_digest(hashlib.sha256(given.encode("utf-8", "surrogatepass")).digest(),
                               hashlib.sha256(expected.encode("utf-8", "surrogatepass")).digest())


def _password_fingerprint() -> str:
    """What a login stores in the session cookie. Derived from the password,
    so changing the password logs every browser out."""
    key = current_app.config["SECRET_KEY"].encode()
    return hmac.new(key, b"operator:" + current_app.config["CLAUDEOPS_PASSWORD"].encode(), "sha256").hexdigest()


def logged_in() -> bool:
    """Whether the request comes from a login in force; asked once a request
    (the guard, then the layout), so that a page drawn while the database is
    unavailable does not ask it again."""
    # Kept with the request, not in ``g``: an application context may outlast
    # one request (a test's, a CLI's), and the next would be told this answer.
    answer = request.environ.get(LOGGED_IN_ENVIRON)
    if answer is None:
        answer = request.environ[LOGGED_IN_ENVIRON] = _logged_in()
    return answer


def _logged_in() -> bool:
    if not current_app.config.get("CLAUDEOPS_PASSWORD"):
        return False
    stored = session.get(SESSION_KEY)
    if not (isinstance(stored, str) and hmac.compare_digest(stored, _password_fingerprint())):
        return False
    since = session.get(LOGGED_IN_AT_KEY)
    lifetime = current_app.permanent_session_lifetime.total_seconds()
    if not (isinstance(since, int) and 0 <= time.time() - since < lifetime):
        return False
    return logins.is_current(session.get(LOGIN_TOKEN_KEY))


def _bearer_token() -> Optional[str]:
    header = request.headers.get("Authorization", "")
    scheme, _, token = header.partition(" ")
    return _as_sent(token.strip()) if scheme.lower() == "bearer" and token.strip() else None


def _as_sent(value: str) -> str:
    """A header's text as the client wrote it. WSGI gives a header's bytes
    as Latin-1: a token with a character beyond ASCII, sent as UTF-8 (curl,
    Go, Node), would otherwise never match the configured one. Bytes that
    are no UTF-8 (Latin-1, as Python's requests sends it) are kept as read."""
    try:
        return value.encode("latin-1").decode("utf-8")
    except UnicodeError:
        return value


def _is_api_request() -> bool:
    return request.path == API_PREFIX or request.path.startswith(API_PREFIX + "/")


def _is_open_endpoint() -> bool:
    endpoint = request.endpoint or ""
    return endpoint in OPEN_ENDPOINTS or (endpoint.endswith(".static") and _serves_static_files(endpoint))


def _serves_static_files(endpoint: str) -> bool:
    """Whether ``endpoint`` is the route Flask gives a blueprint with a
    ``static_folder`` (``<blueprint>.static``), which the login page's
    stylesheet may need: not any view a plugin happens to call ``static``,
    which would then answer without the login or the bearer token."""
    view = current_app.view_functions.get(endpoint)
    owner = getattr(view, "__self__", None)
    return (isinstance(owner, Blueprint) and owner.has_static_folder
            and getattr(view, "__func__", None) is type(owner).send_static_file)


def guard() -> Optional[Response]:
    """``before_request``: let the request through (None) or answer it."""
    config = current_app.config
    if not credentials_configured(config):
        if not _from_loopback():
            return _refuse_remote()
        return _refuse_other_sites()
    if _is_open_endpoint():
        return None
    if _is_api_request():
        return _check_bearer(config.get("CLAUDEOPS_API_TOKEN") or "")
    if logged_in():
        return None
    return _to_login()


def _from_loopback() -> bool:
    """Whether the client is this machine. Behind a trusted proxy (gunicorn
    started by hand; ``serve`` refuses one without a credential) both the
    address the proxy names and the one the request arrived from must be
    loopback: a client on another machine that reaches the service around
    the proxy names whatever it likes in X-Forwarded-For, 127.0.0.1 too."""
    arrived = request.environ.get("werkzeug.proxy_fix.orig", {}).get("REMOTE_ADDR")
    return all(not address or is_loopback(address) for address in (request.remote_addr, arrived))


def _refuse_remote() -> Response:
    return _refuse_open("this service has no credential configured and answers only on loopback; "
                        "set CLAUDEOPS_PASSWORD and CLAUDEOPS_API_TOKEN to serve other machines")


def _refuse_other_sites() -> Optional[Response]:
    """Open, the service trusts whatever reaches it on loopback, and a
    browser on this machine reaches it on behalf of any page it shows. So a
    request must name the service by a loopback name (a page on a name that
    an attacker's DNS points at 127.0.0.1, "DNS rebinding", would otherwise
    be the same origin as the service and read and do anything), and a
    request that changes something must not come from another origin (the
    API takes no CSRF token, and a form or fetch from any site would reach
    it). Browsers always say a request's origin when it changes something.
    Behind a trusted proxy (which ``serve`` refuses without a credential)
    the Host the request arrived with must be a loopback name too: a page's
    script may set X-Forwarded-Host to one."""
    arrived = request.environ.get("werkzeug.proxy_fix.orig", {}).get("HTTP_HOST")
    for named in (request.host, arrived):
        if named is None:
            continue
        host = _hostname("//" + named) or ""
        if not (is_loopback(host) or host.endswith(".localhost")):
            return _refuse_open(f"this service has no credential configured and answers only to a loopback name "
                                f"(localhost, 127.0.0.1, [::1]), not {host!r}; set CLAUDEOPS_PASSWORD and "
                                "CLAUDEOPS_API_TOKEN to serve it under another name")
    if request.method in ("GET", "HEAD", "OPTIONS"):
        return None
    origin = request.headers.get("Origin")
    cross_site = request.headers.get("Sec-Fetch-Site") == "cross-site"
    if cross_site or (origin is not None and origin_host(origin) != request.host.lower()):
        return _refuse_open(f"a request from another site ({origin or 'cross-site'}) may not change anything here")
    return None


def _hostname(url: str) -> Optional[str]:
    try:
        return urlsplit(url).hostname
    except ValueError:   # "[" with no "]", say: no name at all
        return None


def _refuse_open(message: str) -> Response:
    """403, in open mode: no credential would let the request through."""
    log.warning("refused %s %s from %s (Host %s, Origin %s): %s", request.method, request.path, request.remote_addr,
                request.host, request.headers.get("Origin"), message)
    if _is_api_request():
        return json_error(message, 403)
    return Response(message + "\n", 403, mimetype="text/plain")


def _check_bearer(expected: str) -> Optional[Response]:
    token = _bearer_token()
    if expected and token is not None:
        if _bearer_guesses_over_limit():
            return _too_many_bearer_failures()
        if secrets_equal(token, expected):
            return None
        if not _count_wrong_bearer():
            return _too_many_bearer_failures()
    if not expected:
        message = "the API is closed: set CLAUDEOPS_API_TOKEN to use it"
    elif token is None:
        message = "authentication required: send Authorization: Bearer <CLAUDEOPS_API_TOKEN>"
    else:
        message = "invalid bearer token"
        log.warning("invalid bearer token for %s %s from %s", request.method, request.path, request.remote_addr)
    response = json_error(message, 401)
    response.headers["WWW-Authenticate"] = 'Bearer realm="claudeops"'
    return response


def _bearer_guesses_over_limit() -> bool:
    return limiter.enabled and not limiter.limiter.test(BEARER_FAILURES, "bearer", client_network())


def _count_wrong_bearer() -> bool:
    """Counts a wrong token; whether it was within the limit. Told by the
    count itself, not by the check before: guesses sent at once to several
    workers all pass that check, but only ten are counted within."""
    if not limiter.enabled:
        return True
    within = limiter.limiter.hit(BEARER_FAILURES, "bearer", client_network())
    if within and _bearer_guesses_over_limit():   # logged once, not for every call it refuses
        log.warning("wrong bearer tokens from %s over the limit (%s): the API refuses it until the minute is over",
                    request.remote_addr, BEARER_FAILURES)
    return within


def _too_many_bearer_failures() -> Response:
    reset_at = limiter.limiter.get_window_stats(BEARER_FAILURES, "bearer", client_network()).reset_time
    response = json_error("too many wrong bearer tokens from this address: wait a minute, then try again", 429)
    response.headers["Retry-After"] = str(max(1, round(reset_at - time.time())))
    return response


# The header that gives an HTMX request refused for want of a login the
# login page to offer (app/static/polling.js).
LOGIN_PAGE_HEADER = "X-Claudeops-Login"
# The header an HTMX answer gives the current CSRF token in; the one htmx sends it back in.
CSRF_TOKEN_HEADER = "X-CSRFToken"


def _to_login() -> Response:
    """GETs go to the login page and come back afterwards. An HTMX request
    (a poll, or an action on a page: a login that ended, or was ended in
    another tab) leaves its page as it is, with what the operator typed
    there: the page says so and offers the login page (polling.js), since
    sending the tab there would throw away a half-written form. A form
    posted after the login ended goes to the login page, which says that
    what it asked was not done, and back to the page it was on."""
    if request.headers.get("HX-Request"):
        response = Response("Not done: your login has ended (it expired, or Log out was pressed in another tab). "
                            "Log in again, then send it again.", 401, mimetype="text/plain")
        response.headers[LOGIN_PAGE_HEADER] = url_for("auth.login",
                                                      next=page_of(request.headers.get("HX-Current-URL")))
        return response
    if request.method in ("GET", "HEAD"):
        return redirect(url_for("auth.login", next=request.full_path.rstrip("?")))
    flash("Your login had ended, so what you sent was not done: log in, then send it again.", "error")
    return redirect(url_for("auth.login", next=page_of(request.referrer)), 303)


def page_of(url: Optional[str]) -> str:
    """The path and query of ``url`` (a page of this site the browser names), or "/"."""
    try:
        parts = urlsplit(url or "")
    except ValueError:   # "http://[": a header no browser sends
        return "/"
    return safe_next(parts.path + (f"?{parts.query}" if parts.query else "")) if parts.path else "/"


def safe_next(target: Optional[str]) -> str:
    """Only a path on this site: never another host (an open redirect), nor a
    control character (a line break would end the Location header)."""
    if (not target or not target.startswith("/") or target.startswith("//") or "\\" in target
            or any(ord(c) < 0x20 or ord(c) == 0x7f for c in target)):
        return url_for("overview.index")
    parts = urlsplit(target)
    if parts.scheme or parts.netloc:
        return url_for("overview.index")
    return target


@auth.route("/login", methods=["GET", "POST"])
@limiter.limit(LOGIN_ATTEMPTS, methods=["POST"], key_func=known_browsers.login_limit_key)
def login():
    config = current_app.config
    if not credentials_configured(config):
        return redirect(url_for("overview.index"))
    password_set = bool(config.get("CLAUDEOPS_PASSWORD"))
    next_url = safe_next(request.values.get("next"))
    # HEAD too (Flask answers it with this view): only a POST checks a
    # password, as only a POST is counted and carries a CSRF token.
    if request.method != "POST":
        if logged_in():
            return redirect(next_url)
        return render_template("login.html", next_url=next_url, password_set=password_set, error=None)
    given = request.form.get("password", "")
    if password_set and secrets_equal(given, config["CLAUDEOPS_PASSWORD"]):
        session.clear()  # a fresh session: nothing from before the login carries over
        session[SESSION_KEY] = _password_fingerprint()
        session[LOGGED_IN_AT_KEY] = int(time.time())
        session[LOGIN_TOKEN_KEY] = logins.begin(current_app.permanent_session_lifetime)
        session.permanent = True
        log.info("operator logged in from %s", request.remote_addr)
        return known_browsers.remember(redirect(next_url))
    log.warning("failed dashboard login from %s", request.remote_addr)
    error = "Wrong password." if password_set else "Dashboard login is off: CLAUDEOPS_PASSWORD is not set."
    return render_template("login.html", next_url=next_url, password_set=password_set, error=error), 401


@auth.errorhandler(429)
def too_many_attempts(_exc):
    log.warning("login attempts from %s over the limit (%s)", request.remote_addr, LOGIN_ATTEMPTS)
    response = make_response(render_template(
        "login.html", next_url=safe_next(request.values.get("next")),
        password_set=bool(current_app.config.get("CLAUDEOPS_PASSWORD")),
        error="Too many attempts. Wait a minute, then try again."), 429)
    # When the window that refused it is over, as for the API's wrong tokens.
    breached = limiter.current_limit
    response.headers["Retry-After"] = str(max(1, round(breached.reset_at - time.time())) if breached else 60)
    return response


@auth.post("/logout")
def logout():
    logins.end(session.get(LOGIN_TOKEN_KEY))
    session.clear()
    flash("Logged out.", "info")   # kept in the fresh session the redirect sets
    return redirect(url_for("auth.login"))


def _pass_on_the_csrf_token(response: Response) -> Response:
    """Every HTMX answer the dashboard gives carries the current CSRF token,
    which polling.js puts into the page. A login made in another tab starts
    a new session, whose token the page, drawn before it, does not hold:
    without this, what was typed there could not be sent, only reloaded away."""
    if (request.headers.get("HX-Request") and response.status_code < 400 and not _is_api_request()
            and current_app.config.get("WTF_CSRF_ENABLED", True)):
        response.headers[CSRF_TOKEN_HEADER] = generate_csrf()
    return response


def init_auth(app: Flask) -> None:
    app.register_blueprint(auth)
    app.before_request(guard)
    app.after_request(_pass_on_the_csrf_token)

    @app.context_processor
    def auth_state():
        required = credentials_configured(app.config)
        # A page one may see logged out (a missing static file's 404) shows no
        # sidebar: which pages and plugins there are is the operator's to see.
        try:
            signed_out = required and not logged_in()
        except SQLAlchemyError:   # the database's error page, drawn without it
            signed_out = True
        return {"login_required": required, "signed_out": signed_out}
