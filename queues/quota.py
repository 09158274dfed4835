"""Quota arithmetic over plain numbers: the tree invariants and "does R fit on this path".

Nothing here touches the database; the rules of docs/architecture.md section 4 are pure
functions of the tree, the usage and the request.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache, partial
from typing import Any, Protocol

from kube.quantity import PODS, POOL_MARK, ResourceList, add, human, pool_parts, pooled
from kube.said import Said, gettext_noop

from . import phrases
from .phrases import Phrase
from .pools import Pool


@dataclass(frozen=True)
class Node:
    """One node of the quota tree. A resource missing from ``max`` is not limited here."""

    path: str
    min: ResourceList = field(default_factory=dict)
    max: ResourceList = field(default_factory=dict)
    namespaces: tuple[str, ...] = ()
    weight: float = 1.0  # its fair-share weight among its siblings (queues.fairness)
    # What its subtree's pods may be (queues.pod_policy): {"security", "serviceAccounts",
    # "secrets"}, each key inherited from the nearest node on a leaf's path that sets it.
    pods: Mapping[str, Any] = field(default_factory=dict, compare=False, hash=False)
    # On the root alone: the tree's node pools, in its order (queues.pools).
    pools: tuple[Pool, ...] = field(default=(), compare=False, hash=False)
    # Whether its subtree admits, and what its leaves' jobs may do (queues.limits): the
    # stopPolicy ("" admits) and the limits, in base units.
    stop: str = field(default="", compare=False, hash=False)
    limits: Mapping[str, Any] = field(default_factory=dict, compare=False, hash=False)
    # The resources it gives a pool's share of (``nvidia.com/gpu@h100`` names gpu), and
    # those pools: derived from min and max.
    pooled: Mapping[str, tuple[str, ...]] = field(init=False, compare=False, hash=False)

    def __post_init__(self) -> None:
        pooled: dict[str, list[str]] = {}
        for key in (*self.min, *self.max):
            resource, pool = pool_parts(key)
            if pool and pool not in pooled.setdefault(resource, []):
                pooled[resource].append(pool)
        object.__setattr__(self, "pooled", {r: tuple(ps) for r, ps in pooled.items()})

    @property
    def parent(self) -> str | None:
        return self.path.rsplit("/", 1)[0] if "/" in self.path else None

    @property
    def name(self) -> str:
        return self.path.rsplit("/", 1)[-1]


def tree_pools(tree: Mapping[str, Node]) -> tuple[Pool, ...]:
    """The tree's node pools, kept on its root."""
    return next((node.pools for node in tree.values() if node.parent is None), ())


def path_to_root(path: str) -> list[str]:
    """``root/algorithm/video`` -> ``[root/algorithm/video, root/algorithm, root]``."""
    return list(_ancestors(path))


@lru_cache(maxsize=16_384)
def _ancestors(path: str) -> tuple[str, ...]:
    """Asked for the same few leaves over and over (every candidate of every cycle)."""
    parts = path.split("/")
    return tuple("/".join(parts[:i]) for i in range(len(parts), 0, -1))


