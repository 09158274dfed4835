"""Start timeouts: admitted jobs whose pods do not all run in time leave the cluster.

A job whose objects were released in the cluster more than START_TIMEOUT_SECONDS of
reachable time ago (``Job.start_clock_at``) and whose pods are not all running goes back
to its queue in backoff, or fails after START_TIMEOUT_ATTEMPTS, with the cluster's last
scheduling failure as the reason. Time the cluster did not answer is not counted
(``jobs.tables.jobs.start_clocks_resume``). The cluster sync calls both once per sync.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction

from jobs.cluster import SCHEDULING_FAILURES
from jobs.engine import transitions
from jobs.models import Job, JobEvent, State
from queues import phrases
from queues.phrases import Phrase
from sql.rows import rows_update


def jobs_time_out(now: datetime, *, started: list[int]) -> tuple[list[int], list[int]]:
    """Admitted jobs whose pods are not all running START_TIMEOUT_SECONDS of reachable time
    after their objects were released leave the cluster, with the cluster's last word on
    why: back to their queue in backoff, growing exponentially with their
    ``start_timeouts``, or failed once they have timed out START_TIMEOUT_ATTEMPTS times
    (Kueue's ``backoffLimitCount``), so that a gang the cluster never places does not take
    its quota round after round.

    Returns the jobs requeued and the jobs failed.
    """
    timeout = settings.START_TIMEOUT_SECONDS
    attempts = settings.START_TIMEOUT_ATTEMPTS
    late = list(
        Job.objects.filter(
            state=State.ADMITTED, start_clock_at__lte=now - timedelta(seconds=timeout)
        )
        .exclude(pk__any=list(started))
        .values_list("pk", flat=True)
    )
    if not late:
        return [], []
    last_failure: dict[int, str] = {}
    for job_id, message in (
        JobEvent.objects.filter(job_id__any=late, reason__in=SCHEDULING_FAILURES)
        .order_by("job_id", "-created_at", "-id")
        .values_list("job_id", "message")
    ):
        last_failure.setdefault(job_id, message)
    with transaction.atomic():
        jobs = list(
            Job.objects.select_for_update(of=("self",), no_key=True)
            .select_related("queue")
            .filter(pk__any=late, state=State.ADMITTED)
            .order_by("pk")
        )
        events: list[tuple[Job, str, Phrase]] = []
        for job in jobs:
            # The cluster's last words are its own (English); that it said none is Caldera's.
            cause = last_failure.get(job.pk) or phrases.nested(
                Phrase(phrases.NO_SCHEDULING_FAILURE)
            )
            job.start_timeouts += 1
            if job.start_timeouts >= attempts:
                job.dequeued_at, job.last_tried_at = None, now
                transitions.step(job, State.FAILED)
                job.finished_at, job.next_attempt_at = now, None
                exceeded = Phrase(
                    phrases.START_ATTEMPTS_EXCEEDED,
                    {"timeout": f"{timeout:.0f}", "attempt": job.start_timeouts,
                     "attempts": attempts, "cause": cause},
                )  # fmt: skip
                events.append((job, "StartAttemptsExceeded", exceeded))
                continue
            reason = Phrase(phrases.START_TIMEOUT, {"timeout": f"{timeout:.0f}", "cause": cause})
            transitions.leave_for_backoff(job, reason=reason, attempts=job.start_timeouts, now=now)
            events.append(
                (
                    job,
                    JobEvent.Reason.START_TIMEOUT,
                    Phrase(
                        phrases.START_TIMEOUT_EVENT,
                        {"reason": reason.as_json(), "attempt": job.start_timeouts,
                         "attempts": attempts, "next_at": phrases.at(job.next_attempt_at or now)},
                    ),
                )
            )  # fmt: skip
        rows_update(jobs, [*transitions.LEFT_FOR_BACKOFF, "start_timeouts", "finished_at"])
        JobEvent.objects.record(
            ((job.pk, reason, message) for job, reason, message in events), at=now, warning=True
        )
    return (
        [job.pk for job in jobs if job.state == State.BACKOFF],
        [job.pk for job in jobs if job.state == State.FAILED],
    )
