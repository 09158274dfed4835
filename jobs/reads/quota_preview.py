"""What a quota tree change would do, before it is made: the admission rule itself, run on
the cluster's usage and the queues as they are now, once with the tree as it is and once
with the tree proposed.

Nothing is written: the two plans are compared and the difference is the change's
consequence. The running jobs the proposed tree would preempt (a lowered ``max`` takes
back what is above it; a raised ``min`` lets a department reclaim), and the waiting jobs
the next cycle would admit under it, each marked by whether the current tree would have
done the same anyway (a job the cycle admits regardless is not the change's doing).

The tree's own refusals come first: ``tree_check`` refuses what the save would refuse, in
the same words (queues.services.TreeError).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime

from django.db.models import Q
from django.utils import timezone
from django.utils.translation import gettext as _

from jobs.cluster import get_backend
from jobs.engine.admission.inputs import (
    HEADS_PER_QUEUE,
    cluster_allocatable,
    queue_heads,
    read_holding,
    woken_at,
)
from jobs.engine.unrunnable import unrunnable_shapes
from jobs.models import PENDING, Job
from jobs.reads.estimate import Estimate, describe, head_starts
from jobs.tables.jobs import pending_heads
from kube.quantity import ResourceList, human
from queues.admission import Plan, plan_admissions
from queues.limits import limits_lines
from queues.quota import Node, exceeds_max, path_to_root, tree_pools
from queues.selectors import shares_used_under
from queues.services import tree_check


@dataclass(frozen=True)
class Change:
    """One resource of one node, before and after (None: not set, or no such node)."""

    node: str
    field: str  # "min" or "max"
    resource: str
    before: str | None
    after: str | None


@dataclass(frozen=True)
class Consequence:
    """A job the proposed tree would move: who and where, and why in the rule's words."""

    job: int
    name: str
    owner: str
    queue: str
    why: str
    # False when the current tree's next cycle would do the same: not the change's doing.
    by_the_change: bool


@dataclass(frozen=True)
class QuotaPreview:
    changes: list[Change]
    preempted: list[Consequence]
    admitted: list[Consequence]
    # Waiting jobs the tree leaves with nowhere to run: applying it fails them
    # (``jobs.engine.unrunnable``), at most UNRUNNABLE_SHOWN of them named.
    unrunnable: list[Consequence] = field(default_factory=list)
    unrunnable_count: int = 0
    # Each queue under a changed node, or that gains or loses jobs: its first waiting job
    # and about when it starts, with the tree as it is and with this one.
    queues: list[QueueHead] = field(default_factory=list)


@dataclass(frozen=True)
class QueueHead:
    queue: str
    job: int
    name: str
    before: Estimate
    after: Estimate


UNRUNNABLE_SHOWN = 100


def tree_changes(now: Mapping[str, Node], proposed: Mapping[str, Node]) -> list[Change]:
    """Every min and max that differs between the two trees, node by node in path order; a
    node added or retired shows each of its quantities against None. A node's stopPolicy
    and each of its limits are changes too (their ``resource`` the limit's name)."""
    changes = []
    for path in sorted(set(now) | set(proposed)):
        stop = [tree[path].stop if path in tree else "" for tree in (now, proposed)]
        if stop[0] != stop[1]:
            changes.append(Change(path, "stopPolicy", "", stop[0] or None, stop[1] or None))
        said = [
            dict(line.split(": ", 1) for line in limits_lines(tree[path].limits))
            if path in tree else {}
            for tree in (now, proposed)
        ]  # fmt: skip
        for name in sorted(set(said[0]) | set(said[1])):
            if said[0].get(name) != said[1].get(name):
                changes.append(Change(path, "limits", name, said[0].get(name), said[1].get(name)))
        for field_name in ("min", "max"):
            before = getattr(now[path], field_name) if path in now else {}
            after = getattr(proposed[path], field_name) if path in proposed else {}
            for resource in sorted(set(before) | set(after)):
                if before.get(resource) != after.get(resource):
                    changes.append(
                        Change(
                            node=path,
                            field=field_name,
                            resource=resource,
                            before=_shown(resource, before),
                            after=_shown(resource, after),
                        )
                    )
    return changes


def _shown(resource: str, quantities: ResourceList) -> str | None:
    return human(resource, quantities[resource]) if resource in quantities else None