def validate_tree(nodes: Iterable[Node]) -> list[str]:
    """Every broken invariant of docs/architecture.md section 4, as messages naming node and
    numbers: English ``Said`` text, which the tree's import says in the client's language
    where it refuses (``queues.phrases.in_language``), this module being a pure rule."""
    by_path = {node.path: node for node in nodes}
    children: dict[str, list[Node]] = {path: [] for path in by_path}
    errors: list[str] = []
    roots = [node for node in by_path.values() if node.parent is None]
    if len(roots) != 1:
        errors.append(
            Said(
                gettext_noop("the tree must have exactly one root, found %(count)s"),
                count=len(roots),
            )
        )
    for node in by_path.values():
        if node.parent is not None:
            if node.parent not in by_path:
                errors.append(
                    Said(
                        gettext_noop("%(path)s: parent %(parent)s does not exist"),
                        path=node.path,
                        parent=node.parent,
                    )
                )
            else:
                children[node.parent].append(node)
    namespace_owner: dict[str, str] = {}
    for node in sorted(by_path.values(), key=lambda n: n.path):
        for resource, low in sorted(node.min.items()):
            high = node.max.get(resource)
            if high is not None and low > high:
                errors.append(
                    Said(
                        gettext_noop("%(path)s: min %(resource)s %(min)s is above max %(max)s"),
                        path=node.path,
                        resource=named(resource),
                        min=human(resource, low),
                        max=human(resource, high),
                    )
                )
        errors += _pools_within_totals(node)
        kids = children[node.path]
        if kids:
            if node.namespaces:
                errors.append(
                    Said(
                        gettext_noop(
                            "%(path)s: only leaves bind namespaces, but it has children "
                            "and namespaces %(namespaces)s"
                        ),
                        path=node.path,
                        namespaces=", ".join(node.namespaces),
                    )
                )
            summed: ResourceList = {}
            for kid in kids:
                summed = add(summed, kid.min)
            for resource, kids_min in sorted(summed.items()):
                own = node.min.get(resource, node.min.get(pool_parts(resource)[0], 0))
                if kids_min > own:
                    errors.append(
                        Said(
                            gettext_noop(
                                "%(path)s: children's min %(resource)s sum to %(sum)s, "
                                "above its own min %(min)s"
                            ),
                            path=node.path,
                            resource=named(resource),
                            sum=human(resource, kids_min),
                            min=human(resource, own),
                        )
                    )
            for kid in kids:
                for resource, limit in sorted(node.max.items()):
                    kid_max = kid.max.get(resource)
                    if kid_max is not None and kid_max > limit:
                        errors.append(
                            Said(
                                gettext_noop(
                                    "%(path)s: max %(resource)s %(max)s is above "
                                    "its parent %(parent)s's max %(limit)s"
                                ),
                                path=kid.path,
                                resource=named(resource),
                                max=human(resource, kid_max),
                                parent=node.path,
                                limit=human(resource, limit),
                            )
                        )
        for namespace in node.namespaces:
            if namespace in namespace_owner:
                errors.append(
                    Said(
                        gettext_noop(
                            "namespace %(namespace)s is bound to both %(first)s and %(second)s"
                        ),
                        namespace=namespace,
                        first=namespace_owner[namespace],
                        second=node.path,
                    )
                )
            namespace_owner[namespace] = node.path
    return errors


def named(key: str) -> str:
    """A resource key as a sentence names it: ``nvidia.com/gpu in pool h100``."""
    resource, pool = pool_parts(key)
    return f"{resource} in pool {pool}" if pool else resource


def _pools_within_totals(node: Node) -> list[str]:
    """A node's pools share its totals: the pools' mins of a resource sum to no more than
    its min of it, and no pool's max is above its max of it, where it names them."""
    errors: list[str] = []
    pool_mins: dict[str, int] = {}
    for key, low in node.min.items():
        resource, pool = pool_parts(key)
        if pool:
            pool_mins[resource] = pool_mins.get(resource, 0) + low
    for resource, summed in sorted(pool_mins.items()):
        if governs_total(node, resource) and summed > node.min.get(resource, 0):
            errors.append(
                Said(
                    gettext_noop(
                        "%(path)s: its pools' min %(resource)s sum to %(sum)s, above its "
                        "own min %(min)s"
                    ),
                    path=node.path,
                    resource=resource,
                    sum=human(resource, summed),
                    min=human(resource, node.min.get(resource, 0)),
                )  # fmt: skip
            )
    for key, high in sorted(node.max.items()):
        resource, pool = pool_parts(key)
        limit = node.max.get(resource)
        if pool and limit is not None and high > limit:
            errors.append(
                Said(
                    gettext_noop("%(path)s: max %(resource)s %(max)s is above its max %(limit)s"),
                    path=node.path,
                    resource=named(key),
                    max=human(key, high),
                    limit=human(resource, limit),
                )  # fmt: skip
            )
    return errors


def governs_total(node: Node, resource: str) -> bool:
    return resource in node.min or resource in node.max


def _shared(node: Node, used: Mapping[str, int], resource: str) -> tuple[int, int]:
    """For a resource the node gives pools' shares of: what its pools use beyond their own
    shares (what else uses it, a pool it names no share of among them), and the part of
    its min given to no pool, which every pool shares. Without a total min of its own, the
    node guarantees its pools' shares alone."""
    pools = node.pooled[resource]
    own = sum(
        min(used.get(pooled(resource, p), 0), node.min.get(pooled(resource, p), 0)) for p in pools
    )
    given = sum(node.min.get(pooled(resource, p), 0) for p in pools)
    total_min = node.min.get(resource, given if resource not in node.max else 0)
    return used.get(resource, 0) - own, max(total_min - given, 0)


