"""The rule that a job must be able to run somewhere (queues/placement.py): pure, no database.

Amounts are in base units, as the rule takes them: cpu in millicores, memory in bytes.
"""

from dataclasses import replace

from hypothesis import given
from hypothesis import strategies as st

from kube.scheduling import ClusterNode, Placement, Taint
from queues.placement import unplaceable
from queues.quota import Node

GI = 2**30
SIXTEEN_CPU = {"cpu": 16_000, "memory": 64 * GI, "nvidia.com/gpu": 4}


def shaped(shapes) -> list[ClusterNode]:
    """Nodes of these allocatable resources, with no label or taint."""
    return [ClusterNode(f"node-{i + 1}", shape) for i, shape in enumerate(shapes)]


NODES = shaped([SIXTEEN_CPU] * 4)  # the default simulated cluster
PATH = [
    Node("root/algorithm/video", {"cpu": 12_000}, {"cpu": 14_000, "memory": 14 * GI}),
    Node("root/algorithm", {"cpu": 32_000}, {"cpu": 48_000}),
    Node("root", {"cpu": 64_000}, {"cpu": 64_000}),
]


def reason(pods, nodes=NODES, path_nodes=PATH) -> str | None:
    found = unplaceable(pods=pods, nodes=nodes, path_nodes=path_nodes)
    return None if found is None else found.reason


def test_pods_that_each_fit_a_node_can_run():
    pods = {"head": {"cpu": 4000, "memory": 4 * GI}, "workers[0]": {"cpu": 16_000}}
    assert unplaceable(pods=pods, nodes=NODES, path_nodes=PATH) is None


def test_a_pod_larger_than_every_node_names_the_pod_the_resource_and_the_largest_node():
    found = unplaceable(pods={"head": {"cpu": 20_000}}, nodes=NODES, path_nodes=PATH)

    assert (found.pod, found.resource) == ("head", "cpu")
    assert found.reason == "head asks for cpu 20; the largest node has 16"


def test_the_largest_node_is_the_one_with_the_most_of_that_resource():
    nodes = shaped([{"cpu": 8000, "memory": 256 * GI}, {"cpu": 32_000, "memory": 64 * GI}])
    pods = {"head": {"cpu": 1000}, "workers[0]": {"memory": 300 * GI}}

    assert reason(pods, nodes) == "workers[0] asks for memory 300Gi; the largest node has 256Gi"


def test_a_resource_no_node_has_is_refused_though_max_does_not_mention_it():
    pods = {"head": {"cpu": 1000}, "workers[0]": {"cpu": 1000, "example.com/foo": 1}}
    found = unplaceable(pods=pods, nodes=NODES, path_nodes=PATH)

    assert (found.pod, found.resource) == ("workers[0]", "example.com/foo")
    assert found.reason == "workers[0] asks for example.com/foo 1; no node has example.com/foo"


def test_a_resource_the_tree_offers_but_no_node_has_is_refused_and_the_reason_says_so():
    path = [Node("root/a", {}, {"example.com/foo": 4}), Node("root", {}, {})]

    assert reason({"head": {"example.com/foo": 1}}, path_nodes=path) == (
        "head asks for example.com/foo 1; no node has example.com/foo, though the quota tree "
        "offers it"
    )


def test_a_pod_fits_only_a_node_that_holds_all_it_asks_for():
    # One node has the cpu, the other the GPUs: neither has both.
    nodes = shaped([{"cpu": 32_000, "nvidia.com/gpu": 0}, {"cpu": 8000, "nvidia.com/gpu": 8}])
    found = unplaceable(
        pods={"head": {"cpu": 16_000, "nvidia.com/gpu": 1}}, nodes=nodes, path_nodes=PATH
    )

    assert (found.pod, found.resource) == ("head", "nvidia.com/gpu")
    assert found.reason == (
        "head asks for cpu 16, nvidia.com/gpu 1 on one node; no node has all of it: the "
        "closest has nvidia.com/gpu 0"
    )
    assert reason({"head": {"cpu": 8000, "nvidia.com/gpu": 1}}, nodes) is None


