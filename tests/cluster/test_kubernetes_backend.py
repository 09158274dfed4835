"""The Kubernetes backend against a real HTTP server speaking the Kubernetes API (kmock's
emulator), through the official client: no patched methods. The test plays the operators,
the scheduler and the kubelet by writing statuses, events and nodes through the same API.
"""

from __future__ import annotations

import json
import logging
import threading
from datetime import UTC, datetime, timedelta

import pytest
import yaml
from kubernetes import client
from kubernetes.client import ApiException

from jobs.cluster import ClusterUnavailable, KubernetesBackend, ObjectRef, Settings, kinds
from jobs.cluster.manifests import build_manifests
from jobs.cluster.manifests.common import (
    ANNOTATION_DEQUEUED,
    ANNOTATION_ENQUEUED,
    kube_queue_timestamp,
)
from kube.names import LABEL_MANAGED_BY, MANAGER
from kube.scheduling import ClusterNode, Taint

from ..support import k8s_schema
from ..support.kube_emulator import APPLY_PATCH, status
from ..support.kubernetes import backend_for
from ..support.polling import wait_for
from ..support.specs import pytorch_spec, ray_spec, volcano_spec

NOW = datetime(2026, 11, 23, 10, 0, tzinfo=UTC)
WHERE = ("video", "text")  # the namespaces of the specs of tests/cluster/test_manifests.py
DEQUEUED = datetime(2026, 11, 23, 10, 5, tzinfo=UTC)
RAYJOBS = "/apis/ray.io/v1/namespaces/video/rayjobs"


@pytest.fixture
def backend(kube):
    return backend_for(kube)


# -- creating --------------------------------------------------------------------------


def test_a_dequeued_job_is_created_as_its_manifests_say(kube, backend):
    spec = ray_spec(dequeued_at=DEQUEUED)

    assert backend.apply([spec], now=NOW) == {}

    configmap, rayjob = build_manifests(spec)
    stored = kube.get("kuberay", "video", "rayjob-video-7")
    assert (
        stored["spec"] == rayjob["spec"]
        and stored["metadata"]["labels"] == (rayjob["metadata"]["labels"])
    )
    assert stored["spec"]["suspend"] is False
    assert kube.configmaps("video") == [configmap["metadata"]["name"]]


def test_creating_what_exists_is_success_and_creates_nothing_twice(kube, backend):
    spec = pytorch_spec()
    backend.apply([spec], now=NOW)
    backend.apply([spec], now=NOW)

    assert [o["metadata"]["name"] for o in kube.objects("kubeflow")] == ["resnet-ddp-9"]
    assert len(kube.requests("post", "/pytorchjobs")) == 2  # the second answered 409


def test_a_cycle_creates_its_jobs_together_across_runtimes(kube, backend):
    specs = [ray_spec(id=i, object_name=f"rayjob-video-{i}", script="") for i in range(1, 21)]
    specs += [pytorch_spec(), volcano_spec()]

    assert backend.apply(specs, now=NOW) == {}

    assert len(kube.objects("kuberay")) == 20
    assert len(kube.objects("kubeflow")) == 1 and len(kube.objects("volcano")) == 1


# -- the suspend gate ------------------------------------------------------------------


def test_creates_carry_the_kubeconfig_s_credentials_as_the_client_s_own_calls_do(kube, tmp_path):
    kubeconfig = tmp_path / "config"
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "emulated", "cluster": {"server": kube.url}}],
                "users": [{"name": "caldera", "user": {"token": "first-token"}}],
                "contexts": [
                    {"name": "here", "context": {"cluster": "emulated", "user": "caldera"}}
                ],
                "current-context": "here",
            }
        )
    )
    backend = KubernetesBackend(
        Settings(runtimes=("kuberay",), kubeconfig=str(kubeconfig), timeout_seconds=1.0)
    )

    backend.apply([ray_spec()], now=NOW)
    # A token that expires is read again when the client's hook says so (an exec plugin's,
    # a ServiceAccount's projected token): the next create carries the new one.
    configuration = backend.api.configuration
    configuration.refresh_api_key_hook = lambda c: c.api_key.update(
        BearerToken="Bearer second-token"
    )
    backend.apply([ray_spec(id=8, object_name="rayjob-video-8", script="")], now=NOW)
    backend.observe(now=NOW, namespaces=["video"])

    [configmap, first, second] = kube.requests("post")
    [listing] = kube.requests("get", "/rayjobs")
    assert configmap.headers["Authorization"] == first.headers["Authorization"]
    assert first.headers["Authorization"] == "Bearer first-token"
    assert second.headers["Authorization"] == listing.headers["Authorization"]
    assert second.headers["Authorization"] == "Bearer second-token"
    assert first.headers["User-Agent"] == listing.headers["User-Agent"]
    assert [o["metadata"]["name"] for o in kube.objects("kuberay")] == [
        "rayjob-video-7",
        "rayjob-video-8",
    ]


def test_through_a_proxy_creates_go_to_the_proxy_as_the_client_s_own_calls_do(kube):
    # The emulator plays the proxy too: it answers a request for a whole URL by its path.
    # The server's own name does not resolve, so only a request through the proxy arrives.
    backend = KubernetesBackend(
        Settings(runtimes=("kuberay",), host="http://apiserver.invalid", timeout_seconds=1.0)
    )
    configuration = backend.api.configuration
    configuration.proxy = kube.url
    backend = KubernetesBackend(backend.settings, client.ApiClient(configuration))

    assert backend.apply([ray_spec(script="")], now=NOW) == {}
    backend.observe(now=NOW, namespaces=["video"])

    [create] = kube.requests("post")
    assert str(create.url).startswith("http://apiserver.invalid/apis/ray.io/v1/")
    assert [o["metadata"]["name"] for o in kube.objects("kuberay")] == ["rayjob-video-7"]


