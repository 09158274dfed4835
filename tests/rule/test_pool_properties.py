"""The quota promise with node pools (``queues.pools``), as properties of ``plan_admissions``.

Hypothesis generates valid trees with two to four pools: each node names totals, and some
name a pool's share of a resource (``nvidia.com/gpu@h100``) in their ``min`` and ``max``; a
cluster whose pools hold less than its total; jobs holding quota, each placed in a pool;
candidates that accept some pools in an order of their own, or leave it to the tree's. Every
plan is replayed as ``test_admission_properties.check_plan`` replays one, each candidate's
request as placed in the pool the plan chose, and must besides:

- place every admitted or waiting candidate in a pool, one it accepts (the tree's order when
  it names none), and no other candidate;
- stay within every pool's ``max`` and the total's on every node, and within each pool's
  share of the cluster (the replay's checks, every pooled key being a key of its own);
- take reclaim victims only from branches above their own ``min`` of what the victim frees:
  of the pool's share where the branch names it, else of the total every pool shares;
- take the first place of the documented order: a pool where it fits within its guarantee,
  then one where it fits by borrowing, in its own order among equals.
"""

from __future__ import annotations

from dataclasses import replace

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kube.quantity import in_pool, pool_parts, pooled
from queues.admission import (
    BEST_EFFORT,
    PRIORITY,
    RECLAIM,
    Admitted,
    Candidate,
    InPools,
    QueueHeads,
    Releasing,
    plan_admissions,
    within_guarantee,
)
from queues.quota import Node, rollup, shortfall, validate_tree

from .test_admission_properties import _leaf_usage, check_plan, leaves_of

GPU = "nvidia.com/gpu"
POOLS = ("h100", "a100", "v100", "spot")


@st.composite
def pooled_trees(draw) -> tuple[dict[str, Node], tuple[str, ...]]:
    """A valid tree with pools: totals of cpu and gpu as ``test_admission_properties``
    draws them, and on some nodes a pool's share of gpu (or cpu): mins that sum within the
    node's own and within the parent's share of that pool, maxes within the node's."""
    pools = POOLS[: draw(st.integers(2, 4))]
    keys = ("cpu", GPU, *(pooled(r, p) for p in pools for r in (GPU, "cpu")))
    root_max = {"cpu": draw(st.integers(4, 30)), GPU: draw(st.integers(2, 24))}
    root_min = {r: draw(st.integers(0, amount)) for r, amount in root_max.items()}
    _pool_shares(draw, root_min, root_max, pools, parent=None)
    nodes = {"root": Node("root", root_min, root_max)}
    frontier = ["root"]
    for depth in range(2):
        next_frontier = []
        for parent_path in frontier:
            parent = nodes[parent_path]
            left = {key: _own_min(parent, key) for key in keys}
            for index in range(draw(st.integers(1 if depth == 0 else 0, 3))):
                path = f"{parent_path}/{'abc'[depth]}{index}"
                low, high = {}, {}
                for r in ("cpu", GPU):
                    if draw(st.integers(0, 3)):
                        low[r] = draw(st.integers(0, left[r]))
                        left[r] -= low[r]
                    ceiling = parent.max.get(r)
                    if ceiling is not None or draw(st.booleans()):
                        top = 60 if ceiling is None else ceiling
                        if top >= low.get(r, 0):
                            high[r] = draw(st.integers(low.get(r, 0), top))
                        else:
                            low.pop(r, None)
                _pool_shares(draw, low, high, pools, parent=parent, left=left)
                nodes[path] = Node(path, low, high)
                next_frontier.append(path)
        frontier = next_frontier
    assert validate_tree(nodes.values()) == [], validate_tree(nodes.values())
    return nodes, pools


def _own_min(node: Node, key: str) -> int:
    """What a node guarantees of ``key``: its pool's share where it names one, else the
    total every pool shares (as ``queues.quota.validate_tree`` reads the children's sums)."""
    return node.min.get(key, node.min.get(pool_parts(key)[0], 0))


def _pool_shares(draw, low, high, pools, *, parent, left=None) -> None:
    """Some pools' shares of the node's resources, added to ``low`` and ``high``."""
    for r in ("cpu", GPU):
        room = low.get(r, 0) if r in low or r in high else None  # the pools' mins sum within it
        for pool in pools:
            if not draw(st.integers(0, 2)):
                continue
            key = pooled(r, pool)
            most = left[key] if left is not None else 30
            if room is not None:
                most = min(most, room)
            share = draw(st.integers(0, max(most, 0)))
            top = high.get(r, 60)
            if parent is not None and key in parent.max:
                top = min(top, parent.max[key])
            if share > top:
                continue
            low[key] = share
            high[key] = draw(st.integers(share, top))
            if room is not None:
                room -= share
            if left is not None:
                left[key] -= share


