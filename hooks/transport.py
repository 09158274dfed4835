"""One POST to a checked destination (``hooks.addresses.Destination``), and its answer.

The connection goes to the destination's addresses, those that were checked (the first
that answers), never to a new lookup of its name; TLS still verifies the certificate
against the host name (SNI and the hostname check use the name), and the Host header names
it. Redirects are not followed (http.client never does): a 3xx is a failed attempt,
recorded as such. Every socket operation has WEBHOOK_TIMEOUT_SECONDS, the whole attempt
ATTEMPT_TIMEOUTS times that (a receiver that drips its answer a byte at a time is cut
off), and at most WEBHOOK_ANSWER_CHARS of the answer is read.
"""

from __future__ import annotations

import http.client
import socket
import ssl
import threading
import time
from contextlib import suppress
from dataclasses import dataclass
from functools import cache

from django.conf import settings

from .addresses import Destination

# The whole attempt may take this many WEBHOOK_TIMEOUT_SECONDS; a claim lasts longer
# (hooks.services), so a delivery is never sent twice at once.
ATTEMPT_TIMEOUTS = 3


@dataclass(frozen=True)
class Answer:
    """What came of one POST: the status and the start of the body, or an error."""

    status: int | None
    body: str
    error: str
    duration_ms: int

    @property
    def ok(self) -> bool:
        return self.status is not None and 200 <= self.status < 300


@cache
def _context(ca_file: str) -> ssl.SSLContext:
    """Verifies the chain and the host name against the system's authorities, and
    WEBHOOK_CA_FILE's too (a company's own, for receivers inside it)."""
    context = ssl.create_default_context()
    if ca_file:
        context.load_verify_locations(cafile=ca_file)
    return context


def _tls() -> ssl.SSLContext:
    return _context(settings.WEBHOOK_CA_FILE)


def _connect(destination: Destination, timeout: float | None) -> socket.socket:
    """A connection to the first of the checked addresses that takes one."""
    failure: OSError | None = None
    for address in destination.addresses:
        try:
            return socket.create_connection((address, destination.port), timeout)
        except OSError as error:
            failure = error
    assert failure is not None  # a destination has at least one address
    raise failure


class _PinnedHTTPS(http.client.HTTPSConnection):
    """HTTPS to the checked address, with SNI and certificate check against the name."""

    def __init__(self, destination: Destination, timeout: float):
        super().__init__(destination.host, destination.port, timeout=timeout, context=_tls())
        self.destination = destination

    def connect(self) -> None:
        raw = _connect(self.destination, self.timeout)
        self.sock = _tls().wrap_socket(raw, server_hostname=self.destination.host)


class _PinnedHTTP(http.client.HTTPConnection):
    def __init__(self, destination: Destination, timeout: float):
        super().__init__(destination.host, destination.port, timeout=timeout)
        self.destination = destination

    def connect(self) -> None:
        self.sock = _connect(self.destination, self.timeout)


def _cut(connection: http.client.HTTPConnection, cut: threading.Event) -> None:
    """The attempt's time is up: its socket is shut, which ends a read that waits."""
    cut.set()
    if connection.sock is not None:
        with suppress(OSError):
            connection.sock.shutdown(socket.SHUT_RDWR)


def post(destination: Destination, body: bytes, headers: dict[str, str]) -> Answer:
    """POST ``body`` with ``headers``; never raises for what the network or the receiver
    does, it answers it."""
    timeout = settings.WEBHOOK_TIMEOUT_SECONDS
    kind = _PinnedHTTPS if destination.scheme == "https" else _PinnedHTTP
    connection = kind(destination, timeout)
    cut = threading.Event()
    deadline = threading.Timer(ATTEMPT_TIMEOUTS * timeout, _cut, args=(connection, cut))
    started = time.monotonic()
    status, text, error = None, "", ""
    deadline.start()
    try:
        connection.request("POST", destination.target, body=body, headers=headers)
        response = connection.getresponse()
        status = response.status
        # Kept as text: a NUL (which PostgreSQL's text refuses) becomes U+FFFD as bad bytes do.
        start = response.read(settings.WEBHOOK_ANSWER_CHARS)
        text = start.decode("utf-8", "replace").replace("\x00", "\ufffd")
        if 300 <= status < 400:
            location = response.getheader("Location", "")
            error = f"redirect to {location or '(no Location)'} not followed"
        elif not 200 <= status < 300:
            error = f"answered {status} {response.reason}"
    except ssl.SSLCertVerificationError as failure:
        error = f"TLS: {failure.reason}: {failure.verify_message}"
    except ssl.SSLError as failure:
        error = f"TLS: {failure.reason or failure}"
    except (OSError, http.client.HTTPException) as failure:
        error = f"{type(failure).__name__}: {failure}" if str(failure) else type(failure).__name__
    finally:
        deadline.cancel()
        connection.close()
    if cut.is_set():
        # Whatever was read is not the whole answer (a shut socket reads as its end).
        status, error = None, f"no whole answer within {ATTEMPT_TIMEOUTS * timeout:g} s"
    duration_ms = int((time.monotonic() - started) * 1000)
    return Answer(status, text, error, duration_ms)
