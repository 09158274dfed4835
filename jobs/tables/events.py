"""The raw statements on the job events that read them with their jobs.

The events' own INSERT over arrays is ``JobEvent.objects.record`` in ``jobs.models``: the
manager method is already that statement's named function, and the models cannot import
from here.
"""

from __future__ import annotations

from collections.abc import Sequence

from django.db import connection

from jobs.models import JOB_EVENTS, JOBS
from queues.selectors import QUEUES


def event_waits(
    *, reasons: Sequence[str], bounds: Sequence[float]
) -> list[tuple[str, str, int, int, float | None]]:
    """The events of ``reasons`` counted by queue name, reason and bucket of the time from
    their job's enqueue, with the sum of those times, as (queue, reason, bucket, count,
    seconds). A bucket is how many of ``bounds`` lie below the time, so a time equal to a
    bound counts in that bound's bucket (Prometheus' ``le`` is inclusive), and
    ``len(bounds)`` is the bucket beyond the last."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            SELECT q.name, e.reason,
                   (SELECT COUNT(*) FROM unnest(%s::float8[]) b WHERE b < w.seconds) AS bucket,
                   COUNT(*), SUM(w.seconds)
            FROM {JOB_EVENTS} e
            JOIN {JOBS} j ON j.id = e.job_id
            JOIN {QUEUES} q ON q.id = j.queue_id
            CROSS JOIN LATERAL (
                SELECT EXTRACT(EPOCH FROM e.created_at - j.enqueued_at)::float8 AS seconds
            ) w
            WHERE e.reason = ANY(%s)
            GROUP BY q.name, e.reason, bucket
            """,
            [list(bounds), list(reasons)],
        )
        return cursor.fetchall()
