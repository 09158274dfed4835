"""What Caldera adds to gunicorn (wired by portal/gunicorn.py's hooks): a liveness listener
in the arbiter, and JSON refusals of requests gunicorn cannot read.

The liveness listener: the request workers answer /livez too, but behind every slow
request in their queue (under 32 clients it took 3.4 s, near the probe's 5 s timeout, and
a busy pod would be restarted for being busy). gunicorn's arbiter (its master process)
serves no requests; a thread of it answers GET /livez on a port of its own (PROBE_PORT):
200 while a worker has beaten within gunicorn's timeout, which is what the arbiter itself
counts as alive (it kills a worker that has not, and starts another), else 503. It reads
no database and no broker, like the workers' /livez.

JSON refusals: a request line or header beyond gunicorn's limits (limit_request_line,
limit_request_field_size) never reaches Django; gunicorn's workers answer it from
``Worker.handle_error``, which picks the status and logs the refusal, then writes an HTML
page with ``gunicorn.util.write_error``. ``json_refusals`` makes that page JSON in the
worker process, ``{"detail": ...}`` like every other API error, leaving gunicorn's choice
of status and its logging as they are.

This module imports nothing of Django: the arbiter never sets Django up.
"""

from __future__ import annotations

import json
import time
from socket import socket
from threading import Thread
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from gunicorn import util


def json_refusals() -> None:
    """gunicorn's error answers written as JSON in this process (a worker's)."""
    util.write_error = write_json_error


def write_json_error(sock: socket, status_int: int, reason: str, mesg: str) -> None:
    """gunicorn's ``util.write_error``, with a JSON body."""
    body = json.dumps({"detail": mesg or reason}).encode()
    head = (
        f"HTTP/1.1 {status_int} {reason}\r\n"
        "Connection: close\r\n"
        "Content-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n"
        "\r\n"
    )
    util.write_nonblock(sock, head.encode("latin-1") + body)


def has_live_worker(arbiter) -> bool:
    """Whether one of the arbiter's workers beat within gunicorn's timeout (the test of the
    arbiter's own ``murder_workers``); a busy sync worker beats again when its request
    ends, and gunicorn replaces one that does not within the timeout."""
    now = time.monotonic()
    for worker in list(arbiter.WORKERS.values()):  # the arbiter's thread changes the dict
        try:
            if not arbiter.timeout or now - worker.tmp.last_update() <= arbiter.timeout:
                return True
        except (OSError, ValueError):  # it exited meanwhile and its file was closed
            continue
    return False


class _Quiet(WSGIRequestHandler):
    # A stalled client cannot hold the listener (it answers one connection at a time).
    timeout = 2
    server_version, sys_version = "caldera", ""  # not the Python version

    def log_message(self, format, *args):  # noqa: A002 (the base class's name)
        pass  # the kubelet asks every few seconds; gunicorn's own log says what matters


class LivenessListener:
    """GET /livez on ``host:port``, answered by a thread of the arbiter."""

    def __init__(self, arbiter, host: str, port: int):
        self.arbiter = arbiter
        self.server: WSGIServer = make_server(host, port, self._app, handler_class=_Quiet)
        self.thread = Thread(target=self.server.serve_forever, name="caldera-livez", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def close_in_worker(self) -> None:
        """In a forked worker: its copy of the listening socket goes, so the port is the
        arbiter's alone (and is freed when the arbiter exits)."""
        self.server.socket.close()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def _app(self, environ, start_response):
        if environ["PATH_INFO"] != "/livez" or environ["REQUEST_METHOD"] != "GET":
            status, body = "404 Not Found", {"detail": "only GET /livez is answered here"}
        elif has_live_worker(self.arbiter):
            status, body = "200 OK", {"web": "ok"}
        else:
            status, body = "503 Service Unavailable", {"web": "no live worker"}
        payload = json.dumps(body).encode()
        start_response(
            status,
            [("Content-Type", "application/json"), ("Content-Length", str(len(payload)))],
        )
        return [payload]
