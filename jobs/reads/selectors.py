"""Reads of jobs and queues, scoped to a user, cheap at 100,000 pending jobs.

A queue's order is priority, then ticket (its arrival; see Job.ticket). A page of a queue
is a range scan of the queue-order index. A position is a sum over the pending blocks
ahead (PendingBlock, kept by triggers) plus a count inside the job's own block, so its cost
does not grow with the depth of the queue; pending counts are sums of the same blocks.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import cast

from django.conf import settings
from django.db.models import Count, Q, QuerySet, Sum
from django.http import Http404
from django.utils.translation import gettext as _

from jobs.cluster.kinds import RESOURCES
from jobs.cluster.manifests.common import LABEL_JOB_ID
from jobs.document.validation import pod_count
from jobs.engine.admission.inputs import leaf_usage
from jobs.engine.objects import object_ref
from jobs.models import (
    HOLDING,
    LEAVING,
    LIVE,
    PENDING,
    QUEUE_ORDER,
    ClusterHealth,
    Job,
    JobEvent,
    PendingBlock,
    State,
    kind_shape,
)
from jobs.tables.jobs import (
    leaf_holding,
    leaf_pending_demand,
    pending_positions,
    queue_holding,
)
from kube.quantity import ResourceList
from queues.models import Queue
from queues.quota import rollup
from queues.selectors import queues_for_user

# What a queue's page shows of each job (not its script, pod groups or manifest fields).
PAGE_FIELDS = (
    "id", "name", "queue_id", "owner_id", "priority", "ticket", "state", "enqueued_at",
    "dequeued_at", "backoff_reason", "backoff_code", "backoff_args", "next_attempt_at",
    "last_tried_at", "start_clock_at", "request", "pools", "held_at", "held_by_id",
)  # fmt: skip


def jobs_for_user(user) -> QuerySet[Job]:
    jobs = Job.objects.select_related("queue__node", "owner", "held_by")
    if user.is_staff:
        return jobs
    return jobs.filter(queue__in=queues_for_user(user).values("id"))


def job_get_for_user(user, pk: object) -> Job:
    """The job if the user may see it; 404 otherwise, never a leak of its existence."""
    try:
        return jobs_for_user(user).get(pk=int(pk))  # type: ignore[call-overload]  # TypeError below
    except (Job.DoesNotExist, ValueError, TypeError):
        raise Http404("no such job") from None


def queue_get_for_user(user, name: str) -> Queue:
    queue = (
        queues_for_user(user)
        .filter(Q(name=name) | Q(node__path=name))
        .select_related("node")
        .first()
    )
    if queue is None:
        raise Http404("no such queue")
    return queue


def job_position(job: Job) -> int | None:
    """1 for the next job to be tried in its queue; None once the job left the queue."""
    if job.state not in PENDING:
        return None
    return job_positions([job]).get(job.pk)


def queue_pending_page(queue: Queue, *, offset: int = 0, limit: int = 50) -> list[tuple[int, Job]]:
    """(position, job) for a page of the queue's pending jobs, in queue order."""
    jobs = (
        Job.objects.filter(queue=queue, state__in=PENDING)
        .select_related("owner", "held_by")
        .only(*PAGE_FIELDS, "owner__username", "held_by__username")
        .order_by(*QUEUE_ORDER)[offset : offset + limit]
    )
    return [(offset + index + 1, job) for index, job in enumerate(jobs)]


def queue_counts(queue: Queue) -> dict[str, int]:
    """Jobs of the queue by live state: pending from its blocks, the rest by index."""
    counts = dict(
        Job.objects.filter(queue=queue, state__in=[s for s in LIVE if s != State.QUEUED])
        .values_list("state")
        .annotate(n=Count("id"))
        .values_list("state", "n")
    )
    counts[State.QUEUED] = pending_counts([queue.pk]).get(queue.pk, 0) - counts.get(
        State.BACKOFF, 0
    )
    return {state: counts.get(state, 0) for state in LIVE}


