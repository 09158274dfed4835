"""The admission rule: which queue heads are dequeued in one cycle, and whom they preempt.

A pure function of the tree, the usage, the admitted jobs and the queue heads
(docs/architecture.md section 5). It knows nothing of the database: a candidate is a key,
a request and a rank; an admitted job is a key, a leaf, a request, a priority and an
admission time.

The rules, in the order they apply:

0. **Stops.** A leaf whose path has a ``stopPolicy`` (``queues.limits``) admits nothing:
   its queue is not offered. Under ``HoldAndDrain`` its jobs holding quota are preempted
   back to their queue first (rule ``drain``), in victim order.
1. **Over quota.** A node whose usage is above its ``max`` (an admin lowered it) gives
   back jobs from its subtree until it is within ``max``: lowest priority first, then
   the most recently admitted.
2. **Fair order.** Each round offers every open queue's next candidate. Candidates that
   stay within their guarantee (every node on the path below the root stays within its
   own ``min``) go first; among borrowers, while the tree has a half-life, the one whose
   nodes stand lowest (``fair``: decayed usage over entitled share, ``queues.fairness``,
   compared from the department down to the leaf) goes first; then the one whose nodes
   borrow least now (dominant share of used over ``min``, compared the same way); then
   priority and enqueue time. No leaf gets two admissions in a round.
3. **Fit.** A candidate is admitted when its request fits under ``max`` at its leaf and
   every ancestor, and under the cluster's allocatable resources.
4. **Reclaim.** A candidate within its guarantee that does not fit preempts jobs of
   borrowers (the branches, below the nearest common ancestor, that use more than their
   own ``min``), lowest priority first, then most recently admitted, only while the
   victim's branch is above its ``min`` (while the tree has a half-life, the branch that
   used most of its share lately gives back first, then as before); then any victim the
   others make unnecessary is kept (tried in reverse order, as Kueue does), so no more
   are preempted than it needs.
   If the queue allows it, a candidate may also preempt lower priority jobs of its own
   queue. If not enough can be freed, nothing is preempted and the candidate is refused
   with the reason.
5. **Leaving jobs hold their quota until they are gone.** A job that was preempted or
   cancelled keeps counting in the usage until the cluster confirms its objects are gone
   (``leaving``), so capacity is never counted twice. A candidate that does not fit now
   but would once the leaving jobs are gone (its victims among them) is not admitted: it
   waits for them (``Releasing``), and what it needs of the freed capacity is set aside
   for it, so that a later candidate neither counts on the same release nor preempts
   again for it. Victims and borrowing are judged on that future usage.
6. **Within the cycle.** The cycle plans against the usage it has already added, and only
   jobs that held quota before it can be victims: a job admitted earlier in the cycle is
   never preempted by a later candidate, and a branch borrows only by what those jobs
   use.
7. **Node pools.** Where the tree declares pools (``queues.pools``), a candidate is placed
   in one of the pools it accepts (its own list, else the tree's order), its request
   counted there and in the totals. The pools are tried in order, as Kueue's flavor
   assignment tries flavors, and the first place found in this order is taken: a pool
   where it fits within its guarantee; then one where it fits by borrowing; then one it
   fits once the leaving jobs are gone; then one where preemption makes room (reclaim and
   queue priority, per pool, as above). So a guaranteed place in a later pool beats
   borrowing in an earlier one: what is borrowed can be reclaimed, a guarantee cannot.
   Refused in every pool, it is told each pool's reason, and which pools it does not
   accept.
8. **Policies.** Under ``Priority`` a refused or waiting head closes its queue for the
   cycle, and so does a backing-off head while it could still be admitted (its request
   fits every ``max`` on its path and the cluster); under ``BestEffort`` it is set aside
   and the next candidate is tried.
9. **Per person.** Where the leaf's path sets ``perPerson`` limits, a candidate whose owner
   would have more jobs holding quota in the leaf than ``jobs``, or hold more of a resource
   there than ``resources`` gives (leaving jobs and those admitted in the cycle counted),
   is refused with that reason before any fit is tried, and it never closes its queue:
   under either policy the queue goes on to the next candidate, as best effort does, so
   one person at their limit does not hold back the others.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kube.quantity import POOL_MARK, ResourceList, add, in_pool, pool_parts, subtract, unpooled

from . import phrases
from .limits import HOLD_AND_DRAIN, LeafLimits, limits_of
from .phrases import Phrase
from .quota import Node, Shortfall, borrows, guaranteed, path_to_root, shortfall

PRIORITY = "Priority"
BEST_EFFORT = "BestEffort"

RECLAIM = "reclaim"
QUEUE_PRIORITY = "queue priority"
OVER_QUOTA = "over quota"
DRAIN = "drain"


@dataclass(frozen=True)
class Candidate:
    """A pending job at the head of its queue.

    ``rank`` orders candidates of equal claim (smaller first): (-priority, enqueued, id).
    ``due`` is False while the job is backing off; it is not tried then, and under the
    ``Priority`` policy it still blocks the jobs behind it.
    """

    key: int
    request: ResourceList
    rank: tuple[Any, ...]
    due: bool = True
    priority: int = 0
    # The node pools it accepts, in order (queues.pools); () for the tree's order.
    pools: tuple[str, ...] = ()
    owner: int | None = None  # who submitted it: its leaf's perPerson limits count theirs


@dataclass(frozen=True)
class QueueHeads:
    leaf: str
    candidates: Sequence[Candidate]  # in queue order
    policy: str = PRIORITY
    exhausted: bool = True  # False when the queue holds more jobs than were read
    preemption: bool = False  # a candidate may preempt lower priority jobs of this queue


@dataclass(frozen=True)
class Admitted:
    """A job holding quota: admitted or running, or leaving (preempted or cancelled, its
    objects not yet gone from the cluster)."""

    key: int
    leaf: str
    request: ResourceList
    priority: int
    admitted_at: Any  # comparable: later means more recently admitted
    owner: int | None = None


@dataclass(frozen=True)
class Preemption:
    """A job that must leave the cluster, and why."""

    victim: Admitted
    rule: str  # RECLAIM, QUEUE_PRIORITY or OVER_QUOTA
    node: str  # the node that reclaims, or the node that went over its max
    by: int | None = None  # the candidate the capacity goes to
    borrower: str = ""  # RECLAIM: the branch that used more than its min

    def phrase(self) -> Phrase:
        released = phrases.request(self.victim.request)
        if self.rule == RECLAIM:
            return Phrase(
                phrases.PREEMPTED_RECLAIM,
                {"node": self.node, "borrower": self.borrower, "by": self.by,
                 "released": released},
            )  # fmt: skip
        if self.rule == QUEUE_PRIORITY:
            return Phrase(
                phrases.PREEMPTED_PRIORITY, {"by": self.by, "node": self.node, "released": released}
            )
        if self.rule == DRAIN:
            return Phrase(phrases.PREEMPTED_DRAIN, {"node": self.node, "released": released})
        return Phrase(phrases.PREEMPTED_OVER_QUOTA, {"node": self.node, "released": released})

    def message(self) -> str:
        return self.phrase().english()


@dataclass(frozen=True)
class Releasing:
    """Why a candidate waits although it fits once the jobs leaving the cluster are gone:
    it does not fit now (``now``), and these jobs still hold what it needs."""

    jobs: tuple[int, ...]
    now: Shortfall

    def phrase(self) -> Phrase:
        return Phrase(
            phrases.RELEASING,
            {"count": len(self.jobs), "jobs": phrases.jobs(self.jobs),
             "now": phrases.nested(self.now.phrase())},
        )  # fmt: skip

    def message(self) -> str:
        return self.phrase().english()


@dataclass(frozen=True)
class InPools:
    """Why a candidate is placed in none of the pools it accepts: each one's reason, in
    its order, and the tree's pools it does not accept."""

    reasons: tuple[tuple[str, Shortfall], ...]
    unlisted: tuple[str, ...] = ()

    @property
    def shortfalls(self) -> list[Shortfall]:
        """Each pool's reason once: pools refused by the same total (the leaf's max of cpu,
        say) give one reason, which no pool could change."""
        distinct: list[Shortfall] = []
        for _pool, short in self.reasons:
            if short not in distinct:
                distinct.append(short)
        return distinct

    def phrase(self) -> Phrase:
        if not self.reasons:
            return Phrase(phrases.NO_POOL, {"pools": ", ".join(self.unlisted)})
        shorts = self.shortfalls
        if len(shorts) == 1 and POOL_MARK not in shorts[0].resource and not self.unlisted:
            return shorts[0].phrase()  # as a tree without pools says it
        reasons = phrases.all_of([short.phrase() for short in shorts])
        if not self.unlisted:
            return Phrase(phrases.POOLS_SHORT, {"reasons": reasons})
        return Phrase(
            phrases.POOLS_SHORT_UNLISTED,
            {"reasons": reasons, "pools": ", ".join(self.unlisted), "count": len(self.unlisted)},
        )

    def message(self) -> str:
        return self.phrase().english()


