"""Backing services taken away for a block of a test, and restored before it ends.

- ``database_down``: the connection pointed at a port nothing listens on.
- ``broker_down``: Redis refusing connections (a Celery app on such a port made the
  current one, and REDIS_URL pointed there).
- ``broker_hung``: Redis accepting connections and never answering, as a stopped
  (SIGSTOP) one does (``silent_port``: a socket that listens and never accepts).
- ``connections_to``: which threads connect to a port during a block, seen through an
  audit hook (Python's own ``socket.connect`` event), so that a test can show who waits on
  a hung broker without replacing any code.
"""

from __future__ import annotations

import socket
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from celery import Celery
from django.conf import settings as django_settings
from django.db import connection

from jobs.engine.triggers import SENDER, process_redis_client
from portal.celery import app as portal_app

# Requests handed to the sender during an outage are sent or dropped within this long once
# the broker's socket is gone; the next test then starts with a fresh sender.
SENDER_SETTLE_SECONDS = 20


def closed_port() -> int:
    """A local port nothing listens on (bound, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextmanager
def database_down():
    """The next queries of this thread find no PostgreSQL; restored on exit."""
    port = connection.settings_dict["PORT"]
    connection.close()
    connection.settings_dict["PORT"] = closed_port()
    try:
        yield
    finally:
        connection.close()
        connection.settings_dict["PORT"] = port


@contextmanager
def _broker_at(settings, url: str) -> Iterator[None]:
    """Celery sends to, and the triggers and the probes read from, the Redis at ``url``."""
    before, settings.REDIS_URL = settings.REDIS_URL, url
    process_redis_client.cache_clear()
    app = Celery("outage", broker=url, set_as_current=True)
    app.conf.broker_transport = django_settings.CELERY_BROKER_TRANSPORT
    app.conf.broker_transport_options = dict(django_settings.CELERY_BROKER_TRANSPORT_OPTIONS)
    # kombu tries to connect for broker_connection_timeout before giving up (4 s by
    # default); a shorter try keeps the test quick and changes nothing else.
    app.conf.broker_connection_timeout = 0.5
    try:
        yield
    finally:
        # Back before the cache is cleared: a thread (a worker's heartbeat) that makes its
        # client meanwhile must not keep the outage's address past it.
        settings.REDIS_URL = before
        portal_app.set_current()
        process_redis_client.cache_clear()


def _fresh_sender() -> None:
    """What the outage's requests left in the sender (their drops, its rest) stays there."""
    SENDER.flush(SENDER_SETTLE_SECONDS)
    SENDER.reset()


@contextmanager
def broker_down(settings) -> Iterator[None]:
    """Redis refuses connections."""
    try:
        with _broker_at(settings, f"redis://127.0.0.1:{closed_port()}/0"):
            yield
    finally:
        _fresh_sender()


@contextmanager
def silent_port() -> Iterator[int]:
    """A local port that accepts connections and never answers, as a stopped (SIGSTOP)
    server does: a socket that listens and never accepts. On exit the socket is closed:
    whoever waits on it gets an error at once."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(64)
        yield silent.getsockname()[1]


@contextmanager
def broker_hung(settings) -> Iterator[int]:
    """Redis accepts connections and never answers; yields its port."""
    try:
        with silent_port() as port, _broker_at(settings, f"redis://127.0.0.1:{port}/0"):
            yield port
    finally:
        _fresh_sender()


_watched: dict[int, list[tuple[int, str]]] = {}


def _on_audit(event: str, args: tuple) -> None:
    if event == "socket.connect" and _watched:
        address = args[1]
        if isinstance(address, tuple) and len(address) >= 2 and address[1] in _watched:
            thread = threading.current_thread()
            _watched[address[1]].append((thread.ident, thread.name))


sys.addaudithook(_on_audit)  # an audit hook cannot be removed; it records only when asked


@contextmanager
def connections_to(port: int) -> Iterator[list[tuple[int, str]]]:
    """(thread id, thread name) of every connection opened to ``port`` in the block."""
    _watched[port] = connected = []
    try:
        yield connected
    finally:
        del _watched[port]