def queue_in_cluster(queue: Queue, *, limit: int = 100) -> list[Job]:
    """The queue's jobs holding quota: admitted, running, and leaving (preempted or
    stopping) until the cluster confirms their objects are gone."""
    return list(
        Job.objects.filter(queue=queue, state__in=HOLDING)
        .select_related("owner")
        .only(*PAGE_FIELDS, "owner__username")
        .order_by("dequeued_at", "id")[:limit]
    )


def usage_by_path() -> dict[str, ResourceList]:
    """Usage of every node: what its subtree's jobs hold (``leaf_usage``)."""
    return rollup(leaf_usage())


@dataclass(frozen=True)
class LeafLoads:
    """Per leaf path and resource, in base units: what its jobs holding quota use, how
    many of them hold some of the resource, and what its pending jobs ask for."""

    used: dict[str, ResourceList]
    admitted: dict[str, ResourceList]
    pending: dict[str, ResourceList]


def leaf_loads(*, resources: Iterable[str]) -> LeafLoads:
    """Usage, admitted jobs and pending demand of every leaf, in two queries.

    The jobs holding quota are few (what the cluster runs): every resource they hold is
    summed, as ``leaf_usage`` does, and the jobs holding some of each counted. Pending jobs
    may be 100,000: their demand is summed only for ``resources`` (the ones the tree
    names). Both select by the states of the partial indexes ``job_holding`` and
    ``job_pending_order``.
    """
    names = sorted(set(resources))
    used, admitted = leaf_holding()
    pending = leaf_pending_demand(names) if names else {}
    return LeafLoads(used=used, admitted=admitted, pending=pending)


def queue_usage(queue: Queue) -> ResourceList:
    return queue_holding(queue.pk)


def job_events(job: Job) -> QuerySet[JobEvent]:
    return job.events.select_related("actor").order_by("created_at", "id")


@dataclass
class Cycles:
    """Scheduling cycles of one attempt (the job's n-th dequeue) in a row that failed the
    same way: what the cluster said in the last of them, and how many there were."""

    attempt: int
    first: int
    last: int
    times: int
    events: list[JobEvent]  # the last cycle's, one per pod or pod group

    @property
    def created_at(self):
        return self.events[0].created_at

    @property
    def label(self) -> str:
        """ "Scheduling cycle 3", or "Scheduling cycles 3 to 60, 58 times"."""
        if self.times == 1:
            return _("Scheduling cycle %(cycle)s") % {"cycle": self.last}
        return _("Scheduling cycles %(first)s to %(last)s, %(times)s times") % {
            "first": self.first,
            "last": self.last,
            "times": self.times,
        }


def _said(events: list[JobEvent]) -> tuple:
    """What a cycle's events said, the cycle's own number left out, to compare cycles."""
    return tuple(
        sorted(
            (e.reason, e.involved, re.sub(rf"\bcycle {e.cycle}\b", "cycle N", e.message))
            for e in events
        )
    )


def event_timeline(events: Iterable[JobEvent]) -> list[JobEvent | Cycles]:
    """The job's events in order, its scheduling failures grouped by cycle and attempt, and
    consecutive cycles of an attempt that failed the same way collapsed into one row. A job
    dequeued again after a start timeout starts a new attempt whose cycles are new rows."""
    rows: list[JobEvent | tuple[int, int]] = []
    attempt, current = 0, None
    by_cycle: dict[tuple[int, int], list[JobEvent]] = {}
    order: list[tuple[int, int]] = []
    for event in events:
        if event.reason == JobEvent.Reason.DEQUEUED:
            attempt += 1
        if event.cycle is None:
            rows.append(event)
            continue
        key = (attempt, event.cycle)
        if key not in by_cycle:
            by_cycle[key] = []
            order.append(key)
            rows.append(key)  # placeholder, filled below in order
        by_cycle[key].append(event)
    timeline: list[JobEvent | Cycles] = []
    for row in rows:
        if isinstance(row, JobEvent):
            timeline.append(row)
            current = None
            continue
        (number_attempt, cycle), said = row, by_cycle[row]
        if (
            current is not None
            and current.attempt == number_attempt
            and current.last + 1 == cycle
            and _said(current.events) == _said(said)
        ):
            current.last, current.times, current.events = cycle, current.times + 1, said
            continue
        current = Cycles(number_attempt, cycle, cycle, 1, said)
        timeline.append(current)
    return timeline


