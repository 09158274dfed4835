"""What the admission rule is given, read once for everyone who asks it.

The cycle (``jobs.engine.admission.cycle``), the explanation of why a job waits
(``jobs.reads.waiting``) and the start estimates (``jobs.reads.estimate``) all read the
tree, the usage, the jobs holding quota (admitted or running, and leaving until their
objects are gone) and the heads of the queues here, through the statements of the job
table (``jobs.tables.jobs``: ``holding_rows``, ``pending_heads``), so they cannot read
them differently.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from jobs.cluster import get_backend
from jobs.models import LEAVING, AdmissionWake, State
from jobs.tables.jobs import PendingRow, holding_rows, leaf_holding
from kube.quantity import ResourceList, add, in_pool
from queues.admission import Admitted, Candidate, QueueHeads
from queues.pools import Pool, allocatable_by_pool
from queues.quota import Node, lent_by_node, rollup, tree_pools
from queues.selectors import half_life, shares_used_under, tree_nodes

# What a cycle offers the rule of each queue: its first jobs, in queue order.
HEADS_PER_QUEUE = 8


def leaf_usage() -> dict[str, ResourceList]:
    """Requests of the jobs holding quota (admitted, running, and leaving until their
    objects are gone) summed per leaf path, in SQL."""
    return leaf_holding()[0]


def holding_jobs() -> tuple[list[Admitted], list[Admitted]]:
    """Every job holding quota, as two lists: those admitted or running (the pool reclaim
    chooses from) and those leaving (preempted or stopping, their objects not yet gone)."""
    admitted: list[Admitted] = []
    leaving: list[Admitted] = []
    for row in holding_rows():
        job = Admitted(
            key=row.id,
            leaf=row.leaf,
            request=in_pool(row.request, row.pool),
            priority=row.priority,
            admitted_at=row.dequeued_at,
            owner=row.owner_id,
        )
        (leaving if row.state in LEAVING else admitted).append(job)
    return admitted, leaving


def usage_of(admitted: list[Admitted]) -> dict[str, ResourceList]:
    leaves: dict[str, ResourceList] = {}
    for job in admitted:
        leaves[job.leaf] = add(leaves.get(job.leaf, {}), job.request)
    return rollup(leaves)


def is_due(
    state: str,
    next_attempt_at: datetime | None,
    last_tried_at: datetime | None,
    now: datetime,
    woken_at: datetime | None,
) -> bool:
    """Whether a pending job is tried at the next cycle: a queued job always; a backing-off
    one once its next attempt is due, or capacity changed since it was last tried."""
    return state == State.QUEUED or (
        (next_attempt_at is not None and next_attempt_at <= now)
        or (woken_at is not None and (last_tried_at is None or last_tried_at < woken_at))
    )


def queue_heads(
    rows: list[PendingRow], now: datetime, woken_at: datetime | None, limit: int, held: set[int]
) -> list[QueueHeads]:
    """The first ``limit`` pending jobs of every active queue (``rows``: ``limit`` + 1 of
    each) as candidates, and whether each queue holds more; the ``held`` are not tried."""
    grouped: dict[str, tuple[str, bool, list[Candidate]]] = {}
    for row in rows:
        due = row.id not in held and is_due(
            row.state, row.next_attempt_at, row.last_tried_at, now, woken_at
        )
        candidate = Candidate(
            key=row.id,
            request=row.request,
            rank=(-row.priority, row.enqueued_at, row.id),
            due=due,
            priority=row.priority,
            pools=row.pools,
            owner=row.owner_id,
        )
        grouped.setdefault(row.leaf, (row.policy, row.preemption, []))[2].append(candidate)
    return [
        QueueHeads(
            leaf=path,
            policy=policy,
            candidates=candidates[:limit],
            exhausted=len(candidates) <= limit,
            preemption=preemption,
        )
        for path, (policy, preemption, candidates) in grouped.items()
    ]


@dataclass(frozen=True)
class Holding:
    """Everything holding quota now, and what the tree and the cluster allow."""

    tree: Mapping[str, Node]
    used: Mapping[str, ResourceList]
    allocatable: Mapping[str, int] | None
    admitted: Sequence[Admitted] = ()
    leaving: Sequence[Admitted] = ()
    # Each node's share used while the tree has a half-life (queues.fairness), else empty.
    fair: Mapping[str, float] = field(default_factory=dict)
    half_life: timedelta | None = None
    pools: Sequence[Pool] = ()  # the tree's node pools, in its order

    @property
    def pool_names(self) -> tuple[str, ...]:
        return tuple(pool.name for pool in self.pools)

    def lent(self) -> dict[str, ResourceList]:
        return lent_by_node(self.tree, self.used)


def read_holding() -> Holding:
    """The tree, the usage, the cluster's allocatable and the jobs holding quota: what the
    rule is given besides the queues' heads."""
    admitted, leaving = holding_jobs()
    tree = tree_nodes()
    half = half_life()
    pools = tree_pools(tree)
    return Holding(
        tree=tree,
        used=usage_of(admitted + leaving),
        allocatable=cluster_allocatable(pools),
        admitted=admitted,
        leaving=leaving,
        fair=shares_used_under(tree, half),
        half_life=half,
        pools=pools,
    )


def cluster_allocatable(pools: Sequence[Pool]) -> ResourceList | None:
    """What the cluster's nodes hold, with each node pool's share beside it."""
    backend = get_backend()
    allocatable = backend.allocatable()
    if not pools or allocatable is None:
        return allocatable
    return allocatable_by_pool(allocatable, backend.nodes(), pools)


def woken_at() -> datetime | None:
    """When capacity last changed (``capacity_changed``): every job backing off since
    then is due at the next cycle."""
    return AdmissionWake.objects.filter(pk=1).values_list("woken_at", flat=True).first()
