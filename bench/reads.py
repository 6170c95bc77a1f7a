"""Read paths at a small and a large table: the Memories and Events pages,
their API listings and the memory context build must cost the same at
100,000 memories and 1,000,000 events as at 1,000 (at most 2×)."""
from __future__ import annotations

from typing import Callable

from flask import Flask

from app.runtime import setting
from bench.report import Figure, size_ratio
from bench.timing import compare
from plugins.memory.context import build_memory_context

TARGET = 2.0

# (figure name, URL, what the size is counted in). "{middle}" in a URL is
# the id halfway through the table (ids are 1..n): a page deep in the rows.
PAGES = (
    ("Memories page (GET /memories)", "/memories", "memories"),
    ("Memories poll (HTMX table, every 5 s)", "/memories?page=1", "memories"),
    ("Events page (GET /events)", "/events", "events"),
    ("Events poll (HTMX rows, every 5 s)", "/events", "events"),
    ("Events page halfway back (GET /events?before=…)", "/events?before={middle}", "events"),
    ("GET /api/v1/memories", "/api/v1/memories", "memories"),
    ("GET /api/v1/memories?service=…&active=true", "/api/v1/memories?service=postgres&active=true",
     "memories"),
    ("GET /api/v1/events", "/api/v1/events", "events"),
    ("GET /api/v1/events?level=critical", "/api/v1/events?level=critical", "events"),
)
HTMX = {"HX-Request": "true"}


def _getter(app: Flask, url: str, headers: dict) -> Callable[[], None]:
    client = app.test_client()

    def get() -> None:
        response = client.get(url, headers=headers)
        if response.status_code != 200:   # a fast error page would be no figure at all
            raise RuntimeError(f"GET {url} answered {response.status_code}")
    return get


def _context_builder(app: Flask) -> Callable[[], None]:
    def build() -> None:
        with app.app_context():
            context = build_memory_context(setting("CLAUDEOPS_MEMORY_BUDGET"))
            if not context.included:
                raise RuntimeError("the memory context came out empty")
    return build


def measure(small: Flask, large: Flask, sizes: dict, repeat: int) -> list[Figure]:
    """``sizes`` holds the row counts of each app: {"memories": (s, l), "events": (s, l)}."""
    figures = []
    for name, url, counted in PAGES:
        headers = HTMX if "HTMX" in name else {}
        small_url, large_url = (url.format(middle=n // 2) for n in sizes[counted])
        small_s, large_s = compare(_getter(small, small_url, headers), _getter(large, large_url, headers), repeat)
        figures.append(_figure(name, counted, sizes, small_s, large_s))
    small_s, large_s = compare(_context_builder(small), _context_builder(large), repeat)
    figures.append(_figure("Memory context build", "memories", sizes, small_s, large_s))
    return figures


def _figure(name: str, counted: str, sizes: dict, small_s: float, large_s: float) -> Figure:
    small_n, large_n = sizes[counted]
    return size_ratio(name, f"{small_n:,} {counted}", small_s, f"{large_n:,}", large_s, TARGET)