@dataclass(frozen=True)
class OverPersonLimit:
    """Why a candidate is refused before its fit is tried: its owner is at the leaf's
    ``perPerson`` limit of jobs (``resource`` "") or of a resource."""

    leaf: str
    node: str  # the node that sets the limit
    holding: int  # the owner's jobs holding quota in the leaf
    limit: int  # the most jobs, or units of ``resource``
    resource: str = ""
    used: int = 0  # units of ``resource`` the owner holds there
    requested: int = 0

    def phrase(self) -> Phrase:
        if not self.resource:
            return Phrase(
                phrases.PERSON_JOBS,
                {"holding": self.holding, "leaf": self.leaf, "node": self.node,
                 "limit": self.limit},
            )  # fmt: skip
        return Phrase(phrases.PERSON_RESOURCES, self.args())

    def args(self) -> dict[str, Any]:
        r = self.resource
        return {
            "resource": r, "leaf": self.leaf, "node": self.node,
            "used": phrases.quantity(r, self.used, self.limit),
            "asks": phrases.quantity(r, self.requested, self.limit),
            "limit": phrases.quantity(r, self.limit),
        }  # fmt: skip

    def message(self) -> str:
        return self.phrase().english()


Refusal = Shortfall | Releasing | InPools | OverPersonLimit