def test_a_rayjob_waits_suspended_and_is_released_at_its_dequeue(kube, backend):
    backend.apply([ray_spec(suspend=True)], now=NOW)
    assert kube.get("kuberay", "video", "rayjob-video-7")["spec"]["suspend"] is True
    assert backend.observe(now=NOW, namespaces=WHERE).statuses[0].phase == "Suspended"

    backend.apply([ray_spec(suspend=False, dequeued_at=DEQUEUED)], now=NOW)

    stored = kube.get("kuberay", "video", "rayjob-video-7")
    assert stored["spec"]["suspend"] is False
    assert stored["metadata"]["annotations"][ANNOTATION_DEQUEUED] == kube_queue_timestamp(DEQUEUED)
    assert backend.observe(now=NOW, namespaces=WHERE).statuses[0].phase == "Pending"


def test_a_pytorchjob_is_suspended_and_released_through_its_run_policy(kube, backend):
    backend.apply([pytorch_spec(suspend=True)], now=NOW)
    assert kube.get("kubeflow", "text", "resnet-ddp-9")["spec"]["runPolicy"]["suspend"] is True

    backend.apply([pytorch_spec(suspend=False)], now=NOW)
    backend.apply([pytorch_spec(suspend=False)], now=NOW)  # releasing twice is harmless

    run_policy = kube.get("kubeflow", "text", "resnet-ddp-9")["spec"]["runPolicy"]
    assert run_policy["suspend"] is False
    assert run_policy["schedulingPolicy"]["queue"] == "root-algorithm-text"


# -- deleting --------------------------------------------------------------------------


def test_removing_deletes_the_object_and_its_script_and_deleting_twice_is_success(kube, backend):
    spec = ray_spec()
    backend.apply([spec], now=NOW)
    ref = ObjectRef("rayjob-video-7", "video", "kuberay")

    backend.remove([ref], now=NOW)
    backend.remove([ref], now=NOW)  # both objects answer 404 now

    assert kube.objects("kuberay") == [] and kube.configmaps("video") == []
    deletes = kube.requests("delete", "/rayjobs/rayjob-video-7")
    # In the foreground: the object stays listed until the cluster has removed its pods.
    assert len(deletes) == 2 and "propagationPolicy=Foreground" in str(deletes[0].url)
    (script,) = kube.requests("delete", "/configmaps/")[:1]
    assert "propagationPolicy=Background" in str(script.url)


def sample_objects() -> tuple[dict, ...]:
    """KubeRay's sample RayJob and the ConfigMap of its script, as a team sends them."""
    rayjob, config_map = yaml.safe_load_all(
        (k8s_schema.SAMPLES / "kuberay-ray-job.sample.yaml").read_text()
    )
    return rayjob, config_map


