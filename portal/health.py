"""The probes.

- GET /livez: 200 while the process answers requests; it reads nothing, so a database or
  broker outage never restarts a web process. The Deployment's liveness probe asks the
  same question of gunicorn's arbiter on the probe port instead (portal/web_server.py),
  so that it is answered even while every request worker is busy.
- GET /readyz: 200 when the database and the broker answer, else 503 naming the one
  that does not (the readiness probe: a pod that cannot serve leaves the Service).
- GET /healthz: 200 when the web process and the database answer, with a body that also
  says whether the broker (Redis), at least one Celery worker and the cluster answer;
  those do not fail it, since submissions are accepted without them.

Each is cheap enough for a flood of probes: at most one ``SELECT 1``, one Redis round
trip that counts the workers' heartbeats (portal/heartbeat.py; it also proves the broker
answers), and the cluster's last recorded answer, with no call to a worker or the cluster.
Each dependency gets PROBE_TIMEOUT_SECONDS: a stopped Redis (it accepts connections and
never answers) or a PostgreSQL stuck on a statement costs a probe that much, not the
broker's own timeout, so a probe always answers well inside its own timeout.
"""

from __future__ import annotations

from functools import cache

import redis
from django.conf import settings
from django.db import Error, connection, transaction
from django.http import HttpRequest, JsonResponse

from jobs.reads.selectors import cluster_trouble

from .heartbeat import live_workers


@cache
def _redis(url: str, timeout: float) -> redis.Redis:
    return redis.Redis.from_url(url, socket_timeout=timeout, socket_connect_timeout=timeout)


def probe_redis() -> redis.Redis:
    """The probes' Redis client: PROBE_TIMEOUT_SECONDS to connect and to read. One per
    URL and timeout, so a changed setting takes effect at the next probe."""
    return _redis(settings.REDIS_URL, settings.PROBE_TIMEOUT_SECONDS)


def database_answers() -> bool:
    """Whether PostgreSQL answers ``SELECT 1`` within PROBE_TIMEOUT_SECONDS."""
    try:
        with transaction.atomic(), connection.cursor() as cursor:
            # Local to this transaction: the connection goes back to the request's
            # other work without the limit.
            milliseconds = max(1, round(settings.PROBE_TIMEOUT_SECONDS * 1000))
            cursor.execute("SELECT set_config('statement_timeout', %s, true)", [str(milliseconds)])
            cursor.execute("SELECT 1")
        return True
    except Error:  # the body says "down"; the status 503
        return False


def _workers() -> int | None:
    """The live workers, or None when Redis does not answer in time."""
    try:
        return live_workers(probe_redis())
    except redis.RedisError:
        return None


def _cluster() -> str:
    trouble = cluster_trouble()
    if trouble is None:
        return "ok"
    return f"unavailable since {trouble.failing_since.isoformat()}: {trouble.error}"


def livez(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"web": "ok"})


def readyz(request: HttpRequest) -> JsonResponse:
    database, broker = database_answers(), _workers() is not None
    body = {"database": "ok" if database else "down", "broker": "ok" if broker else "down"}
    return JsonResponse(body, status=200 if database and broker else 503)


def healthz(request: HttpRequest) -> JsonResponse:
    database = database_answers()
    workers = _workers()
    body = {
        "web": "ok",
        "database": "ok" if database else "down",
        "broker": "down" if workers is None else "ok",
        "workers": workers or 0,
        "cluster": _cluster() if database else "unknown",
    }
    return JsonResponse(body, status=200 if database else 503)
