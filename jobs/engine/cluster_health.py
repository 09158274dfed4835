"""Cluster health: whether the cluster answered the last sync or reconcile, and if not, since
when and with what error (the single ``ClusterHealth`` row that every page's banner and
``/healthz`` read).

The error is written, and the cluster named unavailable, only once it has failed for
CLUSTER_UNAVAILABLE_GRACE_SECONDS: an API server that restarts answers 503 and refuses
every request for about a second, which is not an outage of its RBAC. A namespace's own
trouble is never the cluster's (``jobs.engine.namespace_health``).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection

from jobs.models import ClusterHealth

ANSWER_RECORDED_EVERY = timedelta(seconds=10)  # a cluster that keeps answering: few writes


def cluster_answered(*, now: datetime) -> datetime | None:
    """The cluster answered a sync's listing: clear its error (and note the time, now and
    then). Returns since when it had not answered, when this ends such a time."""
    table = ClusterHealth._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            WITH before AS (SELECT failing_since FROM {table} WHERE id = 1)
            INSERT INTO {table} (id, answered_at, failing_since, error) VALUES (1, %s, NULL, '')
            ON CONFLICT (id) DO UPDATE
            SET answered_at = EXCLUDED.answered_at, failing_since = NULL, error = ''
            WHERE {table}.error <> '' OR {table}.failing_since IS NOT NULL
               OR {table}.answered_at IS NULL
               OR {table}.answered_at < EXCLUDED.answered_at - %s
            RETURNING (SELECT failing_since FROM before)
            """,
            # psycopg takes a timedelta, which the stub's parameter types leave out.
            [now, ANSWER_RECORDED_EVERY],  # type: ignore[list-item]
        )
        row = cursor.fetchone()
    return row[0] if row else None


def cluster_unavailable(*, now: datetime, error: str) -> None:
    """The cluster did not answer: keep since when it has been failing, and its error once
    that is longer ago than the grace."""
    table = ClusterHealth._meta.db_table
    grace = timedelta(seconds=settings.CLUSTER_UNAVAILABLE_GRACE_SECONDS)
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            INSERT INTO {table} (id, answered_at, failing_since, error)
            VALUES (
                1, NULL, %(now)s, CASE WHEN %(grace)s <= interval '0' THEN %(error)s ELSE '' END
            )
            ON CONFLICT (id) DO UPDATE SET
                failing_since = COALESCE({table}.failing_since, EXCLUDED.failing_since),
                error = CASE
                    WHEN COALESCE({table}.failing_since, EXCLUDED.failing_since)
                         <= %(now)s - %(grace)s THEN %(error)s
                    ELSE {table}.error
                END
            """,
            # psycopg takes a timedelta, which the stub's parameter types leave out.
            {"now": now, "grace": grace, "error": error[:2000]},  # type: ignore[dict-item]
        )
