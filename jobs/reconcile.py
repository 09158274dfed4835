"""Make the cluster match the database, and record what the cluster says.

``jobs_reconcile`` creates the objects of admitted jobs and deletes those of jobs that
left the cluster. ``cluster_sync`` reads statuses and events, moves jobs to running and
finished, and frees their quota. Both are idempotent: running them twice, or at the same
time in two processes, changes nothing more.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.db.models import Q
from django.utils import timezone

from queues import exchange, services
from queues.selectors import queue_department, queue_departments

from .admission import backoff_delay, capacity_changed
from .cluster import ClusterUnavailable, ObjectRef, get_backend
from .cluster.kinds import RESOURCES
from .locks import SYNC, advisory_lock
from .manifests.common import object_name
from .models import IN_CLUSTER, PENDING, ClusterHealth, Job, JobEvent, State, sources_of
from .spec import JobSpec, PodGroup
from .triggers import request_admission, request_sync, request_sync_at
from .unrunnable import jobs_fail_unrunnable

log = logging.getLogger(__name__)


# Runtimes whose objects have a suspend flag: KubeRay's RayJob, Kubeflow's PyTorchJob.
SUSPENDABLE = tuple(name for name, kind in RESOURCES.items() if kind.suspend_path)
RUNNING, SUSPENDED, ABSENT = "running", "suspended", "absent"


def object_wanted(state: str, runtime: str) -> str:
    """Where a job in ``state`` wants its object: released to the scheduler (running),
    created and suspended until its dequeue (suspended, with CLUSTER_GATE=suspend), or
    not in the cluster at all (absent)."""
    if state in IN_CLUSTER:
        return RUNNING
    if state in PENDING and settings.CLUSTER_GATE == "suspend" and runtime in SUSPENDABLE:
        return SUSPENDED
    return ABSENT


def object_ref(job: Job) -> ObjectRef:
    return ObjectRef(object_name(job.name, job.pk), job.namespace, job.runtime)


def job_spec(job: Job, *, department: str = "", suspend: bool = False) -> JobSpec:
    """The plain description of a job that manifests and backends take."""
    return JobSpec(
        id=job.pk,
        name=job.name,
        object_name=object_name(job.name, job.pk),
        namespace=job.namespace,
        kind=job.kind,
        runtime=job.runtime,
        image=job.image,
        head=PodGroup(
            name="master" if job.kind == Job.Kind.PYTORCH else "head",
            replicas=1,
            resources=dict(job.head.get("resources", {})),
        ),
        workers=tuple(
            PodGroup(g["name"], g["replicas"], dict(g["resources"]), g.get("max_replicas"))
            for g in job.workers
        ),
        queue_name=job.queue.name,
        queue_path=job.queue.node.path,
        department=department,
        owner=job.owner.username,
        priority=job.priority,
        priority_class=job.queue.priority_class,
        entrypoint=job.entrypoint,
        command=tuple(job.command),
        script=job.script,
        script_filename=job.script_filename,
        run_seconds=job.run_seconds,
        pip=tuple(job.pip),
        env=dict(job.env),
        enqueued_at=job.enqueued_at,
        dequeued_at=job.dequeued_at,
        batch_scheduler="volcano" if "volcano" in settings.CLUSTER_RUNTIMES else "",
        suspend=suspend,
    )


def job_spec_full(job: Job) -> JobSpec:
    department = queue_department(job.queue)
    return job_spec(job, department=department.name if department else "")


def jobs_reconcile(job_ids: Iterable[int], *, now: datetime | None = None) -> None:
    """Bring each job's object to where its state wants it (``object_wanted``): created
    and released, created suspended, or deleted. Jobs whose objects the cluster refuses
    for good fail with its reason."""
    now = now or timezone.now()
    try:
        _reconcile(job_ids, now)
    except ClusterUnavailable as error:
        cluster_unavailable(now=now, error=str(error))
        raise


def _reconcile(job_ids: Iterable[int], now: datetime) -> None:
    jobs = list(Job.objects.filter(pk__in=list(job_ids)).select_related("queue__node", "owner"))
    wanted = {job.pk: object_wanted(job.state, job.runtime) for job in jobs}
    # Every queue's department in one query, not one per queue.
    owners = queue_departments({job.queue for job in jobs if wanted[job.pk] != ABSENT})
    present = [
        job_spec(
            job,
            department=owners[job.queue_id].name if job.queue_id in owners else "",
            suspend=wanted[job.pk] == SUSPENDED,
        )
        for job in jobs
        if wanted[job.pk] != ABSENT
    ]
    unwanted = [object_ref(job) for job in jobs if wanted[job.pk] == ABSENT]
    backend = get_backend()
    if unwanted:
        backend.remove(unwanted, now=now)
    preempted = [job.pk for job in jobs if job.state == State.PREEMPTED]
    if preempted:
        jobs_requeue(preempted, now=now)
    if present:
        refused = backend.apply(present, now=now)
        if refused:
            jobs_refused(refused, now=now)
        request_sync()


def jobs_refused(reasons: dict[int, str], *, now: datetime) -> list[int]:
    """Jobs whose objects the cluster refused for good (an invalid object, a namespace
    that does not exist) fail with the cluster's words; what they held is freed and what
    they left behind is removed."""
    failed = _transition(State.FAILED, reasons, now, "Refused")
    if failed:
        get_backend().remove(
            [object_ref(job) for job in Job.objects.filter(pk__in=failed)], now=now
        )
        capacity_changed(now=now)
        transaction.on_commit(request_admission)
    return failed


def jobs_requeue(job_ids: list[int], *, now: datetime) -> list[int]:
    """Preempted jobs whose objects left the cluster go back to their queue.

    They keep their enqueue time, so they return to their place in the queue order.
    """
    with transaction.atomic():
        moved = list(
            Job.objects.filter(pk__in=job_ids, state=State.PREEMPTED)
            .select_for_update()
            .values_list("pk", "queue__name")
        )
        if not moved:
            return []
        Job.objects.filter(pk__in=[pk for pk, _ in moved]).update(
            state=State.QUEUED,
            dequeued_at=None,
            started_at=None,
            backoff_reason="",
            next_attempt_at=None,
        )
        JobEvent.objects.bulk_create(
            JobEvent(
                job_id=pk,
                created_at=now,
                reason="Requeued",
                message=f"Left the cluster and went back to {queue} at its original place",
            )
            for pk, queue in moved
        )
    transaction.on_commit(request_admission)
    return [pk for pk, _ in moved]


def quota_publish() -> list[str]:
    """Write the quota tree to the cluster as CLUSTER_PUBLISH_QUOTA asks, so that the
    cluster's own scheduler agrees with Caldera. Returns the kinds of objects written."""
    targets = settings.CLUSTER_PUBLISH_QUOTA
    if not targets:
        return []
    tree = services.tree_export() if "elasticquotatree" in targets else None
    if tree is not None and not tree["spec"]["root"]:
        tree = None  # no tree yet: nothing to write
    queues = exchange.volcano_queues() if "volcano" in targets else None
    get_backend().publish_quota(tree=tree, queues=queues)
    return [
        kind for kind, obj in (("elasticquotatree", tree), ("volcano", queues)) if obj is not None
    ]