def quota_preview(document: object) -> QuotaPreview:
    """What applying ``document`` (an ElasticQuotaTree) would do now; TreeError when the
    save would refuse it."""
    parsed = tree_check(document=document)
    proposed = {node.path: node for node in parsed.nodes}
    holding = read_holding()
    changes = tree_changes(holding.tree, proposed)
    rows = pending_heads(HEADS_PER_QUEUE + 1)
    now = timezone.now()

    def plan(tree: Mapping[str, Node], woken: datetime | None, fair: Mapping[str, float]) -> Plan:
        heads = queue_heads(rows, now, woken, HEADS_PER_QUEUE, held=set())
        pools = tree_pools(tree)
        return plan_admissions(
            tree=tree,
            used=holding.used,
            allocatable=(
                holding.allocatable if pools == tuple(holding.pools) else cluster_allocatable(pools)
            ),
            queues=[queue for queue in heads if queue.leaf in tree],
            admitted=[job for job in holding.admitted if job.leaf in tree],
            leaving=holding.leaving,
            fair=fair,
            pools=tuple(pool.name for pool in pools),
        )

    # Applying a tree wakes every backing-off job (jobs.receivers.on_tree_changed): the next
    # cycle tries them all under the new tree, and only the due ones under the tree as it is.
    # A new weight or half-life orders the borrowers by the shares used it gives.
    fair = shares_used_under(proposed, parsed.half_life)
    current, changed = plan(holding.tree, woken_at(), holding.fair), plan(proposed, now, fair)
    preempted_now = {p.victim.key for p in current.preempted}
    admitted_now = {c.key for c in current.admitted}
    preempted_ids = [p.victim.key for p in changed.preempted]
    admitted_ids = [c.key for c in changed.admitted]
    jobs = _jobs([*preempted_ids, *admitted_ids])
    return QuotaPreview(
        changes=changes,
        preempted=[
            _consequence(jobs[p.victim.key], p.phrase().text(), p.victim.key not in preempted_now)
            for p in changed.preempted
            if p.victim.key in jobs
        ],
        admitted=[
            _consequence(jobs[key], "", key not in admitted_now)
            for key in admitted_ids
            if key in jobs
        ],
        **_unrunnable(holding.tree, proposed),
        queues=_queue_heads(
            now,
            holding.tree,
            proposed,
            changed={change.node for change in changes},
            gone=set(preempted_ids),
            moved=_leaves_of([*preempted_ids, *admitted_ids]),
        ),
    )


def _queue_heads(
    now: datetime,
    current: Mapping[str, Node],
    proposed: Mapping[str, Node],
    *,
    changed: set[str],
    gone: set[int],
    moved: set[str],
) -> list[QueueHead]:
    """The first waiting job of every queue the change touches (under a changed node, or
    gaining or losing jobs) and about when it starts before and after: the replay of
    ``jobs.reads.estimate`` under each tree, the jobs the change preempts taken as gone."""
    leaves = {
        leaf
        for leaf in set(current) | set(proposed)
        if leaf in moved or any(path in changed for path in path_to_root(leaf))
    }
    if not leaves:
        return []
    heads = head_starts(now=now, leaves=leaves, trees=[(current, set()), (proposed, gone)])
    jobs = _jobs(key for key, _starts in heads.values())
    return [
        QueueHead(
            queue=jobs[key].queue.name,
            job=key,
            name=jobs[key].name,
            before=describe(before, now=now, ahead=0),
            after=describe(after, now=now, ahead=0),
        )  # fmt: skip
        for _leaf, (key, (before, after)) in sorted(heads.items())
        if key in jobs
    ]


def _leaves_of(ids: list[int]) -> set[str]:
    return set(Job.objects.filter(pk__any=ids).values_list("queue__node__path", flat=True))


def _unrunnable(now: Mapping[str, Node], proposed: Mapping[str, Node]) -> dict:
    """The waiting jobs ``proposed`` leaves unable ever to start, each with why: those no
    node could hold (applying it fails them, ``jobs.engine.unrunnable``) and those that ask
    for more than a max on their path (they wait until it is raised). A job the tree as it
    is leaves so too is not the change's doing."""
    nodes = get_backend().nodes()
    already = {_key(shape) for shape, _reason in unrunnable_shapes(now, nodes)}
    found: list[tuple[dict, str, bool]] = [
        (shape, reason.text(), _key(shape) not in already)
        for shape, reason in unrunnable_shapes(proposed, nodes)
    ]
    asks = (
        Job.objects.filter(state__in=PENDING)
        .order_by()
        .values_list("queue__node__path", "request")
        .distinct()
    )
    for leaf, request in asks:
        too_big = (
            exceeds_max(leaf=leaf, request=request, tree=proposed) if leaf in proposed else None
        )
        if too_big is not None:
            was = exceeds_max(leaf=leaf, request=request, tree=now) if leaf in now else None
            why = _("can never be admitted while it stays so: %(reason)s") % {
                "reason": too_big.phrase().text()
            }
            found.append(({"queue__node__path": leaf, "request": request}, why, was is None))
    # Ids alone for the count (a deep queue of one shape is one statement); whole rows
    # only for the jobs named.
    seen: set[int] = set()
    shown: list[tuple[int, str, bool]] = []
    for shape, why, by_the_change in found:
        ids = Job.objects.filter(Q(**shape), state__in=PENDING).order_by("id")
        for pk in ids.values_list("pk", flat=True):
            if pk not in seen:
                seen.add(pk)
                if len(shown) < UNRUNNABLE_SHOWN:
                    shown.append((pk, why, by_the_change))
    jobs = _jobs(pk for pk, _why, _by in shown)
    named = [_consequence(jobs[pk], why, by) for pk, why, by in shown if pk in jobs]
    return {"unrunnable": named, "unrunnable_count": len(seen)}


def _key(shape: dict) -> str:
    return json.dumps(shape, sort_keys=True)


def _jobs(ids: Iterable[int]) -> dict[int, Job]:
    chosen = Job.objects.filter(pk__any=list(ids)).select_related("owner", "queue")
    return {job.pk: job for job in chosen.only("id", "name", "owner__username", "queue__name")}


def _consequence(job: Job, why: str, by_the_change: bool) -> Consequence:
    return Consequence(
        job=job.pk,
        name=job.name,
        owner=job.owner.get_username(),
        queue=job.queue.name,
        why=why,
        by_the_change=by_the_change,
    )
