"""The usage audit: recompute what every node uses from the jobs, and say what is wrong.

Beat runs it every USAGE_AUDIT_SECONDS (``jobs.tasks.usage_audit``) and ``manage.py
usage_audit`` runs it by hand. It reads, it never repairs: what it finds is logged as an
error for the people who watch the logs, since each finding means a rule was broken
somewhere or an admin's change is still being reclaimed.

- **Quota**: every node's usage, summed from the admitted and running jobs, against its
  ``max``, and the root's against the cluster's allocatable. A node above its ``max`` is
  normal for a moment after an admin lowers it (reclaim brings it down at the next cycle);
  one that stays there across audits is not.
- **Pending counts**: each queue's count kept by the ``PendingBlock`` rows (positions and
  queue lengths are read from them) against the pending jobs counted one by one.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from django.db.models import Count, Sum

from jobs.cluster import get_backend
from jobs.engine.admission.inputs import leaf_usage
from jobs.models import PENDING, Job, PendingBlock
from queues.quota import Breach, breaches, rollup
from queues.selectors import tree_nodes

log = logging.getLogger(__name__)


@dataclass
class AuditReport:
    over_quota: list[Breach] = field(default_factory=list)
    # queue id -> (pending jobs counted, pending jobs the blocks say)
    count_drift: dict[int, tuple[int, int]] = field(default_factory=dict)

    @property
    def clean(self) -> bool:
        return not (self.over_quota or self.count_drift)

    def lines(self) -> list[str]:
        found = [f"above its limit: {breach.message()}" for breach in self.over_quota]
        found += [
            f"queue {queue}: {counted} pending jobs, but its blocks say {kept}"
            for queue, (counted, kept) in sorted(self.count_drift.items())
        ]
        return found


def usage_audit() -> AuditReport:
    """Recompute usage and pending counts from the jobs (three reads); log what is wrong."""
    report = AuditReport()
    leaves = leaf_usage()
    report.over_quota = breaches(
        added=leaves,  # every leaf that uses anything: every node and resource in use
        tree=tree_nodes(),
        used=rollup(leaves),
        allocatable=get_backend().allocatable(),
    )
    counted = dict(
        Job.objects.filter(state__in=PENDING)
        .order_by()
        .values_list("queue_id")
        .annotate(n=Count("id"))
        .values_list("queue_id", "n")
    )
    kept = dict(
        PendingBlock.objects.order_by()
        .values_list("queue_id")
        .annotate(n=Sum("jobs"))
        .values_list("queue_id", "n")
    )
    for queue in counted.keys() | kept.keys():
        if counted.get(queue, 0) != (kept.get(queue) or 0):
            report.count_drift[queue] = (counted.get(queue, 0), kept.get(queue) or 0)
    for line in report.lines():
        log.error("usage audit: %s", line)
    return report
