"""Polling a condition that another process or thread makes true."""
from __future__ import annotations

import time


def wait_for(predicate, timeout: float = 30.0, interval: float = 0.1, what: str = "condition"):
    """Call ``predicate`` until it returns something truthy, and return that;
    fail the test after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"{what} not met within {timeout} s")
        time.sleep(interval)