def test_the_first_pod_that_fits_no_node_is_named():
    pods = {
        "master": {"cpu": 2000},
        "workers[0]": {"nvidia.com/gpu": 5},
        "workers[1]": {"cpu": 64_000},
    }
    assert reason(pods) == "workers[0] asks for nvidia.com/gpu 5; the largest node has 4"


def test_amounts_of_zero_ask_for_nothing():
    assert reason({"head": {"cpu": 1000, "example.com/foo": 0}}) is None


def test_unknown_nodes_refuse_nothing():
    pods = {"head": {"cpu": 1_000_000, "example.com/foo": 1}}
    assert unplaceable(pods=pods, nodes=None, path_nodes=PATH) is None
    # A cluster without a schedulable node for a moment (a drain, an upgrade) says nothing.
    assert unplaceable(pods=pods, nodes=[], path_nodes=PATH) is None


RESOURCES = st.sampled_from(["cpu", "memory", "nvidia.com/gpu", "example.com/foo"])
AMOUNTS = st.integers(min_value=0, max_value=5)
SHAPES = st.dictionaries(RESOURCES, AMOUNTS, max_size=4)


@given(
    pods=st.dictionaries(st.sampled_from(["head", "workers[0]", "workers[1]"]), SHAPES),
    nodes=st.lists(SHAPES, min_size=1, max_size=4),
)
def test_a_job_is_refused_exactly_when_some_pod_fits_no_node_by_every_resource(pods, nodes):
    def fits(pod, node):
        return all(node.get(resource, 0) >= amount for resource, amount in pod.items())

    found = unplaceable(pods=pods, nodes=shaped(nodes), path_nodes=PATH)

    stuck = [name for name, pod in pods.items() if not any(fits(pod, n) for n in nodes)]
    assert (found is None) == (not stuck)
    if found is not None:
        assert found.pod == stuck[0]  # the first, in the order given
        assert pods[found.pod].get(found.resource, 0) > 0
        assert found.resource in found.reason and found.pod in found.reason


# -- where a pod may run: labels and taints (kube.scheduling) -----------------------------

GPU_POOL = [
    ClusterNode(
        "gpu-1",
        SIXTEEN_CPU,
        {"pool": "a100", "zone": "b", "cores": "64"},
        (Taint("nvidia.com/gpu", "present", "NoSchedule"),),
    ),
    ClusterNode("cpu-1", {"cpu": 64_000, "memory": 256 * GI}, {"pool": "cpu", "zone": "a"}),
]


def placed(pod_spec: dict, pods=None, nodes=GPU_POOL):
    pods = pods or {"head": {"cpu": 1000}}
    placement = Placement.of_pod_spec(pod_spec)
    return unplaceable(pods=pods, nodes=nodes, path_nodes=PATH, placements={"head": placement})


def affinity(*expressions, fields=()) -> dict:
    term = {"matchExpressions": list(expressions)}
    if fields:
        term["matchFields"] = list(fields)
    return {
        "affinity": {
            "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [term]
            }}
        }
    }  # fmt: skip


def test_a_node_selector_no_node_has_is_refused_naming_the_selector_and_its_field():
    found = placed({"nodeSelector": {"pool": "h100"}})

    assert (found.pod, found.resource, found.field) == ("head", "", "head.spec.nodeSelector")
    assert (
        found.reason == "head asks for nodes with nodeSelector pool=h100; no node has those labels"
    )
    assert placed({"nodeSelector": {"pool": "cpu"}}) is None


