"""The cluster sync: read statuses and events from the cluster and record them.

``cluster_sync`` moves jobs to running and finished (freeing their quota), records
Warning events (one row each, however often they repeat), times out jobs that do not start
(``jobs.engine.start_timeouts``), fails waiting jobs when the nodes change
(``jobs.engine.unrunnable``), and hands what is missing or left over to the reconciler.
One sync runs at a time, holding a lease (``jobs.engine.locks``); it is idempotent.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

from django.conf import settings
from django.db import IntegrityError
from django.utils import timezone

from jobs.cluster import (
    FINISHED_PHASES,
    ClusterUnavailable,
    NamespaceTrouble,
    ObjectRef,
    ObjectStatus,
    Phase,
    get_backend,
)
from jobs.engine.admission.writes import capacity_changed
from jobs.engine.cluster_health import cluster_answered, cluster_unavailable
from jobs.engine.lifecycle import jobs_past_limit, jobs_retrying
from jobs.engine.locks import SYNC, leased
from jobs.engine.log_tails import KEPT_STATES, tails_keep
from jobs.engine.namespace_health import namespaces_checked, unavailable_namespaces
from jobs.engine.objects import (
    ABSENT,
    SUSPENDABLE,
    SUSPENDED,
    job_config_maps,
    object_wanted,
    refs_removable,
)
from jobs.engine.reconcile import jobs_left, jobs_reconcile, jobs_transition
from jobs.engine.start_timeouts import jobs_time_out
from jobs.engine.triggers import (
    remember,
    request_admission,
    request_sync,
    request_sync_at,
    seen_before,
)
from jobs.engine.unrunnable import jobs_fail_unrunnable
from jobs.models import HOLDING, Job, JobEvent, State
from jobs.tables.jobs import (
    jobs_known,
    jobs_unlisted_leaving,
    jobs_unlisted_wanting_objects,
    next_time_limit_at,
    start_clocks_resume,
)
from queues import phrases
from queues.phrases import Phrase
from queues.selectors import tree_namespaces
from sql.rows import rows_update

log = logging.getLogger(__name__)


@dataclass
class SyncResult:
    started: list[int] = field(default_factory=list)
    finished: list[int] = field(default_factory=list)
    timed_out: list[int] = field(default_factory=list)  # left the cluster, into backoff
    # Timed out START_TIMEOUT_ATTEMPTS times: left the cluster and failed.
    start_failed: list[int] = field(default_factory=list)
    unrunnable: list[int] = field(default_factory=list)  # waiting jobs the nodes cannot hold
    left: list[int] = field(default_factory=list)  # leaving jobs whose objects are gone
    # Running jobs whose namespace is gone, and their objects with it: failed.
    lost: list[int] = field(default_factory=list)
    # Running jobs past their time limit, and failed jobs with retries left: stopping.
    past_limit: list[int] = field(default_factory=list)
    retrying: list[int] = field(default_factory=list)
    # Namespaces found unavailable (their jobs wait), and those found back.
    troubled: list[str] = field(default_factory=list)
    back: list[str] = field(default_factory=list)
    events: int = 0

    @property
    def freed(self) -> bool:
        """Capacity was given back: the next jobs can be admitted."""
        return bool(self.finished or self.timed_out or self.start_failed or self.left or self.lost)


def cluster_sync(
    *, now: datetime | None = None, before: Callable[[], None] | None = None
) -> SyncResult | None:
    """Record cluster statuses and events. None if another process is syncing.

    The caller admits into the capacity ``result.finished`` freed (see jobs.tasks.sync).
    Whether the cluster answered is recorded for the pages (``ClusterHealth``): it has
    once it listed the jobs' objects; a later step that fails records the error again.
    """
    now = now or timezone.now()
    try:
        return _sync(now, before)
    except ClusterUnavailable as error:
        cluster_unavailable(now=now, error=str(error))
        raise


def _sync(now: datetime, before: Callable[[], None] | None) -> SyncResult | None:
    result = SyncResult()
    with leased(SYNC) as lease:
        if lease is None:
            return None
        if before is not None:
            before()
        observed = _observed_namespaces()
        # What the watches see start, finish or go asks for the next sync at once: beat's
        # schedule is a safety net, not the pulse.
        observation = get_backend().observe(now=now, namespaces=observed, on_change=request_sync)
        troubled = _namespaces_in_trouble(observation, observed)
        outage_since = cluster_answered(now=now)
        if outage_since is not None:  # the time it did not answer counts for no start
            start_clocks_resume(outage_since=outage_since, now=now)
        result.troubled = sorted(troubled)
        result.back = namespaces_checked(troubled, now=now)
        # A namespace that is gone took its objects with it: the listing is complete there.
        # One refused or being deleted says nothing of its jobs: nothing is concluded.
        unknown = sorted(ns for ns, trouble in troubled.items() if not trouble.gone)
        gone = sorted(ns for ns, trouble in troubled.items() if trouble.gone)
        result.unrunnable = _nodes_changed(now)
        result.events = _record_events(observation.events)
        phases = {status.job_id: status for status in observation.statuses}
        listed = list(phases)
        jobs = _known(listed)
        moves: dict[str, dict[int, Phrase | str]] = {
            State.RUNNING: {},
            State.SUCCEEDED: {},
            State.FAILED: {},
        }
        for job_id, status in phases.items():
            job = jobs.get(job_id)
            if job is None:
                continue
            if status.phase == Phase.RUNNING and job.state == State.ADMITTED:
                moves[State.RUNNING][job_id] = Phrase(phrases.ALL_PODS_RUNNING)
            elif status.phase in FINISHED_PHASES:
                target = State.SUCCEEDED if status.phase == Phase.SUCCEEDED else State.FAILED
                moves[target][job_id] = status.message or f"The job {status.phase.lower()}"
        result.started = jobs_transition(State.RUNNING, moves[State.RUNNING], now, "Running")
        result.retrying = jobs_retrying(moves[State.FAILED], now)
        for job_id in result.retrying:
            del moves[State.FAILED][job_id]
        for target, reason in (
            (State.SUCCEEDED, JobEvent.Reason.SUCCEEDED),
            (State.FAILED, JobEvent.Reason.FAILED),
        ):
            result.finished += jobs_transition(target, moves[target], now, reason)
        result.timed_out, result.start_failed = jobs_time_out(now, started=result.started)
        result.past_limit = jobs_past_limit(now)
        result.lost = _lost_with_namespace(gone, now)
        # Objects of jobs that want none (finished, cancelled, timed out) are removed; jobs
        # whose object is missing from this complete listing, or suspended when it should
        # not be (or the reverse), are reconciled.
        leftover, mismatched, ended = [], [], []
        moved = _moved_by(result)
        stopped = {*result.past_limit, *result.retrying}  # to end as failed, or retried
        for job_id, status in phases.items():
            job = jobs.get(job_id)
            wanted = ABSENT
            if job is not None:
                state = moved.get(job_id, job.state)
                wanted = object_wanted(state, job.runtime)
                if (state in KEPT_STATES or job_id in stopped) and not job.kept:
                    ended.append((job_id, status.ref))
            if wanted == ABSENT:
                # One delete per object: a leaving job's were sent by the reconcile that
                # made it leave moments ago, and a listing (an informer's above all) may
                # not show them yet; after REMOVED_RECENTLY they are sent again, for a
                # reconcile that was lost.
                if not status.deleting and not _removed_recently(job, now):
                    leftover.append((job_id, status.ref))
            elif status.phase not in FINISHED_PHASES and (status.phase == Phase.SUSPENDED) != (
                wanted == SUSPENDED
            ):
                mismatched.append(job_id)
        # With CLUSTER_GATE=suspend, a pending job of a suspendable runtime waits in the
        # cluster, its objects suspended.
        suspendable = SUSPENDABLE if settings.CLUSTER_GATE == "suspend" else None
        unlisted = jobs_unlisted_wanting_objects(
            listed, dequeued_by=now - BEING_CREATED, suspendable=suspendable, unknown=unknown
        )
        missing = sorted(set(unlisted) | set(mismatched))
        # Leaving jobs whose objects are gone from this complete listing let their quota
        # go; those still listed are removed again, even when the reconcile task that
        # removed them was lost.
        left = jobs_unlisted_leaving(listed, unknown=unknown)
        if left:
            result.left = jobs_left(left, now=now)
        _ray_clusters_named(phases, jobs)
    # The end of the log of each job that ended is read before its objects, and its pods
    # with them, are removed; after the lease, for they are calls to the cluster, as many
    # as jobs ended (a burst of thousands, at worst, is cut at KEEP_SECONDS). A sync
    # starting meanwhile reads the same jobs' ends before it removes anything either, and
    # whichever keeps one first keeps it. Those left unread stay for the next sync.
    later = tails_keep(ended, now=now) if ended else set()
    leftover = [(job_id, ref) for job_id, ref in leftover if job_id not in later]
    if leftover:
        get_backend().remove(_with_config_maps(leftover), now=now)
    if result.past_limit or result.retrying:
        # Stopped here, their objects removed just now: the next sync sees them gone (a
        # watch would too, on a real cluster) and ends them as their stop says.
        request_sync()
    if missing:
        jobs_reconcile(missing, now=now)
    if result.freed or result.back:
        # The caller admits into what they freed (jobs.tasks.sync); the jobs held for a
        # namespace that is back are woken and tried at the next cycle.
        capacity_changed(now=now)
    if result.back:
        request_admission()
    wakes = [at for at in (observation.next_change_at, next_time_limit_at()) if at is not None]
    if wakes:
        request_sync_at(max(min(wakes), now))
    return result


# A job dequeued this recently is having its objects created by the admission that
# dequeued it (or by that reconcile's retries); the sync leaves it to them.
BEING_CREATED = timedelta(seconds=10)
# A job that started leaving this recently had its objects deleted by the reconcile that
# made it leave (or by that reconcile's retries); the sync leaves them to it.
REMOVED_RECENTLY = timedelta(seconds=30)


@dataclass(frozen=True)
class _Known:
    pk: int
    state: str
    runtime: str
    leaving_since: datetime | None
    kept: bool  # the end of its log is kept (jobs.engine.log_tails)
    ray_cluster: str


def _ray_clusters_named(phases: dict[int, ObjectStatus], jobs: dict[int, _Known]) -> None:
    """Keep the RayCluster KubeRay named for each RayJob, whose head Service the job's page
    names for its Ray dashboard: one UPDATE for the few that are new (a RayJob's first
    syncs), none once every job's is kept."""
    named = [
        Job(pk=job_id, ray_cluster=status.ray_cluster)
        for job_id, status in phases.items()
        if (job := jobs.get(job_id)) is not None
        and job.runtime == Job.Runtime.KUBERAY
        and status.ray_cluster
        and status.ray_cluster != job.ray_cluster
    ]
    rows_update(named, ["ray_cluster"])