EVENT_PAGE = 50  # rows of a job's events on its page


def timeline_page(timeline: list, page: int | None) -> tuple[list, int, int]:
    """One page of a job's event timeline: (rows, the page, the number of pages). Without
    a page, the last one: the newest rows."""
    pages = max(1, -(-len(timeline) // EVENT_PAGE))
    page = pages if page is None else min(max(page, 1), pages)
    return timeline[(page - 1) * EVENT_PAGE : page * EVENT_PAGE], page, pages


def job_positions(jobs: list[Job]) -> dict[int, int]:
    """Positions of several pending jobs in one query, whatever the depth of their queue."""
    ids = [job.pk for job in jobs if job.state in PENDING]
    if not ids:
        return {}
    return pending_positions(ids)


def pending_counts(queue_ids: list[int]) -> dict[int, int]:
    """Pending (queued and backoff) jobs of each queue, from its blocks."""
    return dict(
        PendingBlock.objects.filter(queue_id__any=queue_ids)
        .values_list("queue_id")
        .annotate(n=Sum("jobs"))
        .values_list("queue_id", "n")
    )


def cluster_trouble():
    """The cluster's current failure (a ``ClusterHealth`` with its error), or None."""
    return ClusterHealth.objects.filter(pk=1).exclude(error="").first()


def jobs_stuck_leaving(*, now: datetime) -> QuerySet[Job]:
    """Leaving jobs (stopping or preempted) whose objects the cluster has not removed in
    LEAVING_WARN_SECONDS: their pods had time to end, so something holds the objects (the
    garbage collector, a finalizer, a node that is gone). The job page and /metrics."""
    since = now - timedelta(seconds=settings.LEAVING_WARN_SECONDS)
    return Job.objects.filter(state__in=LEAVING, leaving_since__lte=since)


@dataclass(frozen=True)
class StuckLeaving:
    """What the page of a job stuck leaving says: since when, and what an admin runs to
    see what holds its objects."""

    since: datetime
    object_command: str
    pods_command: str


def job_stuck_leaving(job: Job, *, now: datetime) -> StuckLeaving | None:
    """What to say of the job if it is among ``jobs_stuck_leaving``, else None."""
    if job.state not in LEAVING or not jobs_stuck_leaving(now=now).filter(pk=job.pk).exists():
        return None
    ref, resource = object_ref(job), RESOURCES[job.runtime]
    return StuckLeaving(
        since=cast(datetime, job.leaving_since),  # set while it leaves
        object_command=(
            f"kubectl get {resource.plural}.{resource.group} {ref.name} -n {ref.namespace} -o yaml"
        ),
        pods_command=f"kubectl get pods -n {ref.namespace} -l {LABEL_JOB_ID}={job.pk}",
    )


@dataclass(frozen=True)
class PodGroupRow:
    name: str  # "head", "master" or the worker group's name
    pods: int
    asks: str  # each pod's resources: "cpu 4, memory 4G"


@dataclass(frozen=True)
class PodsSummary:
    """A job's pods as a page shows them, bounded whatever the job's size: the head or
    master, the first ``shown`` worker groups, and how many groups and pods are left."""

    pods: int
    rows: list[PodGroupRow]
    more_groups: int
    more_pods: int


def job_pods_summary(job: Job, *, shown: int) -> PodsSummary:
    head = kind_shape(job.kind).head
    rows = [PodGroupRow(head, 1, _asks(job.head))]
    rows += [
        PodGroupRow(str(group.get("name", "")), group.get("replicas", 0), _asks(group))
        for group in job.workers[:shown]
    ]
    left = job.workers[shown:]
    return PodsSummary(
        pods=pod_count(job.workers),
        rows=rows,
        more_groups=len(left),
        more_pods=sum(group.get("replicas", 0) for group in left),
    )


def _asks(group: dict) -> str:
    resources = group.get("resources") or {}
    return ", ".join(f"{name} {amount}" for name, amount in sorted(resources.items()))
