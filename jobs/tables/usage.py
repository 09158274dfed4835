"""The raw statements on the usage samples (``UsageSample``): what the charts, the CSV
and the history API read of one node. Beat writes the samples through the ORM."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from django.db import connection

from jobs.models import USAGE_SAMPLES

# What the sampling intervals and the chart buckets are aligned on.
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def usage_buckets(
    *, node: str, step: timedelta, since: datetime, now: datetime
) -> list[tuple[datetime, str, int, int, int | None, int, int]]:
    """One node's samples from ``since`` to ``now`` by bucket of ``step`` and resource,
    the highest of each figure in each, in one query through the unique index of node and
    time: (bucket, resource, used, min, max, pending, admitted), by resource (cpu first),
    then time.

    Buckets are aligned on the epoch (``date_bin``), so a chart drawn a minute later puts
    the same samples in the same buckets; a bucket without samples (beat was down) is
    missing, not zero.
    """
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            SELECT date_bin(%(step)s, at, %(epoch)s) AS bucket, resource, MAX(used), MAX(min),
                   MAX(max), MAX(pending), MAX(admitted)
            FROM {USAGE_SAMPLES}
            WHERE node = %(node)s AND at >= %(since)s AND at <= %(now)s
            GROUP BY bucket, resource
            ORDER BY resource <> 'cpu', resource, bucket
            """,
            # psycopg takes a timedelta (the step), which the stub's parameter types leave out.
            {"step": step, "epoch": EPOCH, "node": node, "since": since, "now": now},  # type: ignore[dict-item]
        )
        return cursor.fetchall()
