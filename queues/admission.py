"""The admission rule: which queue heads are dequeued in one cycle.

A pure function of the tree, the usage and the queue heads (DESIGN.md sections 3 and 4).
It knows nothing of jobs: a candidate is a key, a leaf, a request and a rank.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from .quantity import ResourceList, add
from .quota import Node, Shortfall, path_to_root, shortfall

PRIORITY = "Priority"
BEST_EFFORT = "BestEffort"


@dataclass(frozen=True)
class Candidate:
    """A pending job at the head of its queue.

    ``rank`` orders candidates across queues (smaller first): (-priority, enqueued, id).
    ``due`` is False while the job is backing off; it is not tried then, and under the
    ``Priority`` policy it still blocks the jobs behind it.
    """

    key: int
    request: ResourceList
    rank: tuple
    due: bool = True


@dataclass(frozen=True)
class QueueHeads:
    leaf: str
    candidates: Sequence[Candidate]  # in queue order
    policy: str = PRIORITY
    exhausted: bool = True  # False when the queue holds more jobs than were read


@dataclass
class Plan:
    admitted: list[Candidate] = field(default_factory=list)
    refused: dict[int, Shortfall] = field(default_factory=dict)
    more: bool = False  # a queue ran out of read candidates while admitting: run again


def plan_admissions(
    *,
    tree: Mapping[str, Node],
    used: Mapping[str, ResourceList],
    allocatable: Mapping[str, int] | None,
    queues: Sequence[QueueHeads],
) -> Plan:
    """Admit queue heads round-robin until no queue can admit another.

    Each round, every queue still open offers its next candidate, queues with the best
    ranked head first; so no leaf gets two admissions while another leaf's fitting head
    waits. A candidate that does not fit is refused with the reason. Under ``Priority`` a
    refused (or backing off) head closes its queue for the cycle; under ``BestEffort`` it
    is set aside and the next candidate is tried.
    """
    usage = {path: dict(resources) for path, resources in used.items()}
    plan = Plan()
    cursors = {index: 0 for index in range(len(queues))}
    open_queues = set(cursors)

    def next_candidate(index: int) -> Candidate | None:
        heads = queues[index]
        while cursors[index] < len(heads.candidates):
            candidate = heads.candidates[cursors[index]]
            if candidate.due:
                return candidate
            if heads.policy == PRIORITY:
                return None
            cursors[index] += 1
        return None

    while open_queues:
        offers = []
        for index in list(open_queues):
            candidate = next_candidate(index)
            if candidate is None:
                open_queues.discard(index)
                heads = queues[index]
                if cursors[index] >= len(heads.candidates) and not heads.exhausted:
                    plan.more = True
            else:
                offers.append((candidate.rank, index, candidate))
        for _rank, index, candidate in sorted(offers, key=lambda offer: offer[:2]):
            heads = queues[index]
            while candidate is not None:
                cursors[index] += 1
                reason = shortfall(
                    leaf=heads.leaf,
                    request=candidate.request,
                    tree=tree,
                    used=usage,
                    allocatable=allocatable,
                )
                if reason is None:
                    plan.admitted.append(candidate)
                    for path in path_to_root(heads.leaf):
                        usage[path] = add(usage.get(path, {}), candidate.request)
                    break
                plan.refused[candidate.key] = reason
                if heads.policy == PRIORITY:
                    open_queues.discard(index)
                    break
                candidate = next_candidate(index)
    return plan