def test_a_job_sent_as_objects_is_created_as_sent_with_its_config_maps_and_removed_whole(
    kube, backend
):
    rayjob, config_map = sample_objects()
    spec = ray_spec(object_name="rayjob-sample", objects=(rayjob, config_map), script="")

    assert backend.apply([spec], now=NOW) == {}

    stored = kube.get("kuberay", "video", "rayjob-sample")
    for key in ("entrypoint", "runtimeEnvYAML", "shutdownAfterJobFinishes"):
        assert stored["spec"].get(key) == rayjob["spec"].get(key), key
    head = stored["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]
    assert head["spec"] == rayjob["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]
    assert head["metadata"]["labels"]["caldera.io/job-id"] == "7"  # its pods are found by it
    assert stored["spec"]["rayClusterSpec"]["rayVersion"] == "2.52.0"
    assert stored["metadata"]["labels"]["caldera.io/job-id"] == "7"
    assert kube.configmaps("video") == ["ray-job-code-sample"]

    backend.remove(
        [ObjectRef("rayjob-sample", "video", "kuberay", ("ray-job-code-sample",))], now=NOW
    )

    assert kube.objects("kuberay") == [] and kube.configmaps("video") == []


# -- statuses --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "phase", "message"),
    [
        ({}, "Pending", ""),
        ({"jobDeploymentStatus": "Initializing"}, "Pending", ""),
        ({"jobDeploymentStatus": "Running", "jobStatus": "PENDING"}, "Running", ""),
        ({"jobDeploymentStatus": "Complete", "jobStatus": "SUCCEEDED"}, "Succeeded", ""),
        (
            {"jobDeploymentStatus": "Complete", "jobStatus": "FAILED", "message": "exit 1"},
            "Failed",
            "exit 1",
        ),
        (
            {"jobDeploymentStatus": "Complete", "jobStatus": "STOPPED"},
            "Failed",
            "The Ray job ended STOPPED",
        ),
        (
            {"jobDeploymentStatus": "ValidationFailed", "message": "bad spec"},
            "Failed",
            "bad spec",
        ),
        ({"jobDeploymentStatus": "Suspended"}, "Suspended", ""),
    ],
)
def test_rayjob_statuses(kube, backend, status, phase, message):
    backend.apply([ray_spec()], now=NOW)
    kube.set_status("kuberay", "video", "rayjob-video-7", status)

    [observed] = backend.observe(now=NOW, namespaces=WHERE).statuses

    assert (observed.job_id, observed.phase, observed.message) == (7, phase, message)
    assert observed.ref == ObjectRef("rayjob-video-7", "video", "kuberay")


@pytest.mark.parametrize(
    ("conditions", "phase"),
    [
        ([{"type": "Created", "status": "True"}], "Pending"),
        ([{"type": "Created", "status": "True"}, {"type": "Running", "status": "True"}], "Running"),
        (
            [
                {"type": "Running", "status": "False"},
                {"type": "Succeeded", "status": "True", "message": "done"},
            ],
            "Succeeded",
        ),
        ([{"type": "Failed", "status": "True", "message": "OOMKilled"}], "Failed"),
        ([{"type": "Suspended", "status": "True"}], "Suspended"),
    ],
)
def test_pytorchjob_statuses_follow_the_last_true_condition(kube, backend, conditions, phase):
    backend.apply([pytorch_spec()], now=NOW)
    kube.set_status("kubeflow", "text", "resnet-ddp-9", {"conditions": conditions})

    assert backend.observe(now=NOW, namespaces=WHERE).statuses[0].phase == phase


@pytest.mark.parametrize(
    ("state", "phase"),
    [
        ({"phase": "Pending"}, "Pending"),
        ({"phase": "Running"}, "Running"),
        ({"phase": "Completing"}, "Running"),
        ({"phase": "Completed"}, "Succeeded"),
        ({"phase": "Restarting"}, "Pending"),
        ({"phase": "Failed", "message": "task head failed"}, "Failed"),
        ({"phase": "Aborted"}, "Failed"),
    ],
)
def test_volcano_job_statuses_follow_the_state_phase(kube, backend, state, phase):
    backend.apply([volcano_spec()], now=NOW)
    kube.set_status("volcano", "video", "rayjob-video-11", {"state": state})

    assert backend.observe(now=NOW, namespaces=WHERE).statuses[0].phase == phase


def test_objects_caldera_did_not_create_are_not_listed(kube, backend):
    kube.custom.create_namespaced_custom_object(
        "ray.io", "v1", "video", "rayjobs", {"metadata": {"name": "someone-elses"}}
    )
    assert backend.observe(now=NOW, namespaces=WHERE).statuses == []

    backend.apply([ray_spec()], now=NOW)
    assert [s.object_name for s in backend.observe(now=NOW, namespaces=WHERE).statuses] == [
        "rayjob-video-7"
    ]
    listing = kube.requests("get", "/apis/ray.io/v1/namespaces/video/rayjobs")[-1]
    assert listing.url.query["labelSelector"] == "caldera.io/job-id"


# -- events ----------------------------------------------------------------------------


def test_scheduling_warnings_of_pods_and_pod_groups_are_read_with_their_cycle(kube, backend):
    backend.apply([ray_spec(), pytorch_spec(), volcano_spec()], now=NOW)
    kube.warn(
        "video",
        "e1",
        reason="GangFailedScheduling",
        message="rayjob-video-7-abcde-head-x1 in gang failed to be scheduled in cycle 3: "
        "0/2 nodes are available: 2 Insufficient cpu.",
        involved=("Pod", "rayjob-video-7-abcde-head-x1"),
        uid="u1",
    )
    kube.warn(
        "video",
        "e2",
        reason="Unschedulable",
        message="0/2 nodes are unavailable: 2 Insufficient nvidia.com/gpu.",
        involved=("PodGroup", "rayjob-video-11-0f9c"),
        uid="u2",
    )
    kube.warn(
        "text",
        "e3",
        reason="Evicted",
        message="The node was low on resource: memory.",
        involved=("Pod", "resnet-ddp-9-worker-1"),
        uid="u3",
    )
    kube.warn(
        "video",
        "e4",
        reason="BackOff",
        message="restarting",
        involved=("Pod", "rayjob-video-7-x"),
        uid="u4",
    )
    kube.warn(
        "video",
        "e5",
        reason="Scheduled",
        message="ok",
        involved=("Pod", "rayjob-video-7-y"),
        uid="u5",
        type="Normal",
    )
    kube.warn(
        "video",
        "e6",
        reason="FailedScheduling",
        message="not ours",
        involved=("Pod", "other-3-head"),
        uid="u6",
    )

    events = sorted(backend.observe(now=NOW, namespaces=WHERE).events, key=lambda e: e.uid)

    assert [(e.job_id, e.reason, e.cycle, e.involved) for e in events] == [
        (7, "GangFailedScheduling", 3, "pod/rayjob-video-7-abcde-head-x1"),
        (11, "Unschedulable", None, "podgroup/rayjob-video-11-0f9c"),
        (9, "Evicted", None, "pod/resnet-ddp-9-worker-1"),
    ]
    assert events[0].at == datetime(2026, 11, 23, 10, 0, tzinfo=UTC)


def test_a_repeated_event_keeps_its_key_with_its_count_and_first_and_last_time(kube, backend):
    backend.apply([ray_spec()], now=NOW)
    warning = dict(
        reason="FailedScheduling",
        message="0/4 nodes are available: 4 Insufficient cpu.",
        involved=("Pod", "rayjob-video-7-head-0"),
        uid="u1",
    )
    kube.warn("video", "e1", **warning)
    first = backend.observe(now=NOW, namespaces=WHERE).events
    again = backend.observe(now=NOW, namespaces=WHERE).events
    kube.warn(
        "video", "e1", count=2, first="2026-11-23T10:00:00Z", at="2026-11-23T10:01:00Z", **warning
    )
    repeated = backend.observe(now=NOW, namespaces=WHERE).events

    assert [(e.uid, e.count, e.first_at) for e in first] == [("k8s/u1", 1, None)]
    assert again == first
    assert [(e.uid, e.count, e.first_at, e.at) for e in repeated] == [
        ("k8s/u1", 2, NOW, NOW + timedelta(minutes=1))
    ]


# -- failures --------------------------------------------------------------------------


def test_a_server_error_is_retried_and_the_object_created_once(kube, backend):
    kube.answer_next("post", RAYJOBS, 500)

    assert backend.apply([ray_spec(script="")], now=NOW) == {}

    assert len(kube.requests("post", "/rayjobs")) == 2
    assert len(kube.objects("kuberay")) == 1


def test_a_create_that_failed_after_the_server_stored_it_succeeds_on_the_409(kube, backend):
    # The emulator stores the object even when it answers 500, as a server may that
    # fails after writing: the retry gets 409 Conflict, which is success.
    kube.answer_next("post", RAYJOBS, 503)

    assert backend.apply([ray_spec(script="", suspend=True)], now=NOW) == {}
    assert kube.get("kuberay", "video", "rayjob-video-7")["spec"]["suspend"] is True


def test_a_server_that_keeps_failing_makes_the_cluster_unavailable_after_bounded_tries(
    kube, backend
):
    kube.answer_next("get", "/apis/ray.io/v1/namespaces/video/rayjobs", 500, times=10)

    with pytest.raises(ClusterUnavailable, match="list rayjobs in video: HTTP 500"):
        backend.observe(now=NOW, namespaces=WHERE)

    assert len(kube.requests("get", "/apis/ray.io/v1/namespaces/video/rayjobs")) == 3


def test_a_slow_answer_times_out_and_is_retried(kube, backend):
    kube.pause_next("post", RAYJOBS, seconds=3)

    assert backend.apply([ray_spec(script="")], now=NOW) == {}

    assert len(kube.requests("post", "/rayjobs")) == 2
    assert len(kube.objects("kuberay")) == 1


@pytest.mark.parametrize("status", [400, 404, 422])
def test_an_object_the_server_refuses_is_reported_with_its_reason_not_retried(
    kube, backend, status
):
    kube.answer_next("post", RAYJOBS, status)

    refused = backend.apply([ray_spec(script="")], now=NOW)

    assert list(refused) == [7] and f"({status}: " in refused[7].reason and not refused[7].retry
    assert len(kube.requests("post", "/rayjobs")) == 1


def test_a_forbidden_call_makes_the_cluster_unavailable_and_fails_no_job(kube, backend):
    kube.answer_next("post", RAYJOBS, 403)
    kube.answer_next("get", "/api/v1/namespaces/video", 403)  # refused there too,
    kube.authorize(refused={("list", "nodes")})  # and its cluster role is gone: everywhere

    with pytest.raises(ClusterUnavailable, match="create RayJob rayjob-video-7"):
        backend.apply([ray_spec(script="")], now=NOW)

    assert len(kube.requests("post", "/rayjobs")) == 1  # asking again would not help


def test_a_long_listing_is_read_page_by_page(kube):
    backend = backend_for(kube, list_page=2)
    backend.apply(
        [ray_spec(id=i, object_name=f"rayjob-video-{i}", script="") for i in (1, 2, 3)], now=NOW
    )
    stored = kube.objects("kuberay")

    def page(request):
        start = int(request.params.get("continue") or 0)
        following = {"continue": str(start + 2)} if start + 2 < len(stored) else {}
        return {
            "metadata": {"resourceVersion": "7", **following},
            "items": stored[start : start + 2],
        }

    kube.server["get /apis/ray.io/v1/namespaces/video/rayjobs"] << page
    before = len(kube.requests("get", "/apis/ray.io/v1/namespaces/video/rayjobs"))

    assert sorted(s.job_id for s in backend.observe(now=NOW, namespaces=WHERE).statuses) == [
        1,
        2,
        3,
    ]
    listings = kube.requests("get", "/apis/ray.io/v1/namespaces/video/rayjobs")[before:]
    assert [(r.params.get("continue"), r.params["limit"]) for r in listings] == [
        (None, "2"),
        ("2", "2"),
    ]


def test_a_failed_listing_is_never_read_as_an_empty_cluster(kube, backend):
    backend.apply([ray_spec()], now=NOW)
    kube.answer_next("get", "/apis/ray.io/v1/namespaces/video/rayjobs", 500, times=3)

    with pytest.raises(ClusterUnavailable):
        backend.observe(now=NOW, namespaces=WHERE)

    assert [s.job_id for s in backend.observe(now=NOW, namespaces=WHERE).statuses] == [7]


def test_a_listing_that_is_not_allowed_is_unavailable_not_empty(kube, backend):
    kube.answer_next("get", "/apis/kubeflow.org/v1/namespaces/video/pytorchjobs", 403)
    kube.answer_next("get", "/api/v1/namespaces/video", 403)  # refused there too,
    kube.authorize(refused={("list", "nodes")})  # and its cluster role is gone: everywhere

    with pytest.raises(ClusterUnavailable, match="pytorchjobs"):
        backend.observe(now=NOW, namespaces=WHERE)


def test_a_namespace_its_roles_do_not_name_yet_is_that_namespaces_trouble(kube, backend):
    """Refused the listing and the namespace itself, while its cluster role holds (a leaf
    added since ``manage.py cluster_rbac`` was applied): only that namespace says nothing."""
    kube.add_namespace("text")
    backend.apply([pytorch_spec(script="")], now=NOW)
    kube.answer_next("get", "/apis/kubeflow.org/v1/namespaces/video/pytorchjobs", 403)
    kube.answer_next("get", "/api/v1/namespaces/video", 403)

    observation = backend.observe(now=NOW, namespaces=WHERE)

    assert [s.job_id for s in observation.statuses] == [9]  # text's
    [(namespace, trouble)] = observation.troubled.items()
    assert namespace == "video" and not trouble.gone
    assert trouble.reason.startswith("Caldera may not read namespace video: its roles do not")
    assert "manage.py cluster_rbac | kubectl apply -f -" in trouble.reason


def test_a_listing_refused_in_one_namespace_is_that_namespaces_trouble_not_empty(kube, backend):
    for namespace in WHERE:
        kube.add_namespace(namespace)
    backend.apply([ray_spec(script=""), pytorch_spec(script="")], now=NOW)
    kube.deny("list", "kubeflow", "video", times=1)  # its Role lost the rule

    observation = backend.observe(now=NOW, namespaces=WHERE)

    assert [s.job_id for s in observation.statuses] == [9]  # text's; video says nothing
    [(namespace, trouble)] = observation.troubled.items()
    assert namespace == "video" and not trouble.gone
    assert trouble.reason.startswith("Caldera has no Role in namespace video")
    assert 'cannot list resource "pytorchjobs"' in trouble.reason


def test_a_cluster_that_refuses_connections_is_unavailable(kube):
    backend = backend_for(kube, host="http://127.0.0.1:9")  # nothing listens on port 9

    with pytest.raises(ClusterUnavailable, match="list rayjobs"):
        backend.observe(now=NOW, namespaces=WHERE)
    with pytest.raises(ClusterUnavailable):
        backend.apply([ray_spec()], now=NOW)
    with pytest.raises(ClusterUnavailable):
        backend.remove([ObjectRef("rayjob-video-7", "video", "kuberay")], now=NOW)


# -- capacity --------------------------------------------------------------------------


def test_allocatable_sums_the_ready_schedulable_nodes_and_is_read_at_most_every_period(
    kube, backend
):
    kube.add_node("n1", {"cpu": "16", "memory": "64Gi", "nvidia.com/gpu": "4", "pods": "110"})
    kube.add_node("n2", {"cpu": "8", "memory": "32Gi", "pods": "110"})
    kube.add_node("cordoned", {"cpu": "64", "memory": "256Gi"}, unschedulable=True)
    kube.add_node("not-ready", {"cpu": "64", "memory": "256Gi"}, ready=False)

    allocatable = backend.allocatable()
    kube.add_node("n3", {"cpu": "16", "memory": "64Gi"})

    assert allocatable == {
        "cpu": 24_000,
        "memory": 96 * 2**30,
        "nvidia.com/gpu": 4,
        "pods": 220,
    }
    assert backend.allocatable() == allocatable  # within the period: not read again
    assert len(kube.requests("get", "/api/v1/nodes")) == 1
    assert backend_for(kube, allocatable_seconds=0).allocatable()["cpu"] == 40_000


def test_allocatable_is_unknown_while_the_nodes_cannot_be_read(kube, backend):
    kube.answer_next("get", "/api/v1/nodes", 500, times=3)

    assert backend.allocatable() is None


def test_nodes_are_the_ready_schedulable_nodes_from_the_same_listing_as_allocatable(kube, backend):
    kube.add_node(
        "n1",
        {"cpu": "16", "memory": "64Gi", "nvidia.com/gpu": "4", "pods": "250"},
        labels={"pool": "a100"},
        taints=[{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}],
    )
    kube.add_node("n2", {"cpu": "8", "memory": "32Gi"})
    kube.add_node("cordoned", {"cpu": "64"}, unschedulable=True)
    kube.add_node("not-ready", {"cpu": "64"}, ready=False)

    nodes = backend.nodes()
    allocatable = backend.allocatable()

    # Each node's own pods; one that does not say (a kubelet always does) holds 110. Its
    # labels and taints, as the scheduler's filters read them.
    assert sorted(nodes, key=lambda node: node.name) == [
        ClusterNode(
            "n1",
            {"cpu": 16_000, "memory": 64 * 2**30, "nvidia.com/gpu": 4, "pods": 250},
            {"pool": "a100"},
            (Taint("nvidia.com/gpu", "present", "NoSchedule"),),
        ),
        ClusterNode("n2", {"cpu": 8000, "memory": 32 * 2**30, "pods": 110}),
    ]
    assert allocatable == {"cpu": 24_000, "memory": 96 * 2**30, "nvidia.com/gpu": 4, "pods": 360}
    assert len(kube.requests("get", "/api/v1/nodes")) == 1  # one listing for both


def test_nodes_that_cannot_be_read_are_not_asked_for_again_within_the_period(kube):
    """Every submit asks for the nodes: a cluster that is away must not make each wait."""
    kube.add_node("n1", {"cpu": "16"})
    kube.answer_next("get", "/api/v1/nodes", 503)
    backend = backend_for(kube, attempts=1)

    assert backend.nodes() is None
    assert backend.nodes() is None
    assert len(kube.requests("get", "/api/v1/nodes")) == 1
    assert backend_for(kube, allocatable_seconds=0).nodes() == [
        ClusterNode("n1", {"cpu": 16_000, "pods": 110})
    ]


# -- reading names and messages (pure) -------------------------------------------------


@pytest.mark.parametrize(
    ("involved", "job_id"),
    [
        ("train-7-master-0", 7),
        ("train-7-2-worker-1", 2),  # the longest object name wins
        ("train-7", 7),  # a Kubeflow pod group is named after its job
        ("ray-rayjob-video-7-x7k2p-pg", 70),  # KubeRay's pod group for Volcano
        ("train-70-master-0", None),
        ("other-1-head-0", None),
    ],
)
def test_events_are_matched_to_jobs_by_the_names_operators_give(involved, job_id):
    index = kinds.ObjectIndex(
        [("ns", "train-7", 7), ("ns", "train-7-2", 2), ("ns", "rayjob-video-7", 70)]
    )

    assert index.job_of("ns", involved) == job_id
    assert index.job_of("elsewhere", involved) is None


def test_the_cycle_is_read_from_the_message():
    assert kinds.cycle_of("p in gang failed to be scheduled in cycle 12: 0/4 nodes") == 12
    assert kinds.cycle_of("0/4 nodes are available: 4 Insufficient cpu.") is None


# -- what a real API server answers (the emulator answers the same) ----------------------


def test_a_job_back_in_its_queue_loses_its_dequeue_time_on_the_object(kube, backend):
    backend.apply([ray_spec(suspend=False, dequeued_at=DEQUEUED)], now=NOW)

    backend.apply([ray_spec(suspend=True, dequeued_at=None)], now=NOW)  # a start timeout

    stored = kube.get("kuberay", "video", "rayjob-video-7")
    assert stored["spec"]["suspend"] is True
    assert ANNOTATION_DEQUEUED not in stored["metadata"]["annotations"]
    assert stored["metadata"]["annotations"][ANNOTATION_ENQUEUED]


def test_a_scheduler_event_repeated_as_a_series_keeps_its_key_with_its_count_and_times(
    kube, backend
):
    backend.apply([ray_spec()], now=NOW)
    warning = dict(
        reason="FailedScheduling",
        message="0/4 nodes are available: 4 Insufficient cpu.",
        involved=("Pod", "rayjob-video-7-head-0"),
        uid="s1",
        first="2026-11-23T10:00:00.000000Z",
    )
    kube.warn_series("video", "e1", count=1, last="", **warning)
    first = backend.observe(now=NOW, namespaces=WHERE).events
    kube.warn_series("video", "e1", count=5, last="2026-11-23T10:04:00.000000Z", **warning)
    repeated = backend.observe(now=NOW, namespaces=WHERE).events

    assert [(e.uid, e.count, e.at, e.first_at) for e in first] == [("k8s/s1", 1, NOW, None)]
    assert [(e.uid, e.count, e.at, e.first_at) for e in repeated] == [
        ("k8s/s1", 5, NOW + timedelta(minutes=4), NOW)
    ]


def test_a_runtime_whose_crd_is_missing_is_named_in_plain_words(kube, backend):
    kube.without_crd("kubeflow")

    with pytest.raises(ClusterUnavailable) as unavailable:
        backend.observe(now=NOW, namespaces=WHERE)

    assert str(unavailable.value) == (
        "list pytorchjobs: the PyTorchJob CRD is not installed (404 page not found)"
    )


def test_the_emulator_refuses_a_named_access_review_as_a_real_server_does(kube):
    kube.authorize()
    review = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SelfSubjectAccessReview",
        "metadata": {"name": "check.list.rayjobs.ray.io"},
        "spec": {"resourceAttributes": {"group": "ray.io", "resource": "rayjobs", "verb": "list"}},
    }

    with pytest.raises(ApiException) as refused:
        client.AuthorizationV1Api(kube.api).create_self_subject_access_review(review)

    assert refused.value.status == 422
    assert "metadata: Invalid value" in refused.value.body and "must be empty" in refused.value.body


