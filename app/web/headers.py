"""Response headers that make the browser a second line of defence.

Agent text is escaped wherever it is rendered; the Content-Security-Policy
makes sure that, should an escape ever be missed, no injected script runs:
scripts only from this service's own files (htmx and the plugins' static
JS), no inline handlers, no eval, no framing. What the service answers, but for
its static files, is kept in no cache (a shared browser's, a proxy's): it
is the infrastructure's state, read after a login. With
CLAUDEOPS_HSTS_SECONDS set, an answer over TLS (or through a trusted proxy
that says so) tells the browser to use only TLS for this host name from
then on (HSTS): a login cookie is then never offered over a plain-http link
to it. It is off unless set: it holds for every port of the name, and a
homelab's other services on the same name may be plain http. Subdomains are
never included.
"""
from __future__ import annotations

from flask import Flask, current_app, request

CONTENT_SECURITY_POLICY = "; ".join((
    "default-src 'self'",
    "script-src 'self'",
    # style attributes (a confidence bar's width) and htmx's indicator style
    "style-src 'self' 'unsafe-inline'",
    "img-src 'self' data:",
    "object-src 'none'",
    "base-uri 'none'",
    "form-action 'self'",
    "frame-ancestors 'none'",
))

SECURITY_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "same-origin",
}


def register_security_headers(app: Flask) -> None:
    @app.after_request
    def add_headers(response):
        for name, value in SECURITY_HEADERS.items():
            response.headers.setdefault(name, value)
        endpoint = request.endpoint or ""
        if endpoint != "static" and not endpoint.endswith(".static"):
            response.headers.setdefault("Cache-Control", "no-store")
        hsts_seconds = current_app.config["CLAUDEOPS_HSTS_SECONDS"]
        if hsts_seconds and request.is_secure:
            response.headers.setdefault("Strict-Transport-Security", f"max-age={hsts_seconds}")
        return response
