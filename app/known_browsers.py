"""Known browsers: a login limit the agent cannot turn against the operator.

Login attempts are limited per client address (``app/auth.py``). On the
service's own host the agent, every local script and the operator's browser
(through an SSH tunnel, or a reverse proxy on this machine) share one
address: ten wrong guesses a minute from any of them would keep the operator
out for as long as they went on.

So a browser that has logged in is given a signed cookie naming it (a
"device cookie"), and its login attempts are counted by that name instead of
its address. Guesses from elsewhere never hold it back; guesses sent with a
copied cookie are limited by that cookie, as one more address would be. The
cookie grants nothing else: the password is asked for as ever, and it is
sent only to the login page. Only the service can sign one: its key is
made of the password's (which the agent is never given) and the cookie key.
"""
from __future__ import annotations

import hmac
import secrets
from datetime import timedelta
from typing import Optional

from flask import Response, current_app, request, url_for
from itsdangerous import BadSignature, URLSafeTimedSerializer

from app.extensions import client_network

COOKIE_NAME = "claudeops_browser"
# Long enough that an operator who logs in now and then stays known; a
# browser not seen for that long counts by its address again until it logs in.
KNOWN_FOR = timedelta(days=400)
_SALT = "claudeops known browser"


def _serializer() -> URLSafeTimedSerializer:
    """Signed with a key of the password's as well as the cookie key's: the
    cookie key alone is kept in the state directory, where the agent (it
    runs as the service's user) may read it and sign a new name for every
    guess. Changing the password forgets every known browser."""
    password = current_app.config.get("CLAUDEOPS_PASSWORD") or ""
    key = hmac.new(current_app.config["SECRET_KEY"].encode(), b"known browser:" + password.encode(), "sha256")
    return URLSafeTimedSerializer(key.hexdigest(), salt=_SALT)


def browser_name() -> Optional[str]:
    """The name the request's cookie gives its browser, if the cookie is
    one this service signed within KNOWN_FOR; else None."""
    cookie = request.cookies.get(COOKIE_NAME)
    if not cookie:
        return None
    try:
        name = _serializer().loads(cookie, max_age=int(KNOWN_FOR.total_seconds()))
    except BadSignature:   # forged, from another secret key, or expired
        return None
    return name if isinstance(name, str) else None


def login_limit_key() -> str:
    """Whose attempts a login counts against: the known browser's, else
    the client address's (``client_network``)."""
    name = browser_name()
    return f"browser:{name}" if name else client_network()


def remember(response: Response) -> Response:
    """Mark the browser a login succeeded in as known (renewing its cookie,
    so that it stays known while it keeps logging in)."""
    name = browser_name() or secrets.token_urlsafe(16)
    response.set_cookie(COOKIE_NAME, _serializer().dumps(name), max_age=int(KNOWN_FOR.total_seconds()),
                        path=url_for("auth.login"), httponly=True, samesite="Lax",
                        secure=current_app.session_interface.get_cookie_secure(current_app))
    return response
