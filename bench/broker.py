"""A hung broker: submit latency and the probes, with Redis answering and with it stopped.

gunicorn serves the portal with its production configuration (``-c python:portal.gunicorn``,
the arbiter's /livez on a probe port) against a private redis-server of its own. Each
figure is taken twice: with Redis answering, then with Redis stopped by SIGSTOP, which
keeps its port open and answers nothing (the outage that costs a client its full socket
timeout, unlike a refused connection). Measured in each state:

- ``POST /api/v1/jobs/`` under 1 and 32 clients (bench/load.py, a process of its own);
- while the 32 clients submit, /livez on the request workers' port and on the probe port,
  one GET every PROBE_EVERY_SECONDS;
- then /readyz and /healthz, PROBE_ROUNDS sequential GETs each.

No Celery worker runs: the figures are the web tier's; the jobs submitted stay queued.
Imported by bench/__main__.py once Django is set up.
"""

from __future__ import annotations

import http.client
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from access.services import full_token
from portal.embedded import free_port, redis_pings, redis_server_program

from .kueue import Scenario, job_body
from .services import REPO, web

CLIENTS = (1, 32)
PROBE_ROUNDS = 10
PROBE_EVERY_SECONDS = 0.2
STATES = ("answering", "stopped")


@contextmanager
def private_redis(directory: Path) -> Iterator[tuple[subprocess.Popen, int]]:
    """A redis-server on a free port, and the port; the caller stops (SIGSTOP) and
    continues it."""
    port = free_port()
    process = subprocess.Popen(
        [str(redis_server_program()), "--bind", "127.0.0.1", "--port", str(port),
         "--save", "", "--appendonly", "no", "--dir", str(directory)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 10
        while not redis_pings(port):
            if time.monotonic() > deadline:
                raise RuntimeError("the private redis-server did not answer within 10 s")
            time.sleep(0.05)
        yield process, port
    finally:
        os.kill(process.pid, signal.SIGCONT)
        process.terminate()
        process.wait(timeout=10)


def measure(scenario: Scenario, *, user, env: dict, port: int, seconds: float) -> dict:
    token = full_token(user, name="bench")
    bodies = [json.dumps(job_body(w)) for w in scenario.workloads[:2000]]
    probe_port = free_port()
    result: dict = {"submit": [], "livez_under_load": [], "probes": []}
    with tempfile.TemporaryDirectory() as scratch:
        bodies_file = Path(scratch) / "bodies.json"
        bodies_file.write_text(json.dumps(bodies))
        with private_redis(Path(scratch)) as (redis_server, redis_port):
            web_env = {
                **env,
                "REDIS_URL": f"redis://127.0.0.1:{redis_port}/0",
                "PROBE_PORT": str(probe_port),
                "PROBE_HOST": "127.0.0.1",
            }
            with web(web_env, port=port, config=True) as url:
                for state in STATES:
                    if state == "stopped":
                        os.kill(redis_server.pid, signal.SIGSTOP)
                    for clients in CLIENTS:
                        sampled = _sample_livez(port, probe_port, enabled=clients == max(CLIENTS))
                        with sampled as samples:
                            figures = _submit(
                                url + "/api/v1/jobs/", token, clients, seconds, bodies_file
                            )
                        result["submit"].append({"broker": state, **figures})
                        print(f"bench: broker {state} submit {json.dumps(figures)}", flush=True)
                        for where, times in samples.items():
                            result["livez_under_load"].append(
                                {"broker": state, "clients": clients, "where": where,
                                 **_summary(times)}
                            )  # fmt: skip
                    for path in ("/readyz", "/healthz"):
                        times, statuses = _probe(port, path, PROBE_ROUNDS)
                        row = {"broker": state, "path": path, "statuses": statuses}
                        result["probes"].append({**row, **_summary(times)})
                    os.kill(redis_server.pid, signal.SIGCONT)
    return result


def _submit(url: str, token: str, clients: int, seconds: float, bodies: Path) -> dict:
    """The load generator's figures for ``clients`` submitting for ``seconds``."""
    command = [sys.executable, "-m", "bench.load", "--url", url, "--token", token,
               "--clients", str(clients), "--seconds", str(seconds),
               "--bodies", str(bodies)]  # fmt: skip
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def _get(port: int, path: str, timeout: float = 30) -> tuple[int, float]:
    """(status, seconds) of one GET on a connection of its own."""
    started = time.monotonic()
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        connection.request("GET", path, headers={"Host": "localhost"})
        response = connection.getresponse()
        response.read()
        return response.status, time.monotonic() - started
    finally:
        connection.close()


def _probe(port: int, path: str, rounds: int) -> tuple[list[float], dict[str, int]]:
    times, statuses = [], {}
    for _ in range(rounds):
        status, took = _get(port, path)
        times.append(took)
        statuses[str(status)] = statuses.get(str(status), 0) + 1
    return times, statuses


@contextmanager
def _sample_livez(port: int, probe_port: int, *, enabled: bool) -> Iterator[dict]:
    """GET /livez on both ports every PROBE_EVERY_SECONDS while the block runs."""
    samples: dict[str, list[float]] = {}
    if not enabled:
        yield samples
        return
    stop = threading.Event()

    def sample(where: str, on: int) -> None:
        times = samples.setdefault(where, [])
        while not stop.is_set():
            status, took = _get(on, "/livez")
            if status == 200:
                times.append(took)
            stop.wait(PROBE_EVERY_SECONDS)

    threads = [
        threading.Thread(target=sample, args=("request workers", port), daemon=True),
        threading.Thread(target=sample, args=("probe port", probe_port), daemon=True),
    ]
    for thread in threads:
        thread.start()
    try:
        yield samples
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=60)


def _summary(times: list[float]) -> dict:
    """Count, p50, p99 and max in milliseconds (None without a sample)."""
    ordered = sorted(times)

    def at(share: float) -> float | None:
        if not ordered:
            return None
        return round(ordered[min(len(ordered) - 1, int(share * len(ordered)))] * 1000, 2)

    return {"count": len(ordered), "p50_ms": at(0.50), "p99_ms": at(0.99), "max_ms": at(1.0)}