@dataclass
class SyncResult:
    started: list[int] = field(default_factory=list)
    finished: list[int] = field(default_factory=list)
    timed_out: list[int] = field(default_factory=list)  # left the cluster, into backoff
    # Timed out START_TIMEOUT_ATTEMPTS times: left the cluster and failed.
    start_failed: list[int] = field(default_factory=list)
    unrunnable: list[int] = field(default_factory=list)  # waiting jobs the nodes cannot hold
    events: int = 0

    @property
    def freed(self) -> bool:
        """Capacity was given back: the next jobs can be admitted."""
        return bool(self.finished or self.timed_out or self.start_failed)


def cluster_sync(
    *, now: datetime | None = None, before: Callable[[], None] | None = None
) -> SyncResult | None:
    """Record cluster statuses and events. None if another process is syncing.

    The caller admits into the capacity ``result.finished`` freed (see jobs.tasks.sync).
    Whether the cluster answered is recorded for the pages (``ClusterHealth``).
    """
    now = now or timezone.now()
    try:
        result = _sync(now, before)
    except ClusterUnavailable as error:
        cluster_unavailable(now=now, error=str(error))
        raise
    if result is not None:
        cluster_answered(now=now)
    return result


ANSWER_RECORDED_EVERY = timedelta(seconds=10)  # a cluster that keeps answering: few writes


