"""The ``caldera`` command (client/) as a user runs it: a child process with its own home
and config directory, talking HTTP to a server, its output read back."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from .paths import REPO


@dataclass
class Cli:
    """``cli.run("ls", "--mine")`` -> the finished process; ``cli.start(...)`` a running one.

    ``env`` is added to a clean environment: HOME and XDG_CONFIG_HOME in ``home``, no
    CALDERA_* variable but those given, nor a CI platform's (GITHUB_*, CI_*: they give
    submits a key of their own), polls every 0.2 s and retries for 5 s."""

    home: Path
    env: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.home.mkdir(parents=True, exist_ok=True)

    @property
    def config(self) -> Path:
        return self.home / "config" / "caldera" / "config.json"

    def environment(self, extra: dict[str, str]) -> dict[str, str]:
        clean = {
            k: v for k, v in os.environ.items() if not k.startswith(("CALDERA_", "GITHUB_", "CI_"))
        }
        # From the tree, whether or not the venv has it installed (make venv does).
        path = os.pathsep.join(filter(None, [str(REPO / "client"), clean.get("PYTHONPATH")]))
        return {
            **clean,
            "PYTHONPATH": path,
            "HOME": str(self.home),
            "XDG_CONFIG_HOME": str(self.home / "config"),
            "CALDERA_POLL_SECONDS": "0.2",
            "CALDERA_RETRY_SECONDS": "5",
            **self.env,
            **extra,
        }

    def command(self, args: tuple[str, ...]) -> list[str]:
        return [sys.executable, "-m", "caldera_cli", *args]

    def run(
        self, *args: str, input: str | None = None, timeout: float = 120, **env: str
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            self.command(args), input=input if input is not None else "", text=True,
            capture_output=True, env=self.environment(env), timeout=timeout, cwd=self.home,
        )  # fmt: skip

    def start(self, *args: str, **env: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            self.command(args), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True, env=self.environment(env), cwd=self.home,
        )  # fmt: skip


def json_lines(text: str) -> list[dict]:
    """``--output json``: every line one JSON object."""
    return [json.loads(line) for line in text.splitlines()]


# (method, path with its query, headers) -> (status, headers, JSON body)
Answer = Callable[[str, str, dict[str, str]], tuple[int, dict[str, str], object]]


@contextmanager
def stub_server(answer: Answer) -> Iterator[str]:
    """A server of the test's own on a free port, each request answered by ``answer``: what
    Caldera (or a CI platform) is not made to do on purpose, a 503 or a gateway's 502. Yields
    its URL."""

    class Handler(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            self.rfile.read(length)
            status, headers, body = answer(self.command, self.path, dict(self.headers))
            data = json.dumps(body).encode()
            self.send_response(status)
            for name, value in {"Content-Type": "application/json", **headers}.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = _answer

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
