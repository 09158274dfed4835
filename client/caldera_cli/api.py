"""The HTTP client of Caldera's REST API (docs/api.md), with the retries a pipeline needs.

What is retried is named: a connection that could not be made, and the answers that say
"not now" (429, 502, 503, 504), with exponential backoff and jitter, honouring
``Retry-After``, for up to ``retry_seconds`` (``CALDERA_RETRY_SECONDS``, 60 by default). A
submission (POST) is retried only where the server cannot have taken it: no connection, 429
or 503 (Caldera's "busy"), never a read that timed out or a gateway's 502/504, so a retry
never submits a job twice; unless it carries an ``Idempotency-Key``, which makes the server
answer a retry with the jobs the first attempt queued, so every failure is retried. A 401 is
final at once.
"""

from __future__ import annotations

import random
import time
from typing import Any

import requests
from urllib3.exceptions import ConnectTimeoutError, NewConnectionError  # requests' own

from caldera_cli import __version__
from caldera_cli.exit_codes import Exit

RETRY_SECONDS = 60.0
TIMEOUT = (5.0, 60.0)  # connect, read
TRANSIENT = {429, 502, 503, 504}
TRANSIENT_FOR_WRITES = {429, 503}
IDEMPOTENCY_HEADER = "Idempotency-Key"


class ApiError(Exception):
    """A request that did not succeed; ``exit`` is what the command exits with."""

    exit = Exit.USAGE

    def __init__(self, message: str, *, status: int | None = None, body: Any = None):
        super().__init__(message)
        self.status = status
        self.body = body


class Refused(ApiError):
    """The server answered 4xx (but 401 and 429): the request itself is wrong."""


class Unauthorized(ApiError):
    exit = Exit.UNREACHABLE


class Unreachable(ApiError):
    """No answer, or "not now" answers, until the retries ran out; or a server error."""

    exit = Exit.UNREACHABLE


def _never_sent(error: requests.RequestException) -> bool:
    """Whether the request cannot have reached the server: the connection was not made."""
    if isinstance(error, requests.ConnectTimeout):
        return True
    reason = getattr(error.args[0], "reason", None) if error.args else None
    return isinstance(reason, (NewConnectionError, ConnectTimeoutError))


def _detail(answer: requests.Response) -> Any:
    try:
        return answer.json()
    except ValueError:
        return answer.text.strip()[:500]


def _retry_after(answer: requests.Response) -> float | None:
    value = answer.headers.get("Retry-After", "")
    return float(value) if value.isdigit() else None


class Client:
    def __init__(self, url: str, token: str | None, *, retry_seconds: float = RETRY_SECONDS):
        self.url = url.rstrip("/")
        self.retry_seconds = retry_seconds
        self.session = requests.Session()
        self.session.headers["User-Agent"] = f"caldera-cli/{__version__}"
        if token:
            self.session.headers["Authorization"] = f"Token {token}"

    def get(self, path: str, **params: Any) -> Any:
        return self.request("GET", path, params={k: v for k, v in params.items() if v is not None})

    def post(
        self,
        path: str,
        body: Any = None,
        *,
        key: str | None = None,
        params: dict[str, Any] | None = None,
    ) -> Any:
        """POST ``body`` (with the query ``params`` that are not None); with ``key``, as an
        ``Idempotency-Key``, safe to send again."""
        headers = {IDEMPOTENCY_HEADER: key} if key else None
        query = {k: v for k, v in (params or {}).items() if v is not None}
        return self.request("POST", path, json=body, headers=headers, params=query or None)

    def request(self, method: str, path: str, **kwargs: Any) -> Any:
        """The answer's JSON (None when empty); raises an ApiError."""
        answer = self.send(method, path, **kwargs)
        return answer.json() if answer.content else None

    def pages(self, path: str, **params: Any) -> list[Any]:
        """Every item of a list that pages by a ``Link: rel="next"`` header (events)."""
        items: list[Any] = []
        answer = self.send("GET", path, params=params)
        items.extend(answer.json())
        while "next" in answer.links:
            answer = self.send("GET", answer.links["next"]["url"])
            items.extend(answer.json())
        return items

    def send(self, method: str, path: str, **kwargs: Any) -> requests.Response:
        """A successful answer, after the retries the module's docstring names."""
        url = path if path.startswith("http") else f"{self.url}/api/v1/{path.lstrip('/')}"
        # A write the server cannot take twice (it carries its key) is retried like a read.
        write = method != "GET" and IDEMPOTENCY_HEADER not in (kwargs.get("headers") or {})
        deadline = time.monotonic() + self.retry_seconds
        attempt = 0
        while True:
            wait: float | None = None
            try:
                answer = self.session.request(method, url, timeout=TIMEOUT, **kwargs)
            except requests.RequestException as error:
                if write and not _never_sent(error):
                    raise Unreachable(f"{method} {url}: {error}; it may have been taken") from error
                problem = f"cannot reach {self.url}: {type(error).__name__}"
            else:
                if answer.status_code < 400:
                    return answer
                body = _detail(answer)
                if answer.status_code == 401:
                    raise Unauthorized(_say(body, "the server refused the token"), status=401)
                if answer.status_code not in (TRANSIENT_FOR_WRITES if write else TRANSIENT):
                    kind = Refused if answer.status_code < 500 else Unreachable
                    raise kind(_say(body, answer.reason), status=answer.status_code, body=body)
                problem = f"{self.url} answered {answer.status_code}: {_say(body, answer.reason)}"
                wait = _retry_after(answer)
            attempt += 1
            backoff = min(0.5 * 2 ** (attempt - 1), 15.0) * random.uniform(0.5, 1.0)
            pause = backoff if wait is None else wait
            if time.monotonic() + pause > deadline:
                raise Unreachable(f"{problem} (gave up after {attempt} attempts)")
            time.sleep(pause)


def _say(body: Any, fallback: str) -> str:
    """The one sentence of an error body (``detail``), else the fallback."""
    if isinstance(body, dict) and isinstance(body.get("detail"), str):
        return str(body["detail"])
    if isinstance(body, str) and body and not body.startswith("<"):
        return body
    return fallback
