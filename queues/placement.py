"""Can a job's pods ever be placed? Each pod's request against the shapes of the nodes.

docs/architecture.md section 4, "Every pod must fit a node". Quota says how much a job may
hold; it does not say whether its pods fit the machines. A pod larger than every node, or
asking for a resource no node has, would be admitted, time out and be admitted again for
ever (or wait at the head of its queue), so such a job is refused. A pod fits a node only
if every resource it asks for fits that same node.

A resource that ``max`` does not mention is unlimited for quota, not for the nodes: a job
asking for one that no node has is refused too. So is one the tree offers but no node has,
since the scheduler places pods only on what nodes advertise (and the admission cycle
counts every resource against the cluster's allocatable); the reason then says that the
tree offers it, which points the admin at the tree or the nodes.

A gang starts whole or not at all, so a job whose request, summed over its pods, is more
than all the nodes hold together can never run either: most often its number of pods
(``pods``; a node holds a kubelet's maxPods, 110 by default), or a gang of many pods
that each fit a node but not all at once.

A pod that says where it may run (``nodeSelector``, required node affinity, tolerations:
``kube.scheduling.Placement``) fits only the nodes whose labels and taints let it; one that
no node's labels select, or that every selected node's taints keep away, can never run,
and the reason names what it asked for. Its resources are then read against those nodes.

Plain numbers, no database: the callers read the tree and ask the cluster for its nodes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from kube.scheduling import ClusterNode, Placement

from . import phrases
from .phrases import Phrase
from .pools import Pool
from .quota import Node


@dataclass(frozen=True)
class Unplaceable:
    """Why a job can never run: the pod that fits no node, the resource, and the numbers."""

    pod: str  # "head", "master", "workers[0]"; "" for the whole gang
    resource: str  # "" when the nodes' labels or taints refuse the pod
    phrase: Phrase  # "head asks for cpu 20; the largest node has 16"
    # The part of the pod's template at fault when it is not its resources.
    part: str = ""  # "spec.nodeSelector", "spec.affinity", "spec.tolerations"

    @property
    def reason(self) -> str:
        return self.phrase.english()

    @property
    def field(self) -> str:
        """The field of the job document to name: the pod's resources (or the part of its
        template that keeps it off every node), or the request."""
        if not self.pod:
            return "request"
        return f"{self.pod}.{self.part or 'resources'}"


def _offered_by_tree(path_nodes: Iterable[Node]) -> set[str]:
    """Resources the tree's nodes on a job's path give a positive ``min`` or ``max``."""
    return {
        resource
        for node in path_nodes
        for limits in (node.min, node.max)
        for resource, amount in limits.items()
        if amount > 0
    }


def unplaceable(
    *,
    pods: Mapping[str, Mapping[str, int]],
    nodes: Sequence[ClusterNode] | None,
    path_nodes: Iterable[Node],
    request: Mapping[str, int] | None = None,
    placements: Mapping[str, Placement] | None = None,
    pools: Sequence[Pool] = (),
) -> Unplaceable | None:
    """None when every pod fits some node, else why the first pod that fits none does not;
    then, given the job's whole ``request``, why the gang is more than every node holds.

    ``pools``: the node pools the job may be placed in (``queues.pools``), whose node
    labels and tolerations its pods then carry. It can run when its pods fit in one of
    them; else the reason is the first pool's.
    """
    if not pools:
        return _unplaceable(pods, nodes, list(path_nodes), request, placements or {})
    path_nodes = list(path_nodes)
    first = None
    for pool in pools:
        joined = {
            pod: (placements or {}).get(pod, Placement()).joined(pool.placement) for pod in pods
        }
        found = _unplaceable(pods, nodes, path_nodes, request, joined)
        if found is None:
            return None
        first = first or found
    return first


def _unplaceable(
    pods: Mapping[str, Mapping[str, int]],
    nodes: Sequence[ClusterNode] | None,
    path_nodes: Sequence[Node],
    request: Mapping[str, int] | None,
    placements: Mapping[str, Placement],
) -> Unplaceable | None:
    """``unplaceable`` with the pods' placements given whole.

    ``pods`` maps each pod's name ("head", "workers[0]"...) to its request in base units,
    in the order to report them; ``placements`` what some of them ask of a node's labels
    and taints. ``nodes`` is each schedulable node, None (or empty) when unknown: then
    nothing is refused, since a cluster that cannot be read, or has no schedulable node
    for a moment, says nothing about which jobs could run.
    """
    if not nodes:
        return None
    for pod, pod_request in pods.items():
        asked = {r: amount for r, amount in sorted(pod_request.items()) if amount > 0}
        placement = placements.get(pod, Placement())
        allowed = nodes
        if placement:
            allowed, refused = _allowed(pod, placement, asked, nodes)
            if refused is not None:
                return refused
        found = _short(pod, asked, [node.allocatable for node in allowed], path_nodes)
        if found is not None:
            return found
    return _beyond_the_nodes(request or {}, [node.allocatable for node in nodes])


def _allowed(
    pod: str, placement: Placement, asked: Mapping[str, int], nodes: Sequence[ClusterNode]
) -> tuple[list[ClusterNode], Unplaceable | None]:
    """The nodes whose labels and taints let the pod run, or why there is none."""
    selected = [node for node in nodes if placement.selects(node)]
    if not selected:
        part = "spec.nodeSelector" if placement.node_selector else "spec.affinity"
        return [], Unplaceable(
            pod,
            "",
            Phrase(phrases.NO_NODE_SELECTED, {"pod": pod, "selector": placement.selector_text()}),
            part,
        )
    allowed = [node for node in selected if placement.untolerated(node, asked) is None]
    if not allowed:
        taint = placement.untolerated(selected[0], asked)
        return [], Unplaceable(
            pod,
            "",
            Phrase(phrases.NO_NODE_TOLERATED, {"pod": pod, "taint": str(taint)}),
            "spec.tolerations",
        )
    return allowed, None


def _short(
    pod: str,
    asked: Mapping[str, int],
    nodes: Sequence[Mapping[str, int]],
    path_nodes: Iterable[Node],
) -> Unplaceable | None:
    """Why no node among ``nodes`` holds the pod's request, if none does."""
    on_nodes: dict[str, tuple[int, int]] = {}  # resource: (asked, most on one node)
    for resource, amount in asked.items():
        largest = max(node.get(resource, 0) for node in nodes)
        if largest > 0:
            on_nodes[resource] = (amount, largest)
            continue
        offered = resource in _offered_by_tree(path_nodes)  # read only to say why
        return Unplaceable(
            pod,
            resource,
            Phrase(
                phrases.NO_NODE_HAS_THOUGH_TREE if offered else phrases.NO_NODE_HAS,
                {"pod": pod, "resource": resource,
                 "amount": phrases.quantity(resource, amount)},
            ),
        )  # fmt: skip
    for resource, (amount, largest) in on_nodes.items():
        if amount > largest:
            return Unplaceable(
                pod,
                resource,
                Phrase(
                    phrases.LARGEST_NODE,
                    {"pod": pod, "resource": resource,
                     "amount": phrases.quantity(resource, amount),
                     "largest": phrases.quantity(resource, largest)},
                ),
            )  # fmt: skip
    if any(_fits(on_nodes, node) for node in nodes):
        return None
    # Each resource fits some node, but no node holds them all: name the closest node
    # (the fewest resources short, the first such) and what it lacks.
    closest = min(nodes, key=lambda node: len(_lacking(on_nodes, node)))
    resource = _lacking(on_nodes, closest)[0]
    asks = {r: amount for r, (amount, _) in on_nodes.items()}
    return Unplaceable(
        pod,
        resource,
        Phrase(
            phrases.NO_NODE_HAS_ALL,
            {"pod": pod, "asks": phrases.request(asks), "resource": resource,
             "closest": phrases.quantity(resource, closest.get(resource, 0))},
        ),
    )  # fmt: skip


def _beyond_the_nodes(
    request: Mapping[str, int], nodes: Sequence[Mapping[str, int]]
) -> Unplaceable | None:
    for resource, amount in sorted(request.items()):
        together = sum(node.get(resource, 0) for node in nodes)
        if together and amount > together:
            return Unplaceable(
                "",
                resource,
                Phrase(
                    phrases.BEYOND_THE_NODES,
                    {"resource": resource, "amount": phrases.quantity(resource, amount),
                     "nodes": len(nodes), "together": phrases.quantity(resource, together)},
                ),
            )  # fmt: skip
    return None


def _lacking(asked: Mapping[str, tuple[int, int]], node: Mapping[str, int]) -> list[str]:
    return [r for r, (amount, _) in asked.items() if node.get(r, 0) < amount]


def _fits(asked: Mapping[str, tuple[int, int]], node: Mapping[str, int]) -> bool:
    return not _lacking(asked, node)
