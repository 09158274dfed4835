"""GET /healthz: 200 when the web process and the database answer.

The body also says whether the broker (Redis), at least one Celery worker and the cluster
answer; those do not fail the check, since submissions are accepted without them.
"""

from __future__ import annotations

from django.db import connection
from django.http import JsonResponse


def _database() -> bool:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        return True
    except Exception:  # any failure means "does not answer"; the body says so
        return False


def _broker() -> bool:
    from jobs.triggers import _redis

    try:
        return bool(_redis().ping())
    except Exception:
        return False


def _workers() -> int:
    from portal.celery import app

    try:
        return len(app.control.ping(timeout=0.5) or [])
    except Exception:
        return 0


def _cluster() -> str:
    from jobs.selectors import cluster_trouble

    trouble = cluster_trouble()
    if trouble is None:
        return "ok"
    return f"unavailable since {trouble.failing_since.isoformat()}: {trouble.error}"


def healthz(request):
    database = _database()
    broker = _broker()
    workers = _workers() if broker else 0
    body = {
        "web": "ok",
        "database": "ok" if database else "down",
        "broker": "ok" if broker else "down",
        "workers": workers,
        "cluster": _cluster() if database else "unknown",
    }
    return JsonResponse(body, status=200 if database else 503)