@dataclass
class Plan:
    admitted: list[Candidate] = field(default_factory=list)
    refused: dict[int, Refusal] = field(default_factory=dict)
    preempted: list[Preemption] = field(default_factory=list)
    more: bool = False  # a queue ran out of read candidates while admitting: run again
    # The keys of the candidates admitted or set waiting (Releasing), in the order the cycle
    # decided them: a replay of the plan follows it.
    order: list[int] = field(default_factory=list)
    # The pool each candidate admitted or set waiting was placed in, where the tree has pools.
    placed: dict[int, str] = field(default_factory=dict)


def victim_order(job: Admitted) -> tuple[int, float, int]:
    """Who is preempted first: the lowest priority, then the most recently admitted."""
    return (job.priority, _newest_first(job.admitted_at), -job.key)


def _newest_first(moment: Any) -> float:
    if moment is None:
        return 0.0  # unknown admission time: taken as the oldest
    seconds: float = moment.timestamp() if hasattr(moment, "timestamp") else moment
    return -seconds


def within_guarantee(
    leaf: str,
    request: Mapping[str, int],
    tree: Mapping[str, Node],
    used: Mapping[str, Mapping[str, int]],
) -> bool:
    """True when admitting ``request`` keeps every node below the root within its own min,
    for each resource the node names (``governs``); a request placed in a pool, within
    the pool's share where the node gives one (``queues.quota.guaranteed``)."""
    pool = ""
    for key in request:
        if POOL_MARK in key:
            pool = pool_parts(key)[1]
            break
    for path in path_to_root(leaf)[:-1]:
        node = tree[path]
        node_used = used.get(path, {})
        if node.pooled:
            after = add(node_used, request)
        for resource, amount in request.items():
            if (
                not amount
                or POOL_MARK in resource
                or not (governs(node, resource) or resource in node.pooled)
            ):
                continue
            if node.pooled:
                if not guaranteed(node, after, resource, pool):
                    return False
            elif node_used.get(resource, 0) + amount > node.min.get(resource, 0):
                return False
    return True


def governs(node: Node, resource: str) -> bool:
    """Whether the node's quota speaks of ``resource`` (in its ``min`` or its ``max``).

    One it does not name is not guaranteed there, nor borrowed: it is limited only by the
    ancestors that name it and by the cluster. Every job asks for ``pods``, and a tree that
    does not name them leaves a job's guarantee and a department's share to the resources
    it does name."""
    return resource in node.min or resource in node.max


def dominant_share(node: Node, used: Mapping[str, int]) -> float:
    """The largest used/min ratio over the resources the node names (infinite above a min
    of 0)."""
    share = 0.0
    for resource, amount in used.items():
        if amount <= 0 or not governs(node, resource):
            continue
        minimum = node.min.get(resource, 0)
        share = max(share, amount / minimum if minimum else math.inf)
    return share


def borrow_key(
    leaf: str,
    request: Mapping[str, int],
    tree: Mapping[str, Node],
    used: Mapping[str, Mapping[str, int]],
) -> tuple[float, ...]:
    """Dominant shares after admission, from the department down to the leaf."""
    below_root = list(reversed(path_to_root(leaf)[:-1]))
    return tuple(
        dominant_share(tree[path], add(used.get(path, {}), request)) for path in below_root
    )


