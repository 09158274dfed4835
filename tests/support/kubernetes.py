"""The Kubernetes side of the tests, on the API server emulator (kube_emulator.py): a
backend for the emulator, the portal configured for it, the operators played, and the
roles a deployment grants (deploy/kubernetes with the roles ``manage.py cluster_rbac``
generates). The ``kube`` fixture of tests/conftest.py is one emulator."""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import replace

import yaml
from django.test import override_settings

from jobs.cluster import get_backend
from jobs.cluster.access import rbac_documents
from jobs.cluster.kubernetes import KubernetesBackend, Settings
from jobs.cluster.manifests import build_manifests
from jobs.cluster.spec import JobSpec

from .kube_emulator import emulator
from .paths import REPO

DEPLOY = REPO / "deploy" / "kubernetes"
# The namespaces of the seed tree's leaves.
TREE_NAMESPACES = ("devops", "intern-text", "intern-video", "text", "video")


def backend_for(kube, **changes) -> KubernetesBackend:
    """The Kubernetes backend on the emulator ``kube``, every runtime, with short timeouts
    and retries (``changes``: other settings)."""
    settings = Settings(
        runtimes=("kuberay", "kubeflow", "volcano"),
        host=kube.url,
        timeout_seconds=1.0,
        attempts=3,
        retry_pause_seconds=0.01,
    )
    return KubernetesBackend(replace(settings, **changes))


@contextmanager
def on_kubernetes(namespaces: tuple[str, ...] | None = None, **settings):
    """The portal configured for the emulated cluster, with two 16-cpu nodes and the
    namespaces of the seed tree (``namespaces``: only these)."""
    with emulator() as kube:
        kube.add_node("node-1", {"cpu": "16", "memory": "64Gi", "pods": "110"})
        kube.add_node("node-2", {"cpu": "16", "memory": "64Gi", "pods": "110"})
        for namespace in TREE_NAMESPACES if namespaces is None else namespaces:
            kube.add_namespace(namespace)
        overrides = dict(
            CLUSTER_BACKEND="kubernetes",
            KUBERNETES_HOST=kube.url,
            KUBERNETES_TIMEOUT_SECONDS=2,
            KUBERNETES_ATTEMPTS=2,
            KUBERNETES_WATCH=False,  # every sync lists: the tests' answers reach it
        )
        with override_settings(**{**overrides, **settings}):
            get_backend.cache_clear()
            try:
                yield kube
            finally:
                get_backend().close()
                get_backend.cache_clear()


def roles(
    *,
    without: tuple[str, str] | None = None,
    runtimes=("kuberay",),
    publish=(),
    namespaces: tuple[str, ...] = TREE_NAMESPACES,
):
    """deploy/kubernetes/rbac.yaml's ClusterRole with the roles ``manage.py cluster_rbac``
    generates for the seed tree (or a tree binding ``namespaces``); ``without`` takes a
    (namespace, resource) rule out."""
    static = [o for o in deploy_objects() if o["kind"] in ("ClusterRole", "ClusterRoleBinding")]
    generated = rbac_documents(namespaces=namespaces, runtimes=runtimes, publish=publish)
    for doc in generated:
        if without and doc["kind"] == "Role" and doc["metadata"]["namespace"] == without[0]:
            doc["rules"] = [r for r in doc["rules"] if without[1] not in r["resources"]]
    return static + generated


def deploy_objects() -> list[dict]:
    """The objects of deploy/kubernetes, as its kustomization lists them."""
    kustomization = yaml.safe_load((DEPLOY / "kustomization.yaml").read_text())
    found = []
    for name in kustomization["resources"]:
        found += [doc for doc in yaml.safe_load_all((DEPLOY / name).read_text()) if doc]
    return found


def play_operator(kube, spec: JobSpec, *, suffix: str = "x7k2p", **pod) -> str:
    """Make the job's pods as its runtime's operator does: the labels and containers of
    the pod templates in Caldera's manifest, and the operator's own labels and names. Each
    pod's log says which pod it is. Returns the name of the head or master pod."""
    [job] = [m for m in build_manifests(spec) if m["kind"] != "ConfigMap"]
    name = spec.object_name
    made = []  # (pod name, template, the operator's labels, extra containers)
    if spec.runtime == "kuberay":
        cluster = f"{name}-{suffix}"  # KubeRay names the RayCluster itself
        ray = job["spec"]["rayClusterSpec"]
        sidecar = ("autoscaler",) if ray.get("enableInTreeAutoscaling") else ()
        on = {"ray.io/cluster": cluster}
        made.append((f"{cluster}-head-{suffix}", ray["headGroupSpec"]["template"],
                     on | {"ray.io/node-type": "head"}, sidecar))  # fmt: skip
        for group in ray["workerGroupSpecs"]:
            made.append((f"{cluster}-{group['groupName']}-worker-{suffix}", group["template"],
                         on | {"ray.io/node-type": "worker"}, ()))  # fmt: skip
    elif spec.runtime == "kubeflow":
        for kind, replicas in job["spec"]["pytorchReplicaSpecs"].items():
            labels = {
                "training.kubeflow.org/job-name": name,
                "training.kubeflow.org/replica-type": kind.lower(),
            }
            made.append((f"{name}-{kind.lower()}-0", replicas["template"], labels, ()))
    else:
        for task in job["spec"]["tasks"]:
            labels = {"volcano.sh/job-name": name, "volcano.sh/task-spec": task["name"]}
            made.append((f"{name}-{task['name']}-0", task["template"], labels, ()))
    for pod_name, template, labels, sidecar in made:
        containers = tuple(c["name"] for c in template["spec"]["containers"]) + sidecar
        kube.add_pod(
            spec.namespace,
            pod_name,
            labels=template["metadata"]["labels"] | labels,
            containers=containers,
            **pod,
        )
        if not pod.get("waiting") and pod.get("node", "node-1"):
            kube.write_log(spec.namespace, pod_name, f"I am {pod_name}\n")
    return made[0][0]
