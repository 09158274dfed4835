"""The rule that a job must be able to run somewhere (queues/placement.py): pure, no database.

Amounts are in base units, as the rule takes them: cpu in millicores, memory in bytes.
"""

from hypothesis import given
from hypothesis import strategies as st

from queues.placement import unplaceable
from queues.quota import Node

GI = 2**30
SIXTEEN_CPU = {"cpu": 16_000, "memory": 64 * GI, "nvidia.com/gpu": 4}
NODES = [SIXTEEN_CPU] * 4  # the default simulated cluster
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
    nodes = [{"cpu": 8000, "memory": 256 * GI}, {"cpu": 32_000, "memory": 64 * GI}]
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
    nodes = [{"cpu": 32_000, "nvidia.com/gpu": 0}, {"cpu": 8000, "nvidia.com/gpu": 8}]
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

    found = unplaceable(pods=pods, nodes=nodes, path_nodes=PATH)

    stuck = [name for name, pod in pods.items() if not any(fits(pod, n) for n in nodes)]
    assert (found is None) == (not stuck)
    if found is not None:
        assert found.pod == stuck[0]  # the first, in the order given
        assert pods[found.pod].get(found.resource, 0) > 0
        assert found.resource in found.reason and found.pod in found.reason