def test_a_create_in_a_namespace_being_deleted_is_refused_with_the_servers_words(kube, backend):
    kube.terminating("video")

    refused = backend.apply([ray_spec(script="")], now=NOW)

    # The namespace's trouble, not the job's: it waits while the namespace may come back.
    assert list(refused) == [7] and refused[7].retry and refused[7].namespace == "video"
    assert refused[7].reason.endswith(
        '(403: rayjobs.ray.io "rayjob-video-7" is forbidden: unable to create new content in '
        "namespace video because it is being terminated)"
    )
    assert kube.objects("kuberay") == []


def test_a_full_resource_quota_refuses_for_now_and_stores_nothing(kube, backend):
    kube.resource_quota("video", "rayjob-count", "kuberay", limit=1)
    assert backend.apply([ray_spec(script="")], now=NOW) == {}

    refused = backend.apply([ray_spec(id=8, object_name="rayjob-video-8", script="")], now=NOW)

    assert list(refused) == [8] and refused[8].retry
    assert (
        "exceeded quota: rayjob-count, requested: count/rayjobs.ray.io=1, "
        "used: count/rayjobs.ray.io=1, limited: count/rayjobs.ray.io=1" in refused[8].reason
    )
    assert [o["metadata"]["name"] for o in kube.objects("kuberay")] == ["rayjob-video-7"]


