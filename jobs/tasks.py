"""Celery tasks: thin wrappers that take ids, call the service and return quietly."""

from __future__ import annotations

import logging

from celery import shared_task

from .cluster import ClusterUnavailable
from .triggers import ADMIT, SYNC

log = logging.getLogger(__name__)


@shared_task(name="jobs.tasks.admit", ignore_result=True)
def admit() -> None:
    """Run admission cycles until no trigger arrived during the last one."""
    from .admission import admission_cycle

    ADMIT.started()
    while True:
        if admission_cycle(before=ADMIT.clear) is None:
            return  # another process runs the cycle; it sees our dirty mark when it ends
        if not ADMIT.is_dirty():
            return


@shared_task(
    name="jobs.tasks.reconcile",
    ignore_result=True,
    autoretry_for=(ClusterUnavailable,),
    retry_backoff=1,
    retry_backoff_max=60,
    retry_jitter=True,
    max_retries=8,
)
def reconcile(job_ids: list[int]) -> None:
    """Make the cluster match the database for these jobs."""
    from .reconcile import jobs_reconcile

    jobs_reconcile(job_ids)


@shared_task(name="jobs.tasks.sync", ignore_result=True)
def sync() -> None:
    """Record job statuses and events from the cluster."""
    from .reconcile import cluster_sync

    SYNC.started()
    while True:
        try:
            if cluster_sync(before=SYNC.clear) is None:
                return
        except ClusterUnavailable as error:
            log.warning("cluster sync failed, beat will retry: %s", error)
            return
        if not SYNC.is_dirty():
            return