def cluster_answered(*, now: datetime) -> None:
    """The cluster answered a whole sync: clear its error (and note the time, now and then)."""
    table = ClusterHealth._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            INSERT INTO {table} (id, answered_at, failing_since, error) VALUES (1, %s, NULL, '')
            ON CONFLICT (id) DO UPDATE
            SET answered_at = EXCLUDED.answered_at, failing_since = NULL, error = ''
            WHERE {table}.error <> '' OR {table}.answered_at IS NULL
               OR {table}.answered_at < EXCLUDED.answered_at - %s
            """,
            [now, ANSWER_RECORDED_EVERY],
        )


def cluster_unavailable(*, now: datetime, error: str) -> None:
    """The cluster did not answer: keep the error and since when it has been failing."""
    table = ClusterHealth._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            INSERT INTO {table} (id, answered_at, failing_since, error) VALUES (1, NULL, %s, %s)
            ON CONFLICT (id) DO UPDATE SET error = EXCLUDED.error,
                failing_since = COALESCE({table}.failing_since, EXCLUDED.failing_since)
            """,
            [now, error[:2000]],
        )


def _sync(now: datetime, before: Callable[[], None] | None) -> SyncResult | None:
    result = SyncResult()
    with advisory_lock(SYNC) as acquired:
        if not acquired:
            return None
        if before is not None:
            before()
        observation = get_backend().observe(now=now)
        result.unrunnable = _nodes_changed(now)
        result.events = _record_events(observation.events)
        phases = {status.job_id: status for status in observation.statuses}
        jobs = {
            job.pk: job
            for job in Job.objects.filter(pk__in=list(phases)).only("id", "state", "runtime")
        }
        moves: dict[str, dict[int, str]] = {
            State.RUNNING: {},
            State.SUCCEEDED: {},
            State.FAILED: {},
        }
        for job_id, status in phases.items():
            job = jobs.get(job_id)
            if job is None:
                continue
            if status.phase == "Running" and job.state == State.ADMITTED:
                moves[State.RUNNING][job_id] = "All pods are running"
            elif status.phase in ("Succeeded", "Failed"):
                target = State.SUCCEEDED if status.phase == "Succeeded" else State.FAILED
                moves[target][job_id] = status.message or f"The job {status.phase.lower()}"
        result.started = _transition(State.RUNNING, moves[State.RUNNING], now, "Running")
        for target, reason in ((State.SUCCEEDED, "Succeeded"), (State.FAILED, "Failed")):
            result.finished += _transition(target, moves[target], now, reason)
        result.timed_out, result.start_failed = _start_timeouts(now, started=result.started)
        # Objects of jobs that want none (finished, cancelled, timed out) are removed; jobs
        # whose object is missing from this complete listing, or suspended when it should
        # not be (or the reverse), are reconciled.
        leftover, mismatched = [], []
        for job_id, status in phases.items():
            job = jobs.get(job_id)
            wanted = ABSENT if job is None else object_wanted(_state_now(job, result), job.runtime)
            if wanted == ABSENT:
                leftover.append(status.ref)
            elif status.phase not in FINISHED_PHASES and (status.phase == "Suspended") != (
                wanted == SUSPENDED
            ):
                mismatched.append(job_id)
        missing = sorted(
            set(_jobs_wanting_objects(now).exclude(pk__in=list(phases))) | set(mismatched)
        )
        # Preempted jobs whose objects are gone from the listing are requeued, even when
        # the reconcile task that removed them was lost.
        gone = list(
            Job.objects.filter(state=State.PREEMPTED)
            .exclude(pk__in=list(phases))
            .values_list("pk", flat=True)
        )
        if gone:
            jobs_requeue(gone, now=now)
    if leftover:
        get_backend().remove(leftover, now=now)
    if missing:
        jobs_reconcile(missing, now=now)
    if result.freed:
        capacity_changed(now=now)  # the caller admits into what they freed (jobs.tasks.sync)
    if observation.next_change_at is not None:
        request_sync_at(observation.next_change_at)
    return result


