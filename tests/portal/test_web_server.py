"""gunicorn as the image runs it (``-c python:portal.gunicorn``): its arbiter answers /livez
on the probe port while every request worker is busy, and a request it refuses before
Django sees it is answered in JSON.

One gunicorn for the module, with one sync worker, so that a single held connection keeps
every request worker busy: a request whose headers never end holds a sync worker until
they do (it reads with no timeout of its own; only the arbiter's, 30 s, ends it).
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator

import pytest

from ..support.outages import closed_port
from ..support.paths import REPO
from ..support.polling import wait_for


class Server:
    def __init__(self, port: int, probe_port: int):
        self.port = port
        self.probe_port = probe_port

    def get(self, path: str, *, probe: bool = False, **headers) -> tuple[int, str, dict]:
        """(status, content type, JSON body) of one GET."""
        connection = http.client.HTTPConnection(
            "127.0.0.1", self.probe_port if probe else self.port, timeout=20
        )
        try:
            connection.request("GET", path, headers=headers)
            response = connection.getresponse()
            return response.status, response.getheader("Content-Type"), json.loads(response.read())
        finally:
            connection.close()

    def answers(self) -> bool:
        try:
            return self.get("/livez")[0] == 200 and self.get("/livez", probe=True)[0] == 200
        except OSError:
            return False


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    served = Server(closed_port(), closed_port())
    process = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "portal.wsgi:application",
         "-c", "python:portal.gunicorn", "--bind", f"127.0.0.1:{served.port}",
         "--workers", "1", "--log-level", "warning"],
        cwd=REPO,
        env={**os.environ, "PROBE_PORT": str(served.probe_port), "PROBE_HOST": "127.0.0.1"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        wait_for(served.answers, timeout=60)
        yield served
    finally:
        process.terminate()
        process.wait(timeout=20)


def test_the_arbiter_answers_livez_on_the_probe_port_while_every_worker_is_busy(server):
    held = socket.create_connection(("127.0.0.1", server.port), timeout=20)
    try:
        # The worker takes this connection and waits for the end of its headers.
        held.sendall(b"GET /livez HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        queued: list[int] = []
        behind = threading.Thread(target=lambda: queued.append(server.get("/livez")[0]))
        behind.start()  # queued behind the held request: no worker is free for it

        assert server.get("/livez", probe=True) == (200, "application/json", {"web": "ok"})
        assert behind.is_alive() and queued == []  # the workers' /livez still waits
        held.sendall(b"\r\n")  # the held request ends; the queued one is answered
        behind.join(timeout=20)
    finally:
        held.close()
    assert queued == [200]


def test_the_probe_port_answers_only_livez(server):
    status, kind, body = server.get("/healthz", probe=True)
    assert (status, kind) == (404, "application/json") and "livez" in body["detail"]


@pytest.mark.parametrize(
    ("header", "status"),
    [({}, 414), ({"X-Long": "x" * 9000}, 431)],
    ids=["request line", "header field"],
)
def test_a_request_beyond_gunicorns_limits_is_refused_in_json(server, header, status):
    path = "/api/v1/jobs/" if header else "/api/v1/jobs/?name=" + "x" * 9000
    answer, kind, body = server.get(path, **header)
    assert (answer, kind) == (status, "application/json")
    assert "too large" in body["detail"] or "limit" in body["detail"]
