"""A leaf's pod policy, set in the quota tree (``pods`` on any node, inherited down it): the
Pod Security Standards' profile its pods are held to, the ServiceAccounts they may run as,
the Secrets they may read. Each refusal names the object's path and the rule."""

from __future__ import annotations

import copy

import pytest

from jobs.models import Job

from ..support.jobs import PYTORCH_JOB
from ..support.trees import seed_tree_document
from .test_native_manifests import JOBS, documents, the_job

pytestmark = pytest.mark.django_db
TREE = "/api/v1/quota-tree/"


@pytest.fixture
def policies(api, staff, departments):
    """algorithm: pods may read only hf-credentials; its video leaf: restricted, and run as
    default or trainer."""
    document = copy.deepcopy(seed_tree_document())
    algorithm = document["spec"]["root"]["children"][0]
    algorithm["pods"] = {"secrets": ["hf-credentials"]}
    video = next(c for c in algorithm["children"] if c["name"] == "video")
    video["pods"] = {"security": "restricted", "serviceAccounts": ["default", "trainer"]}
    answer = api(staff).put(TREE, document, format="json")
    assert answer.status_code == 200, answer.json()
    return document


HARDENED = {
    "runAsNonRoot": True,
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"]},
    "seccompProfile": {"type": "RuntimeDefault"},
}


def hardened_volcano_job() -> dict:
    job = the_job(documents("volcano-ray-plugin.yaml"))
    for task in job["spec"]["tasks"]:
        (container,) = task["template"]["spec"]["containers"]
        container["securityContext"] = dict(HARDENED)
    return job


def test_the_tree_keeps_each_node_s_pod_policy(api, staff, policies):
    exported = api(staff).get(TREE).json()["spec"]["root"]["children"][0]
    assert exported["pods"] == {"secrets": ["hf-credentials"]}
    video = next(c for c in exported["children"] if c["name"] == "video")
    assert video["pods"] == {"security": "restricted", "serviceAccounts": ["default", "trainer"]}
    bad = copy.deepcopy(policies)
    bad["spec"]["root"]["children"][0]["pods"] = {"security": "lax", "secrets": "all", "x": 1}
    refused = api(staff).put(TREE, bad, format="json").json()
    assert set(refused) == {
        "spec.root.children[0].pods.security",
        "spec.root.children[0].pods.secrets",
        "spec.root.children[0].pods.x",
    }


def test_a_restricted_leaf_takes_hardened_pods_as_the_service_accounts_it_lists(
    api, member, policies
):
    job = hardened_volcano_job()
    task = job["spec"]["tasks"][1]["template"]["spec"]
    task["serviceAccountName"] = "trainer"

    placed = api(member).post(f"{JOBS}?queue=root/algorithm/video", job, format="json")

    assert placed.status_code == 201, placed.json()
    job["metadata"]["name"] = "other"
    task["serviceAccountName"] = "deployer"
    del task["containers"][0]["securityContext"]["runAsNonRoot"]
    refused = api(member).post(f"{JOBS}?queue=root/algorithm/video", job, format="json").json()
    at = "spec.tasks[1].template.spec"
    assert refused == {
        f"{at}.containers[0].securityContext.runAsNonRoot": [
            "not allowed by the Pod Security Standards' restricted profile (Running as "
            "Non-root): runAsNonRoot must be true, for the pod or every container"
        ],
        f"{at}.serviceAccountName": [
            "the queue's pods run as default, trainer; Caldera creates them and may not lend "
            "them another ServiceAccount"
        ],
    }


def test_a_leaf_s_pods_read_only_the_secrets_its_tree_lists(api, member, policies):
    job = the_job(documents("kubeflow-pytorch-simple.yaml"))
    pod = job["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]
    pod["volumes"] = [{"name": "keys", "secret": {"secretName": "deploy-keys"}}]
    pod["containers"][0]["env"] = [
        {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf-credentials", "key": "t"}}}
    ]
    pod["imagePullSecrets"] = [{"name": "registry"}]

    refused = api(member).post(f"{JOBS}?queue=root/algorithm/text", job, format="json").json()

    at = "spec.pytorchReplicaSpecs.Master.template.spec"
    assert set(refused) == {f"{at}.volumes[0].secret.secretName", f"{at}.imagePullSecrets[0].name"}
    assert refused[f"{at}.volumes[0].secret.secretName"] == [
        "the queue's pods may read only the Secrets hf-credentials, not deploy-keys (the quota "
        "tree's pods.secrets)"
    ]
    del pod["volumes"], pod["imagePullSecrets"]
    assert (
        api(member).post(f"{JOBS}?queue=root/algorithm/text", job, format="json").status_code == 201
    )


def test_a_document_job_is_held_to_its_leaf_s_policy_too(api, member, policies):
    document = {**PYTORCH_JOB, "secret_env": {"TOKEN": "deploy-keys/token"}}

    refused = api(member).post(JOBS, document, format="json").json()
    restricted = api(member).post(JOBS, {**PYTORCH_JOB, "queue": "root/algorithm/video"},
                                  format="json").json()  # fmt: skip

    assert list(refused) == ["secret_env.TOKEN"]
    assert "restricted profile" in restricted["queue"][0]  # with the quota it can never fit
    allowed = {**PYTORCH_JOB, "secret_env": {"TOKEN": "hf-credentials/token"}}
    assert api(member).post(JOBS, allowed, format="json").status_code == 201
    assert Job.objects.count() == 1
