"""Waiting for a condition in a test: poll it with a generous deadline, never sleep a fixed time
and hope (a loaded 2-core machine may take many times as long as an idle one)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

DEADLINE_S = 240.0
"""Seconds a test waits for a condition unless it says otherwise."""


def wait_for(
    cond: Callable[[], T], what: str, timeout_s: float = DEADLINE_S, poll_s: float = 0.1
) -> T:
    """Call ``cond()`` every ``poll_s`` seconds until it returns a true value, and return that;
    raise ``AssertionError`` naming ``what`` once ``timeout_s`` seconds have passed."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = cond()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"not within {timeout_s:g} s: {what}")
        time.sleep(poll_s)
