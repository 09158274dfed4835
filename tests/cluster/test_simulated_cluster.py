"""The simulated cluster: gang placement, pod phases and real event formats, on a fixed clock."""

import re
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from jobs.cluster.simulated import (
    SIMULATED_EXIT_CODE,
    SimulatedBackend,
    SimulatedCluster,
    parse_nodes,
)
from kube.scheduling import Placement, Taint

from ..support.specs import gang_spec

T0 = datetime(2025, 1, 10, 1, 36, 24, tzinfo=UTC)


def cluster(nodes="4xcpu=16,memory=64Gi,nvidia.com/gpu=4"):
    return SimulatedCluster(parse_nodes(nodes), cycle_seconds=5)


def phases(observation):
    return {status.job_id: status.phase for status in observation.statuses}


def test_it_parses_the_node_setting():
    nodes = parse_nodes("2xcpu=8,memory=32Gi;cpu=4,pods=20")
    assert [node.name for node in nodes] == ["node-1", "node-2", "node-3"]
    # A node that names no pods holds a kubelet's default, 110.
    assert nodes[0].allocatable == {"cpu": 8000, "memory": 32 * 2**30, "pods": 110}
    assert nodes[2].allocatable == {"cpu": 4000, "pods": 20}
    # Each carries its hostname label, as a kubelet registers it; no taint.
    assert nodes[2].labels == {"kubernetes.io/hostname": "node-3"} and nodes[2].taints == ()


def test_a_node_group_may_carry_labels_and_taints_as_kubectl_writes_them():
    nodes = parse_nodes(
        "2xcpu=64,nvidia.com/gpu=8 labels:pool=a100,zone=b "
        "taints:nvidia.com/gpu=present:NoSchedule,spot:PreferNoSchedule;cpu=16"
    )
    assert nodes[1].labels == {"kubernetes.io/hostname": "node-2", "pool": "a100", "zone": "b"}
    assert nodes[1].taints == (
        Taint("nvidia.com/gpu", "present", "NoSchedule"),
        Taint("spot", "", "PreferNoSchedule"),
    )
    assert nodes[2].labels == {"kubernetes.io/hostname": "node-3"}
    for wrong, said in [
        ("cpu=4 taints:gpu=yes", "a taint is key[=value]:effect"),
        ("cpu=4 taints:gpu=yes:Sometimes", "a taint is key[=value]:effect"),
        ("cpu=4 labels:pool", "a label is key=value"),
        ("cpu=4 colour:red", "labels:... and taints:..."),
    ]:
        with pytest.raises(ValueError, match=re.escape(said)):
            parse_nodes(wrong)


def test_the_backend_gives_each_nodes_shape_for_the_submit_check():
    backend = SimulatedBackend(parse_nodes("2xcpu=8,memory=32Gi;cpu=4"), cycle_seconds=5)
    shapes = [node.allocatable for node in backend.nodes()]
    assert shapes == [{"cpu": 8000, "memory": 32 * 2**30, "pods": 110}] * 2 + [
        {"cpu": 4000, "pods": 110}
    ]
    assert backend.allocatable()["cpu"] == 20_000


def test_it_places_a_gang_and_runs_it_for_its_run_time():
    sim = cluster()
    sim.create(gang_spec(1, run_seconds=60), now=T0)
    assert phases(sim.tick(now=T0)) == {1: "Running"}
    assert phases(sim.tick(now=T0 + timedelta(seconds=59))) == {1: "Running"}
    assert phases(sim.tick(now=T0 + timedelta(seconds=60))) == {1: "Succeeded"}


def test_a_job_that_asks_for_an_exit_code_fails_with_it_and_frees_its_nodes():
    sim = cluster("1xcpu=12,memory=64Gi")
    failing = replace(gang_spec(1, run_seconds=10), env={SIMULATED_EXIT_CODE: "3"})
    sim.create(failing, now=T0)
    sim.create(gang_spec(2, run_seconds=10), now=T0)
    assert phases(sim.tick(now=T0)) == {1: "Running", 2: "Pending"}

    observed = sim.tick(now=T0 + timedelta(seconds=10))

    assert phases(observed) == {1: "Failed", 2: "Running"}
    (status,) = [s for s in observed.statuses if s.job_id == 1]
    assert status.message == "Pod rayjob-1-head-0 exited with code 3"


