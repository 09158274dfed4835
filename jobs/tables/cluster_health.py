"""The raw statements on the cluster's health (``ClusterHealth``): its single row (id 1),
written by the syncs and reconciles as one upsert each."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.db import connection

from jobs.models import ClusterHealth


def health_answered(*, now: datetime, every: timedelta) -> datetime | None:
    """The cluster answered: clear its error, and write the time it answered when that is
    more than ``every`` after the time written. Returns since when it had been failing,
    when this ends such a time."""
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
            [now, every],  # type: ignore[list-item]
        )
        row = cursor.fetchone()
    return row[0] if row else None


def health_failing(*, now: datetime, grace: timedelta, error: str) -> None:
    """The cluster did not answer: keep since when it has been failing, and write
    ``error`` once that is ``grace`` or longer ago."""
    table = ClusterHealth._meta.db_table
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
            {"now": now, "grace": grace, "error": error},  # type: ignore[dict-item]
        )
