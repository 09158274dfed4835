"""Decayed usage for fair sharing over time (``queues.fairness``), kept by beat.

Every FAIR_SHARE_SECONDS, while the tree has a half-life, beat reads the ledger of holds
(``jobs.models.Hold``), weighs each second every leaf held by its age, rolls the leaves up
the tree and writes each node's decayed usage, resource by resource and its dominant one
(``queues.models.DecayedUsage``). It reads the job records, not the usage samples, and
computes everything again each time, so a restart or a gap loses nothing. Each resource
counts over the cluster's allocatable total of it (the root's ``max``, else its ``min``,
while the cluster has not said), for the resources the root's quota names.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from django.db import transaction
from django.utils import timezone

from jobs.cluster import get_backend
from jobs.tables.holds import decayed_by_leaf
from queues import fairness
from queues.models import DecayedUsage
from queues.quota import Node
from queues.selectors import half_life, tree_nodes


def fair_share_record(now: datetime | None = None) -> int:
    """Write every node's decayed usage now; the number of nodes written (0, and the old
    rows gone, while the tree has no half-life)."""
    now = now or timezone.now()
    half = half_life()
    tree = tree_nodes()
    rows: list[DecayedUsage] = []
    if half is not None:
        totals = cluster_totals(tree, get_backend().allocatable())
        by_leaf = {
            leaf: {r: held / totals[r] for r, held in resources.items() if r in totals}
            for leaf, resources in decayed_by_leaf(
                now=now, half_life=half, kept=fairness.HALF_LIVES_KEPT
            ).items()
        }
        nodes = fairness.rolled_up(by_leaf)
        rows = [
            DecayedUsage(
                path=path,
                resources=nodes.get(path, {}),
                usage=fairness.dominant(nodes.get(path, {})),
                computed_at=now,
            )
            for path in tree
        ]
    with transaction.atomic():
        DecayedUsage.objects.all().delete()
        DecayedUsage.objects.bulk_create(rows)
    return len(rows)


def cluster_totals(
    tree: Mapping[str, Node], allocatable: Mapping[str, int] | None
) -> dict[str, int]:
    """What the whole cluster could hold of each resource the root's quota names."""
    root = next((node for node in tree.values() if node.parent is None), None)
    if root is None:
        return {}
    totals = {}
    for resource in {*root.min, *root.max}:
        total = (
            (allocatable or {}).get(resource) or root.max.get(resource) or root.min.get(resource)
        )
        if total:
            totals[resource] = total
    return totals
