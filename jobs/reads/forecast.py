"""A dry run's answer: would a job run if it were submitted now, and when. Its place in its
queue, why it would wait (the same sentence and path table a queued job gets) and about
when it would start, read as the cycle and the estimates read a queued job, for a job that
is checked but not stored.

A batch is answered as if all its jobs were queued now, together (``forecast_batch``).
Each job's ``position`` counts the pending jobs of its queue of its priority or higher,
then the batch's jobs of its queue before it in queue order: of a higher priority, or of
the same one and sent before it. Whether it fits, and why it would wait, are told by the
admission rule (``waiting.explain``) with the batch's jobs taken in that order: a job that
fits is taken as dequeued, so it leaves its queue and holds its quota for the jobs told
after it; one that does not stays in its queue, ahead of the batch's jobs behind it. The
jobs already pending are read as they stand, as a single dry run reads them: not
dequeued, whether or not they would fit. The estimates replay the rule once for the whole
batch, each job in its place.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from django.db.models import Count
from django.utils import timezone

from jobs.engine.admission.inputs import Holding, is_due, read_holding, woken_at
from jobs.models import PENDING, QUEUE_ORDER, Job
from jobs.reads.estimate import Estimate, Newcomer, estimate_newcomers
from jobs.reads.waiting import NEXT, Waiting, explain, queue_place
from kube.quantity import add
from queues.admission import Admitted
from queues.quota import path_to_root

# The number a job not stored goes by, in its objects' names and where the rule and the
# replay want a key: job ids start at 1. A batch's jobs go by 0, -1, -2, ... in the rule.
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
    return forecast_batch([job], now=now, estimate=estimate)[0]


def forecast_batch(
    jobs: Sequence[Job], *, now: datetime | None = None, estimate: bool = True
) -> list[Forecast]:
    """For ``jobs``, checked and not stored (``jobs.services.job_preview_batch``), as if
    they were all queued now, in the order sent (see the module's doc); the answers in
    that order. The jobs' ``queue`` and its ``node`` must be loaded; their ``pk`` is left
    at UNSTORED."""
    now = now or timezone.now()
    stored = _stored_ahead(jobs)
    # The order the batch stands in its queues: by priority, then as sent.
    order = sorted(range(len(jobs)), key=lambda i: (-jobs[i].priority, i))
    batch_ahead: dict[int, int] = {}
    seen: Counter[int] = Counter()
    for i in order:
        batch_ahead[i] = seen[jobs[i].queue_id]
        seen[jobs[i].queue_id] += 1
    told = _tell(jobs, order, stored, now)
    for job in jobs:
        job.pk = UNSTORED
    positions = [stored[i] + batch_ahead[i] + 1 for i in range(len(jobs))]
    if not estimate:
        return [Forecast(positions[i], told[i], None) for i in range(len(jobs))]
    starts = estimate_newcomers(
        [
            Newcomer(
                key=UNSTORED - i,
                leaf=job.queue.node.path,
                policy=job.queue.policy,
                queue_id=job.queue_id,
                request=job.request,
                priority=job.priority,
                run_seconds=job.run_seconds,
                ahead=stored[i],
                pools=tuple(job.pools),
                time_limit=job.time_limit,
            )
            for i, job in enumerate(jobs)
        ],
        now=now,
    )
    return [Forecast(positions[i], told[i], starts[i]) for i in range(len(jobs))]


def _stored_ahead(jobs: Sequence[Job]) -> list[int]:
    """For each job, the pending jobs of its queue of its priority or higher, in one query."""
    counts: dict[int, list[tuple[int, int]]] = defaultdict(list)
    rows = (
        Job.objects.filter(queue_id__any=list({job.queue_id for job in jobs}), state__in=PENDING)
        .values_list("queue_id", "priority")
        .annotate(count=Count("id"))
        .order_by()
    )
    for queue_id, priority, count in rows:
        counts[queue_id].append((priority, count))
    return [
        sum(count for priority, count in counts[job.queue_id] if priority >= job.priority)
        for job in jobs
    ]


def _tell(
    jobs: Sequence[Job], order: Sequence[int], stored: Sequence[int], now: datetime
) -> list[Waiting | None]:
    """Why each job would wait, told by the rule in ``order``: a job that fits is taken as
    dequeued for those told after it; one that does not stays ahead of its queue's next."""
    holding = read_holding()
    woken = woken_at()
    stored_heads = _stored_heads({job.queue_id for job in jobs}, holding, now, woken)
    left: dict[int, list[tuple[int, Waiting]]] = defaultdict(list)  # priority, why it waits
    told: dict[int, Waiting | None] = {}
    for i in order:
        job = jobs[i]
        job.pk = UNSTORED - i  # its key in the rule, told apart from the batch's others
        waiting_ahead = left[job.queue_id]
        ahead = stored[i] + len(waiting_ahead)
        head = stored_heads.get(job.queue_id) if stored[i] else None
        if waiting_ahead and (head is None or waiting_ahead[0][0] > head[0]):
            head = waiting_ahead[0]
        answer = explain(
            job, place=queue_place(job.queue, ahead + 1), holding=holding,
            head=head[1] if head else None,
        )  # fmt: skip
        told[i] = answer
        if answer is not None and answer.reason == NEXT:
            taken = Admitted(job.pk, job.queue.node.path, job.request, job.priority, now)
            holding = _with(holding, taken)
        elif answer is not None:
            # Not a stored job: the head's id in the answer is null.
            left[job.queue_id].append((job.priority, replace(answer, job_id=None)))
    return [told[i] for i in range(len(jobs))]


def _stored_heads(
    queue_ids: set[int], holding: Holding, now: datetime, woken: datetime | None
) -> dict[int, tuple[int, Waiting]]:
    """The first pending job of each of these queues, with its priority and why it waits,
    as ``jobs_waiting`` tells it."""
    heads = {}
    for queue_id in queue_ids:
        first = (
            Job.objects.filter(queue_id=queue_id, state__in=PENDING)
            .select_related("queue__node")
            .order_by(*QUEUE_ORDER)
            .first()
        )
        if first is None:
            continue
        due = is_due(first.state, first.next_attempt_at, first.last_tried_at, now, woken)
        told = explain(first, place=queue_place(first.queue, 1), holding=holding, due=due)
        if told is not None:
            heads[queue_id] = (first.priority, told)
    return heads


def _with(holding: Holding, job: Admitted) -> Holding:
    """``holding`` with ``job`` dequeued: it holds its request on its path."""
    used = dict(holding.used)
    for path in path_to_root(job.leaf):
        used[path] = add(used.get(path, {}), job.request)
    return replace(holding, used=used, admitted=[*holding.admitted, job])