def share_used_key(leaf: str, fair: Mapping[str, float], depth: int) -> tuple[float, ...]:
    """The shares used of the leaf's nodes, from the department down to the leaf, the
    last repeated to ``depth`` values so that leaves at different depths compare level by
    level (and equal shares compare equal); empty while the tree has no half-life."""
    if not fair:
        return ()
    used = [fair.get(path, 0.0) for path in reversed(path_to_root(leaf)[:-1])]
    return tuple(used + used[-1:] * (depth - len(used)))


def _is_under(leaf: str, path: str) -> bool:
    return path == "cluster" or leaf == path or leaf.startswith(path + "/")


def _borrowing_branch(victim_leaf: str, leaf: str) -> str | None:
    """The victim's ancestor just below the nearest common ancestor with ``leaf``."""
    if victim_leaf == leaf:
        return None
    ours, theirs = leaf.split("/"), victim_leaf.split("/")
    common = 0
    while common < min(len(ours), len(theirs)) and ours[common] == theirs[common]:
        common += 1
    return "/".join(theirs[: common + 1])


class _Holders:
    """The jobs that held quota before the cycle and still do, in victim order: the only
    jobs a plan may preempt (rule 5)."""

    def __init__(self, jobs: Sequence[Admitted]):
        self.ordered = sorted(jobs, key=victim_order)
        self.by_leaf: dict[str, list[Admitted]] = {}
        # Those under each node (and the cluster) holding each resource (in a pool: its
        # pooled key): the only ones whose preemption frees it there. Those removed since
        # stay in these lists, and are ``gone``.
        self.holding: dict[tuple[str, str], list[Admitted]] = {}
        self.gone: set[int] = set()
        for job in self.ordered:
            self.by_leaf.setdefault(job.leaf, []).append(job)
            for key in _holds(job):
                self.holding.setdefault(key, []).append(job)

    def remove(self, job: Admitted) -> None:
        key = victim_order(job)
        for ordered in (self.ordered, self.by_leaf[job.leaf]):
            del ordered[bisect.bisect_left(ordered, key, key=victim_order)]
        self.gone.add(job.key)


def _holds(job: Admitted) -> list[tuple[str, str]]:
    """(node or "cluster", resource) for what the job holds, under every node above it."""
    places = (*path_to_root(job.leaf), "cluster")
    return [(place, r) for r, amount in job.request.items() if amount for place in places]


class _Usage:
    """Usage per node path, changed as jobs are admitted and preempted during the plan."""

    def __init__(self, used: Mapping[str, ResourceList]):
        self.by_path: MutableMapping[str, ResourceList] = {
            path: dict(resources) for path, resources in used.items()
        }

    def add(self, leaf: str, request: ResourceList) -> None:
        for path in path_to_root(leaf):
            self.by_path[path] = add(self.by_path.get(path, {}), request)

    def remove(self, leaf: str, request: ResourceList) -> None:
        for path in path_to_root(leaf):
            self.by_path[path] = subtract(self.by_path.get(path, {}), request)

    def get(self, path: str) -> ResourceList:
        return self.by_path.get(path, {})

    def copy(self) -> _Usage:
        """A trial copy in O(1): reads fall through to this usage, changes stay in the copy
        (a refused candidate tries one, and a cycle at 2,000 queues refuses thousands)."""
        trial = _Usage({})
        trial.by_path = _Over(self.by_path)
        return trial


_MISSING: Any = object()


class _Over(dict[str, ResourceList]):
    """Changes over a mapping, which reads fall through to: a ChainMap of two, for the few
    operations a trial usage makes (``get`` and assignment), at the cost of a dict's."""

    def __init__(self, under: Mapping[str, ResourceList]):
        super().__init__()
        self.under = under

    def get(self, key: str, default: Any = None) -> Any:
        value = dict.get(self, key, _MISSING)
        return self.under.get(key, default) if value is _MISSING else value

    def __getitem__(self, key: str) -> ResourceList:
        value = dict.get(self, key, _MISSING)
        return self.under[key] if value is _MISSING else value


