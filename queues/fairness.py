"""Fair sharing over time: what a department used lately, against what it is entitled to.

Borrowing among siblings is otherwise fair only at an instant (``queues.admission``, rule
2: dominant share of used over ``min`` now), so a department that held the whole cluster
all week competes for spare capacity on Monday exactly like one that used nothing. With a
half-life set on the tree, each node also has a **share used**:

- its **decayed usage**: the resource-seconds its jobs held (``jobs.models.Hold``), each
  second weighted by ``2 ** -(age / half-life)``, over what the whole cluster could have
  held in the same weighting (each resource's allocatable total), the dominant resource
  counting. A node that held the whole cluster for ever is at 1.0; one that held half
  of it for one half-life, then nothing for another, at 0.125. Kept by beat from the
  ledger of holds, so it survives restarts and gaps.
- its **entitled share**: the root's is 1.0; a child's is its parent's times its weight
  over the weights of its active siblings (every node's weight is 1 unless set).
- its share used: decayed usage over entitled share. Below 1.0 it has used less than
  its share lately, above 1.0 more.

Among borrowers competing for the same spare capacity, the one whose department (then
sub-department, down to the leaf) used less of its share goes first; when reclaim must
choose among borrowers, the branch that used more of its share gives back first
(``queues.admission``). With no half-life there are no shares used and the rule is
today's exactly. ``min`` stays a promise: a job within its guarantee is never ordered by
the share it used.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from datetime import timedelta

from .quota import Node, path_to_root

# The longest span of usage that still counts: older seconds weigh less than 2 ** -20.
HALF_LIVES_KEPT = 20
HALF_LIFE_MIN = timedelta(hours=1)
HALF_LIFE_MAX = timedelta(days=365)
SUGGESTED_HALF_LIFE = "7d"
WEIGHT_MAX = 1000.0

_DURATION = re.compile(r"(\d+(?:\.\d+)?)(d|h|m|s)")
_UNITS = {"d": 86400, "h": 3600, "m": 60, "s": 1}


def parse_half_life(text: object) -> timedelta | None:
    """``7d``, ``168h``, ``1h30m`` (Go's durations, and days): the timedelta, or None when
    the text is not one."""
    if not isinstance(text, str) or not text or len(text) > 32:
        return None
    position, seconds = 0, 0.0
    for match in _DURATION.finditer(text):
        if match.start() != position:
            return None
        seconds += float(match.group(1)) * _UNITS[match.group(2)]
        position = match.end()
    if position != len(text):
        return None
    return timedelta(seconds=seconds)


def format_half_life(value: timedelta) -> str:
    """The largest whole unit that spells it: ``7d``, ``36h``, ``90m``."""
    seconds = int(value.total_seconds())
    for unit, size in _UNITS.items():
        if seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"  # pragma: no cover - seconds always divide


def decay(age_seconds: float, half_life_seconds: float) -> float:
    """The weight of one second of usage ``age_seconds`` ago."""
    return 2.0 ** -min(max(age_seconds, 0.0) / half_life_seconds, HALF_LIVES_KEPT)


def decayed_fraction(
    held: float, started_ago: float, ended_ago: float, half_life_seconds: float
) -> float:
    """The decayed usage of holding ``held`` of a resource from ``started_ago`` to
    ``ended_ago`` seconds ago, over holding 1 of it for ever: what a span adds to a
    node's decayed usage once divided by the resource's allocatable total."""
    return held * (decay(ended_ago, half_life_seconds) - decay(started_ago, half_life_seconds))


def entitled_shares(tree: Mapping[str, Node]) -> dict[str, float]:
    """Every node's entitled share of the cluster: 1.0 at the root, divided among
    children by weight."""
    children: dict[str, list[Node]] = {}
    for node in tree.values():
        if node.parent is not None:
            children.setdefault(node.parent, []).append(node)
    shares: dict[str, float] = {}
    for path in sorted(tree, key=lambda p: p.count("/")):
        node = tree[path]
        if node.parent is None or node.parent not in shares:
            shares[path] = 1.0
            continue
        siblings = sum(kid.weight for kid in children[node.parent])
        shares[path] = shares[node.parent] * node.weight / siblings
    return shares


def rolled_up(
    by_leaf: Mapping[str, Mapping[str, float]],
) -> dict[str, dict[str, float]]:
    """Decayed usage per resource of every node, from its leaves' (a leaf retired since
    still counts for the ancestors its path names)."""
    nodes: dict[str, dict[str, float]] = {}
    for leaf, fractions in by_leaf.items():
        for path in path_to_root(leaf):
            node = nodes.setdefault(path, {})
            for resource, fraction in fractions.items():
                node[resource] = node.get(resource, 0.0) + fraction
    return nodes


def dominant(fractions: Mapping[str, float]) -> float:
    """The largest of a node's decayed usages, resource by resource."""
    return max(fractions.values(), default=0.0)


def shares_used(tree: Mapping[str, Node], usage: Mapping[str, float]) -> dict[str, float]:
    """Each node's decayed (dominant) usage over its entitled share; a node with no usage
    recorded is at 0."""
    shares = entitled_shares(tree)
    return {
        path: usage.get(path, 0.0) / share if share > 0 else math.inf
        for path, share in shares.items()
    }
