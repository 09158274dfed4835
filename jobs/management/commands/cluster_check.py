"""``manage.py cluster_check``: is the cluster ready for Caldera? One line per check."""

from __future__ import annotations

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from jobs.cluster import Rejected, get_backend
from queues.selectors import tree_namespaces


class Command(BaseCommand):
    help = (
        "Ask the cluster's API server whether Caldera can work there: each runtime's CRD, "
        "each permission, each namespace the quota tree binds, the nodes."
    )

    def handle(self, *args, **options) -> None:
        backend = get_backend()
        try:
            checks = backend.checks(
                namespaces=tree_namespaces(), publish=settings.CLUSTER_PUBLISH_QUOTA
            )
        except Rejected as refused:
            raise CommandError(refused.message) from None
        for check in checks:
            mark = "WARN" if check.warning else "ok  " if check.ok else "FAIL"
            detail = f": {check.detail}" if check.detail else ""
            self.stdout.write(f"{mark} {check.what}{detail}")
        failed = sum(not check.ok for check in checks)
        if failed:
            raise CommandError(f"{failed} of {len(checks)} checks failed")
        self.stdout.write(f"all {len(checks)} checks passed")
