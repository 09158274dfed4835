"""The jobs app's answers to the quota tree (``queues.signals``): what queues asks of jobs
without importing them. ``JobsConfig.ready`` connects them once the models are loaded."""

from __future__ import annotations

from dataclasses import asdict

from django.conf import settings
from django.db.models import Count
from django.utils import timezone

from jobs import services
from jobs.engine.admission.writes import capacity_changed
from jobs.engine.namespace_health import held_reason, unavailable_namespaces
from jobs.engine.triggers import request_admission, request_quota_publish
from jobs.engine.unrunnable import jobs_fail_unrunnable
from jobs.models import LIVE, Job
from jobs.reads.quota_preview import quota_preview
from jobs.reads.selectors import usage_by_path
from kube.quantity import ResourceList
from queues import signals
from queues.models import Queue, QuotaNode


def on_tree_changed(sender, **kwargs) -> None:
    """A changed tree: fail the waiting jobs it leaves with nowhere to run (they would block
    their queues), wake backed-off jobs, admit, and republish the tree to the cluster."""
    now = timezone.now()
    jobs_fail_unrunnable(now=now)
    capacity_changed(now=now)
    request_admission()
    if settings.CLUSTER_PUBLISH_QUOTA:
        request_quota_publish()


def namespace_trouble(sender, **kwargs) -> dict[str, str]:
    """The namespaces the cluster takes no jobs in now (``jobs.engine.namespace_health``)."""
    return {name: held_reason(row).text() for name, row in unavailable_namespaces().items()}


def live_jobs(sender, *, queue_ids: list[int], **kwargs) -> dict[int, int]:
    """Queued, backing-off and quota-holding jobs per queue id: a leaf with any stays."""
    rows = (
        Job.objects.filter(queue_id__any=queue_ids, state__in=LIVE)
        .values_list("queue_id")
        .annotate(n=Count("id"))
    )
    return dict(rows)


def usage(sender, **kwargs) -> dict[str, ResourceList]:
    """Every node's usage by path, for the admin's tree page."""
    return usage_by_path()


def tree_preview(sender, *, document, **kwargs) -> dict:
    """What applying ``document`` would do now, for the admin's tree editor."""
    return asdict(quota_preview(document))


def tree_apply_previewed(sender, *, document, previewed, actor, source, **kwargs) -> dict:
    """Apply a tree the admin previewed (``jobs.services.tree_apply_previewed``)."""
    applied = services.tree_apply_previewed(
        document=document, previewed=previewed, actor=actor, source=source
    )
    return {
        "changes": applied.changes,
        "preview": asdict(applied.preview),
        "grown": [asdict(job) for job in applied.grown],
    }


def connect() -> None:
    signals.tree_changed.connect(on_tree_changed, sender=QuotaNode, dispatch_uid="jobs-tree")
    signals.live_jobs_wanted.connect(live_jobs, sender=Queue, dispatch_uid="jobs-live-jobs")
    signals.usage_wanted.connect(usage, sender=QuotaNode, dispatch_uid="jobs-usage")
    signals.tree_preview_wanted.connect(
        tree_preview, sender=QuotaNode, dispatch_uid="jobs-tree-preview"
    )
    signals.tree_apply_previewed_wanted.connect(
        tree_apply_previewed, sender=QuotaNode, dispatch_uid="jobs-tree-apply-previewed"
    )
    signals.namespace_trouble_wanted.connect(
        namespace_trouble, sender=QuotaNode, dispatch_uid="jobs-namespace-trouble"
    )