@st.composite
def pooled_scenarios(draw):
    tree, pools = draw(pooled_trees())
    leaves = leaves_of(tree)
    allocatable = draw(
        st.none()
        | st.fixed_dictionaries(
            {
                "cpu": st.integers(0, 40),
                GPU: st.integers(0, 30),
                **{pooled(r, p): st.integers(0, 12) for p in pools for r in ("cpu", GPU)},
            }
        )
    )
    admitted, used = [], {}
    for key in range(1, draw(st.integers(0, 16)) + 1):
        pool = draw(st.sampled_from(pools))
        job = Admitted(
            key=key,
            leaf=draw(st.sampled_from(leaves)),
            request=in_pool(_request(draw), pool),
            priority=draw(st.integers(-2, 2)),
            admitted_at=draw(st.integers(0, 50)),
        )
        fits = shortfall(
            leaf=job.leaf, request=job.request, tree=tree, used=used, allocatable=allocatable
        )
        if fits is None:
            admitted.append(job)
            used = rollup(_leaf_usage(admitted))
    queues = []
    key = 1000
    for leaf in draw(st.lists(st.sampled_from(leaves), unique=True, max_size=len(leaves))):
        candidates = []
        for _ in range(draw(st.integers(1, 4))):
            key += 1
            priority = draw(st.integers(-2, 3))
            accepts = draw(st.just(()) | st.lists(st.sampled_from(pools), unique=True, min_size=1))
            candidates.append(
                Candidate(
                    key=key,
                    request=_request(draw),
                    rank=(-priority, draw(st.integers(0, 9)), key),
                    due=draw(st.booleans()) or draw(st.booleans()),
                    priority=priority,
                    pools=tuple(accepts),
                )
            )
        candidates.sort(key=lambda c: c.rank)
        queues.append(
            QueueHeads(
                leaf=leaf,
                candidates=candidates,
                policy=draw(st.sampled_from([PRIORITY, BEST_EFFORT])),
                preemption=draw(st.booleans()),
            )
        )
    leaving = [job for job in admitted if draw(st.integers(0, 4)) == 0]
    admitted = [job for job in admitted if job not in leaving]
    return tree, pools, admitted, queues, allocatable, leaving


@st.composite
def crowded_pools(draw):
    """Reclaim is the question: jobs of branches with no guarantee hold much of every pool
    while jobs of guaranteed leaves ask for their pool's share."""
    tree, pools, admitted, queues, allocatable, leaving = draw(pooled_scenarios())
    if draw(st.booleans()):
        allocatable = None  # the tree alone limits: its pools' maxes are what is short
    borrowers = [p for p in leaves_of(tree) if not any(tree[p].min.values())] or [
        p for p in leaves_of(tree) if not tree[p].pooled
    ]
    for key in range(200, 200 + draw(st.integers(1, 30)) if borrowers else 200):
        job = Admitted(
            key=key,
            leaf=draw(st.sampled_from(borrowers)),
            request=in_pool(_request(draw), draw(st.sampled_from(pools))),
            priority=draw(st.integers(-2, 2)),
            admitted_at=draw(st.integers(0, 50)),
        )
        used = rollup(_leaf_usage([*admitted, *leaving]))
        if shortfall(leaf=job.leaf, request=job.request, tree=tree, used=used,
                     allocatable=allocatable) is None:  # fmt: skip
            admitted.append(job)
    key = 3000
    for heads in list(queues):
        shares = [(k, n) for k, n in tree[heads.leaf].min.items() if n and pool_parts(k)[1]]
        if shares:
            share, most = draw(st.sampled_from(shares))
            resource, pool = pool_parts(share)
            key += 1
            asked = Candidate(key, {resource: draw(st.integers(1, most))}, (-9, 0, key),
                              priority=9, pools=(pool,))  # fmt: skip
            queues[queues.index(heads)] = replace(heads, candidates=[asked, *heads.candidates])
    return tree, pools, admitted, queues, allocatable, leaving


