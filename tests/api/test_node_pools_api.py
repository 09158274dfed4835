"""Node pools at the API: a team's object says its pool by the nodeSelector it already
has, or by caldera.io/pools; a document and the query by ``pools``; the tree's YAML declares
pools and quota per pool, every bad part refused by its path."""

from __future__ import annotations

import copy

import pytest

from jobs.cluster import get_backend
from jobs.engine.admission.cycle import admission_cycle
from jobs.models import Job
from portal.management.commands.demo import DEMO_NODES
from queues.services import TreeError, tree_apply

from ..support.jobs import RAY_JOB
from ..support.trees import A100, GPU, H100, pooled_tree_document
from .test_native_manifests import JOBS, documents, the_job

pytestmark = pytest.mark.django_db


@pytest.fixture
def pools(tree, settings):
    settings.SIMULATED_CLUSTER_NODES = DEMO_NODES
    get_backend.cache_clear()
    tree_apply(document=pooled_tree_document())
    yield
    get_backend.cache_clear()


def pytorchjob(selector: dict | None = None, annotations: dict | None = None) -> dict:
    job = copy.deepcopy(the_job(documents("kubeflow-pytorch-simple.yaml")))
    if annotations:
        job["metadata"]["annotations"] = annotations
    for spec in job["spec"]["pytorchReplicaSpecs"].values():
        if selector is not None:
            spec["template"]["spec"]["nodeSelector"] = selector
    return job


def test_an_object_s_node_selector_on_a_pool_s_labels_is_the_pool_it_accepts(api, member, pools):
    answer = api(member).post(
        f"{JOBS}?queue=root/algorithm/text", pytorchjob({f"{GPU}.product": A100}), format="json"
    )
    assert answer.status_code == 201, answer.json()
    job = Job.objects.get(pk=answer.json()["id"])
    assert job.pools == ["a100"]
    assert answer.json()["pools"] == ["a100"]
    admission_cycle()
    assert Job.objects.get(pk=job.pk).pool == "a100"


def test_an_object_that_names_no_pool_s_label_takes_the_tree_s_order(api, member, pools):
    answer = api(member).post(f"{JOBS}?queue=root/algorithm/text", pytorchjob(), format="json")
    assert answer.status_code == 201, answer.json()
    assert Job.objects.get(pk=answer.json()["id"]).pools == []
    admission_cycle()
    assert Job.objects.get(pk=answer.json()["id"]).pool == "h100"


def test_a_selector_that_contradicts_every_pool_is_refused_naming_the_pools(api, member, pools):
    answer = api(member).post(
        f"{JOBS}?queue=root/algorithm/text",
        pytorchjob({f"{GPU}.product": "Tesla-V100"}),
        format="json",
    )
    assert answer.status_code == 400
    assert answer.json() == {
        "spec.pytorchReplicaSpecs.Master.template.spec.nodeSelector": [
            f"its nodeSelector {GPU}.product=Tesla-V100 matches no node pool of "
            f"the quota tree (h100: {GPU}.product={H100}; a100: {GPU}.product={A100})"
        ]
    }


def test_the_annotation_and_the_query_name_the_pools_in_order(api, member, pools):
    job = pytorchjob(annotations={"caldera.io/pools": "a100,h100"})
    answer = api(member).post(f"{JOBS}?queue=root/algorithm/text", job, format="json")
    assert answer.status_code == 201, answer.json()
    assert Job.objects.get(pk=answer.json()["id"]).pools == ["a100", "h100"]
    job["metadata"]["name"] = "by-query"  # another job: its object has a name of its own
    answer = api(member).post(f"{JOBS}?queue=root/algorithm/text&pools=h100", job, format="json")
    assert answer.status_code == 201, answer.json()
    assert Job.objects.get(pk=answer.json()["id"]).pools == ["h100"]
    document = {**RAY_JOB, "name": "by-query"}
    answer = api(member).post(f"{JOBS}?pools=a100", document, format="json")
    assert answer.status_code == 201, answer.json()
    assert Job.objects.get(pk=answer.json()["id"]).pools == ["a100"]
    answer = api(member).post(
        f"{JOBS}?queue=root/algorithm/text",
        pytorchjob(annotations={"caldera.io/pools": "a100,a100,H 100"}),
        format="json",
    )
    assert answer.status_code == 400
    assert answer.json() == {
        "metadata.annotations['caldera.io/pools']": [
            "[1]: 'a100' is named twice",
            "[2]: 'H' is not a node pool's name",
        ]
    }


def test_the_tree_s_pools_are_refused_by_path_every_problem_at_once(pools):
    document = pooled_tree_document()
    document["spec"]["nodePools"].append({"name": "H100!", "nodeLabels": {"a": "b"}, "taints": []})
    document["spec"]["nodePools"].append(
        {"name": "spot", "nodeLabels": {}, "tolerations": [{"effect": "Sometimes"}]}
    )
    root = document["spec"]["root"]
    root["pools"]["v100"] = {"min": {GPU: 1}}
    algorithm = root["children"][0]
    algorithm["pools"]["h100"]["min"] = {GPU: 9}  # above algorithm's own 8 GPUs
    with pytest.raises(TreeError) as refused:
        tree_apply(document=document)
    assert refused.value.errors == {
        "spec.nodePools[2].taints": ["unknown field"],
        "spec.nodePools[2].name": [
            "'H100!' is not a valid pool name (at most 32 lowercase letters, digits and '-')"
        ],
        "spec.nodePools[3].nodeLabels": [
            "must be from 1 to 16 node labels (label: value), the labels that select the "
            "pool's nodes"
        ],
        "spec.nodePools[3].tolerations[0].effect": [
            "must be NoSchedule, PreferNoSchedule or NoExecute"
        ],
        "spec.root.pools.v100": [
            "'v100' is not a node pool of the tree (spec.nodePools: a100, h100, spot)"
        ],
    }
    del document["spec"]["nodePools"][2:]
    del root["pools"]["v100"]
    with pytest.raises(TreeError) as refused:
        tree_apply(document=document)
    assert refused.value.errors == {
        "spec.root": [
            "root: children's min nvidia.com/gpu in pool h100 sum to 9, above its own min 8",
            "root/algorithm: min nvidia.com/gpu in pool h100 9 is above max 4",
            "root/algorithm: its pools' min nvidia.com/gpu sum to 13, above its own min 8",
        ]
    }
