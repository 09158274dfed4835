"""The processes a benchmark runs against: a private database, a Celery worker, gunicorn.

A benchmark never touches the data of the demo or the tests: it uses the database named
by ``DATABASE_URL`` with ``_bench`` appended (dropped and created for each run) and the
Redis database ``BENCH_REDIS_DB`` of the Redis named by ``REDIS_URL``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg import sql

REPO = Path(__file__).resolve().parent.parent
BENCH_REDIS_DB = 14
API_LIMITS = (
    "API_SUBMIT_RATE_PER_TOKEN",
    "API_SUBMIT_RATE_PER_PERSON",
    "API_READ_RATE_PER_TOKEN",
    "API_READ_RATE_PER_PERSON",
)


NODE_PODS = 100_000


def bench_environment(environ: dict[str, str]) -> dict[str, str]:
    """The environment of every benchmark process, pointing at the bench's own data."""
    database = urlsplit(environ["DATABASE_URL"])
    bench_name = database.path.lstrip("/") + "_bench"
    redis_url = urlsplit(environ["REDIS_URL"])
    env = dict(environ)
    env["DATABASE_URL"] = urlunsplit(database._replace(path=f"/{bench_name}"))
    env["REDIS_URL"] = urlunsplit(redis_url._replace(path=f"/{BENCH_REDIS_DB}"))
    env.setdefault("SECRET_KEY", "benchmark-only-secret")
    env.setdefault("DEMO_TRAFFIC", "0")
    # The kueue part sizes the node to each scenario's quota for its worker and web.
    env.setdefault("SIMULATED_CLUSTER_NODES", one_node(cpu=1000))
    env.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
    # The load is far beyond the API's limits (portal/throttling.py), which are off so that
    # the figures are Caldera's own: no count, no round trip to Redis per request.
    for limit in API_LIMITS:
        env.setdefault(limit, "off")
    return env


def one_node(*, cpu: int) -> str:
    """SIMULATED_CLUSTER_NODES for Kueue's scenarios, which count quota, not nodes: one
    node large enough for their 20-cpu jobs (or submits would refuse them as never able
    to run), and with room for every pod, since Kueue's runner has no kubelet whose 110
    pods would cap the replay at 110 running jobs."""
    return f"1xcpu={cpu},pods={NODE_PODS}"


def recreate_database(env: dict[str, str]) -> None:
    """Drop and create the bench database, then migrate it."""
    target = urlsplit(env["DATABASE_URL"])
    name = target.path.lstrip("/")
    admin_url = urlunsplit(target._replace(path="/postgres"))
    with psycopg.connect(admin_url, autocommit=True) as connection:
        connection.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )
        connection.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "--verbosity", "0"], cwd=REPO, env=env, check=True
    )


def flush_redis(env: dict[str, str]) -> None:
    import redis

    redis.Redis.from_url(env["REDIS_URL"]).flushdb()


@contextmanager
def worker(env: dict[str, str], *, concurrency: int = 2) -> Iterator[None]:
    """A Celery worker and beat, as in production, until the block ends."""
    processes = [
        _start(
            [sys.executable, "-m", "celery", "-A", "portal", "worker", "-l", "warning",
             "--concurrency", str(concurrency), "-n", f"bench-{os.getpid()}@%h"],
            env,
        ),
        _start(
            [sys.executable, "-m", "celery", "-A", "portal", "beat", "-l", "warning",
             "--schedule", str(REPO / ".caldera" / "bench-celerybeat-schedule")],
            env,
        ),
    ]  # fmt: skip
    try:
        _wait_for_worker(env)
        yield
    finally:
        _stop(processes)


@contextmanager
def web(
    env: dict[str, str], *, port: int, workers: int = 4, config: bool = False, threads: int = 1
) -> Iterator[str]:
    """gunicorn serving the portal on loopback; yields its base URL. ``config``: with the
    image's configuration (``-c python:portal.gunicorn``: its limits and hooks). ``threads``
    above 1: gunicorn's threaded workers, which keep connections open, as the demo runs."""
    process = _start(
        [sys.executable, "-m", "gunicorn", "portal.wsgi:application", "--bind",
         f"127.0.0.1:{port}", "--workers", str(workers), "--log-level", "warning",
         *(["--threads", str(threads)] if threads > 1 else []),
         *(["-c", "python:portal.gunicorn"] if config else [])],
        env,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_for_http(url + "/healthz")
        yield url
    finally:
        _stop([process])


def _start(command: list[str], env: dict[str, str]) -> subprocess.Popen:
    return subprocess.Popen(command, cwd=REPO, env=env)


def _stop(processes: list[subprocess.Popen]) -> None:
    for process in processes:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
    for process in processes:
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()


def _wait_for_worker(env: dict[str, str], timeout: float = 60) -> None:
    from portal.celery import app

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if app.control.ping(timeout=0.5):
            return
    raise RuntimeError("the Celery worker did not answer within a minute")


def _wait_for_http(url: str, timeout: float = 60) -> None:
    import urllib.request

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"{url} did not answer within a minute")


def baseline_in_process(
    *, half_life: str | None = None, queued: int = 0
) -> tuple[object, object, list[dict]]:
    """For a measurement in this process (``python -m bench.<module>`` inside
    ``portal.embedded run``): a fresh bench database and Redis, Django set up, then
    ``baseline_loaded``."""
    env = bench_environment(dict(os.environ))
    os.environ.update(env)
    recreate_database(env)
    flush_redis(env)
    import django

    django.setup()
    return baseline_loaded(half_life=half_life, queued=queued)


def baseline_loaded(
    *, half_life: str | None = None, queued: int = 0
) -> tuple[object, object, list[dict]]:
    """Into the fresh bench database of a process with Django set up: the Kueue baseline
    scenario's tree loaded (with ``half_life`` as its fair-sharing half-life) and its first
    ``queued`` jobs submitted as one batch. Returns the scenario, the user who submits, and
    the bodies of those jobs."""
    from jobs.services import job_submit_batch

    from .kueue import job_body, load
    from .replay import prepare

    scenario = load("baseline")
    document = scenario.tree_document()
    if half_life:
        document["spec"]["fairSharing"] = {"halfLife": half_life}
    user = prepare(scenario, document)
    bodies = [job_body(w) for w in scenario.workloads[:queued]]
    if bodies:
        job_submit_batch(user=user, documents=bodies)
    return scenario, user, bodies
