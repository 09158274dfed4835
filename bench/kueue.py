"""Kueue's scheduler performance scenarios, read from its own generator configs.

``bench/scenarios/`` holds Kueue's ``generator.yaml`` files (see SOURCES.md there). A
scenario becomes an ElasticQuotaTree (a department per cohort, a leaf per cluster queue,
min = nominal quota, max = nominal + borrowing limit) and a timetable of submissions: each
queue receives each workload set's ``count`` workloads, one every ``creationIntervalMs``,
all sets starting together, as Kueue's runner does.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml

SCENARIOS = Path(__file__).resolve().parent / "scenarios"

# Kueue's own measured means (rangespec files) and the physical bound of the baseline.
KUEUE_BASELINE = {
    "wall_seconds": 351.1,
    "mean_admission_seconds": {"large": 6.666, "medium": 76.768, "small": 215.468},
    "physical_bound_seconds": 66.0,
}
KUEUE_LARGE_SCALE_LIMIT_SECONDS = 900.0


@dataclass(frozen=True)
class WorkloadClass:
    name: str
    runtime_seconds: float
    priority: int
    cpu: int


@dataclass(frozen=True)
class Workload:
    queue: str  # the leaf's path
    at: float  # seconds after the start
    workload_class: WorkloadClass
    index: int  # within its queue and class


@dataclass(frozen=True)
class QueueSpec:
    path: str
    nominal_cpu: int
    borrowing_limit_cpu: int
    reclaim: bool
    preempt_lower_priority: bool


@dataclass(frozen=True)
class Scenario:
    name: str
    queues: list[QueueSpec]
    workloads: list[Workload]  # in submission order

    @property
    def total_cpu(self) -> int:
        return sum(queue.nominal_cpu for queue in self.queues)

    @property
    def work_cpu_seconds(self) -> float:
        return sum(w.workload_class.cpu * w.workload_class.runtime_seconds for w in self.workloads)

    @property
    def physical_bound_seconds(self) -> float:
        """No scheduler can do the work faster than the whole cluster busy all the time."""
        return self.work_cpu_seconds / self.total_cpu

    def tree_document(self, pools: int = 0) -> dict:
        """The scenario's quota as an ElasticQuotaTree in the seed's format; with ``pools``,
        that many node pools (``pool_nodes``' labels), each guaranteed a share of the root's
        cpu and of each cohort's guarantee and capped by the total, the leaves sharing their
        totals among them: every job is then placed in a pool, trying them in the tree's
        order, and the quota it may hold in all is the same as without pools."""
        cohorts: dict[str, list[QueueSpec]] = {}
        for queue in self.queues:
            cohorts.setdefault(queue.path.split("/")[1], []).append(queue)
        children = []
        for cohort, queues in cohorts.items():
            nominal = sum(q.nominal_cpu for q in queues)
            children.append(
                {
                    "name": cohort,
                    "min": {"cpu": nominal},
                    "max": {"cpu": nominal},
                    "children": [
                        {
                            "name": q.path.rsplit("/", 1)[1],
                            "min": {"cpu": q.nominal_cpu},
                            "max": {"cpu": q.nominal_cpu + q.borrowing_limit_cpu},
                            "namespaces": [q.path.replace("/", "-")],
                        }
                        for q in queues
                    ],
                }
            )
            if pools:
                children[-1]["pools"] = {
                    f"p{k}": {"min": {"cpu": nominal // pools}, "max": {"cpu": nominal}}
                    for k in range(pools)
                }
        document = quota_tree(min_cpu=self.total_cpu, max_cpu=self.total_cpu, children=children)
        if pools:
            share = self.total_cpu // pools
            document["spec"]["nodePools"] = [
                {"name": f"p{k}", "nodeLabels": {POOL_LABEL: f"p{k}"}} for k in range(pools)
            ]
            document["spec"]["root"]["pools"] = {
                f"p{k}": {"min": {"cpu": share}, "max": {"cpu": self.total_cpu}}
                for k in range(pools)
            }
        return document


# The label that tells the bench's node pools apart.
POOL_LABEL = "bench.caldera.io/pool"


def pool_nodes(*, cpu: int, pools: int, pods: int) -> str:
    """SIMULATED_CLUSTER_NODES for ``tree_document(pools)``: one node per pool, each as
    large as the whole cluster (``cpu``, and room for every pod), so that the pools cost
    the cycle all their work (each job placed in one, its request counted there, the
    cluster counted per pool) without parting the capacity: the root's quota holds the
    total to ``cpu``, and a run measures the rule's cost, not a cluster cut in four, whose
    large jobs would wait for room in one pool while another has it."""
    return ";".join(f"1xcpu={cpu},pods={pods} labels:{POOL_LABEL}=p{k}" for k in range(pools))


def quota_tree(*, min_cpu: int, max_cpu: int, children: list[dict]) -> dict:
    """An ElasticQuotaTree document in the seed's format, with cpu quota at the root."""
    return {
        "apiVersion": "scheduling.sigs.k8s.io/v1beta1",
        "kind": "ElasticQuotaTree",
        "metadata": {"name": "elasticquotatree", "namespace": "kube-system"},
        "spec": {
            "root": {
                "name": "root",
                "min": {"cpu": min_cpu},
                "max": {"cpu": max_cpu},
                "children": children,
            }
        },
    }


def load(name: str, *, scale: float = 1.0) -> Scenario:
    """Read ``<name>-generator.yaml``; ``scale`` < 1 keeps that share of each set's count."""
    config = yaml.safe_load((SCENARIOS / f"{name}-generator.yaml").read_text())
    queues: list[QueueSpec] = []
    workloads: list[Workload] = []
    for cohort_set in config["cohorts"]:
        for c in range(cohort_set["count"]):
            cohort = f"{cohort_set['className']}-{c}"
            for queue_set in cohort_set["queuesSets"]:
                for q in range(queue_set["count"]):
                    path = f"root/{cohort}/{queue_set['className']}-{c}-{q}"
                    queues.append(
                        QueueSpec(
                            path=path,
                            nominal_cpu=queue_set["nominalQuota"],
                            borrowing_limit_cpu=queue_set["borrowingLimit"],
                            reclaim=queue_set.get("reclaimWithinCohort", "Never") != "Never",
                            preempt_lower_priority=(
                                queue_set.get("withinClusterQueue") == "LowerPriority"
                            ),
                        )
                    )
                    workloads += _queue_workloads(path, queue_set["workloadsSets"], scale)
    workloads.sort(key=lambda w: (w.at, w.queue, w.workload_class.name, w.index))
    return Scenario(name=name, queues=queues, workloads=workloads)


def _queue_workloads(path: str, sets: list[dict], scale: float) -> list[Workload]:
    workloads = []
    for workload_set in sets:
        count = max(1, round(workload_set["count"] * scale))
        interval = workload_set["creationIntervalMs"] / 1000
        for spec in workload_set["workloads"]:
            workload_class = WorkloadClass(
                name=spec["className"],
                runtime_seconds=spec["runtimeMs"] / 1000,
                priority=spec["priority"],
                cpu=spec["request"],
            )
            workloads += [
                Workload(path, index * interval, workload_class, index) for index in range(count)
            ]
    return workloads


def job_body(workload: Workload) -> dict:
    """The REST API body (and ``job_parse`` input) of one workload: a one-pod Ray job."""
    cls = workload.workload_class
    return {
        "queue": workload.queue,
        "kind": "ray",
        "name": f"{cls.name}-{workload.index}",
        "image": "rayproject/ray:2.36.1",
        "entrypoint": "python -c 'pass'",
        "head": {"resources": {"cpu": str(cls.cpu)}},
        "priority": cls.priority,
        "run_seconds": cls.runtime_seconds,
    }