def plan_admissions(
    *,
    tree: Mapping[str, Node],
    used: Mapping[str, ResourceList],
    allocatable: Mapping[str, int] | None,
    queues: Sequence[QueueHeads],
    admitted: Sequence[Admitted] = (),
    leaving: Sequence[Admitted] = (),
    fair: Mapping[str, float] | None = None,
    pools: Sequence[str] = (),
) -> Plan:
    """Admit queue heads round-robin until no queue can admit another (see module doc).

    ``used`` is what every job holding quota uses, ``leaving`` ones included; ``admitted``
    are those that may be preempted, ``leaving`` those already on their way out. ``fair``
    is each node's share used (``queues.fairness.shares_used``) while the tree has a
    half-life; empty or None, borrowers are ordered by their usage now alone. ``pools``
    are the tree's node pools in its order (rule 7); ``admitted`` and ``leaving`` jobs
    placed in one carry their request as placed there (``kube.quantity.in_pool``).
    """
    cycle = _Cycle(tree, allocatable, used, admitted, leaving, fair or {}, tuple(pools))
    plan = Plan()
    for preemption in _drained(cycle):
        plan.preempted.append(preemption)
        cycle.preempt(preemption.victim)
    for preemption in _over_quota(tree, cycle.future, cycle.holders):
        plan.preempted.append(preemption)
        cycle.preempt(preemption.victim)

    cursors = {index: 0 for index in range(len(queues))}
    open_queues = {
        index for index in cursors if not (cycle.stops and cycle.limits(queues[index].leaf).stop)
    }

    def next_candidate(index: int) -> Candidate | None:
        heads = queues[index]
        while cursors[index] < len(heads.candidates):
            candidate = heads.candidates[cursors[index]]
            if candidate.due:
                return candidate
            if (
                heads.policy == PRIORITY
                and cycle.over_person_limit(heads.leaf, candidate) is None
                and cycle.admissible(heads.leaf, candidate)
            ):
                return None
            cursors[index] += 1
        return None

    def claim(
        index: int, candidate: Candidate
    ) -> tuple[bool, tuple[float, ...], tuple[float, ...], tuple[Any, ...], int]:
        leaf, used_now = queues[index].leaf, cycle.future.by_path
        options = cycle.options(candidate)
        if any(within_guarantee(leaf, request, tree, used_now) for _pool, request in options):
            return (False, (), (), candidate.rank, index)
        request = options[0][1] if options else candidate.request
        fair = share_used_key(leaf, cycle.fair, cycle.depth)
        return (True, fair, borrow_key(leaf, request, tree, used_now), candidate.rank, index)

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
                offers.append((claim(index, candidate), index, candidate))
        for _claim, index, candidate in sorted(offers, key=lambda offer: offer[0]):
            heads = queues[index]
            while candidate is not None:
                cursors[index] += 1
                if _admit(plan, cycle, heads, candidate):
                    break
                if (
                    heads.policy == PRIORITY
                    and not isinstance(plan.refused.get(candidate.key), OverPersonLimit)
                    and cycle.admissible(heads.leaf, candidate)
                ):
                    open_queues.discard(index)
                    break
                candidate = next_candidate(index)
    return plan


