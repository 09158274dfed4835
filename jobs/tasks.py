"""Celery tasks: thin wrappers that take ids, call the service and return quietly."""

from __future__ import annotations

import logging

from celery import shared_task

from .cluster import ClusterUnavailable
from .triggers import ADMIT, SYNC

log = logging.getLogger(__name__)

# Every task here is idempotent, so its message is acknowledged only once it ended: one cut
# off by a killed worker or a lost broker runs again (CELERY_TASK_ACKS_LATE is off for any
# task that does not say so).
IDEMPOTENT = dict(acks_late=True)


@shared_task(name="jobs.tasks.admit", ignore_result=True, **IDEMPOTENT)
def admit() -> None:
    """Run admission cycles until no trigger arrived during the last one."""
    ADMIT.started()
    admit_and_reconcile()


def admit_and_reconcile() -> None:
    """Admission cycles, each followed at once by the cluster calls it asks for.

    Preempted jobs leave the cluster before the jobs that take their place arrive. Doing
    it here, not in another task, saves a broker round trip on every dequeue; if the
    cluster does not answer, the reconcile task takes over with its retries.
    """
    from .admission import admission_cycle
    from .reconcile import jobs_reconcile

    while True:
        result = admission_cycle(before=ADMIT.clear)
        if result is None:
            return  # another process runs the cycle; it sees our dirty mark when it ends
        changed = result.preempted + result.admitted
        if changed:
            try:
                jobs_reconcile(changed)
            except ClusterUnavailable as error:
                log.warning("reconcile after admission failed, retrying in a task: %s", error)
                reconcile.delay(changed)
        if not ADMIT.is_dirty():
            return


# A task that talks to the cluster is tried again, with growing pauses, while it is away.
RETRIED_WHILE_THE_CLUSTER_IS_AWAY = dict(
    autoretry_for=(ClusterUnavailable,),
    retry_backoff=1,
    retry_backoff_max=60,
    retry_jitter=True,
    max_retries=8,
)


@shared_task(
    name="jobs.tasks.reconcile",
    ignore_result=True,
    **IDEMPOTENT,
    **RETRIED_WHILE_THE_CLUSTER_IS_AWAY,
)
def reconcile(job_ids: list[int]) -> None:
    """Make the cluster match the database for these jobs."""
    from .reconcile import jobs_reconcile

    jobs_reconcile(job_ids)


@shared_task(
    name="jobs.tasks.publish_quota",
    ignore_result=True,
    **IDEMPOTENT,
    **RETRIED_WHILE_THE_CLUSTER_IS_AWAY,
)
def publish_quota() -> None:
    """Write the quota tree to the cluster (CLUSTER_PUBLISH_QUOTA)."""
    from .cluster.kubernetes import Rejected
    from .reconcile import quota_publish

    try:
        quota_publish()
    except Rejected as error:
        log.error("the cluster refused the quota tree: %s", error)


@shared_task(name="jobs.tasks.sync", ignore_result=True, **IDEMPOTENT)
def sync() -> None:
    """Record job statuses and events from the cluster."""
    from .reconcile import cluster_sync

    SYNC.started()
    while True:
        try:
            result = cluster_sync(before=SYNC.clear)
        except ClusterUnavailable as error:
            log.warning("cluster sync failed, beat will retry: %s", error)
            return
        if result is None:
            return
        if result.freed:
            # The capacity they freed goes to the next jobs in this task, without a hop.
            ADMIT.mark()
            admit_and_reconcile()
        if not SYNC.is_dirty():
            return


@shared_task(name="jobs.tasks.usage_audit", ignore_result=True, **IDEMPOTENT)
def usage_audit() -> None:
    """Recompute every node's usage and every queue's pending count; log what is wrong."""
    from .usage_audit import usage_audit as audit

    audit()
