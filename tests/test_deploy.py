"""deploy/kubernetes: the manifests that run Caldera in a cluster, read as data.

The RBAC rules are checked against the calls the Kubernetes backend really makes (recorded
by the emulator): everything it does is allowed, and nothing it does not do is granted.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml

from jobs.cluster import ObjectRef
from jobs.cluster.kubernetes import (
    PERMISSIONS,
    QUOTA_PERMISSIONS,
    KubernetesBackend,
    Settings,
)

from .kube_emulator import APPLY_PATCH, emulator
from .test_manifests import pytorch_spec, ray_spec

DEPLOY = Path(__file__).resolve().parents[1] / "deploy" / "kubernetes"
SETTINGS = Path(__file__).resolve().parents[1] / "portal" / "settings.py"
NOW = datetime(2026, 11, 23, 10, 0, tzinfo=UTC)


def objects() -> list[dict]:
    kustomization = yaml.safe_load((DEPLOY / "kustomization.yaml").read_text())
    found = []
    for name in kustomization["resources"]:
        found += [doc for doc in yaml.safe_load_all((DEPLOY / name).read_text()) if doc]
    return found


def by_kind(kind: str) -> dict[str, dict]:
    return {o["metadata"]["name"]: o for o in objects() if o["kind"] == kind}


def test_the_kustomization_names_every_manifest_and_each_object_is_well_formed():
    listed = set(yaml.safe_load((DEPLOY / "kustomization.yaml").read_text())["resources"])
    assert listed == {p.name for p in DEPLOY.glob("*.yaml")} - {"kustomization.yaml"}
    for obj in objects():
        assert obj["apiVersion"] and obj["kind"] and obj["metadata"]["name"]


def test_web_worker_and_beat_run_the_portals_entry_points_with_its_settings():
    deployments = by_kind("Deployment")
    assert set(deployments) == {"caldera-web", "caldera-worker", "caldera-beat"}
    commands = {
        name: [c["command"] for c in d["spec"]["template"]["spec"].get("initContainers", [])]
        + [c["command"] for c in d["spec"]["template"]["spec"]["containers"]]
        for name, d in deployments.items()
    }
    assert commands["caldera-web"][0] == ["python", "manage.py", "migrate", "--noinput"]
    assert commands["caldera-web"][1][:2] == ["gunicorn", "portal.wsgi:application"]
    assert commands["caldera-worker"][0][:4] == ["celery", "-A", "portal", "worker"]
    assert commands["caldera-beat"][0][:4] == ["celery", "-A", "portal", "beat"]
    assert deployments["caldera-beat"]["spec"]["replicas"] == 1
    for deployment in deployments.values():
        for container in deployment["spec"]["template"]["spec"]["containers"]:
            sources = {next(iter(source)) for source in container["envFrom"]}
            assert sources == {"configMapRef", "secretRef"}


def test_the_settings_configmap_sets_only_settings_caldera_reads():
    read = set(re.findall(r'env_\w+\("([A-Z_]+)"', SETTINGS.read_text()))
    data = by_kind("ConfigMap")["caldera-settings"]["data"]
    assert set(data) <= read, sorted(set(data) - read)
    assert data["CLUSTER_BACKEND"] == "kubernetes"
    assert all(isinstance(value, str) for value in data.values())


def test_only_the_worker_carries_the_service_account_token():
    deployments = by_kind("Deployment")
    worker = deployments["caldera-worker"]["spec"]["template"]["spec"]
    assert worker["serviceAccountName"] == "caldera"
    assert worker.get("automountServiceAccountToken", True) is True
    for name in ("caldera-web", "caldera-beat"):
        assert (
            deployments[name]["spec"]["template"]["spec"]["automountServiceAccountToken"] is False
        )
    [binding] = by_kind("ClusterRoleBinding").values()
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "caldera", "namespace": "caldera-system"}
    ]
    assert binding["roleRef"]["name"] == "caldera"


_PATH = re.compile(
    r"^/(?:api/v1|apis/(?P<group>[^/]+)/[^/]+)(?:/namespaces/[^/]+)?/(?P<plural>[^/?]+)(?P<name>/[^/?]+)?"
)
_VERBS = {"POST": "create", "PATCH": "patch", "DELETE": "delete", "PUT": "update"}


def permissions(request) -> set[tuple[str, str, str]]:
    """(apiGroup, resource, verb) of one request, as the API server's authorizer sees it.
    A server-side apply is a patch, and a create too when the object is missing (it is
    then authorized as ``create``: Kubernetes' "Patch and apply")."""
    method, path = request.method.value, request.url.path
    match = _PATH.match(path)
    assert match, path
    verbs = {_VERBS.get(method) or ("get" if match["name"] else "list")}
    if APPLY_PATCH in request.headers.get("Content-Type", ""):
        verbs.add("create")
    return {(match["group"] or "", match["plural"], verb) for verb in verbs}


def granted() -> set[tuple[str, str, str]]:
    rules = by_kind("ClusterRole")["caldera"]["rules"]
    return {
        (group, resource, verb)
        for rule in rules
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }


@pytest.fixture
def used():
    """Every permission the backend needs: each runtime created, released, listed with its
    events, deleted; the nodes read; the quota tree written twice, a leaf gone between."""
    with emulator() as kube:
        kube.server.resources["scheduling.sigs.k8s.io/v1beta1/elasticquotatrees"] = {}
        kube.server.resources["scheduling.volcano.sh/v1beta1/queues"] = {}
        backend = KubernetesBackend(
            Settings(runtimes=("kuberay", "kubeflow", "volcano"), host=kube.url, timeout_seconds=2)
        )
        volcano = ray_spec(id=11, object_name="rayjob-video-11", runtime="volcano")
        backend.apply([ray_spec(suspend=True), pytorch_spec(suspend=True), volcano], now=NOW)
        backend.apply([ray_spec(), pytorch_spec()], now=NOW)
        backend.observe(now=NOW)
        backend.allocatable()
        backend.remove(
            [
                ObjectRef("rayjob-video-7", "video", "kuberay"),
                ObjectRef("resnet-ddp-9", "text", "kubeflow"),
                ObjectRef("rayjob-video-11", "video", "volcano"),
            ],
            now=NOW,
        )
        tree = {"metadata": {"name": "elasticquotatree", "namespace": "kube-system"}}
        queues = [{"metadata": {"name": name}} for name in ("root-a", "root-b")]
        backend.publish_quota(tree=tree, queues=queues)
        backend.publish_quota(tree=tree, queues=queues[:1])
        kube.authorize()
        checks = backend.checks(namespaces=["video"], publish_quota=True)
        # No namespace and no node in the emulator: all else is allowed and listed.
        assert [check.what for check in checks if not check.ok] == [
            "namespace video exists",
            "the nodes' allocatable resources can be read",
        ]
        yield set().union(*(permissions(request) for request in list(kube.server)))


def test_the_cluster_role_grants_exactly_what_the_backend_does(used):
    assert used == granted()


def test_cluster_check_asks_about_every_permission_the_backend_uses(used):
    asked = set(PERMISSIONS) | set(QUOTA_PERMISSIONS)
    check_only = {
        ("", "namespaces", "get"),
        ("authorization.k8s.io", "selfsubjectaccessreviews", "create"),
    }
    assert asked == used - check_only