class _Cycle:
    """What one plan works against. ``usage`` is what jobs hold now, leaving jobs included,
    plus what the cycle admitted: a candidate is admitted only where it fits there.
    ``future`` is the usage once the leaving jobs and the cycle's victims are gone, plus
    what the cycle admitted or set aside for waiting candidates: victims are chosen
    against it. ``settled`` is the part of ``future`` that jobs held before the cycle (who
    borrows, rule 6), and ``holders`` those jobs (who can be preempted)."""

    def __init__(
        self,
        tree: Mapping[str, Node],
        allocatable: Mapping[str, int] | None,
        used: Mapping[str, ResourceList],
        admitted: Sequence[Admitted],
        leaving: Sequence[Admitted],
        fair: Mapping[str, float],
        pools: tuple[str, ...] = (),
    ):
        self.tree = tree
        self.pools = pools
        self._options: dict[int, list[tuple[str, ResourceList]]] = {}
        self.allocatable = allocatable
        self.fair = fair
        self.depth = max((path.count("/") for path in tree), default=0)
        self.usage = _Usage(used)
        self.future = _Usage(used)
        self.settled = _Usage(used)
        for job in leaving:
            self.future.remove(job.leaf, job.request)
            self.settled.remove(job.leaf, job.request)
        self.leaving_under: dict[str, list[Admitted]] = {}
        for job in leaving:
            self._leaves(job)
        self.holders = _Holders(admitted)
        self._limits: dict[str, LeafLimits] = {}
        self.stops = any(node.stop for node in tree.values())
        self.per_person = any("perPerson" in node.limits for node in tree.values())
        # What each person holds in each leaf (jobs, and the totals of what they hold),
        # leaving jobs and those the cycle admits included: perPerson limits count it.
        self.person: dict[tuple[str, int], tuple[int, ResourceList]] = {}
        if self.per_person:  # a tree without perPerson limits counts nothing
            for job in (*admitted, *leaving):
                self._count(job.leaf, job.owner, job.request)

    def limits(self, leaf: str) -> LeafLimits:
        limits = self._limits.get(leaf)
        if limits is None:
            limits = self._limits[leaf] = limits_of(self.tree, leaf)
        return limits

    def _count(self, leaf: str, owner: int | None, request: ResourceList) -> None:
        if owner is None or not self.per_person or not self.limits(leaf).per_person:
            return
        jobs, held = self.person.get((leaf, owner), (0, {}))
        self.person[(leaf, owner)] = (jobs + 1, add(held, unpooled(request)))

    def over_person_limit(self, leaf: str, candidate: Candidate) -> OverPersonLimit | None:
        """Why the candidate's owner may not have it admitted in ``leaf``: at its path's
        perPerson limit of jobs, or of a resource; None when within them (or unlimited)."""
        if candidate.owner is None or not self.per_person:
            return None
        limits = self.limits(leaf)
        if not limits.per_person:
            return None
        jobs, held = self.person.get((leaf, candidate.owner), (0, {}))
        node = limits.person_at
        if limits.person_jobs is not None and jobs + 1 > limits.person_jobs:
            return OverPersonLimit(leaf, node, jobs, limits.person_jobs)
        for resource, limit in sorted(limits.person_resources.items()):
            asks = candidate.request.get(resource, 0)
            if asks and held.get(resource, 0) + asks > limit:
                return OverPersonLimit(
                    leaf, node, jobs, limit, resource, held.get(resource, 0), asks
                )
        return None

    def _leaves(self, job: Admitted) -> None:
        """The job is on its way out: it is found under every node above its leaf, and under
        the cluster."""
        for path in (*path_to_root(job.leaf), "cluster"):
            self.leaving_under.setdefault(path, []).append(job)

    def options(self, candidate: Candidate) -> list[tuple[str, ResourceList]]:
        """Where the candidate may be placed, in its order: each pool it accepts of the
        tree's, with its request as placed there; its request as it is where the tree has
        no pools; none where the tree has pools and it accepts none of them."""
        if not self.pools:
            return [("", candidate.request)]
        options = self._options.get(candidate.key)
        if options is None:  # asked when it is offered, and again when it is tried
            accepted = (
                [pool for pool in candidate.pools if pool in self.pools]
                if candidate.pools
                else self.pools
            )
            options = [(pool, in_pool(candidate.request, pool)) for pool in accepted]
            self._options[candidate.key] = options
        return options

    def unlisted(self, candidate: Candidate) -> tuple[str, ...]:
        """The tree's pools the candidate does not accept."""
        if not candidate.pools:
            return ()
        return tuple(pool for pool in self.pools if pool not in candidate.pools)

    def admissible(self, leaf: str, candidate: Candidate) -> bool:
        """Whether the request fits its path's max and the cluster when nothing runs, in
        some pool it accepts."""
        return any(
            shortfall(leaf=leaf, request=request, tree=self.tree, used={},
                      allocatable=self.allocatable)
            is None
            for _pool, request in self.options(candidate)
        )  # fmt: skip

    def shortfall(self, leaf: str, request: ResourceList, usage: _Usage) -> Shortfall | None:
        return shortfall(
            leaf=leaf, request=request, tree=self.tree, used=usage.by_path,
            allocatable=self.allocatable,
        )  # fmt: skip

    def preempt(self, job: Admitted) -> None:
        """The job leaves: it holds its quota now, not in the future."""
        self.future.remove(job.leaf, job.request)
        self.settled.remove(job.leaf, job.request)
        self.holders.remove(job)
        self._leaves(job)

    def admit(self, leaf: str, request: ResourceList) -> None:
        self.usage.add(leaf, request)
        self.future.add(leaf, request)

    def set_aside(self, leaf: str, request: ResourceList) -> None:
        """What a waiting candidate needs of the capacity being released is kept for it."""
        self.future.add(leaf, request)

    def holding(self, now: Shortfall) -> tuple[int, ...]:
        """The leaving jobs that hold what is short now, where it is short."""
        resource = now.resource
        return tuple(
            job.key for job in self.leaving_under.get(now.where, ()) if job.request.get(resource)
        )