def guaranteed(node: Node, used: Mapping[str, int], resource: str, pool: str) -> bool:
    """Whether the node's usage ``used`` of ``resource``, placed in ``pool`` ("" none),
    stays within its guarantee: its min of the total; where it gives pools' shares, the
    pool's own share, else the part of its min given to no pool."""
    if resource not in node.pooled:
        return used.get(resource, 0) <= node.min.get(resource, 0)
    key = pooled(resource, pool) if pool else resource
    if pool and used.get(key, 0) <= node.min.get(key, 0):
        return True
    beyond, shared = _shared(node, used, resource)
    return beyond <= shared


def borrows(node: Node, used: Mapping[str, int], key: str) -> bool:
    """Whether the node uses more of ``key`` (a total, or a pool's share) than its own
    min: what it uses above is lent. Where it gives pools' shares of the resource, a pool
    borrows what it uses beyond its own share once the part no pool is given is used up;
    a pool's share it names nothing of is judged by its total, which every pool shares."""
    resource, pool = pool_parts(key)
    if resource not in node.pooled:
        return used.get(resource, 0) > node.min.get(resource, 0)
    beyond, shared = _shared(node, used, resource)
    if beyond <= shared:
        return False
    return not pool or used.get(key, 0) > node.min.get(key, 0)


def rollup(leaf_usage: Mapping[str, ResourceList]) -> dict[str, ResourceList]:
    """Usage of every node from the usage of the leaves: a node uses what its subtree uses."""
    used: dict[str, ResourceList] = {}
    for leaf, resources in leaf_usage.items():
        for path in path_to_root(leaf):
            used[path] = add(used.get(path, {}), resources)
    return used


@dataclass(frozen=True)
class Shortfall:
    """Why a request does not fit: the first node (or the cluster) and resource that refuse."""

    where: str  # a node's path, or "cluster"
    resource: str
    requested: int
    used: int
    limit: int

    @property
    def free(self) -> int:
        return max(self.limit - self.used, 0)

    def phrase(self) -> Phrase:
        r = self.resource
        return Phrase(
            phrases.CLUSTER_SHORT if self.where == "cluster" else phrases.QUOTA_SHORT,
            {
                "where": self.where, "resource": phrases.resource(r),
                "requested": phrases.quantity(r, self.requested),
                "free": phrases.quantity(r, self.free),
                "used": phrases.quantity(r, self.used),
                "limit": phrases.quantity(r, self.limit),
            },
        )  # fmt: skip

    def message(self) -> str:
        return self.phrase().english()


def shortfall(
    *,
    leaf: str,
    request: Mapping[str, int],
    tree: Mapping[str, Node],
    used: Mapping[str, Mapping[str, int]],
    allocatable: Mapping[str, int] | None,
) -> Shortfall | None:
    """None when ``request`` fits into ``leaf``, else the first reason it does not.

    It fits when, for every node N from the leaf up to the root, used(N) + R <= max(N),
    and the cluster has room: used(root) + R <= allocatable. Idle capacity is lent freely,
    so ``min`` plays no part here; it matters for reclaim and for who goes first.
    """
    path = path_to_root(leaf)
    asked = sorted(item for item in request.items() if item[1])
    for node_path in path:
        limits = tree[node_path].max
        node_used = used.get(node_path, {})
        for resource, amount in asked:
            limit = limits.get(resource)
            if limit is not None and node_used.get(resource, 0) + amount > limit:
                return Shortfall(node_path, resource, amount, node_used.get(resource, 0), limit)
    if allocatable is not None:
        cluster_used = used.get(path[-1], {})
        for resource, amount in asked:
            limit = allocatable.get(resource, 0)
            if cluster_used.get(resource, 0) + amount > limit:
                return Shortfall("cluster", resource, amount, cluster_used.get(resource, 0), limit)
    return None


def exceeds_max(
    *, leaf: str, request: Mapping[str, int], tree: Mapping[str, Node]
) -> Shortfall | None:
    """A request larger than some max on its path can never be admitted, even on an idle tree."""
    return shortfall(leaf=leaf, request=request, tree=tree, used={}, allocatable=None)


