"""Cluster health: whether the cluster answered the last sync or reconcile, and if not, since
when and with what error (the single ``ClusterHealth`` row that every page's banner and
``/healthz`` read)."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.db import connection

from .models import ClusterHealth

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
            WHERE {table}.error <> '' OR {table}.answered_at IS NULL
               OR {table}.answered_at < EXCLUDED.answered_at - %s
            RETURNING (SELECT failing_since FROM before)
            """,
            [now, ANSWER_RECORDED_EVERY],
        )
        row = cursor.fetchone()
    return row[0] if row else None


def cluster_unavailable(*, now: datetime, error: str) -> None:
    """The cluster did not answer: keep the error and since when it has been failing."""
    table = ClusterHealth._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            INSERT INTO {table} (id, answered_at, failing_since, error) VALUES (1, NULL, %s, %s)
            ON CONFLICT (id) DO UPDATE SET error = EXCLUDED.error,
                failing_since = COALESCE({table}.failing_since, EXCLUDED.failing_since)
            """,
            [now, error[:2000]],
        )