def _admit(plan: Plan, cycle: _Cycle, heads: QueueHeads, candidate: Candidate) -> bool:
    """Admit the candidate where it fits both now and once the leaving jobs are gone,
    preempting if the future needs it and the rules allow. If it fits only once they are
    gone, it waits for them with its need set aside; else it is refused with the reason.
    Where the tree has pools, the first place in the order of rule 7 is taken. A candidate
    whose owner is at the leaf's perPerson limit is refused first (rule 9)."""
    leaf = heads.leaf
    over = cycle.over_person_limit(leaf, candidate)
    if over is not None:
        plan.refused[candidate.key] = over
        return False
    options = cycle.options(candidate)
    if not cycle.pools:
        ((pool, request),) = options
        now = cycle.shortfall(leaf, request, cycle.usage)
        later = cycle.shortfall(leaf, request, cycle.future)
        if later is None:
            return _place(plan, cycle, candidate, leaf, pool, request, now)
        victims = _victims(cycle, heads, candidate, request, later)
        if victims is None:
            plan.refused[candidate.key] = now or later
            return False
        _preempt(plan, cycle, victims)
        return _place(plan, cycle, candidate, leaf, pool, request, now)
    return _admit_in_pools(plan, cycle, heads, candidate, options)


def _admit_in_pools(
    plan: Plan,
    cycle: _Cycle,
    heads: QueueHeads,
    candidate: Candidate,
    options: list[tuple[str, ResourceList]],
) -> bool:
    """``_admit`` over the pools the candidate accepts, in its order (rule 7). Each pool's
    fit once the leaving jobs are gone is read only as far as the order needs: the first
    pool where it fits now within its guarantee is taken at once, and a total it cannot
    fit (a leaf's cpu, say) rules out every pool without preemption."""
    leaf = heads.leaf
    laters: list[Shortfall | None] = []
    fitting: list[tuple[bool, bool, int]] = []  # (waits, borrows, index): the order's key
    nows: dict[int, Shortfall | None] = {}
    for index, (pool, request) in enumerate(options):
        later = cycle.shortfall(leaf, request, cycle.future)
        laters.append(later)
        if later is not None:
            if POOL_MARK not in later.resource:
                break  # the totals every pool shares: no pool fits without preemption
            continue
        now = nows[index] = cycle.shortfall(leaf, request, cycle.usage)
        borrows = not within_guarantee(leaf, request, cycle.tree, cycle.future.by_path)
        if now is None and not borrows:
            return _place(plan, cycle, candidate, leaf, pool, request, now)
        fitting.append((now is not None, borrows, index))
    if fitting:
        index = min(fitting)[2]
        pool, request = options[index]
        return _place(plan, cycle, candidate, leaf, pool, request, nows[index])
    laters += [None] * (len(options) - len(laters))
    for index, (pool, request) in enumerate(options):
        later = laters[index] or cycle.shortfall(leaf, request, cycle.future)
        laters[index] = later
        victims = _victims(cycle, heads, candidate, request, later)
        if victims is None:
            continue
        _preempt(plan, cycle, victims)
        return _place(
            plan, cycle, candidate, leaf, pool, request,
            cycle.shortfall(leaf, request, cycle.usage),
        )  # fmt: skip
    reasons = []
    for (pool, request), later in zip(options, laters, strict=True):
        now = cycle.shortfall(leaf, request, cycle.usage)
        reasons.append((pool, now or later))
    plan.refused[candidate.key] = InPools(tuple(reasons), cycle.unlisted(candidate))  # type: ignore[arg-type]
    return False


def _preempt(plan: Plan, cycle: _Cycle, victims: list[Preemption]) -> None:
    for preemption in victims:
        plan.preempted.append(preemption)
        cycle.preempt(preemption.victim)


def _place(
    plan: Plan,
    cycle: _Cycle,
    candidate: Candidate,
    leaf: str,
    pool: str,
    request: ResourceList,
    now: Shortfall | None,
) -> bool:
    """Admit the candidate in ``pool`` if it fits now, else set it waiting for the leaving
    jobs that hold what it needs there."""
    plan.order.append(candidate.key)
    if pool:
        plan.placed[candidate.key] = pool
    if now is None:
        plan.admitted.append(candidate)
        cycle.admit(leaf, request)
        cycle._count(leaf, candidate.owner, request)
        return True
    plan.refused[candidate.key] = Releasing(cycle.holding(now), now)
    cycle.set_aside(leaf, request)
    return False