@dataclass(frozen=True)
class Breach:
    """A node (or the cluster) whose usage a change took above its limit."""

    where: str  # a node's path, or "cluster"
    resource: str
    used: int
    limit: int

    def message(self) -> str:
        r, what = self.resource, "allocatable" if self.where == "cluster" else "max"
        return f"{self.where}: {r} used {human(r, self.used)} of {what} {human(r, self.limit)}"


def breaches(
    *,
    added: Mapping[str, Mapping[str, int]],
    tree: Mapping[str, Node],
    used: Mapping[str, Mapping[str, int]],
    allocatable: Mapping[str, int] | None,
) -> list[Breach]:
    """Where ``used`` (every node's usage after a change) breaks the quota promise for what
    the change ``added`` (requests summed per leaf).

    Only the nodes on the added leaves' paths and only the resources added there are
    judged: a node an admin lowered below its usage may stay above its ``max`` as long as
    nothing more is added to it (reclaim brings it down), but a node that gains a resource
    must end within its ``max`` of it, and the root within the cluster's allocatable.
    """
    gained: dict[str, set[str]] = {}
    for leaf, request in added.items():
        for path in path_to_root(leaf):
            gained.setdefault(path, set()).update(r for r, amount in request.items() if amount)
    found = []
    for path, resources in sorted(gained.items()):
        node_used = used.get(path, {})
        for resource in sorted(resources):
            limit = tree[path].max.get(resource)
            if limit is not None and node_used.get(resource, 0) > limit:
                found.append(Breach(path, resource, node_used.get(resource, 0), limit))
            if allocatable is not None and tree[path].parent is None:
                limit = allocatable.get(resource, 0)
                if node_used.get(resource, 0) > limit:
                    found.append(Breach("cluster", resource, node_used.get(resource, 0), limit))
    return found


@dataclass(frozen=True)
class Standing:
    """Where one node (or the cluster) stands on one resource: what the why-it-waits table
    shows for each node on a job's path."""

    where: str  # a node's path, or "cluster"
    resource: str
    min: int | None  # None: the cluster, which guarantees nothing to anyone
    max: int | None  # None: not limited here
    used: int
    lent: int = 0

    @property
    def borrowed(self) -> int:
        """What it uses above its own min: idle capacity of others, lent to it."""
        return 0 if self.min is None else max(self.used - self.min, 0)

    @property
    def free(self) -> int | None:
        return None if self.max is None else max(self.max - self.used, 0)