def _removed_recently(job: _Known | None, now: datetime) -> bool:
    return (
        job is not None
        and job.leaving_since is not None
        and now - job.leaving_since < REMOVED_RECENTLY
    )


def _with_config_maps(listed: list[tuple[int, ObjectRef]]) -> list[ObjectRef]:
    """The listed objects to remove (by job id), each with the ConfigMaps its job has (one
    query): those it was sent with, its document's script's, or none. A job no longer
    stored may have had a script: its ConfigMap is deleted too, found or not."""
    stored = {
        job.pk: job
        for job in Job.objects.filter(pk__any=[job_id for job_id, _ in listed]).only(
            "pk", "name", "object_name", "manifest", "script"
        )
    }
    return refs_removable(
        [
            (job_id, replace(ref, config_maps=job_config_maps(stored[job_id])))
            if job_id in stored
            else (job_id, ref)
            for job_id, ref in listed
        ]
    )


def _known(ids: list[int]) -> dict[int, _Known]:
    """What the database holds of the listed jobs."""
    return {row[0]: _Known(*row) for row in jobs_known(ids)}


def _namespaces_in_trouble(observation, observed: set[str]) -> dict[str, NamespaceTrouble]:
    """The namespaces the listing could not read for their own trouble, and those marked
    unavailable before that are still (read again: one being deleted lists fine)."""
    troubled = dict(observation.troubled)
    again = (set(unavailable_namespaces()) & observed) - set(troubled)
    if again:
        troubled |= get_backend().namespace_troubles(again)
    return troubled