def _request(draw) -> dict[str, int]:
    asked = draw(st.sampled_from([("cpu",), (GPU,), ("cpu", GPU)]))
    amounts = {r: draw(st.integers(0, 8)) for r in asked}
    amounts[asked[0]] = max(amounts[asked[0]], 1)
    return amounts


def run(tree, pools, admitted, queues, allocatable, leaving):
    return plan_admissions(
        tree=tree,
        used=rollup(_leaf_usage([*admitted, *leaving])),
        allocatable=allocatable,
        queues=queues,
        admitted=admitted,
        leaving=leaving,
        pools=pools,
    )


def _borrows_what_it_frees(branch: Node, used: dict, victim: Admitted) -> bool:
    """The branch uses more than its own min of something the victim frees. Where it gives
    pools' shares of the resource: the victim's pool beyond its own share, once the part of
    the branch's min given to no pool is used up; else the total, which every pool shares."""
    for key, amount in victim.request.items():
        resource, pool = pool_parts(key)
        if not amount or (pool and key not in victim.request):
            continue
        shares = {
            k: low
            for k, low in branch.min.items()
            if pool_parts(k)[0] == resource and k != resource
        }
        named = shares.keys() | {
            k for k in branch.max if pool_parts(k)[0] == resource and k != resource
        }
        if not named:
            if used.get(resource, 0) > branch.min.get(resource, 0):
                return True
            continue
        own = sum(min(used.get(k, 0), shares.get(k, 0)) for k in named)
        total_min = branch.min.get(
            resource, sum(shares.values()) if resource not in branch.max else 0
        )
        if used.get(resource, 0) - own > total_min - sum(shares.values()) and (
            not pool or used.get(key, 0) > branch.min.get(key, 0)
        ):
            return True
    return False


@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pooled_scenarios() | crowded_pools())
def test_every_plan_with_pools_keeps_the_promise_in_every_pool_and_in_total(scenario):
    tree, pools, admitted, queues, allocatable, leaving = scenario
    plan = run(*scenario)
    decided = set(plan.order)
    assert set(plan.placed) == decided, "a candidate admitted or waiting without a pool"
    for heads in queues:
        for candidate in heads.candidates:
            if candidate.key in plan.placed:
                accepted = candidate.pools or pools
                assert plan.placed[candidate.key] in accepted, "placed in a pool it did not accept"
            elif candidate.key in plan.refused:
                assert isinstance(plan.refused[candidate.key], InPools)
    # The replay of the rule without pools, each request as placed: every pooled key is a key.
    placed = [
        replace(
            heads,
            candidates=[
                replace(c, request=in_pool(c.request, plan.placed.get(c.key, "")))
                for c in heads.candidates
            ],
        )
        for heads in queues
    ]
    check_plan(tree, admitted, placed, allocatable, leaving, plan)
    settled = rollup(_leaf_usage(admitted))
    for preemption in plan.preempted:
        if preemption.rule == RECLAIM:
            branch = tree[preemption.borrower]
            assert _borrows_what_it_frees(branch, settled.get(branch.path, {}), preemption.victim)
            for path in (p for p in tree if preemption.victim.leaf.startswith(p)):
                settled[path] = {
                    k: v - preemption.victim.request.get(k, 0) for k, v in settled[path].items()
                }


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pooled_scenarios())
def test_a_lone_candidate_takes_the_first_place_of_the_documented_order(scenario):
    """Alone in the cycle, a candidate that fits somewhere without preemption is placed in
    the first pool, in its own order, where it fits within its guarantee, else where it fits
    by borrowing."""
    tree, pools, admitted, queues, allocatable, leaving = scenario
    if not queues:
        return
    heads = replace(queues[0], candidates=[replace(queues[0].candidates[0], due=True)])
    candidate = heads.candidates[0]
    plan = run(tree, pools, admitted, [heads], allocatable, [])
    used = rollup(_leaf_usage(admitted))
    if plan.preempted or candidate.key not in plan.placed:
        return
    fitting = [
        pool
        for pool in candidate.pools or pools
        if shortfall(
            leaf=heads.leaf, request=in_pool(candidate.request, pool), tree=tree, used=used,
            allocatable=allocatable,
        ) is None
    ]  # fmt: skip
    guaranteed = [
        pool
        for pool in fitting
        if within_guarantee(heads.leaf, in_pool(candidate.request, pool), tree, used)
    ]
    assert plan.placed[candidate.key] == (guaranteed or fitting)[0]


