"""Mixed load: 32 clients reading queues and submitting jobs at the same time, over HTTP.

gunicorn serves the portal as in production and a Celery worker with beat admits and runs
what arrives, so PostgreSQL carries the reads, the inserts and the admission cycles at
once, as it does when people watch their queues while pipelines submit. Two load
generators (bench/load.py, each a process of its own on loopback) start together for the
same seconds: READERS clients read queues (``GET /api/v1/queues/<queue>/``, the first page
with positions, the baseline's 30 queues in turn) and SUBMITTERS clients submit one job a
request (``POST /api/v1/jobs/``, the baseline's jobs). Measured: p50 and p99 of the reads
and of the submissions apart, and the requests and jobs per second of both together.

Imported by bench/__main__.py once Django is set up.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

from access.services import full_token

from .kueue import Scenario, job_body
from .services import REPO

READERS = 16
SUBMITTERS = 16
WARMUP_SECONDS = 2.0


def measure(scenario: Scenario, *, user, base_url: str, env: dict, seconds: float) -> dict:
    """Both kinds of client at once for ``seconds`` (after a warm-up); returns the figures."""
    token = full_token(user, name="bench")
    bodies = [json.dumps(job_body(w)) for w in scenario.workloads[:2000]]
    paths = [f"/api/v1/queues/{spec.path.replace('/', '-')}/" for spec in scenario.queues]
    with tempfile.TemporaryDirectory() as scratch:
        bodies_file, paths_file = Path(scratch) / "bodies.json", Path(scratch) / "paths.json"
        bodies_file.write_text(json.dumps(bodies))
        paths_file.write_text(json.dumps(paths))
        loads = [
            _start_load(base_url, token, READERS, seconds, ["--paths", str(paths_file)], env),
            _start_load(
                base_url + "/api/v1/jobs/",
                token,
                SUBMITTERS,
                seconds,
                ["--bodies", str(bodies_file)],
                env,
            ),
        ]
        reads, submissions = (_figures(load, seconds) for load in loads)
    return {
        "clients": READERS + SUBMITTERS,
        "seconds": seconds,
        "reads": reads,
        "submissions": submissions,
        "requests_per_second": round(
            reads["requests_per_second"] + submissions["requests_per_second"], 1
        ),
        "jobs_per_second": submissions["items_per_second"],
    }


def _start_load(
    url: str, token: str, clients: int, seconds: float, what: list[str], env: dict
) -> subprocess.Popen:
    command = [sys.executable, "-m", "bench.load", "--url", url, "--token", token,
               "--clients", str(clients), "--seconds", str(seconds),
               "--warmup", str(WARMUP_SECONDS), *what]  # fmt: skip
    return subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.PIPE, text=True)


def _figures(load: subprocess.Popen, seconds: float) -> dict:
    output, _ = load.communicate(timeout=seconds + WARMUP_SECONDS + 120)
    if load.returncode != 0:
        raise RuntimeError(f"the load generator failed ({load.returncode}): {output[-500:]}")
    return json.loads(output)