def _lost_with_namespace(namespaces: list[str], now: datetime) -> list[int]:
    """Running jobs whose namespace is gone lost their objects with it: they fail."""
    if not namespaces:
        return []
    running = Job.objects.filter(state=State.RUNNING, namespace__any=namespaces)
    messages: dict[int, Phrase | str] = {
        pk: Phrase(phrases.NAMESPACE_GONE, {"namespace": namespace})
        for pk, namespace in running.values_list("pk", "namespace")
    }
    return jobs_transition(State.FAILED, messages, now, "NamespaceGone")


def _observed_namespaces() -> set[str]:
    """The namespaces the tree binds, and those where jobs still hold quota (a leaf may
    have stopped binding a namespace while its jobs run there)."""
    holding = Job.objects.filter(state__in=HOLDING).values_list("namespace", flat=True)
    return set(tree_namespaces()) | set(holding.distinct())


def _nodes_changed(now: datetime) -> list[int]:
    """When the cluster's nodes changed since the last sync, fail the waiting jobs that
    no node can hold any more (``jobs_fail_unrunnable``); unknown nodes change nothing."""
    nodes = get_backend().nodes()
    if not nodes:
        return []
    shapes = json.dumps(sorted(node.shape() for node in nodes))
    if seen_before("node-shapes", shapes):
        return []
    failed = jobs_fail_unrunnable(now=now, nodes=nodes)
    remember("node-shapes", shapes)
    return failed


