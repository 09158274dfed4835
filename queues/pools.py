"""Node pools: the kinds of node a cluster has (an H100 pool, A100s, CPU-only, spot), as the
quota tree declares them (``spec.nodePools``), and the tree's quota per pool.

A pool is a name, the node labels that select its nodes and the tolerations its pods need.
A node of the tree may give ``min`` and ``max`` per pool (``pools: {h100: {min, max}}``);
they are kept beside its totals as pooled keys (``nvidia.com/gpu@h100``,
``kube.quantity.pooled``), and a job placed in a pool counts its request both in the totals
and in the pool's keys (``kube.quantity.in_pool``). So every rule of ``queues.quota`` and
``queues.admission`` holds per pool and in total with no change of its own: a key is a key.
A resource given without a pool is shared by every pool, as in a tree without pools.

Plain data, no database: the tree's services read and write them, the cycle asks which
pools a job accepts and what each pool's nodes hold.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kube.quantity import POOL_MARK, ResourceList, add, pool_parts, pooled
from kube.said import Said, gettext_noop
from kube.scheduling import EFFECTS, ClusterNode, Placement, Toleration

NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_LABEL_KEY = re.compile(
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$"
)
_LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$")
MAX_POOLS = 32
MAX_LABELS = 16
MAX_TOLERATIONS = 16
NAME_LENGTH = 32
TOLERATION_KEYS = ("key", "operator", "value", "effect")


@dataclass(frozen=True)
class Pool:
    """One kind of node: its name, the labels its nodes carry, the tolerations its pods
    need (each as a pod spec writes one)."""

    name: str
    labels: Mapping[str, str] = field(default_factory=dict)
    tolerations: tuple[Mapping[str, str], ...] = ()

    def selects(self, node: ClusterNode) -> bool:
        return all(node.labels.get(key) == value for key, value in self.labels.items())

    @property
    def placement(self) -> Placement:
        """What the pool adds to every pod of a job placed in it."""
        return Placement(
            node_selector=tuple(sorted(self.labels.items())),
            tolerations=tuple(
                Toleration(
                    key=t.get("key", ""), operator=t.get("operator", "Equal"),
                    value=t.get("value", ""), effect=t.get("effect", ""),
                )
                for t in self.tolerations
            ),
        )  # fmt: skip

    def as_json(self) -> dict[str, Any]:
        """As the tree's document and the root's row keep it."""
        said: dict[str, Any] = {"name": self.name, "nodeLabels": dict(self.labels)}
        if self.tolerations:
            said["tolerations"] = [
                {key: t[key] for key in TOLERATION_KEYS if key in t} for t in self.tolerations
            ]
        return said

    @classmethod
    def from_json(cls, said: Mapping[str, Any]) -> Pool:
        return cls(
            name=said["name"],
            labels=dict(said.get("nodeLabels") or {}),
            tolerations=tuple(dict(t) for t in said.get("tolerations") or ()),
        )


def pools_of(said: Iterable[Mapping[str, Any]]) -> tuple[Pool, ...]:
    return tuple(Pool.from_json(entry) for entry in said)


def pools_read(raw: object, field: str) -> tuple[tuple[Pool, ...], dict[str, Said]]:
    """``spec.nodePools`` as the tree keeps it, and its refusals by path, every one."""
    if raw is None:
        return (), {}
    if not isinstance(raw, list) or len(raw) > MAX_POOLS:
        return (), {field: Said(gettext_noop("must be a list of at most %(most)s node pools"),
                                most=MAX_POOLS)}  # fmt: skip
    errors: dict[str, Said] = {}
    pools: list[Pool] = []
    seen: set[str] = set()
    for index, entry in enumerate(raw):
        where = f"{field}[{index}]"
        if not isinstance(entry, Mapping):
            errors[where] = Said(
                gettext_noop("must be an object of name, nodeLabels and tolerations")
            )
            continue
        for key in sorted(set(entry) - {"name", "nodeLabels", "tolerations"}, key=str):
            errors[f"{where}.{key}"] = Said(gettext_noop("unknown field"))
        name = entry.get("name")
        if not isinstance(name, str) or not NAME.match(name) or len(name) > NAME_LENGTH:
            errors[f"{where}.name"] = Said(
                gettext_noop(
                    "%(name)s is not a valid pool name (at most %(most)s lowercase letters, "
                    "digits and '-')"
                ),
                name=repr(name), most=NAME_LENGTH,
            )  # fmt: skip
            continue
        if name in seen:
            errors[f"{where}.name"] = Said(gettext_noop("%(name)s appears twice"), name=repr(name))
            continue
        seen.add(name)
        labels = _labels(entry.get("nodeLabels"), f"{where}.nodeLabels", errors)
        tolerations = _tolerations(entry.get("tolerations"), f"{where}.tolerations", errors)
        pools.append(Pool(name, labels, tolerations))
    return tuple(pools), errors


def _labels(raw: object, field: str, errors: dict[str, Said]) -> dict[str, str]:
    if (
        not isinstance(raw, Mapping)
        or not raw
        or len(raw) > MAX_LABELS
        or not all(
            isinstance(k, str) and _LABEL_KEY.match(k) and len(k) <= 317
            and isinstance(v, str) and _LABEL_VALUE.match(v) and len(v) <= 63
            for k, v in raw.items()
        )
    ):  # fmt: skip
        errors[field] = Said(
            gettext_noop(
                "must be from 1 to %(most)s node labels (label: value), the labels that select "
                "the pool's nodes"
            ),
            most=MAX_LABELS,
        )
        return {}
    return {str(k): str(v) for k, v in raw.items()}


def _tolerations(raw: object, field: str, errors: dict[str, Said]) -> tuple[dict[str, str], ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list) or len(raw) > MAX_TOLERATIONS:
        errors[field] = Said(
            gettext_noop("must be a list of at most %(most)s tolerations"), most=MAX_TOLERATIONS
        )
        return ()
    kept = []
    for index, entry in enumerate(raw):
        where = f"{field}[{index}]"
        if not isinstance(entry, Mapping) or set(entry) - set(TOLERATION_KEYS):
            errors[where] = Said(
                gettext_noop("must be a toleration of key, operator, value and effect")
            )
            continue
        toleration = {k: entry[k] for k in TOLERATION_KEYS if entry.get(k) not in (None, "")}
        if not all(isinstance(v, str) and len(v) <= 317 for v in toleration.values()):
            errors[where] = Said(gettext_noop("its key, operator, value and effect are words"))
            continue
        if toleration.get("operator", "Equal") not in ("Equal", "Exists"):
            errors[f"{where}.operator"] = Said(gettext_noop("must be Equal or Exists"))
            continue
        if toleration.get("effect", "NoSchedule") not in EFFECTS:
            errors[f"{where}.effect"] = Said(
                gettext_noop("must be NoSchedule, PreferNoSchedule or NoExecute")
            )
            continue
        kept.append(toleration)
    return tuple(kept)


def quota_read(
    raw: object, field: str, pools: Sequence[Pool]
) -> tuple[dict[str, Mapping[str, Any]], dict[str, Said]]:
    """A node's ``pools`` (``{h100: {min: ..., max: ...}}``): each pool's raw ``min`` and
    ``max`` by pool name, and the refusals of names and shapes (quantities are read as the
    node's own)."""
    if raw is None:
        return {}, {}
    if not isinstance(raw, Mapping):
        return {}, {field: Said(gettext_noop("must map a node pool's name to its min and max"))}
    declared = {pool.name for pool in pools}
    kept: dict[str, Mapping[str, Any]] = {}
    errors: dict[str, Said] = {}
    for name, quota in raw.items():
        where = f"{field}.{name}"
        if name not in declared:
            errors[where] = Said(
                gettext_noop("%(name)s is not a node pool of the tree (spec.nodePools: %(pools)s)"),
                name=repr(name), pools=", ".join(sorted(declared)) or "none",
            )  # fmt: skip
        elif not isinstance(quota, Mapping) or set(quota) - {"min", "max"}:
            errors[where] = Said(gettext_noop("must be an object of min and max"))
        else:
            kept[str(name)] = quota
    return kept, errors


def pooled_list(by_pool: Mapping[str, ResourceList]) -> ResourceList:
    """Each pool's resources as pooled keys, in one list beside the totals."""
    return {
        pooled(r, pool): amount
        for pool, amounts in by_pool.items()
        for r, amount in amounts.items()
    }


def by_pool(resources: Mapping[str, int]) -> tuple[ResourceList, dict[str, ResourceList]]:
    """A list's totals, and its pooled keys by pool: the inverse of ``pooled_list``."""
    plain: ResourceList = {}
    pools: dict[str, ResourceList] = {}
    for key, amount in resources.items():
        resource, pool = pool_parts(key)
        if pool:
            pools.setdefault(pool, {})[resource] = amount
        else:
            plain[resource] = amount
    return plain, pools


def has_pools(resources: Mapping[str, int]) -> bool:
    return any(POOL_MARK in key for key in resources)


def allocatable_by_pool(
    allocatable: Mapping[str, int] | None,
    nodes: Sequence[ClusterNode] | None,
    pools: Sequence[Pool],
) -> ResourceList | None:
    """The cluster's allocatable with each pool's share beside it: what the nodes its labels
    select hold. Unknown nodes (None) leave the pools unlimited by the cluster; a pool no
    node carries holds nothing, so no job is placed in it."""
    if allocatable is None or not pools or nodes is None:
        return None if allocatable is None else dict(allocatable)
    found = dict(allocatable)
    for pool in pools:
        held: ResourceList = {}
        for node in nodes:
            if pool.selects(node):
                held = add(held, node.allocatable)
        found.update({pooled(r, pool.name): amount for r, amount in held.items()})
        for resource in allocatable:
            found.setdefault(pooled(resource, pool.name), 0)
    return found


def accepted(placement: Placement, pools: Sequence[Pool]) -> tuple[str, ...]:
    """The pools a pod's own ``nodeSelector`` asks for: those whose every label it names
    with the pool's value (a selector on an H100 pool's labels accepts that pool alone);
    when it names no pool whole, those whose labels it does not contradict (a selector on
    no pool's label accepts every pool, in the tree's order)."""
    selector = dict(placement.node_selector)
    whole = tuple(
        pool.name
        for pool in pools
        if all(selector.get(key) == value for key, value in pool.labels.items())
    )
    return whole or tuple(
        pool.name
        for pool in pools
        if all(selector.get(key, value) == value for key, value in pool.labels.items())
    )