def test_each_operator_of_required_node_affinity_is_read_as_kubernetes_reads_it():
    def runs(*expressions, fields=()) -> bool:
        return placed(affinity(*expressions, fields=fields)) is None

    assert runs({"key": "zone", "operator": "In", "values": ["a", "c"]})
    assert not runs({"key": "zone", "operator": "In", "values": ["c"]})
    # NotIn and DoesNotExist take a node without the label.
    assert runs({"key": "gone", "operator": "NotIn", "values": ["x"]})
    assert not runs({"key": "pool", "operator": "NotIn", "values": ["a100", "cpu"]})
    assert runs({"key": "pool", "operator": "Exists"})
    assert not runs({"key": "gone", "operator": "Exists"})
    assert runs({"key": "gone", "operator": "DoesNotExist"})
    # Gt and Lt read the label as an integer: only the GPU node says cores, and it tolerates
    # nothing, so the pod goes nowhere either way but by its taint.
    assert placed(affinity({"key": "cores", "operator": "Gt", "values": ["32"]})).field == (
        "head.spec.tolerations"
    )
    assert placed(affinity({"key": "cores", "operator": "Lt", "values": ["32"]})).field == (
        "head.spec.affinity"
    )
    # A term's requirements are ANDed; matchFields knows the node's name.
    assert not runs({"key": "zone", "operator": "In", "values": ["a"]},
                    {"key": "pool", "operator": "In", "values": ["a100"]})  # fmt: skip
    assert runs(fields=[{"key": "metadata.name", "operator": "In", "values": ["cpu-1"]}])
    assert not runs(fields=[{"key": "metadata.name", "operator": "NotIn", "values": ["cpu-1"]}])


def test_required_terms_are_ored_and_an_empty_term_matches_no_node():
    either = {
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [
                {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["z"]}]},
                {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]},
            ]
        }}}
    }  # fmt: skip
    assert placed(either) is None
    found = placed(affinity())
    assert found.field == "head.spec.affinity"


def test_a_taint_keeps_away_every_pod_that_does_not_tolerate_it():
    found = placed({"nodeSelector": {"pool": "a100"}})

    assert (found.field, found.resource) == ("head.spec.tolerations", "")
    assert found.reason == (
        "head can run on no node: each node it selects has a taint it does not tolerate, such "
        "as {nvidia.com/gpu: present}"
    )
    for toleration in [
        {"key": "nvidia.com/gpu", "operator": "Exists"},
        {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"},
        {"operator": "Exists"},  # every taint
    ]:
        spec = {"nodeSelector": {"pool": "a100"}, "tolerations": [toleration]}
        assert placed(spec) is None, toleration
    for toleration in [
        {"key": "nvidia.com/gpu", "value": "absent"},
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoExecute"},
        {"key": "other", "operator": "Exists"},
    ]:
        spec = {"nodeSelector": {"pool": "a100"}, "tolerations": [toleration]}
        assert placed(spec) is not None, toleration


def test_a_pod_asking_for_the_tainted_resource_tolerates_it_and_prefer_no_schedule_keeps_none():
    """ExtendedResourceToleration: a pod asking for nvidia.com/gpu tolerates its taint."""
    gpu = {"head": {"cpu": 1000, "nvidia.com/gpu": 1}}
    assert placed({"nodeSelector": {"pool": "a100"}}, pods=gpu) is None
    soft = [replace(GPU_POOL[0], taints=(Taint("spot", "", "PreferNoSchedule"),))]
    assert placed({}, nodes=soft) is None


def test_resources_are_read_against_the_nodes_the_pod_may_run_on():
    big = {"head": {"cpu": 32_000}}
    # 32 cpu fits the CPU node, not the GPU pool the selector asks for.
    assert placed({}, pods=big) is None
    found = placed({"nodeSelector": {"pool": "a100"}, "tolerations": [{"operator": "Exists"}]},
                   pods=big)  # fmt: skip
    assert found.reason == "head asks for cpu 32; the largest node has 16"


def test_a_placement_is_kept_as_json_and_read_back_the_same():
    spec = {
        "nodeSelector": {"pool": "a100"},
        "tolerations": [{"key": "k", "operator": "Exists", "effect": "NoSchedule"}],
        **affinity({"key": "zone", "operator": "In", "values": ["a", "b"]},
                   fields=[{"key": "metadata.name", "operator": "NotIn", "values": ["n"]}]),
    }  # fmt: skip
    placement = Placement.of_pod_spec(spec)
    assert Placement.from_json(placement.as_json()) == placement
    assert placement.selector_text() == (
        "nodeSelector pool=a100; node affinity (zone In (a, b), metadata.name NotIn (n))"
    )
    assert not Placement.of_pod_spec({}) and Placement.from_json({}) == Placement()
