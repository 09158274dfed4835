"""Submission throughput: the REST API under 1, 8 and 32 clients, beside pgbench's INSERTs.

gunicorn serves the portal as in production and a Celery worker admits what arrives;
the load generator (bench/load.py) runs in a process of its own on loopback. Measured:
``POST /api/v1/jobs/`` (one job a request) and ``POST /api/v1/jobs/batch/`` (1,000 jobs a
request, all or none), jobs accepted per second and p50/p99 latency, then PostgreSQL's own
single-row INSERT rate on the same server with ``pgbench`` (8 clients) for scale.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from .kueue import Scenario, job_body
from .services import REPO

CLIENTS = (1, 8, 32)
BATCH_SIZE = 1000
PGBENCH_CLIENTS = 8


def measure(scenario: Scenario, *, user, base_url: str, env: dict, seconds: float) -> dict:
    """Every endpoint at every client count, then pgbench; returns the figures."""
    from access.services import full_token

    token = full_token(user, name="bench")
    bodies = [json.dumps(job_body(w)) for w in scenario.workloads[:2000]]
    batches = [
        json.dumps({"jobs": [json.loads(b) for b in bodies[i : i + BATCH_SIZE]]})
        for i in range(0, len(bodies), BATCH_SIZE)
    ]
    results = {"single": [], "batch": []}
    with tempfile.TemporaryDirectory() as scratch:
        for endpoint, payloads, items in (
            ("single", bodies, 1),
            ("batch", batches, BATCH_SIZE),
        ):
            path = Path(scratch) / f"{endpoint}.json"
            path.write_text(json.dumps(payloads))
            url = base_url + ("/api/v1/jobs/" if endpoint == "single" else "/api/v1/jobs/batch/")
            for clients in CLIENTS:
                figures = _load(url, token, clients, seconds, path, items, env)
                print(f"bench: throughput {endpoint} {json.dumps(figures)}", flush=True)
                results[endpoint].append(figures)
    results["pgbench"] = pgbench_inserts(env, seconds=seconds)
    print(f"bench: pgbench {json.dumps(results['pgbench'])}", flush=True)
    return results


def _load(url, token, clients, seconds, bodies_path, items, env) -> dict:
    command = [sys.executable, "-m", "bench.load", "--url", url, "--token", token,
               "--clients", str(clients), "--seconds", str(seconds),
               "--bodies", str(bodies_path), "--items", str(items)]  # fmt: skip
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def pgbench_inserts(env: dict, *, seconds: float) -> dict:
    """pgbench's single-row INSERT rate into a table shaped like a small job row."""
    binary = shutil.which("pgbench")
    if binary is None:
        return {"error": "pgbench is not installed (Debian: postgresql-client)"}
    url = env["DATABASE_URL"].replace("postgres://", "postgresql://", 1)
    script = (
        "INSERT INTO bench_insert (queue_id, name, state, priority, enqueued_at, request)"
        " VALUES (1, 'small-1', 'queued', 0, now(), '{\"cpu\": 1000}');\n"
    )
    import psycopg

    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute("DROP TABLE IF EXISTS bench_insert")
        connection.execute(
            "CREATE TABLE bench_insert (id bigserial PRIMARY KEY, queue_id int NOT NULL,"
            " name text NOT NULL, state text NOT NULL, priority int NOT NULL,"
            " enqueued_at timestamptz NOT NULL, request jsonb NOT NULL)"
        )
    with tempfile.NamedTemporaryFile("w", suffix=".sql") as file:
        file.write(script)
        file.flush()
        done = subprocess.run(
            [binary, "--no-vacuum", "--client", str(PGBENCH_CLIENTS), "--jobs", "2",
             "--time", str(int(seconds)), "--file", file.name, url],
            capture_output=True, text=True, env={**os.environ, **env},
        )  # fmt: skip
    match = re.search(r"tps = ([\d.]+)", done.stdout)
    if done.returncode != 0 or match is None:
        return {"error": (done.stderr or done.stdout).strip()[-300:]}
    return {"clients": PGBENCH_CLIENTS, "inserts_per_second": round(float(match.group(1)), 1)}
