"""Generated objects validate against the operators' CRD schemas and follow the seed."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest

from jobs.cluster.manifests import build_manifests
from jobs.cluster.manifests.common import kube_queue_timestamp, object_name
from jobs.cluster.spec import JobSpec, PodGroup

from ..support import k8s_schema
from ..support.specs import ENQUEUED, pytorch_spec, ray_spec

DEQUEUED = datetime(2025, 1, 10, 1, 36, 24, 641181, tzinfo=UTC)


def large_ray_spec() -> JobSpec:
    groups = tuple(
        PodGroup(f"group-{i}", 50, {"cpu": "16", "memory": "64Gi", "metax-tech.com/gpu": "8"})
        for i in range(4)
    )
    return ray_spec(workers=groups, priority_class="high", script="", suspend=True)


def autoscaling_ray_spec() -> JobSpec:
    return ray_spec(
        workers=(
            PodGroup("small-group", 2, {"cpu": "4", "memory": "4G"}, max_replicas=6),
            PodGroup("fixed-group", 1, {"cpu": "8", "memory": "8G"}),
        )
    )


SPECS = {
    "small ray": ray_spec(),
    "autoscaling ray": autoscaling_ray_spec(),
    "large ray": large_ray_spec(),
    "ray without script": ray_spec(script=""),
    "small pytorch": pytorch_spec(),
    "large pytorch": pytorch_spec(
        workers=(PodGroup("worker", 127, {"cpu": "32", "metax-tech.com/gpu": "8"}),),
        priority_class="high",
        script="print('hi')",
        suspend=True,
    ),
    "pytorch master only": pytorch_spec(workers=()),
    "small ray on volcano": ray_spec(runtime="volcano"),
    "large ray on volcano": ray_spec(
        runtime="volcano",
        workers=(PodGroup("worker", 200, {"cpu": "16", "metax-tech.com/gpu": "8"}),),
        priority_class="high",
        script="",
    ),
    "small pytorch on volcano": pytorch_spec(runtime="volcano"),
    "large pytorch on volcano": pytorch_spec(
        runtime="volcano",
        workers=(PodGroup("worker", 127, {"cpu": "32", "nvidia.com/gpu": "8"}),),
        priority_class="high",
        script="print('hi')",
    ),
}


@pytest.mark.parametrize("spec", SPECS.values(), ids=SPECS.keys())
def test_every_generated_job_object_validates_against_its_crd(spec):
    job_object = build_manifests(spec)[-1]
    assert k8s_schema.errors(job_object) == []


@pytest.mark.parametrize(
    ("api_version", "kind"),
    [
        ("ray.io/v1", "RayJob"),
        ("kubeflow.org/v1", "PyTorchJob"),
        ("batch.volcano.sh/v1alpha1", "Job"),
    ],
)
def test_the_operators_samples_validate_with_the_same_checker(api_version, kind):
    found = k8s_schema.samples(api_version, kind)
    assert found
    for name, obj in found:
        assert k8s_schema.errors(obj) == [], name


def test_the_checker_rejects_an_undeclared_field_and_a_wrong_type():
    rayjob = build_manifests(ray_spec())[-1]
    rayjob["spec"]["shutdownAfterJobFinish"] = True
    rayjob["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["replicas"] = "two"
    found = k8s_schema.errors(rayjob)
    assert any("shutdownAfterJobFinish" in error for error in found)
    assert any("workerGroupSpecs[0].replicas" in error for error in found)


def test_the_rayjob_follows_the_seed():
    configmap, rayjob = build_manifests(ray_spec(dequeued_at=DEQUEUED, priority_class="high"))
    assert configmap["kind"] == "ConfigMap"
    assert configmap["metadata"]["name"] == "rayjob-video-7-script"
    assert configmap["data"] == {"sample_code.py": "import ray\nray.init()\n"}

    assert rayjob["metadata"]["name"] == "rayjob-video-7"
    assert rayjob["metadata"]["namespace"] == "video"
    assert rayjob["metadata"]["labels"]["ray.io/priority-class-name"] == "high"
    assert rayjob["metadata"]["annotations"] == {
        "caldera.io/queue-path": "root/algorithm/video",
        "kube-queue/job-enqueue-timestamp": "2025-01-10 01:36:24.298639 +0000 UTC",
        "kube-queue/job-dequeue-timestamp": "2025-01-10 01:36:24.641181 +0000 UTC",
    }
    spec = rayjob["spec"]
    assert spec["entrypoint"] == "python /home/ray/samples/sample_code.py"
    assert spec["shutdownAfterJobFinishes"] is True
    head = spec["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]
    container = head["containers"][0]
    assert [p["containerPort"] for p in container["ports"]] == [6379, 8265, 10001]
    assert container["resources"]["requests"] == {"cpu": "4", "memory": "4G"}
    assert container["volumeMounts"] == [{"mountPath": "/home/ray/samples", "name": "script"}]
    assert head["volumes"][0]["configMap"]["name"] == "rayjob-video-7-script"
    (workers,) = spec["rayClusterSpec"]["workerGroupSpecs"]
    assert (workers["groupName"], workers["replicas"]) == ("small-group", 2)


def test_the_pytorchjob_gangs_every_pod_in_its_queue():
    (pytorchjob,) = build_manifests(pytorch_spec(suspend=True))
    spec = pytorchjob["spec"]
    assert spec["runPolicy"] == {
        "suspend": True,
        "schedulingPolicy": {"queue": "root-algorithm-text", "minAvailable": 4},
    }
    master = spec["pytorchReplicaSpecs"]["Master"]
    worker = spec["pytorchReplicaSpecs"]["Worker"]
    assert (master["replicas"], worker["replicas"]) == (1, 3)
    container = worker["template"]["spec"]["containers"][0]
    assert container["name"] == "pytorch"
    assert container["command"] == ["torchrun", "train.py"]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == "1"


def test_every_object_carries_the_job_queue_and_department_labels():
    for spec in SPECS.values():
        for obj in build_manifests(spec):
            labels = obj["metadata"]["labels"]
            assert labels["caldera.io/job-id"] == str(spec.id)
            assert labels["caldera.io/queue"] == spec.queue_name
            assert labels["caldera.io/department"] == "algorithm"
            assert "kube-queue/job-enqueue-timestamp" in obj["metadata"]["annotations"]


@pytest.mark.parametrize(
    ("name", "job_id", "expected"),
    [
        ("rayjob-video", 12, "rayjob-video-12"),
        ("My_Job  v2!", 3, "my-job-v2-3"),
        ("---", 5, "job-5"),
        ("2024 sweep", 3, "job-2024-sweep-3"),
        ("x" * 80, 123456, "x" * 40 + "-123456"),
    ],
)
def test_object_names_are_dns_1035_labels_derived_from_name_and_id(name, job_id, expected):
    result = object_name(name, job_id)
    assert result == expected
    # KubeRay refuses a RayJob name over 47 characters or not a DNS-1035 label.
    assert len(result) <= 47 and re.fullmatch(r"[a-z]([-a-z0-9]*[a-z0-9])?", result)


def test_the_kube_queue_timestamp_format():
    assert kube_queue_timestamp(ENQUEUED) == "2025-01-10 01:36:24.298639 +0000 UTC"


def test_a_ray_job_on_volcano_uses_the_ray_and_svc_plugins_as_one_gang():
    configmap, job = build_manifests(ray_spec(runtime="volcano", priority_class="high"))

    assert (job["apiVersion"], job["kind"]) == ("batch.volcano.sh/v1alpha1", "Job")
    assert job["metadata"]["labels"]["volcano.sh/queue-name"] == "root-algorithm-video"
    spec = job["spec"]
    assert spec["plugins"] == {"ray": [], "svc": []}
    assert spec["queue"] == "root-algorithm-video" and spec["schedulerName"] == "volcano"
    assert spec["minAvailable"] == 3  # the head and both workers, all or none
    assert spec["policies"] == [{"event": "PodEvicted", "action": "RestartJob"}]
    assert spec["maxRetry"] == 3 and spec["priorityClassName"] == "high"
    head, worker = spec["tasks"]
    assert (head["name"], head["replicas"], worker["name"], worker["replicas"]) == (
        "head", 1, "worker", 2,
    )  # fmt: skip
    container = head["template"]["spec"]["containers"][0]
    assert container["command"] == ["/bin/sh", "-c", "python /home/ray/samples/sample_code.py"]
    assert container["volumeMounts"] == [{"mountPath": "/home/ray/samples", "name": "script"}]
    assert (
        head["template"]["spec"]["volumes"][0]["configMap"]["name"] == configmap["metadata"]["name"]
    )


def test_a_pytorch_job_on_volcano_uses_the_pytorch_plugin_and_completes_with_its_master():
    (job,) = build_manifests(pytorch_spec(runtime="volcano"))

    spec = job["spec"]
    assert spec["plugins"] == {
        "pytorch": ["--master=master", "--worker=worker", "--port=23456"],
        "svc": [],
    }
    assert spec["minAvailable"] == 4
    master, worker = spec["tasks"]
    assert master["policies"] == [{"event": "TaskCompleted", "action": "CompleteJob"}]
    assert (master["replicas"], worker["replicas"]) == (1, 3)
    assert worker["template"]["spec"]["containers"][0]["command"] == ["torchrun", "train.py"]
    limits = worker["template"]["spec"]["containers"][0]["resources"]["limits"]
    assert limits["nvidia.com/gpu"] == "1"


def test_volcano_pods_are_named_after_their_tasks():
    names = [name for name, _ in ray_spec(runtime="volcano").pods]

    assert names == ["rayjob-video-7-head-0", "rayjob-video-7-worker-0", "rayjob-video-7-worker-1"]


def test_a_rayjob_names_its_volcano_queue_when_the_cluster_schedules_with_volcano():
    (_, plain), (_, on_volcano) = (
        build_manifests(ray_spec()),
        build_manifests(ray_spec(batch_scheduler="volcano")),
    )

    assert "volcano.sh/queue-name" not in plain["metadata"]["labels"]
    assert on_volcano["metadata"]["labels"]["volcano.sh/queue-name"] == "root-algorithm-video"
    assert k8s_schema.errors(on_volcano) == []


def test_a_ray_worker_group_that_autoscales_runs_between_replicas_and_max_replicas_pods():
    _, rayjob = build_manifests(autoscaling_ray_spec())
    _, fixed = build_manifests(ray_spec())

    cluster = rayjob["spec"]["rayClusterSpec"]
    assert cluster["enableInTreeAutoscaling"] is True  # with KubeRay's autoscaler on
    scaling, steady = cluster["workerGroupSpecs"]
    assert (scaling["replicas"], scaling["minReplicas"], scaling["maxReplicas"]) == (2, 2, 6)
    assert (steady["replicas"], steady["minReplicas"], steady["maxReplicas"]) == (1, 1, 1)
    assert "enableInTreeAutoscaling" not in fixed["spec"]["rayClusterSpec"]
    (group,) = fixed["spec"]["rayClusterSpec"]["workerGroupSpecs"]
    assert (group["replicas"], group["minReplicas"], group["maxReplicas"]) == (2, 2, 2)


def test_a_max_replicas_equal_to_replicas_does_not_turn_the_autoscaler_on():
    spec = ray_spec(workers=(PodGroup("small-group", 2, {"cpu": "4"}, max_replicas=2),))

    _, rayjob = build_manifests(spec)

    assert "enableInTreeAutoscaling" not in rayjob["spec"]["rayClusterSpec"]
    (group,) = rayjob["spec"]["rayClusterSpec"]["workerGroupSpecs"]
    assert (group["minReplicas"], group["maxReplicas"]) == (2, 2)


def test_the_pods_of_an_autoscaling_group_are_the_ones_it_starts_with():
    pods = autoscaling_ray_spec().pods
    names = [name for name, _ in pods]

    assert names == [
        "rayjob-video-7-head-0",
        "rayjob-video-7-small-group-worker-0",
        "rayjob-video-7-small-group-worker-1",
        "rayjob-video-7-fixed-group-worker-0",
    ]
    # The head pod carries KubeRay's autoscaler container: 4 cpu / 4G + 500m / 512Mi.
    assert pods[0][1] == {"cpu": "4500m", "memory": "4430538Ki"}  # 4,536,870,912 bytes
    assert ray_spec().pods[0][1] == {"cpu": "4", "memory": "4G"}  # no autoscaler
