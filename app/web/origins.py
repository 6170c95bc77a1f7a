"""Where a request says it comes from, as the browser tells it: the
``Origin`` header, and ``Sec-Fetch-Site``, which a page's script cannot set."""
from __future__ import annotations

from typing import Optional
from urllib.parse import urlsplit

from flask import request


def origin_host(origin: str) -> Optional[str]:
    """``Origin: http://127.0.0.1:8080`` as a Host header names the same
    (``null``, or anything that is not a URL: None, another site)."""
    try:
        parts = urlsplit(origin)
    except ValueError:   # "http://[", say
        return None
    return parts.netloc.lower() if parts.scheme in ("http", "https") and parts.netloc else None


def from_this_origin() -> bool:
    """The browser says the request came from one of the service's own pages."""
    if request.headers.get("Sec-Fetch-Site") == "same-origin":
        return True
    origin = request.headers.get("Origin")
    return origin is not None and origin_host(origin) == request.host.lower()
