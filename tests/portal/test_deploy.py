"""deploy/kubernetes: the manifests that run Caldera in a cluster, read as data.

The RBAC rules (deploy/kubernetes/rbac.yaml with the roles ``manage.py cluster_rbac``
generates for the tree) are enforced by the emulator while the Kubernetes backend does all
it does, and checked against the calls it made: everything it does is allowed, where it
does it, and nothing it does not do is granted.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from datetime import UTC, datetime

import pytest
import yaml

from jobs.cluster import ObjectRef
from jobs.cluster.access import BASE_GRANTS, rbac_documents
from jobs.cluster.kubernetes import KubernetesBackend, Settings
from kube.names import LABEL_MANAGED_BY, MANAGER

from ..support.kube_emulator import APPLY_PATCH, emulator
from ..support.kubernetes import DEPLOY, deploy_objects, play_operator
from ..support.paths import REPO
from ..support.polling import wait_for
from ..support.specs import pytorch_spec, ray_spec

SETTINGS = REPO / "portal" / "settings.py"
NOW = datetime(2026, 11, 23, 10, 0, tzinfo=UTC)
WHERE = ("video", "text")  # the namespaces of the specs of tests/cluster/test_manifests.py


def by_kind(kind: str) -> dict[str, dict]:
    return {o["metadata"]["name"]: o for o in deploy_objects() if o["kind"] == kind}


def test_the_kustomization_names_every_manifest_and_each_object_is_well_formed():
    listed = set(yaml.safe_load((DEPLOY / "kustomization.yaml").read_text())["resources"])
    assert listed == {p.name for p in DEPLOY.glob("*.yaml")} - {"kustomization.yaml"}
    for obj in deploy_objects():
        assert obj["apiVersion"] and obj["kind"] and obj["metadata"]["name"]


def test_web_worker_and_beat_run_the_portals_entry_points_with_its_settings():
    deployments = by_kind("Deployment")
    assert set(deployments) == {"caldera-web", "caldera-worker", "caldera-cluster", "caldera-beat"}
    commands = {
        name: [c["command"] for c in d["spec"]["template"]["spec"].get("initContainers", [])]
        + [c["command"] for c in d["spec"]["template"]["spec"]["containers"]]
        for name, d in deployments.items()
    }
    assert commands["caldera-web"][0] == ["python", "manage.py", "migrate", "--noinput"]
    assert commands["caldera-web"][1][:2] == ["gunicorn", "portal.wsgi:application"]
    assert commands["caldera-worker"][0][:4] == ["celery", "-A", "portal", "worker"]
    # The sync, and so the cluster's watches, in one process of its own (CELERY_TASK_ROUTES).
    assert commands["caldera-worker"][0][-2:] == ["--exclude-queues", "cluster"]
    assert commands["caldera-cluster"][0][:4] == ["celery", "-A", "portal", "worker"]
    assert commands["caldera-cluster"][0][-4:] == ["--queues", "cluster", "--concurrency", "1"]
    assert deployments["caldera-cluster"]["spec"]["replicas"] == 1
    assert commands["caldera-beat"][0][:4] == ["celery", "-A", "portal", "beat"]
    # Two beats: the one holding the lease sends, the other takes over (portal/beat.py).
    assert deployments["caldera-beat"]["spec"]["replicas"] == 2
    for deployment in deployments.values():
        for container in deployment["spec"]["template"]["spec"]["containers"]:
            sources = {next(iter(source)) for source in container["envFrom"]}
            assert sources == {"configMapRef", "secretRef"}


def test_the_probes_tell_liveness_from_readiness():
    deployments = by_kind("Deployment")
    [web] = deployments["caldera-web"]["spec"]["template"]["spec"]["containers"]
    assert web["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert web["livenessProbe"]["httpGet"]["path"] == "/livez"
    # The worker and beat: alive while their process runs, whatever Redis and PostgreSQL
    # do (tests/portal/test_probe.py); ready while they reach them.
    for name, process in (("worker", "worker"), ("cluster", "worker"), ("beat", "beat")):
        [container] = deployments[f"caldera-{name}"]["spec"]["template"]["spec"]["containers"]
        probe = ["python", "manage.py", "probe", process]
        assert container["livenessProbe"]["exec"]["command"] == [*probe, "--alive"]
        assert container["readinessProbe"]["exec"]["command"] == probe


def test_a_drain_takes_one_pod_of_each_at_a_time_and_they_spread_over_nodes():
    deployments = by_kind("Deployment")
    budgets = by_kind("PodDisruptionBudget")
    # The cluster's worker is one process by design (cluster.yaml): a drain moves it.
    assert "caldera-cluster" not in budgets
    for name, deployment in deployments.items():
        if name == "caldera-cluster":
            continue
        assert budgets[name]["spec"]["maxUnavailable"] == 1
        labels = deployment["spec"]["template"]["metadata"]["labels"]
        assert budgets[name]["spec"]["selector"]["matchLabels"].items() <= labels.items()
        assert deployment["spec"]["replicas"] >= 2
        [spread] = deployment["spec"]["template"]["spec"]["topologySpreadConstraints"]
        assert spread["topologyKey"] == "kubernetes.io/hostname"
        assert spread["labelSelector"]["matchLabels"].items() <= labels.items()


def test_the_worker_runs_as_many_pool_processes_as_its_cpu_limit():
    [worker] = by_kind("Deployment")["caldera-worker"]["spec"]["template"]["spec"]["containers"]
    assert worker["resources"]["limits"]["cpu"]
    [concurrency] = [e for e in worker["env"] if e["name"] == "WORKER_CONCURRENCY"]
    field = concurrency["valueFrom"]["resourceFieldRef"]
    assert (field["containerName"], field["resource"]) == (worker["name"], "limits.cpu")
    read = "from portal.celery import app; print(app.conf.worker_concurrency)"
    environment = {
        **os.environ,
        "WORKER_CONCURRENCY": "2",
        "DJANGO_SETTINGS_MODULE": "portal.settings",
    }
    done = subprocess.run(
        [sys.executable, "-c", read], env=environment, cwd=REPO, capture_output=True, text=True
    )
    assert done.stdout.strip() == "2", done.stderr
    compose = yaml.safe_load((DEPLOY.parents[1] / "docker-compose.yml").read_text())
    assert "/readyz" in " ".join(compose["services"]["web"]["healthcheck"]["test"])


COMPOSE = REPO / "docker-compose.yml"
CALDERA_SERVICES = ("web", "worker", "cluster", "beat")


def test_compose_gives_every_caldera_process_its_settings_and_a_health_check():
    """docker-compose.yml read as Compose reads it: YAML merge keys resolved, each one
    replacing a nested mapping whole. Every Caldera process has each setting the settings
    require and every setting the others have, with the same value (the worker and beat
    only add their own), and each has a health check."""
    services = yaml.safe_load(COMPOSE.read_text())["services"]
    required = set(re.findall(r'env_str\("([A-Z_]+)"\)', SETTINGS.read_text()))
    assert required == {"DATABASE_URL", "REDIS_URL", "SECRET_KEY"}
    environments = {name: services[name].get("environment") or {} for name in CALDERA_SERVICES}
    shared = set.intersection(*(set(environment) for environment in environments.values()))
    for name, environment in environments.items():
        assert required <= set(environment), (name, sorted(required - set(environment)))
        for other in environments.values():
            assert {k: environment[k] for k in shared} == {k: other[k] for k in shared}
    assert set(environments["web"]) <= shared  # the web server's are everyone's
    probes = {name: services[name]["healthcheck"]["test"] for name in CALDERA_SERVICES}
    assert probes["worker"] == ["CMD", "python", "manage.py", "probe", "worker"]
    assert probes["cluster"] == probes["worker"]
    assert services["cluster"]["command"][-4:] == ["--queues", "cluster", "--concurrency", "1"]
    assert probes["beat"] == ["CMD", "python", "manage.py", "probe", "beat"]


def test_the_settings_configmap_sets_only_settings_caldera_reads():
    read = set(re.findall(r'env_\w+\("([A-Z_]+)"', SETTINGS.read_text()))
    data = by_kind("ConfigMap")["caldera-settings"]["data"]
    assert set(data) <= read, sorted(set(data) - read)
    assert data["CLUSTER_BACKEND"] == "kubernetes"
    assert all(isinstance(value, str) for value in data.values())


def test_the_worker_and_the_web_server_carry_the_service_account_token_and_beat_does_not():
    """The worker drives the cluster; the web server reads the logs of jobs' pods for the
    job page and the API; beat never talks to the cluster."""
    deployments = by_kind("Deployment")
    for name in ("caldera-worker", "caldera-cluster", "caldera-web"):
        pod = deployments[name]["spec"]["template"]["spec"]
        assert pod["serviceAccountName"] == "caldera"
        assert pod.get("automountServiceAccountToken", True) is True
    assert (
        deployments["caldera-beat"]["spec"]["template"]["spec"]["automountServiceAccountToken"]
        is False
    )
    [binding] = by_kind("ClusterRoleBinding").values()
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "caldera", "namespace": "caldera-system"}
    ]
    assert binding["roleRef"]["name"] == "caldera"


_PATH = re.compile(
    r"^/(?:api/v1|apis/(?P<group>[^/]+)/[^/]+)(?:/namespaces/(?P<namespace>[^/]+))?"
    r"/(?P<plural>[^/?]+)(?P<name>/[^/?]+)?(?P<subresource>/[^/?]+)?"
)
_DISCOVERY = re.compile(r"^/apis/[^/]+/[^/]+/?$")
_VERBS = {"POST": "create", "PATCH": "patch", "DELETE": "delete", "PUT": "update"}
PUBLISH = ["elasticquotatree", "volcano"]
RUNTIMES = ("kuberay", "kubeflow", "volcano")


def permissions(request) -> set[tuple]:
    """(namespace, apiGroup, resource, verb, name) of one request, as the API server's
    authorizer sees it (namespace None at the cluster scope; the name only of a get). A
    server-side apply is a patch, and a create too when the object is missing (it is then
    authorized as ``create``: Kubernetes' "Patch and apply"). A subresource is a resource
    of its own (``pods/log``), read by the name of a pod its operator made up, which no
    rule can name."""
    method, path = request.method.value, request.url.path
    if _DISCOVERY.match(path):
        return set()  # every identity may read what the server serves
    match = _PATH.match(path)
    assert match, path
    name = (match["name"] or "").lstrip("/")
    watching = str(request.params.get("watch", "")).lower() == "true"
    verbs = {_VERBS.get(method) or ("get" if name else "watch" if watching else "list")}
    if APPLY_PATCH in request.headers.get("Content-Type", ""):
        verbs.add("create")
    subresource = match["subresource"] or ""
    return {
        (
            match["namespace"],
            match["group"] or "",
            match["plural"] + subresource,
            verb,
            name if verb == "get" and not subresource else "",
        )
        for verb in verbs
    }


def granted(documents: list[dict]) -> set[tuple]:
    """The same tuples for every rule the documents bind to Caldera's account."""
    bound = {
        (doc["roleRef"]["kind"], doc["metadata"].get("namespace"), doc["roleRef"]["name"])
        for doc in documents
        if doc["kind"].endswith("Binding")
    }
    found = set()
    for doc in documents:
        namespace = doc["metadata"].get("namespace")
        if (
            doc["kind"] not in ("Role", "ClusterRole")
            or (doc["kind"], namespace, doc["metadata"]["name"]) not in bound
        ):
            continue
        for rule in doc["rules"]:
            for group in rule["apiGroups"]:
                for resource in rule["resources"]:
                    for verb in rule["verbs"]:
                        for name in rule.get("resourceNames") or [""]:
                            found.add((namespace, group, resource, verb, name))
    return found


def deployed_with_generated_roles() -> list[dict]:
    static = [o for o in deploy_objects() if o["kind"] in ("ClusterRole", "ClusterRoleBinding")]
    return static + rbac_documents(namespaces=list(WHERE), runtimes=RUNTIMES, publish=PUBLISH)


@pytest.fixture
def used():
    """Every request the backend makes, under the deploy's RBAC enforced by the emulator:
    each runtime created, released, listed with its events, its head or master pod's log
    read, deleted; the nodes read; the quota tree written twice, a leaf gone between; every
    readiness check."""
    with emulator() as kube:
        kube.server.resources["scheduling.sigs.k8s.io/v1beta1/elasticquotatrees"] = {}
        kube.server.resources["scheduling.volcano.sh/v1beta1/queues"] = {}
        for namespace in WHERE:
            kube.add_namespace(namespace)
        kube.add_node("node-1", {"cpu": "16", "memory": "64Gi", "pods": "110"})
        volcano = ray_spec(id=11, object_name="rayjob-video-11", runtime="volcano")
        for spec in (ray_spec(), pytorch_spec(), volcano):
            play_operator(kube, spec)
        before = len(list(kube.server))
        kube.rbac(deployed_with_generated_roles())
        backend = KubernetesBackend(
            Settings(runtimes=RUNTIMES, host=kube.url, timeout_seconds=2, watch=True)
        )
        backend.apply([ray_spec(suspend=True), pytorch_spec(suspend=True), volcano], now=NOW)
        backend.apply([ray_spec(), pytorch_spec()], now=NOW)
        backend.observe(now=NOW, namespaces=WHERE)
        for spec in (ray_spec(), pytorch_spec(), volcano):
            ref = ObjectRef(spec.object_name, spec.namespace, spec.runtime)
            backend.pod_log(
                ref, job_id=spec.id, head=spec.head.name, tail_lines=10, limit_bytes=999, now=NOW
            )
        wait_for(lambda: all(i.items() is not None for i in backend._informers.values()))
        backend.close()
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
        managed = {LABEL_MANAGED_BY: MANAGER}  # what Caldera lists its queues by
        queues = [{"metadata": {"name": n, "labels": managed}} for n in ("root-a", "root-b")]
        backend.publish_quota(tree=tree, queues=queues)
        backend.publish_quota(tree=tree, queues=queues[:1])
        checks = backend.checks(namespaces=WHERE, publish=PUBLISH)
        requests = list(kube.server)[before:]
        assert kube.refused == []
    assert [c for c in checks if not c.ok or c.warning] == []
    yield requests


def leaves_as_one(found: set[tuple]) -> set[tuple]:
    """Every namespace the tree binds gets the same role: compare them as one."""
    return {("<leaf>" if t[0] in WHERE else t[0], *t[1:]) for t in found}


def test_the_deployed_and_generated_roles_grant_exactly_what_the_backend_does(used):
    done = set().union(*(permissions(r) for r in used))
    assert leaves_as_one(done) == leaves_as_one(granted(deployed_with_generated_roles()))


def test_the_deployed_cluster_role_is_the_declared_base(used):
    [role] = by_kind("ClusterRole").values()
    assert role["rules"] == [grant.rule() for grant in BASE_GRANTS]


def test_cluster_check_asks_about_every_permission_the_backend_uses(used):
    asked = {
        (
            attributes.get("namespace"),
            attributes["group"],
            "/".join(filter(None, (attributes["resource"], attributes.get("subresource")))),
            attributes["verb"],
            attributes.get("name", ""),
        )
        for request in used
        if request.url.path.endswith("selfsubjectaccessreviews")
        for attributes in [request.data["spec"]["resourceAttributes"]]
    }
    done = set().union(*(permissions(r) for r in used))
    assert leaves_as_one(asked) == leaves_as_one(done)


def test_each_kind_of_work_has_a_queue_and_a_worker_without_options_consumes_them_all():
    """Admission, the sync, webhooks and estimates never wait behind one another; the sync
    alone is the cluster worker's, so one process holds the watches."""
    from hooks.task_names import DELIVER_TASK
    from jobs.engine.task_names import ADMIT_TASK, ESTIMATES_TASK, RECONCILE_TASK, SYNC_TASK
    from portal.celery import app

    def queue(task: str) -> str:
        return app.amqp.router.route({}, task)["queue"].name

    routed = {task: queue(task) for task in (ADMIT_TASK, SYNC_TASK, DELIVER_TASK, ESTIMATES_TASK)}
    assert routed == {
        ADMIT_TASK: "admission", SYNC_TASK: "cluster", DELIVER_TASK: "webhooks",
        ESTIMATES_TASK: "estimates",
    }  # fmt: skip
    assert queue(RECONCILE_TASK) == "celery"
    assert set(app.amqp.queues) == {"celery", "admission", "cluster", "webhooks", "estimates"}