FINISHED_PHASES = ("Succeeded", "Failed")


# A job dequeued this recently is having its objects created by the admission that
# dequeued it (or by that reconcile's retries); the sync leaves it to them.
BEING_CREATED = timedelta(seconds=10)


def _jobs_wanting_objects(now: datetime):
    """The ids of every job whose state wants an object in the cluster by now."""
    wanting = Q(state__in=IN_CLUSTER, dequeued_at__lte=now - BEING_CREATED)
    if settings.CLUSTER_GATE == "suspend":
        wanting |= Q(state__in=PENDING, runtime__in=SUSPENDABLE)
    return Job.objects.filter(wanting).values_list("pk", flat=True)


class _NodesSeen:
    """The node shapes this process's last sync saw (its first sync checks once)."""

    shapes: list[tuple] | None = None


def _nodes_changed(now: datetime) -> list[int]:
    """When the cluster's nodes changed since the last sync, fail the waiting jobs that
    no node can hold any more (``jobs_fail_unrunnable``); unknown nodes change nothing."""
    nodes = get_backend().nodes()
    if not nodes:
        return []
    shapes = sorted(tuple(sorted(node.items())) for node in nodes)
    if shapes == _NodesSeen.shapes:
        return []
    failed = jobs_fail_unrunnable(now=now, nodes=nodes)
    _NodesSeen.shapes = shapes
    return failed


def _state_now(job: Job, result: SyncResult) -> str:
    if job.pk in result.timed_out:
        return State.BACKOFF
    if job.pk in result.start_failed:
        return State.FAILED
    return State.SUCCEEDED if job.pk in result.finished else job.state


SCHEDULING_FAILURES = ("GangFailedScheduling", "FailedScheduling", "Unschedulable")