def lent_by_node(
    tree: Mapping[str, Node], used: Mapping[str, Mapping[str, int]]
) -> dict[str, ResourceList]:
    """What each node lends: the part of its min it leaves unused that its siblings use
    above their own mins. What siblings borrow is drawn first from the part of their
    parent's min given to no child (``min(P) - sum(min(C))``: no one's guarantee, so
    borrowing it lends nothing; the seed's root keeps 16 cpu so), then from the siblings
    that leave min unused, shared in proportion to what each leaves unused (rounded down),
    so the siblings lend no more in total than is borrowed. The root has no siblings and
    lends nothing."""
    children: dict[str, list[str]] = {}
    for path, node in tree.items():
        if node.parent is not None:
            children.setdefault(node.parent, []).append(path)
    lent: dict[str, ResourceList] = {}
    for parent, kids in children.items():
        resources = {r for kid in kids for r in tree[kid].min} | {
            r for kid in kids for r in used.get(kid, {})
        }
        for resource in resources:
            unused, borrowed = {}, 0
            for kid in kids:
                low, amount = tree[kid].min.get(resource, 0), used.get(kid, {}).get(resource, 0)
                borrowed += max(amount - low, 0)
                if low > amount:
                    unused[kid] = low - amount
            unassigned = tree[parent].min.get(resource, 0) if parent in tree else 0
            unassigned -= sum(tree[kid].min.get(resource, 0) for kid in kids)
            borrowed = max(borrowed - max(unassigned, 0), 0)
            idle = sum(unused.values())
            for kid, spare in unused.items():
                if borrowed:
                    share = min(spare, borrowed * spare // idle)
                    lent.setdefault(kid, {})[resource] = share
    return lent


def path_standing(
    *,
    leaf: str,
    request: Mapping[str, int],
    tree: Mapping[str, Node],
    used: Mapping[str, Mapping[str, int]],
    allocatable: Mapping[str, int] | None,
    lent: Mapping[str, Mapping[str, int]] | None = None,
) -> list[Standing]:
    """For each node from the leaf to the root, then the cluster (when its allocatable is
    known), how it stands on each resource the request asks for (``pods`` at the nodes
    that name them, and at the cluster)."""
    lent = lent_by_node(tree, used) if lent is None else lent
    wanted = sorted((r for r, amount in request.items() if amount), key=lambda r: (r != "cpu", r))
    rows = []
    for path in path_to_root(leaf):
        node, node_used = tree[path], used.get(path, {})
        rows += [
            Standing(
                path, r, node.min.get(r, 0), node.max.get(r), node_used.get(r, 0),
                lent.get(path, {}).get(r, 0),
            )
            for r in wanted
            if (r != PODS and POOL_MARK not in r) or r in node.min or r in node.max
        ]  # fmt: skip
    if allocatable is not None:
        root_used = used.get(path_to_root(leaf)[-1], {})
        rows += [
            Standing("cluster", r, None, allocatable.get(r, 0), root_used.get(r, 0)) for r in wanted
        ]
    return rows


# The quota tree page's figures: each node's standing on every resource, with the demand
# of the jobs waiting under it.


@dataclass(frozen=True)
class Balance(Standing):
    """A node's standing on one resource (``borrowed``, ``lent`` and ``free`` as above)
    and its pending demand: what the queued and backed-off jobs under it ask for."""

    min: int  # a node's own (only the cluster's standing has none)
    pending: int = 0

    @property
    def unused(self) -> int:
        """The part of its min it does not use: lent (``lent``) or idle."""
        return max((self.min or 0) - self.used, 0)


class Limited(Protocol):
    """What has a ``min`` and a ``max``: a ``Node``, or a stored node."""

    @property
    def min(self) -> Mapping[str, Any]: ...

    @property
    def max(self) -> Mapping[str, Any]: ...


def shown_resources(
    node: Limited, *figures: Mapping[str, int], pooled: Iterable[str] = ()
) -> set[str]:
    """The resources a page shows for ``node`` (a ``Node`` or a stored node): those it
    names in its ``min`` or ``max``, and those ``figures`` (its usage, its demand) hold.
    Every job asks for ``pods``, so they are shown only where the tree names them; a job
    placed in a pool holds each resource in it again, so a pool's share is shown only
    where the node names it, or the tree names it anywhere (``pooled``)."""
    named = set(node.min) | set(node.max)
    held = {r for amounts in figures for r, n in amounts.items() if n} - {PODS}
    held = {r for r in held if POOL_MARK not in r or r in named or r in set(pooled)}
    return named | held


def pool_shares_named(tree: Mapping[str, Node]) -> set[str]:
    """Every pool's share of a resource that some node of the tree names."""
    return {key for node in tree.values() for key in (*node.min, *node.max) if POOL_MARK in key}


def balances(
    *,
    tree: Mapping[str, Node],
    used: Mapping[str, Mapping[str, int]],
    pending: Mapping[str, Mapping[str, int]],
) -> dict[str, dict[str, Balance]]:
    """Every node's ``Balance`` per resource it names (in ``min`` or ``max``) or that is
    used or asked for under it (``pods`` only where named), cpu first.

    ``used`` and ``pending`` are per node, summed over its subtree (``rollup`` of what the
    jobs holding quota use, and of what the pending jobs ask for, per leaf).
    """
    lent = lent_by_node(tree, used)
    pooled = pool_shares_named(tree)
    order = {pool.name: rank for rank, pool in enumerate(tree_pools(tree))}
    answer: dict[str, dict[str, Balance]] = {}
    for path, node in tree.items():
        node_used, node_pending = used.get(path, {}), pending.get(path, {})
        names = shown_resources(node, node_used, node_pending, pooled=pooled)
        answer[path] = {
            r: Balance(
                where=path,
                resource=r,
                min=node.min.get(r, 0),
                max=node.max.get(r),
                used=node_used.get(r, 0),
                lent=lent.get(path, {}).get(r, 0),
                pending=node_pending.get(r, 0),
            )
            for r in sorted(names, key=partial(_shown_order, order))
        }
    return answer


def _shown_order(pools: Mapping[str, int], key: str) -> tuple[bool, str, int]:
    """cpu first, then by name; a resource's pools after its total, in the tree's order."""
    resource, pool = pool_parts(key)
    return (resource != "cpu", resource, pools.get(pool, len(pools)) if pool else -1)