def test_a_guaranteed_place_in_a_later_pool_beats_borrowing_in_the_first():
    """video is guaranteed A100s, not H100s; H100s are idle and lent. Its job accepts H100
    first, then A100: it is placed on A100, where what it holds cannot be reclaimed."""
    tree = {
        "root": Node("root", {GPU: 16, f"{GPU}@a100": 8}, {GPU: 16}),
        "root/video": Node("root/video", {GPU: 8, f"{GPU}@a100": 8}, {GPU: 16}),
        "root/nlp": Node("root/nlp", {GPU: 8}, {GPU: 16}),
    }
    assert validate_tree(tree.values()) == []
    job = Candidate(1, {GPU: 4}, (0,), pools=("h100", "a100"))
    plan = run(tree, ("h100", "a100"), [], [QueueHeads("root/video", [job])], None, [])
    assert plan.placed == {1: "a100"}
    # Its guarantee used up, it borrows, and then its first pool comes first again.
    held = [Admitted(9, "root/video", in_pool({GPU: 8}, "a100"), 0, 0)]
    plan = run(tree, ("h100", "a100"), held, [QueueHeads("root/video", [job])], None, [])
    assert plan.placed == {1: "h100"}


def test_a_refusal_names_each_pool_s_reason_and_the_pools_not_in_its_list():
    tree = {
        "root": Node("root", {GPU: 16}, {GPU: 16, f"{GPU}@h100": 8}),
        "root/video": Node("root/video", {GPU: 8}, {GPU: 16, f"{GPU}@h100": 8}),
    }
    held = [Admitted(9, "root/video", in_pool({GPU: 8}, "h100"), 0, 0)]
    job = Candidate(1, {GPU: 4}, (0,), pools=("h100",))
    plan = run(tree, ("h100", "a100"), held, [QueueHeads("root/video", [job])], None, [])
    assert plan.refused[1].message() == (
        "No pool it accepts has room: Insufficient quota in root/video: nvidia.com/gpu in "
        "pool h100 requested 4, free 0 (used 8 of max 8); pool a100 is not in its list"
    )
    assert not isinstance(plan.refused[1], Releasing)


def test_reclaim_takes_back_the_pool_that_is_short_from_a_branch_above_its_share_there():
    """nlp is guaranteed A100s and borrows video's idle H100s. video's H100 job takes back
    an H100 job of nlp's, never the A100 job nlp holds within its own share."""
    tree = {
        "root": Node("root", {GPU: 16, f"{GPU}@h100": 8, f"{GPU}@a100": 8},
                     {GPU: 16, f"{GPU}@h100": 8, f"{GPU}@a100": 8}),
        "root/video": Node("root/video", {GPU: 8, f"{GPU}@h100": 8}, {GPU: 16}),
        "root/nlp": Node("root/nlp", {GPU: 8, f"{GPU}@a100": 8}, {GPU: 16}),
    }  # fmt: skip
    assert validate_tree(tree.values()) == []
    held = [
        Admitted(1, "root/nlp", in_pool({GPU: 4}, "a100"), priority=-1, admitted_at=9),
        Admitted(2, "root/nlp", in_pool({GPU: 8}, "h100"), priority=0, admitted_at=1),
    ]
    job = Candidate(10, {GPU: 4}, (0,), pools=("h100",))
    plan = run(tree, ("h100", "a100"), held, [QueueHeads("root/video", [job])], None, [])
    assert [(p.victim.key, p.rule, p.borrower) for p in plan.preempted] == [
        (2, RECLAIM, "root/nlp")
    ]
    assert plan.placed == {10: "h100"}


def test_pools_refused_by_one_total_say_it_once_as_a_tree_without_pools_says_it():
    """The leaf's max of cpu refuses it in every pool: no pool would change that, so the
    reason is the one a tree without pools gives."""
    tree = {
        "root": Node("root", {"cpu": 64_000}, {"cpu": 64_000}),
        "root/video": Node("root/video", {"cpu": 12_000}, {"cpu": 14_000}),
    }
    held = [Admitted(9, "root/video", in_pool({"cpu": 12_000}, "h100"), 0, 0)]
    job = Candidate(1, {"cpu": 12_000}, (0,))
    pooled = run(tree, ("h100", "a100"), held, [QueueHeads("root/video", [job])], None, [])
    plain = run(tree, (), held, [QueueHeads("root/video", [job])], None, [])
    assert (
        pooled.refused[1].message()
        == plain.refused[1].message()
        == ("Insufficient quota in root/video: cpu requested 12, free 2 (used 12 of max 14)")
    )