def test_a_403_from_the_authorizer_everywhere_makes_the_cluster_unavailable(kube, backend):
    # The create, the namespace's read, then the access review of Caldera's cluster role.
    kube.server.restart(unready=0, refusing=3)

    with pytest.raises(ClusterUnavailable, match=(
        r'rayjobs.ray.io is forbidden: User "system:serviceaccount:caldera-system:caldera" '
        r'cannot create resource "rayjobs" in API group "ray.io" in the namespace "video"'
    )):  # fmt: skip
        backend.apply([ray_spec(script="")], now=NOW)
    assert kube.objects("kuberay") == []  # a refused create stores nothing


def test_the_emulator_applies_as_a_real_server_does_with_field_managers(kube):
    queues = ("scheduling.volcano.sh", "v1beta1", "queues")
    kube.server.resources["scheduling.volcano.sh/v1beta1/queues"] = {}
    spec = {"capability": {"cpu": "4", "nvidia.com/gpu": "1"}}
    body = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue"}
    kube.custom.create_cluster_custom_object(
        *queues, {**body, "metadata": {"name": "q"}, "spec": spec}
    )

    def apply(capability, **options):
        return kube.custom.patch_cluster_custom_object(
            *queues, "q", {**body, "metadata": {"name": "q"}, "spec": {"capability": capability}},
            field_manager="caldera", _content_type="application/apply-patch+yaml", **options,
        )  # fmt: skip

    with pytest.raises(ApiException) as conflict:
        apply({"cpu": "8"})
    assert conflict.value.status == 409
    assert 'conflict with "OpenAPI-Generator"' in json.loads(conflict.value.body)["message"]
    apply({"cpu": "8"}, force=True)
    # The create's manager still owns the GPU key: caldera's apply does not remove it.
    assert apply({"cpu": "8"}, force=True)["spec"]["capability"] == {
        "cpu": "8",
        "nvidia.com/gpu": "1",
    }
    kube.custom.delete_cluster_custom_object(*queues, "q")
    apply({"cpu": "8", "memory": "1Gi"})
    # What caldera applied and no longer applies is removed.
    assert apply({"cpu": "8"})["spec"]["capability"] == {"cpu": "8"}


