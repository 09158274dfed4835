"""A job's end, past its time limit or between its attempts.

- **Time limits.** A running job whose pods have run longer than its ``time_limit``
  (its own, or its leaf's ``limits.defaultTime``: ``queues.limits``) is stopped: it becomes
  stopping, to end failed (``Job.ends_as``), and holds its quota until the cluster confirms
  its objects are gone, as a cancelled job does; then it fails with "Ran past its limit of
  2h". The sync looks at every sync, and asks for one at the next job's limit.
- **Retries.** A job that asked for ``retries`` and fails with some left is not failed: it
  becomes stopping, to end in its queue (``ENDS_RETRY``), the failed attempt's number, times
  and reason kept in ``Job.attempts``; once its objects are gone its next attempt waits in
  its queue, in backoff, keeping its enqueue time and so its place. Preemptions and start
  timeouts are not failures: they take other ways back to the queue and count no attempt.
  A time limit is a failure of its own and is not retried (Slurm's ``TIMEOUT`` is not
  requeued either).

The sync calls ``jobs_past_limit`` and ``jobs_retrying`` with the jobs it saw fail, and
``jobs_left`` (``jobs.engine.reconcile``) calls ``attempts_ended`` for the stopping jobs
whose objects are gone. Each step commits with its events, so a worker killed between two
of them leaves the job in a state the next sync carries on from.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta

from django.db import transaction
from django.db.models import F

from jobs.engine import transitions
from jobs.models import ENDS_FAILED, ENDS_RETRY, IN_CLUSTER, Job, JobEvent, State
from queues import phrases
from queues.limits import format_duration
from queues.phrases import Phrase
from sql.rows import rows_update

# What stopping a job for its end changes, for rows_update.
_STOPPED = ("state", "ends_as", "leaving_since", "attempts")


def jobs_past_limit(now: datetime) -> list[int]:
    """Running jobs past their time limit stop, to fail once their objects are gone; the ids
    that did. Running jobs are few (what the cluster runs): the filter reads them all."""
    limited = Job.objects.filter(
        state=State.RUNNING, time_limit__isnull=False, started_at__isnull=False
    ).values_list("pk", "started_at", "time_limit")
    late = [
        pk
        for pk, started, limit in limited
        if started is not None and limit is not None and started + timedelta(seconds=limit) <= now
    ]
    if not late:
        return []
    with transaction.atomic():
        jobs = list(
            Job.objects.select_for_update(of=("self",), no_key=True)
            .filter(pk__any=late, state=State.RUNNING)
            .order_by("pk")
            .only("pk", "state", "time_limit", "attempts")
        )
        for job in jobs:
            transitions.step(job, State.STOPPING)
            job.ends_as, job.leaving_since = ENDS_FAILED, now
        rows_update(jobs, _STOPPED)
        JobEvent.objects.record(
            (
                (job.pk, "TimeLimitExceeded", Phrase(phrases.TIME_LIMIT_STOPPING, _limit(job)))
                for job in jobs
            ),
            at=now,
            warning=True,
        )
    return [job.pk for job in jobs]


def jobs_retrying(failed: Mapping[int, Phrase | str], now: datetime) -> list[int]:
    """Of the jobs the cluster says failed (with its reason), those with retries left stop,
    to go back to their queue for their next attempt: the ids that did; the caller fails
    the others. The failed attempt is kept, with its reason, in ``attempts``."""
    if not failed:
        return []
    with transaction.atomic():
        jobs = list(
            Job.objects.select_for_update(of=("self",), no_key=True)
            .filter(pk__any=list(failed), state__in=IN_CLUSTER, attempt__lte=F("retries"))
            .order_by("pk")
            .only("pk", "state", "attempt", "retries", "attempts", "started_at", "dequeued_at")
        )
        events = []
        for job in jobs:
            reason = failed[job.pk]
            said = reason.english() if isinstance(reason, Phrase) else reason
            transitions.step(job, State.STOPPING)
            job.ends_as, job.leaving_since = ENDS_RETRY, now
            job.attempts = [
                *job.attempts,
                {"attempt": job.attempt, "started_at": _iso(job.started_at or job.dequeued_at),
                 "ended_at": _iso(now), "reason": said},
            ]  # fmt: skip
            events.append(
                (
                    job.pk,
                    "Retrying",
                    Phrase(
                        phrases.RETRYING,
                        {"attempt": job.attempt, "attempts": job.retries + 1,
                         "reason": _nested(reason), "next": job.attempt + 1},
                    ),
                )
            )  # fmt: skip
        rows_update(jobs, _STOPPED)
        JobEvent.objects.record(events, at=now, warning=True)
    return [job.pk for job in jobs]


def attempts_ended(ids: list[int], *, now: datetime) -> list[tuple[int, str, Phrase]]:
    """Stopping jobs whose objects are gone and that end otherwise than cancelled: past
    their time limit, they fail; between attempts, the next waits in its queue, in backoff
    (its queue's base and cap, by attempt). The caller holds their row locks. The events
    it owes: (job, reason, message)."""
    jobs = list(
        Job.objects.select_related("queue")
        .filter(pk__any=ids, state=State.STOPPING)
        .exclude(ends_as="")
        .order_by("pk")
    )
    events: list[tuple[int, str, Phrase]] = []
    for job in jobs:
        job.leaving_since = None
        if job.ends_as == ENDS_FAILED:
            transitions.step(job, State.FAILED)
            job.finished_at = now
            events.append((job.pk, JobEvent.Reason.FAILED, Phrase(phrases.TIME_LIMIT_FAILED,
                                                                   _limit(job))))  # fmt: skip
        else:
            last = job.attempts[-1] if job.attempts else {}
            reason = Phrase(
                phrases.RETRY_BACKOFF,
                {"attempt": job.attempt, "attempts": job.retries + 1,
                 "reason": last.get("reason", "")},
            )  # fmt: skip
            # The end kept of the failed attempt goes with it (its last lines), and the next
            # attempt's end is kept anew.
            job.attempts = [
                *job.attempts[:-1],
                {**last, "exit_code": job.exit_code,
                 "log_tail": _last_lines(job.log_tail, ATTEMPT_TAIL_LINES)},
            ]  # fmt: skip
            job.log_tail, job.log_tail_pod, job.log_tail_missing = "", "", ""
            job.log_tail_at, job.log_tail_truncated, job.exit_code = None, False, None
            job.attempt += 1
            transitions.leave_for_backoff(job, reason=reason, attempts=job.attempt - 1, now=now)
            job.started_at = None
            events.append(
                (
                    job.pk,
                    "Requeued",
                    Phrase(
                        phrases.RETRY_QUEUED,
                        {"next": job.attempt, "attempts": job.retries + 1,
                         "queue": job.queue.name, "until": phrases.at(job.next_attempt_at or now)},
                    ),
                )
            )  # fmt: skip
        job.ends_as = ""
    rows_update(
        jobs,
        [*transitions.LEFT_FOR_BACKOFF, "ends_as", "leaving_since", "finished_at", "attempt",
         "started_at", "attempts", *LOG_TAIL_FIELDS],
    )  # fmt: skip
    return events


# What a failed attempt keeps of its log's end: its last lines, at most this many bytes.
ATTEMPT_TAIL_LINES = 20
ATTEMPT_TAIL_BYTES = 4096
LOG_TAIL_FIELDS = (
    "log_tail", "log_tail_pod", "log_tail_missing", "log_tail_at", "log_tail_truncated",
    "exit_code",
)  # fmt: skip


def _last_lines(text: str, lines: int) -> str:
    kept = "\n".join(text.rstrip("\n").split("\n")[-lines:]) if text else ""
    return kept[-ATTEMPT_TAIL_BYTES:]


def _limit(job: Job) -> dict[str, str]:
    return {"limit": format_duration(job.time_limit or 0)}


def _nested(reason: Phrase | str) -> dict | str:
    return reason.as_json() if isinstance(reason, Phrase) else reason


def _iso(moment: datetime | None) -> str | None:
    return moment.isoformat() if moment is not None else None
