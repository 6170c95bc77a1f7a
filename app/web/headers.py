"""Response headers that make the browser a second line of defence.

Agent text is escaped wherever it is rendered; the Content-Security-Policy
makes sure that, should an escape ever be missed, no injected script runs:
scripts only from this service's own files (htmx and the plugins' static
JS), no inline handlers, no eval, no framing. What the service answers, but for
its static files, is kept in no cache (a shared browser's, a proxy's): it
is the infrastructure's state, read after a login. An answer over TLS (or
through a trusted proxy that says so) tells the browser to use only TLS for
this host from then on (HSTS): a login cookie is then never offered over a
plain-http link to it. Subdomains are left alone: a homelab's other services
may still be plain http.
"""
from __future__ import annotations

from flask import Flask, request

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

HSTS = "max-age=31536000"   # a year

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
        if request.is_secure:
            response.headers.setdefault("Strict-Transport-Security", HSTS)
        return response