# -- the quota tree ----------------------------------------------------------------------

QUEUES = ("scheduling.volcano.sh", "v1beta1", "queues")


def volcano_queue(name: str, cpu: str) -> dict:
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": name, "labels": {LABEL_MANAGED_BY: MANAGER}},
        "spec": {"capability": {"cpu": cpu}, "reclaimable": True},
    }


def test_one_pass_publishes_a_tree_of_new_leaves_and_removes_the_stale_queues(kube, backend):
    kube.server.resources["scheduling.sigs.k8s.io/v1beta1/elasticquotatrees"] = {}
    kube.server.resources["scheduling.volcano.sh/v1beta1/queues"] = {}
    kube.custom.create_cluster_custom_object(*QUEUES, volcano_queue("root-gone", "1"))
    tree = {
        "apiVersion": "scheduling.sigs.k8s.io/v1beta1",
        "kind": "ElasticQuotaTree",
        "metadata": {"name": "elasticquotatree", "namespace": "kube-system"},
        "spec": {"root": {"name": "root", "max": {"cpu": "10"}, "min": {"cpu": "10"}}},
    }
    leaves = [f"root-leaf-{n}" for n in range(5)]

    backend.publish_quota(tree=tree, queues=[volcano_queue(name, "2") for name in leaves])

    stored = kube.custom.get_namespaced_custom_object(
        "scheduling.sigs.k8s.io", "v1beta1", "kube-system", "elasticquotatrees", "elasticquotatree"
    )
    assert stored["spec"] == tree["spec"]
    queues = {q["metadata"]["name"]: q["spec"] for q in kube.custom.list_cluster_custom_object(
        *QUEUES)["items"]}  # fmt: skip
    assert sorted(queues) == leaves  # root-gone, no leaf of the tree, deleted
    assert all(spec["capability"] == {"cpu": "2"} for spec in queues.values())


