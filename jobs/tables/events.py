"""The raw statements on the job events that read them with their jobs.

The events' own INSERT over arrays is ``JobEvent.objects.record`` in ``jobs.models``: the
manager method is already that statement's named function, and the models cannot import
from here.
"""

from __future__ import annotations

from collections.abc import Sequence

from django.db import connection

from jobs.models import JOB_EVENTS, JOBS, RETIRED_EVENTS, JobEvent
from queues.selectors import QUEUES

# Seconds from enqueue to admission, as Kueue's admission wait buckets reach (1 s to 3 h).
ADMISSION_WAIT_BOUNDS = (
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
    60.0,
    120.0,
    300.0,
    600.0,
    1800.0,
    3600.0,
    10800.0,
)
# The events the deployment's counters count: admissions, and Kueue's evictions (a job sent
# out of the cluster after its admission: a reclaim or priority preemption, a start timeout).
COUNTED = (JobEvent.Reason.DEQUEUED, JobEvent.Reason.PREEMPTED, JobEvent.Reason.START_TIMEOUT)

# The counted events of stored jobs (of ``job_ids`` alone where it is not null) by queue,
# reason and bucket of the time from their job's enqueue. A bucket is how many of the
# bounds lie below the time, so a time equal to a bound counts in that bound's bucket
# (Prometheus' ``le`` is inclusive), and ``len(bounds)`` is the bucket beyond the last.
_COUNTED_EVENTS = f"""
    SELECT q.name AS queue, e.reason,
           (SELECT COUNT(*) FROM unnest(%(bounds)s::float8[]) b WHERE b < w.seconds) AS bucket,
           COUNT(*) AS count, COALESCE(SUM(w.seconds), 0) AS seconds
    FROM {JOB_EVENTS} e
    JOIN {JOBS} j ON j.id = e.job_id
    JOIN {QUEUES} q ON q.id = j.queue_id
    CROSS JOIN LATERAL (
        SELECT EXTRACT(EPOCH FROM e.created_at - j.enqueued_at)::float8 AS seconds
    ) w
    WHERE e.reason = ANY(%(reasons)s)
      AND (%(jobs)s::bigint[] IS NULL OR e.job_id = ANY(%(jobs)s::bigint[]))
    GROUP BY q.name, e.reason, bucket
"""


def event_waits() -> list[tuple[str, str, int, int, float]]:
    """Every counted event ever, as (queue, reason, bucket, count, seconds): those of the
    stored jobs and the tallies of those retention deleted, so each figure only grows."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            SELECT queue, reason, bucket, SUM(count)::bigint, SUM(seconds)
            FROM (
                {_COUNTED_EVENTS}
                UNION ALL
                SELECT queue, reason, bucket, count, seconds FROM {RETIRED_EVENTS}
            ) counted
            GROUP BY queue, reason, bucket
            """,
            {"bounds": list(ADMISSION_WAIT_BOUNDS), "reasons": list(COUNTED), "jobs": None},
        )
        return cursor.fetchall()


def events_retire(job_ids: Sequence[int]) -> None:
    """Add the counted events of these jobs, about to be deleted, to the tallies: in the
    transaction that deletes them, so that a counter neither drops nor counts twice."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            INSERT INTO {RETIRED_EVENTS} (queue, reason, bucket, count, seconds)
            SELECT queue, reason, bucket, count, seconds FROM ({_COUNTED_EVENTS}) retiring
            ON CONFLICT (queue, reason, bucket) DO UPDATE
                SET count = {RETIRED_EVENTS}.count + EXCLUDED.count,
                    seconds = {RETIRED_EVENTS}.seconds + EXCLUDED.seconds
            """,
            {
                "bounds": list(ADMISSION_WAIT_BOUNDS),
                "reasons": list(COUNTED),
                "jobs": list(job_ids),
            },
        )
