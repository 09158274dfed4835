"""A webhook receiver of the tests' own: a real HTTP server on 127.0.0.1 in a thread, which
records every request it is sent and answers what the test tells it to (a status, a
redirect), so deliveries go over a real socket to a real server."""

from __future__ import annotations

import ssl
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Receiver:
    port: int
    scheme: str = "http"
    status: int = 200
    location: str = ""  # sent with a 3xx
    answer: bytes = b""  # the body it answers; empty: "answered <status>"
    drip: bool = False  # answer a header line every tenth of a second, for ten seconds
    requests: list[Received] = field(default_factory=list)

    def url(self, path: str = "/hook", host: str = "127.0.0.1") -> str:
        return f"{self.scheme}://{host}:{self.port}{path}"


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length", 0))
        body = self.rfile.read(length)
        receiver = self.server.receiver
        receiver.requests.append(Received(self.path, dict(self.headers.items()), body))
        if receiver.drip:
            self._drip()
            return
        self.send_response(receiver.status)
        if receiver.location:
            self.send_header("Location", receiver.location)
        answer = receiver.answer or f"answered {receiver.status}".encode()
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def _drip(self) -> None:
        self.wfile.write(b"HTTP/1.1 200 OK\r\n")
        for n in range(100):
            try:
                self.wfile.write(f"X-Drip-{n}: .\r\n".encode())
                self.wfile.flush()
            except OSError:
                return  # the client hung up
            time.sleep(0.1)

    def log_message(self, format, *args) -> None:  # quiet
        pass


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    receiver: Receiver


@contextmanager
def receiver(tls: tuple[Path, Path] | None = None) -> Iterator[Receiver]:
    """A receiver over http, or over https with ``tls``'s (certificate, key)."""
    server = _Server(("127.0.0.1", 0), _Handler)
    server.receiver = Receiver(port=server.server_address[1])
    if tls is not None:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(*tls)
        server.socket = context.wrap_socket(server.socket, server_side=True)
        server.receiver.scheme = "https"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.receiver
    finally:
        server.shutdown()
        server.server_close()
