"""``manage.py cluster_check``: is the cluster ready for Caldera? One line per check."""

from __future__ import annotations

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from jobs.cluster import get_backend
from jobs.cluster.kubernetes import KubernetesBackend
from queues.models import QuotaNode


class Command(BaseCommand):
    help = (
        "Ask the cluster's API server whether Caldera can work there: each runtime's CRD, "
        "each permission, each namespace the quota tree binds, the nodes."
    )

    def handle(self, *args, **options) -> None:
        backend = get_backend()
        if not isinstance(backend, KubernetesBackend):
            raise CommandError(
                "CLUSTER_BACKEND is simulated: set CLUSTER_BACKEND=kubernetes (README, "
                "'Connecting to a Kubernetes cluster')"
            )
        namespaces = [
            namespace
            for leaf in QuotaNode.objects.filter(active=True).exclude(namespaces=[])
            for namespace in leaf.namespaces
        ]
        checks = backend.checks(
            namespaces=namespaces, publish_quota=bool(settings.CLUSTER_PUBLISH_QUOTA)
        )
        for check in checks:
            mark = "ok  " if check.ok else "FAIL"
            detail = f": {check.detail}" if check.detail else ""
            self.stdout.write(f"{mark} {check.what}{detail}")
        failed = sum(not check.ok for check in checks)
        if failed:
            raise CommandError(f"{failed} of {len(checks)} checks failed")
        self.stdout.write(f"all {len(checks)} checks passed")