def test_the_emulator_answers_an_apply_that_creates_with_201_as_a_real_server_does(kube):
    kube.server.resources["scheduling.volcano.sh/v1beta1/queues"] = {}

    def apply() -> int:
        answer = kube.custom.patch_cluster_custom_object(
            *QUEUES, "q", volcano_queue("q", "1"),
            field_manager="caldera", _content_type=APPLY_PATCH, _preload_content=False,
        )  # fmt: skip
        return answer.status

    assert [apply(), apply()] == [201, 200]  # created, then applied over what is there


# -- the watch -------------------------------------------------------------------------


def informer_in_step(backend, kube) -> int:
    """Wait for video's RayJob informer to be in step; how many listings it took."""

    wait_for(lambda: backend._informers[("kuberay", "video")].items() is not None)
    return len(
        [r for r in kube.requests("get", "/namespaces/video/rayjobs") if "watch" not in r.params]
    )


def test_a_watch_keeps_the_objects_in_step_and_a_410_gone_lists_again(kube):

    backend = backend_for(kube, watch=True)
    try:
        backend.apply([ray_spec()], now=NOW)
        backend.observe(now=NOW, namespaces=WHERE)
        listed = informer_in_step(backend, kube)

        kube.set_status("kuberay", "video", "rayjob-video-7", {"jobDeploymentStatus": "Running"})
        wait_for(lambda: backend.observe(now=NOW, namespaces=WHERE).statuses[0].phase == "Running")
        assert informer_in_step(backend, kube) == listed  # seen through the watch

        streams = kube.watch_streams("kuberay")
        kube.expire_watches("kuberay", "video")
        wait_for(lambda: informer_in_step(backend, kube) == listed + 1)  # listed again
        # The emulator's watch starts at its opening (kmock ignores resourceVersion; a real
        # server would replay what changed since the listing): delete once it streams.
        wait_for(lambda: kube.watch_streams("kuberay") - streams)
        backend.remove([ObjectRef("rayjob-video-7", "video", "kuberay")], now=NOW)
        wait_for(lambda: backend.observe(now=NOW, namespaces=WHERE).statuses == [])
    finally:
        backend.close()


def test_a_sync_after_the_backend_closed_lists_and_starts_no_watch_again(kube):
    """A task still in flight while the process stops (a test's worker, a pod shutting
    down) must not start watches that nobody will stop."""
    backend = backend_for(kube, watch=True)
    backend.apply([ray_spec()], now=NOW)
    backend.observe(now=NOW, namespaces=WHERE)
    assert backend._informers
    backend.close()

    observed = backend.observe(now=NOW, namespaces=WHERE)

    assert [s.object_name for s in observed.statuses] == ["rayjob-video-7"]
    assert backend._informers == {}
    wait_for(lambda: not [t for t in threading.enumerate() if t.name.startswith("watch ")])


def test_while_its_watch_is_not_in_step_a_namespace_is_listed(kube):
    backend = backend_for(kube, watch=True)
    try:
        backend.apply([ray_spec()], now=NOW)
        kube.answer_next("get", RAYJOBS, 500, times=100)  # the informer cannot list
        with pytest.raises(ClusterUnavailable):
            backend.observe(now=NOW, namespaces=WHERE)  # nor can the sync: not "empty"
        assert backend._informers[("kuberay", "video")].items() is None
    finally:
        backend.close()


def watches(kube) -> list:
    """The watch requests of video's RayJobs, in the order they came."""
    return [r for r in kube.requests("get", "/namespaces/video/rayjobs") if "watch" in r.params]


def test_a_watch_asks_the_server_to_end_it_before_the_client_would_give_up_on_it(kube):
    backend = backend_for(kube, watch=True)
    try:
        backend.observe(now=NOW, namespaces=WHERE)
        informer_in_step(backend, kube)
        first = wait_for(lambda: watches(kube))[0]

        # A watch of objects nobody writes gets no bookmarks while etcd's progress
        # notifications are at their default: the server's clean end must come first.
        assert int(first.params["timeoutSeconds"]) < backend.settings.watch_silent_seconds
    finally:
        backend.close()


def test_a_quiet_watch_the_server_ends_is_resumed_from_its_version_without_listing(kube):
    backend = backend_for(kube, watch=True, watch_seconds=1)
    try:
        backend.apply([ray_spec()], now=NOW)
        backend.observe(now=NOW, namespaces=WHERE)
        listed = informer_in_step(backend, kube)
        first = wait_for(lambda: watches(kube))[0]

        resumed = wait_for(lambda: watches(kube)[1:])  # the server ended the first
        assert resumed[0].params["resourceVersion"] == first.params["resourceVersion"]
        streams = kube.watch_streams("kuberay")
        wait_for(lambda: kube.watch_streams("kuberay") - streams)
        kube.set_status("kuberay", "video", "rayjob-video-7", {"jobDeploymentStatus": "Running"})
        wait_for(lambda: backend.observe(now=NOW, namespaces=WHERE).statuses[0].phase == "Running")
        assert informer_in_step(backend, kube) == listed  # resumed, never listed again
    finally:
        backend.close()