def _start_timeouts(now: datetime, *, started: list[int]) -> tuple[list[int], list[int]]:
    """Admitted jobs whose pods are not all running START_TIMEOUT_SECONDS after their
    dequeue leave the cluster, with the cluster's last word on why: back to their queue
    in backoff, growing exponentially with their ``start_timeouts``, or failed once they
    have timed out START_TIMEOUT_ATTEMPTS times (Kueue's ``backoffLimitCount``), so that a
    gang the cluster never places does not take its quota round after round.

    Returns the jobs requeued and the jobs failed.
    """
    timeout = settings.START_TIMEOUT_SECONDS
    attempts = settings.START_TIMEOUT_ATTEMPTS
    late = list(
        Job.objects.filter(state=State.ADMITTED, dequeued_at__lte=now - timedelta(seconds=timeout))
        .exclude(pk__in=started)
        .values_list("pk", flat=True)
    )
    if not late:
        return [], []
    last_failure: dict[int, str] = {}
    for job_id, message in (
        JobEvent.objects.filter(job_id__in=late, reason__in=SCHEDULING_FAILURES)
        .order_by("job_id", "-created_at", "-id")
        .values_list("job_id", "message")
    ):
        last_failure.setdefault(job_id, message)
    with transaction.atomic():
        jobs = list(
            Job.objects.select_for_update(of=("self",))
            .select_related("queue")
            .filter(pk__in=late, state=State.ADMITTED)
        )
        events = []
        for job in jobs:
            cause = last_failure.get(job.pk, "the cluster reported no scheduling failure")
            late_by = f"Its pods were not all running {timeout:.0f}s after it was dequeued"
            job.start_timeouts += 1
            job.dequeued_at, job.last_tried_at = None, now
            if job.start_timeouts >= attempts:
                job.state, job.finished_at, job.next_attempt_at = State.FAILED, now, None
                message = (
                    f"{late_by}, {job.start_timeouts} of {attempts} times, so it left the "
                    f"cluster and failed; last scheduling failure: {cause}"
                )
                events.append((job, "StartAttemptsExceeded", message))
                continue
            job.backoff_reason = (
                f"{late_by}, so it left the cluster; last scheduling failure: {cause}"
            )
            job.backoff_count += 1
            job.next_attempt_at = now + backoff_delay(
                job.start_timeouts,
                base=job.queue.backoff_base_seconds,
                cap=job.queue.backoff_max_seconds,
            )
            job.state = State.BACKOFF
            events.append(
                (
                    job,
                    "StartTimeout",
                    f"{job.backoff_reason}; start attempt {job.start_timeouts} of {attempts};"
                    f" next try at {job.next_attempt_at:%H:%M:%S}",
                )
            )
        Job.objects.bulk_update(
            jobs,
            ["state", "backoff_reason", "backoff_count", "next_attempt_at", "dequeued_at",
             "last_tried_at", "start_timeouts", "finished_at"],
        )  # fmt: skip
        JobEvent.objects.bulk_create(
            JobEvent(
                job_id=job.pk,
                created_at=now,
                type=JobEvent.Type.WARNING,
                reason=reason,
                message=message,
            )
            for job, reason, message in events
        )
    return (
        [job.pk for job in jobs if job.state == State.BACKOFF],
        [job.pk for job in jobs if job.state == State.FAILED],
    )


def _transition(target: str, messages: dict[int, str], now: datetime, reason: str) -> list[int]:
    """Compare-and-swap these jobs into ``target`` together; an event for each that moved."""
    if not messages:
        return []
    stamps = {"started_at": now} if target == State.RUNNING else {"finished_at": now}
    with transaction.atomic():
        moved = list(
            Job.objects.select_for_update()
            .filter(pk__in=list(messages), state__in=sources_of(target))
            .values_list("pk", flat=True)
        )
        Job.objects.filter(pk__in=moved).update(state=target, **stamps)
        JobEvent.objects.bulk_create(
            JobEvent(
                job_id=job_id,
                created_at=now,
                reason=reason,
                message=messages[job_id],
                type=JobEvent.Type.WARNING if target == State.FAILED else JobEvent.Type.NORMAL,
            )
            for job_id in moved
        )
    return moved


def _record_events(events) -> int:
    """Store cluster events once each (their uid is the deduplication key); returns how
    many were new. A real cluster offers its events again at every sync while they last,
    so those already stored are skipped with one indexed read rather than written again."""
    if not events:
        return 0
    stored = set(
        JobEvent.objects.filter(dedup_key__in=[e.uid for e in events]).values_list(
            "dedup_key", flat=True
        )
    )
    events = [e for e in events if e.uid not in stored]
    if not events:
        return 0
    known = set(Job.objects.filter(pk__in={e.job_id for e in events}).values_list("pk", flat=True))
    rows = [
        JobEvent(
            job_id=event.job_id,
            created_at=event.at,
            type=event.type,
            reason=event.reason,
            message=event.message,
            involved=event.involved,
            cycle=event.cycle,
            dedup_key=event.uid,
        )
        for event in events
        if event.job_id in known
    ]
    try:
        created = JobEvent.objects.bulk_create(rows, ignore_conflicts=True)
    except IntegrityError:  # a job deleted between the read and the write
        log.warning("skipped events of a job that is gone")
        return 0
    return len(created)
