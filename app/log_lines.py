"""The service's log lines: when, in UTC, as the dashboard, the API and the
database give every time, so that a line can be set beside a session's
start or an event's time whatever the host's time zone, and two hosts'
logs sort together."""
from __future__ import annotations

import logging
import time

FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class UtcFormatter(logging.Formatter):
    """2026-12-01T06:40:00.123Z: ISO 8601, to the millisecond."""

    converter = time.gmtime
    default_time_format = "%Y-%m-%dT%H:%M:%S"
    default_msec_format = "%s.%03dZ"


def configure(level: str) -> None:
    """Log to standard error at ``level``, unless logging is set up already
    (by the test runner, or an application that embeds this one)."""
    handler = logging.StreamHandler()
    handler.setFormatter(UtcFormatter(FORMAT))
    logging.basicConfig(level=level, handlers=[handler])
