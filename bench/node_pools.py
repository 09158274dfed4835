"""What node pools cost the admission rule (the ``node-pools`` part of ``make bench``).

The large-scale scenario's tree (2,000 queues in 20 cohorts) as the cycle sees it at its
busiest: every queue holds one 20-cpu job (its nominal quota), and offers the rule its
first HEADS queued jobs (small, medium and large, as the scenario queues them), so most are
refused and the borrowers are weighed and reclaimed from. It times ``plan_admissions``
(the pure rule, no database), best and median of ROUNDS, on the tree as it is and on the
same tree with POOLS node pools (``Scenario.tree_document(pools)`` on ``pool_nodes``: each
pool guaranteed a share of the root's cpu and of each cohort's guarantee, the cluster's
nodes one per pool), every job then placed in a pool it accepts in the tree's order, the
jobs holding quota spread over the pools.

Imported by bench/__main__.py once Django is set up.
"""

from __future__ import annotations

import statistics
import time

from .kueue import load

POOLS = 4
HEADS = 8  # jobs.engine.admission.inputs.HEADS_PER_QUEUE
ROUNDS = 5


def measure() -> dict:
    scenario = load("large-scale")
    without = _timed(scenario, 0)
    with_pools = _timed(scenario, POOLS)
    return {
        "queues": len(scenario.queues),
        "heads": HEADS,
        "pools": POOLS,
        "without": without,
        "with_pools": with_pools,
        "ratio": with_pools["median_ms"] / without["median_ms"],
    }


def _timed(scenario, pools: int) -> dict:
    from kube.quantity import in_pool, pooled
    from queues.admission import Admitted, Candidate, QueueHeads, plan_admissions
    from queues.quota import rollup
    from queues.services import tree_parse

    parsed = tree_parse(scenario.tree_document(pools))
    tree = {node.path: node for node in parsed.nodes}
    names = tuple(pool.name for pool in parsed.node_pools)
    by_queue: dict[str, list] = {}
    for workload in scenario.workloads:
        by_queue.setdefault(workload.queue, []).append(workload)
    admitted, queues, leaves = [], [], {}
    for index, queue in enumerate(scenario.queues):
        pool = names[index % len(names)] if names else ""
        held = in_pool({"cpu": 20_000, "pods": 1}, pool)
        admitted.append(Admitted(index, queue.path, held, priority=0, admitted_at=index))
        leaves[queue.path] = held
        candidates = [
            Candidate(
                key=100_000 + index * HEADS + n,
                request={"cpu": w.workload_class.cpu * 1000, "pods": 1},
                rank=(-w.workload_class.priority, n, n),
                priority=w.workload_class.priority,
            )
            for n, w in enumerate(by_queue.get(queue.path, [])[:HEADS])
        ]
        queues.append(QueueHeads(queue.path, candidates, exhausted=False, preemption=True))
    total = scenario.total_cpu * 1000
    allocatable = {"cpu": total, "pods": 10**6}
    for name in names:
        allocatable |= {pooled("cpu", name): total, pooled("pods", name): 10**6}  # pool_nodes
    used = rollup(leaves)
    costs = []
    for _ in range(ROUNDS):
        start = time.perf_counter()
        plan = plan_admissions(
            tree=tree, used=used, allocatable=allocatable, queues=queues, admitted=admitted,
            pools=names,
        )  # fmt: skip
        costs.append((time.perf_counter() - start) * 1000)
    return {
        "best_ms": min(costs),
        "median_ms": statistics.median(costs),
        "admitted": len(plan.admitted),
        "refused": len(plan.refused),
        "preempted": len(plan.preempted),
    }
