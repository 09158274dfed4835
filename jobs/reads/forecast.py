"""A dry run's answer: would a job run if it were submitted now, and when. Its place in its
queue, why it would wait (the same sentence and path table a queued job gets) and about
when it would start, read as the cycle and the estimates read a queued job, for a job that
is checked but not stored."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.utils import timezone

from jobs.models import PENDING, Job
from jobs.reads.estimate import Estimate, estimate_newcomer
from jobs.reads.waiting import NEXT, Waiting, jobs_waiting

# The number a job not stored goes by, in its objects' names and where the rule and the
# replay want a key: job ids start at 1.
UNSTORED = 0


@dataclass(frozen=True)
class Forecast:
    position: int
    waiting: Waiting | None
    estimate: Estimate | None  # None when not asked for

    @property
    def fits_now(self) -> bool:
        return self.waiting is not None and self.waiting.reason == NEXT


def forecast(job: Job, *, now: datetime | None = None, estimate: bool = True) -> Forecast:
    """For ``job``, checked and not stored (``jobs.services.job_preview``): it would go
    behind every pending job of its queue of its priority or higher. ``estimate``: replay
    the rule for its start too (the API's dry run); the submit page's preview, asked as
    the form is typed, answers with the place and the sentence alone."""
    now = now or timezone.now()
    job.pk = UNSTORED
    ahead = Job.objects.filter(
        queue_id=job.queue_id, state__in=PENDING, priority__gte=job.priority
    ).count()
    told = jobs_waiting([job], now=now, positions={UNSTORED: ahead + 1}).get(UNSTORED)
    if not estimate:
        return Forecast(ahead + 1, told, None)
    start = estimate_newcomer(
        key=UNSTORED, leaf=job.queue.node.path, policy=job.queue.policy, queue_id=job.queue_id,
        request=job.request, priority=job.priority, run_seconds=job.run_seconds, ahead=ahead,
        now=now,
    )  # fmt: skip
    return Forecast(ahead + 1, told, start)