def _moved_by(result: SyncResult) -> dict[int, str]:
    """The state this sync moved each job to (one lookup a listed job, however many moved):
    finished, timed out into backoff, failed for good, or stopping (past its time limit,
    or between attempts)."""
    moved: dict[int, str] = dict.fromkeys(result.finished, State.SUCCEEDED)
    moved |= dict.fromkeys(result.start_failed, State.FAILED)
    moved |= dict.fromkeys([*result.past_limit, *result.retrying], State.STOPPING)
    return moved | dict.fromkeys(result.timed_out, State.BACKOFF)


def _record_events(events) -> int:
    """Store cluster events, one row each (their uid is the key); returns how many rows
    were written. A real cluster offers its events again at every sync while they last:
    those unchanged are skipped with one indexed read, and a repeat (the same uid, a higher
    count) updates its row in place, its count, message and times, instead of adding one.
    """
    if not events:
        return 0
    stored = {
        key: (pk, count)
        for key, pk, count in JobEvent.objects.filter(
            dedup_key__any=[e.uid for e in events]
        ).values_list("dedup_key", "pk", "count")
    }
    repeats = [
        JobEvent(
            pk=stored[e.uid][0],
            count=e.count,
            created_at=e.at,
            first_at=e.first_at,
            message=e.message,
        )
        for e in events
        if e.uid in stored and e.count > stored[e.uid][1]
    ]
    # The sync runs alone (its advisory lock): no other writer moves these rows meanwhile.
    rows_update(repeats, ["count", "created_at", "first_at", "message"])
    events = [e for e in events if e.uid not in stored]
    if not events:
        return len(repeats)
    jobs = Job.objects.filter(pk__any=list({e.job_id for e in events}))
    known = set(jobs.values_list("pk", flat=True))
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
            count=event.count,
            first_at=event.first_at,
        )
        for event in events
        if event.job_id in known
    ]
    try:
        created = JobEvent.objects.bulk_create(rows, ignore_conflicts=True)
    except IntegrityError:  # a job deleted between the read and the write
        log.warning("skipped events of a job that is gone")
        return len(repeats)
    return len(repeats) + len(created)
