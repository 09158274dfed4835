"""The one wait of the tests: poll until something that acts in its own time (a worker, a
watch, a child process, a server) has done it, within a bound."""

from __future__ import annotations

import time
import urllib.error
from collections.abc import Callable
from typing import TypeVar

import requests
import urllib3

T = TypeVar("T")

# What a request that took too long raises. In a poll it is no answer: a loaded machine is
# slow, not wrong, so the predicate is asked again until the wait's own bound.
TIMEOUTS = (TimeoutError, requests.Timeout, urllib3.exceptions.TimeoutError)


def timed_out(error: BaseException) -> bool:
    """Whether ``error`` is a request that took too long (urllib's ``URLError`` carries a
    connect timeout as its reason)."""
    if isinstance(error, urllib.error.URLError) and not isinstance(error, urllib.error.HTTPError):
        return isinstance(error.reason, TIMEOUTS)
    return isinstance(error, TIMEOUTS)


def wait_for(
    predicate: Callable[[], T], timeout: float = 20.0, what: str = "", every: float = 0.02
) -> T:
    """Call ``predicate`` every ``every`` seconds until its value is true and return that
    value; fail after ``timeout`` seconds, saying ``what`` was awaited. A predicate whose
    request timed out (``timed_out``) has not seen it yet; any other error is raised."""
    deadline = time.monotonic() + timeout
    last: BaseException | None = None
    while time.monotonic() < deadline:
        try:
            value = predicate()
        except Exception as error:
            if not timed_out(error):
                raise
            last = error
        else:
            if value:
                return value
        time.sleep(every)
    said = f" (its last request timed out: {last})" if last is not None else ""
    raise AssertionError(f"not within {timeout:g} s" + (f": {what}" if what else "") + said)