def test_a_gang_that_fits_starts_as_it_is_created_unless_an_older_one_waits():
    sim = cluster("1xcpu=12,memory=64Gi")
    sim.create(gang_spec(1, run_seconds=10), now=T0)
    assert {p.phase for p in sim.pods.values()} == {"Running"}
    sim.create(gang_spec(2), now=T0)  # does not fit: waits for a tick to report why
    sim.create(gang_spec(3, head_cpu="0", workers=0), now=T0)  # fits, but job 2 came first
    assert {p.job_id for p in sim.pods.values() if p.phase == "Pending"} == {2, 3}
    assert phases(sim.tick(now=T0 + timedelta(seconds=10))) == {
        1: "Succeeded", 2: "Running", 3: "Running",
    }  # fmt: skip


def test_creating_twice_is_the_same_as_once():
    sim = cluster()
    sim.create(gang_spec(1), now=T0)
    sim.create(gang_spec(1), now=T0 + timedelta(seconds=1))
    assert len(sim.pods) == 3


def test_a_gang_that_does_not_fit_places_no_pod_and_reports_each_cycle():
    sim = cluster("2xcpu=8,memory=64Gi")
    sim.create(gang_spec(1, head_cpu="4", workers=3, worker_cpu="4"), now=T0)  # 16 cpu on 2x8: fits
    sim.create(gang_spec(2, head_cpu="2", workers=1, worker_cpu="2"), now=T0)  # no room left
    observation = sim.tick(now=T0)
    assert phases(observation) == {1: "Running", 2: "Pending"}
    assert all(pod.node == "" for pod in sim.pods.values() if pod.job_id == 2)
    messages = [event.message for event in observation.events]
    assert messages == [
        "rayjob-2-head-0 in gang failed to be scheduled in cycle 1: "
        "0/2 nodes are available: 2 Insufficient cpu.",
        "rayjob-2-small-group-worker-0 in gang failed to be scheduled in cycle 1: "
        "0/2 nodes are available: 2 Insufficient cpu.",
    ]
    assert {(e.type, e.reason, e.cycle) for e in observation.events} == {
        ("Warning", "GangFailedScheduling", 1)
    }
    assert sim.tick(now=T0 + timedelta(seconds=1)).events == []  # the next cycle is not due
    assert {e.cycle for e in sim.tick(now=T0 + timedelta(seconds=5)).events} == {2}


def test_a_pod_larger_than_any_node_never_places_even_on_an_idle_cluster():
    sim = cluster()
    sim.create(gang_spec(1, head_cpu="20", workers=0), now=T0)
    observation = sim.tick(now=T0)
    assert phases(observation) == {1: "Pending"}
    assert observation.events[0].message.endswith("0/4 nodes are available: 4 Insufficient cpu.")


def test_finished_pods_free_their_nodes_for_waiting_gangs():
    sim = cluster("1xcpu=12,memory=64Gi")
    sim.create(gang_spec(1, run_seconds=10), now=T0)
    sim.create(gang_spec(2), now=T0)
    assert phases(sim.tick(now=T0)) == {1: "Running", 2: "Pending"}
    assert phases(sim.tick(now=T0 + timedelta(seconds=10))) == {1: "Succeeded", 2: "Running"}


def test_it_says_when_it_will_change_next_a_finish_or_a_gangs_next_cycle():
    sim = cluster("1xcpu=12,memory=64Gi")
    sim.create(gang_spec(1, run_seconds=10.5), now=T0)
    assert sim.tick(now=T0).next_change_at == T0 + timedelta(seconds=10.5)
    sim.create(gang_spec(2), now=T0 + timedelta(seconds=1))
    # Job 2 waits; it will be tried again after a scheduling cycle, before job 1 ends.
    observation = sim.tick(now=T0 + timedelta(seconds=1))
    assert observation.next_change_at == T0 + timedelta(seconds=6)
    sim.delete("rayjob-1")
    sim.delete("rayjob-2")
    assert sim.tick(now=T0 + timedelta(seconds=2)).next_change_at is None


