"""Celery tasks: thin wrappers that take ids, call the service and return quietly."""

from __future__ import annotations

import logging
import time

from celery import shared_task
from django.conf import settings

from jobs.cluster import ClusterUnavailable, Rejected
from jobs.engine.admission.cycle import admission_cycle
from jobs.engine.fair_share import fair_share_record
from jobs.engine.reconcile import jobs_reconcile, quota_publish
from jobs.engine.retention import jobs_archive
from jobs.engine.sync import cluster_sync
from jobs.engine.task_names import (
    ACCOUNTING_TASK,
    ADMIT_TASK,
    ARCHIVE_TASK,
    ESTIMATES_TASK,
    FAIR_SHARE_TASK,
    PUBLISH_QUOTA_TASK,
    RECONCILE_TASK,
    SUBMISSION_KEYS_PRUNE_TASK,
    SYNC_TASK,
    USAGE_AUDIT_TASK,
    USAGE_HISTORY_TASK,
)
from jobs.engine.triggers import ADMIT, SYNC, pause, paused
from jobs.engine.usage_audit import usage_audit as audit_usage
from jobs.reads.estimate import estimates_refresh
from jobs.services import submission_keys_prune
from jobs.usage.accounting import accounting_summarise
from jobs.usage.samples import usage_record

log = logging.getLogger(__name__)
ESTIMATES_PAUSE = "estimates"

# Every task here is idempotent, so its message is acknowledged only once it ended: one cut
# off by a killed worker or a lost broker runs again (CELERY_TASK_ACKS_LATE is off for any
# task that does not say so).
IDEMPOTENT = dict(acks_late=True)


@shared_task(name=ADMIT_TASK, ignore_result=True, **IDEMPOTENT)
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
    name=RECONCILE_TASK,
    ignore_result=True,
    **IDEMPOTENT,
    **RETRIED_WHILE_THE_CLUSTER_IS_AWAY,
)
def reconcile(job_ids: list[int]) -> None:
    """Make the cluster match the database for these jobs."""

    jobs_reconcile(job_ids)


@shared_task(
    name=PUBLISH_QUOTA_TASK,
    ignore_result=True,
    **IDEMPOTENT,
    **RETRIED_WHILE_THE_CLUSTER_IS_AWAY,
)
def publish_quota() -> None:
    """Write the quota tree to the cluster (CLUSTER_PUBLISH_QUOTA)."""

    try:
        quota_publish()
    except Rejected as error:
        log.error("the cluster refused the quota tree: %s", error)


@shared_task(name=SYNC_TASK, ignore_result=True, **IDEMPOTENT)
def sync() -> None:
    """Record job statuses and events from the cluster."""

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


@shared_task(name=USAGE_AUDIT_TASK, ignore_result=True, **IDEMPOTENT)
def usage_audit() -> None:
    """Recompute every node's usage and every queue's pending count; log what is wrong."""

    audit_usage()


@shared_task(name=USAGE_HISTORY_TASK, ignore_result=True, **IDEMPOTENT)
def usage_history() -> None:
    """Record this interval's usage sample of every node; delete samples past retention."""

    usage_record()


@shared_task(name=FAIR_SHARE_TASK, ignore_result=True, **IDEMPOTENT)
def fair_share() -> None:
    """Every node's decayed usage, from the ledger of holds, while the tree has a
    half-life (jobs/engine/fair_share.py)."""

    fair_share_record()


@shared_task(name=ARCHIVE_TASK, ignore_result=True, **IDEMPOTENT)
def archive() -> None:
    """Finished jobs past JOB_RETENTION_DAYS to the archive (jobs/engine/retention.py),
    once the accounting has summarised their days."""

    accounting_summarise()
    archived = jobs_archive()
    if archived.jobs:
        log.info("archived %s finished jobs in %s files", archived.jobs, len(archived.files))


@shared_task(name=ACCOUNTING_TASK, ignore_result=True, **IDEMPOTENT)
def accounting() -> None:
    """Summarise the completed days not yet summarised (and the day before yesterday once
    more, for late writes) into the accounting's daily rows."""

    accounting_summarise()


@shared_task(name=ESTIMATES_TASK, ignore_result=True, **IDEMPOTENT)
def estimates() -> None:
    """Estimate again when the first pending jobs of every queue start
    (jobs/reads/estimate.py), taking at most ESTIMATE_SHARE of a worker process's time:
    after a replay that took d seconds, beat's next ones are skipped until d /
    ESTIMATE_SHARE has passed since it began."""
    if paused(ESTIMATES_PAUSE):
        return
    began = time.monotonic()
    estimates_refresh()
    took = time.monotonic() - began
    pause(ESTIMATES_PAUSE, took / settings.ESTIMATE_SHARE - took)


@shared_task(name=SUBMISSION_KEYS_PRUNE_TASK, ignore_result=True, **IDEMPOTENT)
def prune_submission_keys() -> int:
    """Delete the Idempotency-Keys older than IDEMPOTENCY_KEY_HOURS."""
    return submission_keys_prune()
