"""A few days of jobs written straight into the ledger's past, October 2026 (UTC): a job
whose span crosses midnight, one preempted and readmitted, one still holding, one cancelled
while it waited; and the expected figures, added up here from the raw spans and jobs."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

from audit.models import AuditEntry
from jobs.models import TERMINAL, Hold, Job, JobEvent, State

from .jobs import INTERN_JOB, PYTORCH_JOB, RAY_JOB, submit_document


def at(day: int, hour: int, minute: int = 0, second: int = 0) -> datetime:
    return datetime(2026, 10, day, hour, minute, second, tzinfo=UTC)


# The moment the tests read at: the third day is today, its figures computed live.
NOW = at(3, 6)


def admit(job: Job, when: datetime) -> None:
    Job.objects.filter(pk=job.pk).update(state=State.ADMITTED, dequeued_at=when)


def finish(job: Job, state: str, when: datetime) -> None:
    Job.objects.filter(pk=job.pk).update(state=state, finished_at=when)


def write_ledger(*, member, intern, outsider) -> dict[str, Job]:
    """The jobs of the scenario; the tree's audit moved to September, so that the nodes
    existed all October with the seed's values."""
    AuditEntry.objects.update(at=datetime(2026, 9, 1, tzinfo=UTC))
    crossing = submit_document(member, RAY_JOB, now=at(1, 9))
    admit(crossing, at(1, 22))  # waited 13 hours
    finish(crossing, State.SUCCEEDED, at(2, 2))  # the span crosses midnight

    preempted = submit_document(intern, INTERN_JOB, now=at(1, 10))
    admit(preempted, at(1, 10, 0, 30))  # waited 30 seconds
    Job.objects.filter(pk=preempted.pk).update(state=State.PREEMPTED, preemption_count=1)
    JobEvent.objects.record([(preempted.pk, JobEvent.Reason.PREEMPTED, "reclaimed")], at=at(1, 12))
    Job.objects.filter(pk=preempted.pk).update(state=State.QUEUED)
    # It left the cluster at 12:05 (the trigger closes a span at the statement's time).
    Hold.objects.filter(job=preempted, ended_at__isnull=False).update(ended_at=at(1, 12, 5))
    admit(preempted, at(1, 15))
    finish(preempted, State.FAILED, at(1, 18))

    holding = submit_document(
        outsider, PYTORCH_JOB, now=at(2, 8), queue="root/infrastructure/devops"
    )
    admit(holding, at(2, 9))  # still holding at NOW: counted to NOW

    cancelled = submit_document(member, RAY_JOB, now=at(1, 11))
    finish(cancelled, State.CANCELLED, at(1, 11, 30))  # never held
    return {
        "crossing": crossing,
        "preempted": preempted,
        "holding": holding,
        "cancelled": cancelled,
    }


def expected_held(*, since: datetime, until: datetime, key) -> dict:
    """{(day, key(hold)): {resource: resource-seconds}} from the raw spans, each span's
    request times its overlap with each UTC day, an open span counted to ``until``."""
    sums: dict = {}
    for hold in Hold.objects.select_related("job__owner"):
        start = max(hold.started_at, since)
        end = min(hold.ended_at or until, until)
        day = start.date()
        while start < end:
            midnight = datetime.combine(day + timedelta(days=1), datetime.min.time(), tzinfo=UTC)
            piece = (min(end, midnight) - start).total_seconds()
            cell = sums.setdefault((day, key(hold)), {})
            for resource, units in hold.request.items():
                cell[resource] = cell.get(resource, 0) + units * piece
            start, day = midnight, day + timedelta(days=1)
    return sums


def expected_jobs(*, since: date, until: date, key) -> dict:
    """{(day, key(job)): {"succeeded": n, ...}} of the jobs that finished on each day."""
    counts: dict = {}
    for job in Job.objects.filter(state__in=TERMINAL).select_related("owner", "queue__node"):
        day = job.finished_at.date()
        if since <= day <= until:
            cell = counts.setdefault((day, key(job)), {})
            cell[job.state] = cell.get(job.state, 0) + 1
    return counts


def expected_waits(*, key) -> dict:
    """{(day, key(job)): [waits in seconds]}: first span's start less the enqueue time."""
    waits: dict = {}
    for job in Job.objects.select_related("owner"):
        first = Hold.objects.filter(job=job).order_by("started_at").first()
        if first is not None:
            cell = waits.setdefault((first.started_at.date(), key(job)), [])
            cell.append((first.started_at - job.enqueued_at).total_seconds())
    return waits