def test_deleting_a_job_removes_its_pods():
    sim = cluster()
    sim.create(gang_spec(1), now=T0)
    sim.tick(now=T0)
    sim.delete("rayjob-1")
    assert sim.pods == {} and sim.tick(now=T0).statuses == []


def test_it_is_deterministic_under_a_fixed_clock():
    def run():
        sim = cluster("3xcpu=8,memory=64Gi")
        for job_id in range(1, 6):
            sim.create(
                gang_spec(job_id, head_cpu="2", workers=2, worker_cpu="3", run_seconds=5 * job_id),
                now=T0,
            )
        return [
            (
                sorted((p.name, p.node, p.phase) for p in sim.pods.values()),
                sim.tick(now=T0 + timedelta(seconds=s)).events,
            )
            for s in (0, 5, 10, 15, 30)
        ]

    assert run() == run()


def test_free_capacity_follows_every_change_and_a_reload_agrees():
    """The cluster keeps what its running pods leave free as they change; reloading the
    same pods (a new session in another process) must find the same numbers."""
    cluster = SimulatedCluster(parse_nodes("2xcpu=16,memory=64Gi"))
    for job_id in range(1, 6):  # 12 cpu each: two run at once, three wait
        cluster.create(gang_spec(job_id, run_seconds=60 * job_id), now=T0)
    cluster.tick(now=T0)
    cluster.delete("rayjob-1")  # a running gang leaves
    cluster.tick(now=T0 + timedelta(seconds=1))  # the first waiting gang takes its place
    cluster.tick(now=T0 + timedelta(seconds=150))  # job-2 finishes, the next one starts

    reloaded = SimulatedCluster(parse_nodes("2xcpu=16,memory=64Gi"), cluster.pods.values())

    running = {p.object_name for p in cluster.pods.values() if p.phase == "Running"}
    assert running == {"rayjob-3", "rayjob-4"}
    assert cluster.free() == reloaded.free()
    assert sum(node["cpu"] for node in cluster.free().values()) == 32_000 - 2 * 12_000


def test_pods_run_only_on_nodes_their_selector_and_tolerations_let_them_and_events_say_why():
    sim = cluster(
        "2xcpu=16,memory=64Gi;"
        "cpu=16,memory=64Gi,nvidia.com/gpu=8 labels:pool=a100 taints:dedicated=ml:NoSchedule"
    )
    pool = Placement.of_pod_spec({"nodeSelector": {"pool": "a100"}})
    base = gang_spec(1, head_cpu="2", workers=1, worker_cpu="2")
    untolerated = replace(
        base,
        head=replace(base.head, placement=pool),
        workers=(replace(base.workers[0], placement=pool),),
    )
    sim.create(untolerated, now=T0)
    observation = sim.tick(now=T0)

    assert phases(observation) == {1: "Pending"}
    assert {event.message.split(": ", 1)[1] for event in observation.events} == {
        "0/3 nodes are available: 2 node(s) didn't match Pod's node affinity/selector, "
        "1 node(s) had untolerated taint {dedicated: ml}."
    }

    tolerating = Placement.of_pod_spec(
        {"nodeSelector": {"pool": "a100"},
         "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "ml"}]}
    )  # fmt: skip
    spec = replace(
        gang_spec(2, head_cpu="2", workers=1, worker_cpu="2"),
        head=replace(base.head, placement=tolerating),
        workers=(replace(base.workers[0], placement=tolerating),),
    )
    sim.create(spec, now=T0)
    assert phases(sim.tick(now=T0))[2] == "Running"
    assert {pod.node for pod in sim.pods.values() if pod.job_id == 2} == {"node-3"}
    # Where a pod may run is kept with it: a cluster read back places it the same.
    reloaded = SimulatedCluster(sim.node_of.values(), sim.pods.values())
    assert {p.placement for p in reloaded.pods.values() if p.job_id == 2} == {tolerating}
