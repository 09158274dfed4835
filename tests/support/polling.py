"""The one wait of the tests: poll until something that acts in its own time (a worker, a
watch, a child process, a server) has done it, within a bound."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_for(
    predicate: Callable[[], T], timeout: float = 20.0, what: str = "", every: float = 0.02
) -> T:
    """Call ``predicate`` every ``every`` seconds until its value is true and return that
    value; fail after ``timeout`` seconds, saying ``what`` was awaited."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(every)
    raise AssertionError(f"not within {timeout:g} s" + (f": {what}" if what else ""))