def test_a_quiet_watch_whose_read_times_out_is_resumed_and_a_410_still_lists_again(kube):
    # The server would end the watch after a minute; the client gives up on it first.
    backend = backend_for(kube, watch=True, watch_seconds=60, watch_silent_seconds=1.0)
    try:
        backend.apply([ray_spec()], now=NOW)
        backend.observe(now=NOW, namespaces=WHERE)
        listed = informer_in_step(backend, kube)
        first = wait_for(lambda: watches(kube))[0]

        resumed = wait_for(lambda: watches(kube)[1:])  # its read timed out
        assert resumed[0].params["resourceVersion"] == first.params["resourceVersion"]
        streams = kube.watch_streams("kuberay")
        wait_for(lambda: kube.watch_streams("kuberay") - streams)
        kube.set_status("kuberay", "video", "rayjob-video-7", {"jobDeploymentStatus": "Running"})
        wait_for(lambda: backend.observe(now=NOW, namespaces=WHERE).statuses[0].phase == "Running")
        assert informer_in_step(backend, kube) == listed  # resumed, never listed again

        def expired() -> bool:
            # Whichever watch is open then gets the 410 (one resuming gets none: again).
            kube.expire_watches("kuberay", "video")
            return informer_in_step(backend, kube) > listed

        wait_for(expired)  # listed again
    finally:
        backend.close()


def test_a_watch_asks_for_a_sync_when_an_object_starts_finishes_or_goes(kube):
    """What the sync would move a job for (it runs, it ended, its object went) calls
    ``on_change``, from the watch's thread; a change that moves nothing does not."""
    backend = backend_for(kube, watch=True)
    changes: list[float] = []
    try:
        backend.apply([ray_spec()], now=NOW)
        backend.observe(now=NOW, namespaces=WHERE, on_change=lambda: changes.append(1))
        informer_in_step(backend, kube)
        wait_for(lambda: kube.watch_streams("kuberay"))
        assert changes == []  # created, not yet running

        name = ("kuberay", "video", "rayjob-video-7")
        kube.set_status(*name, {"jobDeploymentStatus": "Running"})
        wait_for(lambda: len(changes) == 1)
        kube.set_status(*name, {"jobDeploymentStatus": "Running", "message": "still"})
        done = {"jobDeploymentStatus": "Complete", "jobStatus": "SUCCEEDED"}
        kube.set_status(*name, done)
        wait_for(lambda: len(changes) == 2)  # the message alone moved nothing
        backend.remove([ObjectRef("rayjob-video-7", "video", "kuberay")], now=NOW)
        wait_for(lambda: len(changes) == 3)
    finally:
        backend.close()


def test_a_watch_refused_while_the_authorizer_warms_up_concludes_nothing(kube, caplog, monkeypatch):
    """For a few seconds after an API server's restart its authorizer refuses everything:
    an informer that lists again then says what the server said, names no missing Role,
    asks nothing more of the server, and is in step again once it answers."""
    # Heard whatever an earlier test did to the loggers (a dictConfig disables those it
    # does not name).
    monkeypatch.setattr(logging.getLogger("jobs.cluster.watch"), "disabled", False)
    caplog.set_level(logging.WARNING, logger="jobs.cluster.watch")
    backend = backend_for(kube, watch=True)
    try:
        backend.apply([ray_spec()], now=NOW)
        backend.observe(now=NOW, namespaces=WHERE)
        listed = informer_in_step(backend, kube)
        asked = len(kube.requests("get", "/api/v1/namespaces/video"))
        reviews = len(kube.requests("post", "selfsubjectaccessreviews"))

        # Both namespaces' watches stream (an event sent before would reach neither).
        wait_for(lambda: len(kube.watch_streams("kuberay")) == len(WHERE))
        kube.server.restart(unready=0, refusing=10**6)  # its authorizer refuses everything
        kube.expire_watches("kuberay", "video")

        thread = backend._informers[("kuberay", "video")]._thread.ident

        def warned() -> list[str]:  # by this informer (not another test's, were one left)
            return [
                r.getMessage()
                for r in caplog.records
                if r.levelname == "WARNING" and r.thread == thread
            ]

        refused = lambda: len(kube.requests("get", "/namespaces/video/rayjobs"))  # noqa: E731
        before = refused()
        wait_for(lambda: refused() >= before + 2, timeout=20)  # two listings refused
        kube.server.restart(unready=0, refusing=0)  # its caches filled
        wait_for(lambda: informer_in_step(backend, kube) > listed, timeout=20)
        assert warned() and all("is forbidden: User" in line for line in warned())
        assert not any("no Role" in line for line in warned())
        assert len(kube.requests("get", "/api/v1/namespaces/video")) == asked
        assert len(kube.requests("post", "selfsubjectaccessreviews")) == reviews
    finally:
        backend.close()


def test_a_watch_answered_429_says_so_in_one_line_and_lists_again(kube, caplog, monkeypatch):
    """A real server's 429 was logged with the client's dump of its headers and body, over
    many lines: the log says what the server said, in one."""
    monkeypatch.setattr(logging.getLogger("jobs.cluster.watch"), "disabled", False)
    caplog.set_level(logging.WARNING, logger="jobs.cluster.watch")
    busy = "Too many requests, please try again later."
    answered = []

    def throttle(request):
        if "watch" in request.params and len(answered) < 2:
            answered.append(request)
            return status(429, "TooManyRequests", busy)
        return None

    kube.server.deny(throttle)
    backend = backend_for(kube, watch=True)
    try:
        backend.apply([ray_spec()], now=NOW)
        backend.observe(now=NOW, namespaces=("video",))
        wait_for(lambda: len(answered) == 2, timeout=20)
        wait_for(lambda: kube.watch_streams("kuberay"), timeout=20)  # then it watches
    finally:
        backend.close()
    said = [r.getMessage() for r in caplog.records if "HTTP 429" in r.getMessage()]
    assert said and all(busy in line and "\n" not in line for line in said)
    assert not [r for r in caplog.records if "HTTP response headers" in r.getMessage()]
