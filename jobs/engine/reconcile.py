"""The reconciler: make the cluster match the database for given jobs.

``jobs_reconcile`` creates the objects of admitted jobs (released, or suspended while they
wait, with CLUSTER_GATE=suspend) and deletes those of jobs that left the cluster; a job
whose object the cluster refuses for good fails with its reason (``jobs_refused``). A
leaving job (preempted or stopping) whose objects the sync no longer sees lets its quota go
(``jobs_left``): a preempted one goes back to its queue, a stopping one is cancelled.
``quota_publish`` writes the quota tree to the cluster. All are idempotent: running them
twice, or at the same time in two processes, changes nothing more.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from datetime import datetime

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from jobs.cluster import (
    ClusterUnavailable,
    NamespaceTrouble,
    NamespaceUnavailable,
    Refusal,
    get_backend,
)
from jobs.engine import transitions
from jobs.engine.admission.writes import capacity_changed, next_try
from jobs.engine.cluster_health import cluster_unavailable
from jobs.engine.lifecycle import attempts_ended
from jobs.engine.locks import lock_jobs
from jobs.engine.namespace_health import (
    failed_reason,
    held_reason,
    namespaces_troubled,
    past_grace,
    unavailable_namespaces,
)
from jobs.engine.objects import (
    ABSENT,
    SUSPENDED,
    job_spec,
    jobs_for_specs,
    object_ref,
    object_wanted,
    pools_by_name,
    refs_removable,
)
from jobs.engine.triggers import request_admission, request_reconcile, request_sync
from jobs.models import IN_CLUSTER, LEAVING, Job, JobEvent, State
from queues import exchange, phrases, services
from queues.phrases import Phrase
from queues.selectors import queue_departments
from sql.rows import rows_update

log = logging.getLogger(__name__)


def jobs_reconcile(job_ids: Iterable[int], *, now: datetime | None = None) -> None:
    """Bring each job's object to where its state wants it (``object_wanted``): created
    and released, created suspended, or deleted. Jobs whose objects the cluster refuses
    for good fail with its reason; those refused for their namespace's trouble wait
    (``jobs_held``). A namespace in trouble is marked so by itself, never the cluster."""
    now = now or timezone.now()
    try:
        _reconcile(job_ids, now)
    except NamespaceUnavailable as error:
        namespaces_troubled(error.troubles, now=now)
        raise
    except ClusterUnavailable as error:
        cluster_unavailable(now=now, error=str(error))
        raise


def _reconcile(job_ids: Iterable[int], now: datetime) -> None:
    jobs = jobs_for_specs(Job.objects.filter(pk__any=list(job_ids)))
    wanted = {job.pk: object_wanted(job.state, job.runtime) for job in jobs}
    # Every queue's department in one query, not one per queue.
    owners = queue_departments({job.queue for job in jobs if wanted[job.pk] != ABSENT})
    pools = pools_by_name() if any(job.pool for job in jobs) else {}
    present = [
        job_spec(
            job,
            department=owners[job.queue_id].name if job.queue_id in owners else "",
            suspend=wanted[job.pk] == SUSPENDED,
            pools=pools,
        )
        for job in jobs
        if wanted[job.pk] != ABSENT
    ]
    unwanted = refs_removable(
        [(job.pk, object_ref(job)) for job in jobs if wanted[job.pk] == ABSENT]
    )
    backend = get_backend()
    troubled = None
    if unwanted:
        try:
            backend.remove(unwanted, now=now)
        except NamespaceUnavailable as error:
            troubled = error  # the other namespaces' objects are removed: go on with them
        request_sync()  # it confirms they are gone, and leaving jobs then let their quota go
    if present:
        refused = backend.apply(present, now=now)
        released = [spec.id for spec in present if not spec.suspend and spec.id not in refused]
        start_clocks(released, now=now)
        held = {i: r for i, r in refused.items() if r.namespace}
        refused = {i: r for i, r in refused.items() if not r.namespace}
        jobs_refused({i: r.reason for i, r in refused.items() if not r.retry}, now=now)
        jobs_deferred({i: r.reason for i, r in refused.items() if r.retry}, now=now)
        jobs_held(held, now=now)
        request_sync()
    if troubled is not None:
        raise troubled


def start_clocks(job_ids: list[int], *, now: datetime) -> None:
    """Admitted jobs whose objects the cluster now holds, released: their start timeout
    begins to count (``jobs.engine.start_timeouts``), once, at the first reconcile that did it."""
    with transaction.atomic():
        lock_jobs(job_ids)
        Job.objects.filter(
            pk__any=job_ids, state=State.ADMITTED, start_clock_at__isnull=True
        ).update(start_clock_at=now)


def jobs_refused(reasons: Mapping[int, Phrase | str], *, now: datetime) -> list[int]:
    """Jobs whose objects the cluster refused for good (an invalid object, a namespace
    that does not exist or is being deleted, a webhook's denial) fail with the cluster's
    words; what they held is freed and what they left behind is removed."""
    if not reasons:
        return []
    failed = jobs_transition(State.FAILED, reasons, now, "Refused")
    if failed:
        get_backend().remove(
            refs_removable(
                [(job.pk, object_ref(job)) for job in Job.objects.filter(pk__any=failed)]
            ),
            now=now,
        )
        capacity_changed(now=now)
        transaction.on_commit(request_admission)
    return failed


def jobs_held(refused: dict[int, Refusal], *, now: datetime) -> None:
    """Admitted jobs whose objects the cluster refused for their namespace's trouble (not
    found, being deleted, no Role for Caldera there): the namespace is marked unavailable by
    itself, and each job goes back to its queue in backoff with the server's words, freeing
    what it held, while the namespace may come back (``jobs_deferred``); once it has been
    unavailable for NAMESPACE_GRACE_SECONDS, the job fails instead (``jobs_refused``)."""
    if not refused:
        return
    namespaces_troubled(
        {r.namespace: NamespaceTrouble(r.reason) for r in refused.values()}, now=now
    )
    rows = unavailable_namespaces()
    late = {
        i
        for i, r in refused.items()
        if r.namespace in rows and past_grace(rows[r.namespace], now=now)
    }
    jobs_deferred(
        {i: held_reason(rows[r.namespace]) for i, r in refused.items() if i not in late}, now=now
    )
    jobs_refused({i: failed_reason(rows[refused[i].namespace]) for i in late}, now=now)


def jobs_deferred(reasons: Mapping[int, Phrase | str], *, now: datetime) -> list[int]:
    """Admitted jobs whose objects the cluster refused for now (its ResourceQuota is full)
    go back to their queue in backoff with the cluster's words, growing with each try, and
    free what they held; what they left behind (a script ConfigMap) is removed by the
    reconcile their new state asks for."""
    if not reasons:
        return []
    with transaction.atomic():
        jobs = list(
            Job.objects.select_for_update(of=("self",), no_key=True)
            .select_related("queue")
            .filter(pk__any=list(reasons), state=State.ADMITTED)
            .order_by("pk")
        )
        for job in jobs:
            transitions.leave_for_backoff(
                job, reason=reasons[job.pk], attempts=job.backoff_count + 1, now=now
            )
        rows_update(jobs, transitions.LEFT_FOR_BACKOFF)
        JobEvent.objects.record(
            (
                (job.pk, "Deferred", next_try(reasons[job.pk], job.next_attempt_at or now))
                for job in jobs
            ),
            at=now,
            warning=True,
        )
        if jobs:
            capacity_changed(now=now)
            moved = [job.pk for job in jobs]
            transaction.on_commit(lambda: request_reconcile(moved))
            transaction.on_commit(request_admission)
    return [job.pk for job in jobs]


def jobs_left(job_ids: list[int], *, now: datetime) -> list[int]:
    """Leaving jobs whose objects the cluster no longer has let their quota go: preempted
    ones go back to their queue, keeping their enqueue time (so they return to their place
    in the queue order); stopping ones are cancelled. Called by the sync, which alone sees
    that the objects are gone."""
    with transaction.atomic():
        moved = list(
            Job.objects.filter(pk__any=job_ids, state__in=LEAVING)
            .select_for_update(of=("self",), no_key=True)
            .order_by("pk")
            .values_list("pk", "state", "queue__name")
        )
        if not moved:
            return []
        transitions.move(
            State.QUEUED,
            Q(pk__any=[pk for pk, state, _ in moved if state == State.PREEMPTED]),
            dequeued_at=None,
            started_at=None,
            **transitions.NO_BACKOFF_REASON,
            next_attempt_at=None,
            leaving_since=None,
        )
        stopping = [pk for pk, state, _ in moved if state == State.STOPPING]
        ended = attempts_ended(stopping, now=now)  # past their limit, or between attempts
        transitions.move(
            State.CANCELLED,
            Q(pk__any=stopping),
            among=[State.STOPPING],
            finished_at=now,
            leaving_since=None,
        )
        JobEvent.objects.record(
            (
                (pk, "Requeued", Phrase(phrases.REQUEUED, {"queue": queue}))
                if state == State.PREEMPTED
                else (pk, JobEvent.Reason.STOPPED, Phrase(phrases.OBJECTS_LEFT))
                for pk, state, queue in moved
            ),
            at=now,
        )
        JobEvent.objects.record(ended, at=now, warning=True)
        capacity_changed(now=now)
    transaction.on_commit(request_admission)
    return [pk for pk, _, _ in moved]


def quota_publish() -> list[str]:
    """Write the quota tree to the cluster as CLUSTER_PUBLISH_QUOTA asks, so that the
    cluster's own scheduler agrees with Caldera. Returns the kinds of objects written."""
    targets = settings.CLUSTER_PUBLISH_QUOTA
    if not targets:
        return []
    tree = services.tree_published() if "elasticquotatree" in targets else None
    if tree is not None and not tree["spec"]["root"]:
        tree = None  # no tree yet: nothing to write
    queues = exchange.volcano_queues() if "volcano" in targets else None
    get_backend().publish_quota(tree=tree, queues=queues)
    return [
        kind for kind, obj in (("elasticquotatree", tree), ("volcano", queues)) if obj is not None
    ]


def jobs_transition(
    target: str, messages: Mapping[int, Phrase | str], now: datetime, reason: str
) -> list[int]:
    """Compare-and-swap these jobs into ``target`` together; an event for each that moved."""
    if not messages:
        return []
    which = Q(pk__any=list(messages))
    with transaction.atomic():
        if target == State.RUNNING:
            moved = transitions.move(target, which, started_at=now)
        else:
            # From the cluster alone: a stopping job that failed ends as its stop says.
            moved = transitions.move(target, which, among=IN_CLUSTER, finished_at=now)
        JobEvent.objects.record(
            ((job_id, reason, messages[job_id]) for job_id in moved),
            at=now,
            warning=target == State.FAILED,
        )
    return moved