def _victims(
    cycle: _Cycle,
    heads: QueueHeads,
    candidate: Candidate,
    request: ResourceList,
    reason: Shortfall | None,
) -> list[Preemption] | None:
    """The fewest preemptions, in victim order, that let the candidate's ``request`` (as
    placed in a pool) fit; None if none do."""
    tree, leaf = cycle.tree, heads.leaf
    reclaim = within_guarantee(leaf, request, tree, cycle.future.by_path)
    if not reclaim and not heads.preemption:
        return None
    own: list[Admitted] = []
    if not reclaim:
        # Without reclaim, only lower priority jobs of the candidate's own queue can give way;
        # with none, nothing can (most refused heads of a busy cycle: ask no more).
        own = [
            job for job in cycle.holders.by_leaf.get(leaf, ()) if job.priority < candidate.priority
        ]
        if not own:
            return None

    def fair_first(jobs: list[Admitted]) -> list[Admitted]:
        # The branch that used most of its share gives back first (sorted is stable: victim order
        # within a branch, and between branches that stand equal).
        return sorted(
            jobs, key=lambda job: -cycle.fair.get(_borrowing_branch(job.leaf, leaf) or "", 0.0)
        )

    trial, settled = cycle.future.copy(), cycle.settled.copy()
    chosen: list[Preemption] = []
    taken: set[int] = set()
    while reason is not None:
        preemption = None
        short = reason.resource
        # With reclaim, any job holding what is short where it is short may give way, in
        # victim order (or fair sharing's); the others would free nothing of it there.
        pool = own
        if reclaim:
            pool = cycle.holders.holding.get((reason.where, short), [])
            if cycle.fair:
                pool = fair_first(pool)
        kept: set[str] = set()  # other leaves none of whose jobs can give way this round
        for job in pool:
            if job.key in taken or job.key in cycle.holders.gone or job.leaf in kept:
                continue
            if not job.request.get(short) or not _is_under(job.leaf, reason.where):
                continue  # preempting it would not free what is short, where it is short
            if heads.preemption and job.leaf == leaf and job.priority < candidate.priority:
                preemption = Preemption(job, QUEUE_PRIORITY, leaf, by=candidate.key)
                break
            branch = _borrowing_branch(job.leaf, leaf)
            if reclaim and branch and borrows(tree[branch], settled.get(branch), short):
                preemption = Preemption(job, RECLAIM, leaf, by=candidate.key, borrower=branch)
                break
            if job.leaf != leaf:
                kept.add(job.leaf)  # its branch does not borrow what is short: nor its others
        if preemption is None:
            return None
        taken.add(preemption.victim.key)
        trial.remove(preemption.victim.leaf, preemption.victim.request)
        settled.remove(preemption.victim.leaf, preemption.victim.request)
        chosen.append(preemption)
        reason = cycle.shortfall(leaf, request, trial)
    # The last victim was needed; an earlier one may not be, now that later ones go.
    for preemption in reversed(chosen[:-1]):
        trial.add(preemption.victim.leaf, preemption.victim.request)
        if cycle.shortfall(leaf, request, trial) is None:
            chosen.remove(preemption)
        else:
            trial.remove(preemption.victim.leaf, preemption.victim.request)
    return chosen


def _drained(cycle: _Cycle) -> list[Preemption]:
    """The jobs holding quota in leaves whose path is stopped with HoldAndDrain, in victim
    order, each named by the node that drains it."""
    preemptions: list[Preemption] = []
    if not cycle.stops:
        return preemptions
    for job in list(cycle.holders.ordered):
        limits = cycle.limits(job.leaf)
        if limits.stop == HOLD_AND_DRAIN:
            preemptions.append(Preemption(job, DRAIN, limits.stopped_at))
    return preemptions


def _over_quota(tree: Mapping[str, Node], usage: _Usage, running: _Holders) -> list[Preemption]:
    """Jobs to give back where usage is above max, deepest nodes first, in victim order."""
    preemptions: list[Preemption] = []
    pool = list(running.ordered)
    trial = usage.copy()
    for path in sorted(tree, key=lambda p: -p.count("/")):
        for job in list(pool):
            over = _over_max(tree[path], trial.by_path.get(path, {}))
            if not over:
                break
            if _is_under(job.leaf, path) and any(job.request.get(r, 0) > 0 for r in over):
                preemptions.append(Preemption(job, OVER_QUOTA, path))
                pool.remove(job)
                trial.remove(job.leaf, job.request)
    return preemptions


def _over_max(node: Node, used: Mapping[str, int]) -> set[str]:
    return {r for r, limit in node.max.items() if used.get(r, 0) > limit}
