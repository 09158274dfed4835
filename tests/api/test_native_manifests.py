"""Kubernetes objects a team already has, submitted as they are: a KubeRay RayJob, a Kubeflow
PyTorchJob, a Volcano Job with the ray or the pytorch plugin (alone, or in a List with its
script's ConfigMap), as JSON or YAML. Each either becomes the job it describes, whose own
objects keep every part taken and validate against the CRDs, or is refused with the paths
Caldera cannot represent; nothing is stored half-way."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import yaml

from jobs.document.schema import job_document
from jobs.models import Job

from ..support import k8s_schema
from ..support.jobs import PYTORCH_JOB, RAY_JOB

pytestmark = pytest.mark.django_db
JOBS = "/api/v1/jobs/"
MANIFESTS = Path(__file__).parent.parent / "support" / "manifests"

SCRIPT = "import ray\nray.init()\nprint('done')\n"
DOCUMENTS = {
    "ray-kuberay": {
        **RAY_JOB,
        "script": SCRIPT,
        "script_filename": "sample_code.py",
        "pip": ["requests==2.26.0"],
        "env": {"counter_name": "test_counter"},
    },
    "ray-kuberay-autoscaling": {
        **RAY_JOB,
        "workers": [{**RAY_JOB["workers"][0], "replicas": 1, "max_replicas": 3}],
    },
    "ray-volcano": {
        **RAY_JOB,
        "runtime": "volcano",
        "env": {"MODE": "fast"},
        "script": SCRIPT,
        "workers": [{**RAY_JOB["workers"][0], "name": "worker"}],  # the plugin's task
    },
    "pytorch-kubeflow": {**PYTORCH_JOB, "env": {"NCCL_DEBUG": "INFO"}},
    "pytorch-volcano": {**PYTORCH_JOB, "runtime": "volcano", "script": SCRIPT},
}


def objects_of(api, user, job_id: int) -> dict:
    """GET .../manifest/ as one body: the object, or a List of the script's ConfigMap and it."""
    objects = api(user).get(f"{JOBS}{job_id}/manifest/").json()
    if len(objects) == 1:
        return objects[0]
    return {"apiVersion": "v1", "kind": "List", "items": objects}


def same_job(first: Job, second: Job) -> None:
    """Every field of the document but the name (an object's name is the job's name and
    id) and the run time, which no Kubernetes object carries unless its annotation does."""
    ours = {k: v for k, v in job_document(first).items() if k not in ("name", "run_seconds")}
    theirs = {k: v for k, v in job_document(second).items() if k not in ("name", "run_seconds")}
    assert theirs == ours


@pytest.mark.parametrize("case", DOCUMENTS)
def test_caldera_s_own_objects_come_back_as_the_same_job(api, member, case):
    original = api(member).post(JOBS, DOCUMENTS[case], format="json")
    assert original.status_code == 201, original.json()
    sent = objects_of(api, member, original.json()["id"])

    copied = api(member).post(JOBS, sent, format="json")

    assert copied.status_code == 201, copied.json()
    first, second = (
        Job.objects.get(pk=original.json()["id"]),
        Job.objects.get(pk=copied.json()["id"]),
    )
    same_job(first, second)
    assert second.name == first.name + f"-{first.pk}"  # the object's name
    (job_object,) = [
        obj
        for obj in api(member).get(f"{JOBS}{second.pk}/manifest/").json()
        if obj["kind"] != "ConfigMap"  # a core object: the API server's own schema
    ]
    assert k8s_schema.errors(job_object) == []


def test_a_yaml_body_is_read_as_its_json_would_be(api, member):
    original = api(member).post(JOBS, DOCUMENTS["pytorch-kubeflow"], format="json").json()
    text = yaml.safe_dump(objects_of(api, member, original["id"]))

    copied = api(member).generic("POST", JOBS, text.encode(), content_type="application/yaml")

    assert copied.status_code == 201, copied.json()
    same_job(Job.objects.get(pk=original["id"]), Job.objects.get(pk=copied.json()["id"]))


def seed_rayjob() -> dict:
    """Seed 003's RayJob with its script's ConfigMap, as one List."""
    config_map, rayjob = yaml.safe_load_all((MANIFESTS / "seed-003-rayjob.yaml").read_text())
    return {"apiVersion": "v1", "kind": "List", "items": [config_map, rayjob]}


def test_the_seed_s_rayjob_is_refused_for_what_caldera_cannot_keep_and_nothing_else(api, member):
    response = api(member).post(JOBS, seed_rayjob(), format="json")

    assert response.status_code == 400
    assert response.json() == {
        "items[1].metadata.labels.job-type": [
            "not supported: Caldera labels the job's objects itself (caldera.io/*)"
        ],
        "items[1].spec.rayClusterSpec.headGroupSpec.rayStartParams": [
            "Caldera writes {} or {'dashboard-host': '0.0.0.0'} here; leave it out"
        ],
    }
    assert not Job.objects.exists()


def test_without_those_the_seed_s_rayjob_runs_with_its_script_from_its_namespace_s_leaf(
    api, member
):
    body = seed_rayjob()
    rayjob = body["items"][1]
    del rayjob["metadata"]["labels"]
    del rayjob["spec"]["rayClusterSpec"]["headGroupSpec"]["rayStartParams"]["num-cpus"]

    response = api(member).post(JOBS, body, format="json")

    assert response.status_code == 201, response.json()
    job = Job.objects.get()
    assert (job.name, job.queue.node.path, job.namespace) == (
        "rayjob-video", "root/algorithm/video", "video"
    )  # fmt: skip
    assert (job.script_filename, job.script) == (
        "sample_code.py", body["items"][0]["data"]["sample_code.py"]
    )  # fmt: skip
    assert job.pip == ["requests==2.26.0", "pendulum==2.1.2"]
    assert job.env == {"counter_name": "test_counter"}
    assert job.entrypoint == "python /home/ray/samples/sample_code.py"
    assert job.request["cpu"] == 12_000 and job.workers[0]["replicas"] == 2


# Every sample manifest of a job and every seed's that is YAML: the paths each is refused for.
REFUSED = {
    "kubeflow-pytorch-mnist-nccl.yaml": {
        "spec.pytorchReplicaSpecs.Master.template.spec.containers[0].args",
        "spec.pytorchReplicaSpecs.Worker.template.spec.containers[0].args",
    },
    "kubeflow-pytorch-simple.yaml": {
        "spec.pytorchReplicaSpecs.Master.template.spec.containers[0].imagePullPolicy",
        "spec.pytorchReplicaSpecs.Worker.template.spec.containers[0].imagePullPolicy",
    },
    "kuberay-ray-job.sample.yaml": {
        "spec.rayClusterSpec.rayVersion",
        "spec.rayClusterSpec.headGroupSpec.template.spec.containers[0].resources.limits.memory",
        "spec.rayClusterSpec.workerGroupSpecs[0].template.spec.containers[0].resources.limits.cpu",
    },
    "kuberay-ray-job.shutdown.yaml": {
        "spec.rayClusterSpec.rayVersion",
        "spec.rayClusterSpec.headGroupSpec.template.spec.containers[0].resources.limits.memory",
    },
    "kuberay-ray-job.volcano-scheduler-queue.yaml": {
        "spec.rayClusterSpec.rayVersion",
        "spec.rayClusterSpec.headGroupSpec.template.spec.containers[0].resources.limits.memory",
    },
    "volcano-job.yaml": {"spec.plugins"},
    "volcano-pytorch-plugin.yaml": {
        "spec.minAvailable",
        "spec.tasks[0].template.spec.containers[0].imagePullPolicy",
        "spec.tasks[1].template.spec.containers[0].imagePullPolicy",
        "spec.tasks[1].template.spec.containers[0].workingDir",
    },
    # No entrypoint (the plugin starts a bare cluster) and no resources to count.
    "volcano-ray-example.yaml": {
        "spec.tasks[0].template.spec.containers[0].command",
        "spec.tasks[0].template.spec.containers[0].resources",
        "spec.tasks[1].template.spec.containers[0].resources",
    },
    "volcano-ray-plugin.yaml": {
        "spec.tasks[0].template.spec.containers[0].command",
        "spec.tasks[0].template.spec.containers[0].resources",
        "spec.tasks[1].template.spec.containers[0].resources",
    },
    "seed-001-volcano-ray.yaml": {
        "spec.tasks[0].template.spec.containers[0].command",
        "spec.tasks[0].template.spec.containers[0].args",
        "spec.tasks[0].template.spec.containers[0].resources.limits.memory",
        "spec.tasks[0].template.spec.containers[0].resources.limits.cpu",
        "spec.tasks[1].template.spec.containers[0].command",
        "spec.tasks[1].template.spec.containers[0].args",
        "spec.tasks[1].template.spec.containers[0].env",
        "spec.tasks[1].template.spec.containers[0].resources.limits.memory",
        "spec.tasks[1].template.spec.containers[0].resources.limits.cpu",
    },
    "seed-001-pytorchjob.yaml": {
        "metadata.annotations['sidecar.istio.io/inject']",
        "spec.cleanPodPolicy",
        "spec.pytorchReplicaSpecs.Master.template.spec.containers[0].volumeMounts",
        "spec.pytorchReplicaSpecs.Master.template.spec.containers[0].ports",
        "spec.pytorchReplicaSpecs.Master.template.spec.containers[0].resources.limits.memory",
        "spec.pytorchReplicaSpecs.Master.template.spec.containers[0].resources.limits.cpu",
        "spec.pytorchReplicaSpecs.Worker.template.spec.volumes",
        "spec.pytorchReplicaSpecs.Worker.template.spec.containers[0].ports",
        "spec.pytorchReplicaSpecs.Worker.template.spec.containers[0].volumeMounts",
        "spec.pytorchReplicaSpecs.Worker.template.spec.containers[0].resources.limits.memory",
        "spec.pytorchReplicaSpecs.Worker.template.spec.containers[0].resources.limits.cpu",
    },
}


def job_objects(path: Path) -> list[dict]:
    return [
        obj
        for obj in yaml.safe_load_all(path.read_text())
        if obj and obj["kind"] in ("RayJob", "PyTorchJob", "Job")
    ]


def as_sent(path: Path) -> tuple[dict, str]:
    """The file's job as ``caldera submit`` sends it (in a List with its script's ConfigMap,
    when the file has one), and where the job is in it."""
    objects = [obj for obj in yaml.safe_load_all(path.read_text()) if obj]
    (job,) = job_objects(path)
    config_maps = [obj for obj in objects if obj["kind"] == "ConfigMap"]
    if not config_maps:
        return job, ""
    return {"apiVersion": "v1", "kind": "List", "items": [job, *config_maps]}, "items[0]."


def test_every_sample_and_seed_job_is_listed():
    files = {p.name for p in k8s_schema.SAMPLES.glob("*.yaml") if job_objects(p)}
    files |= {p.name for p in MANIFESTS.glob("seed-001-*.yaml")}
    assert files == set(REFUSED)


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_a_sample_is_refused_with_the_paths_caldera_cannot_represent(api, member, name):
    path = MANIFESTS / name if name.startswith("seed-") else k8s_schema.SAMPLES / name
    sent, at = as_sent(path)

    response = api(member).post(f"{JOBS}?queue=root/algorithm/video", sent, format="json")

    assert response.status_code == 400
    assert set(response.json()) == {at + place for place in REFUSED[name]}
    assert not Job.objects.exists()


def test_what_a_job_cannot_hold_is_refused_with_its_path_never_dropped(api, member):
    sent = _built(api, member, RAY_JOB)
    pod = sent["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["template"]["spec"]
    pod["volumes"] = [{"name": "data", "emptyDir": {}}]
    pod["nodeSelector"] = {"gpu": "a100"}
    pod["containers"][0]["securityContext"] = {"privileged": True}

    answer = api(member).post(JOBS, sent, format="json").json()

    group = "spec.rayClusterSpec.workerGroupSpecs[0].template.spec"
    assert answer == {
        f"{group}.volumes": [
            "not supported: Caldera mounts the job's script itself (a ConfigMap sent with the job)"
        ],
        f"{group}.nodeSelector": ["not supported: the quota tree and the scheduler place the pods"],
        f"{group}.containers[0].securityContext": ["not supported"],
    }


def _built(api, user, document: dict) -> dict:
    """The object Caldera would make of ``document``: the dry run's."""
    answer = api(user).post(f"{JOBS}dry-run/", document, format="json").json()
    assert "objects" in answer, answer
    (obj,) = answer["objects"]
    return obj


def test_the_services_refusals_name_the_object_s_paths(api, member):
    sent = _built(api, member, RAY_JOB)
    sent["metadata"]["labels"]["caldera.io/queue"] = "nowhere"
    sent["metadata"]["labels"].pop("volcano.sh/queue-name", None)
    sent["metadata"]["annotations"] = {"caldera.io/priority": "5"}
    group = sent["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]
    group["replicas"] = group["minReplicas"] = group["maxReplicas"] = 99

    answer = api(member).post(JOBS, sent, format="json").json()

    assert answer == {"metadata.labels['caldera.io/queue']": [
        "'nowhere' is not a queue you can submit to"
    ]}  # fmt: skip
    sent["metadata"]["labels"]["caldera.io/queue"] = "root-algorithm-video"
    answer = api(member).post(JOBS, sent, format="json").json()
    assert set(answer) == {"metadata.annotations['caldera.io/priority']"}
    del sent["metadata"]["annotations"]
    answer = api(member).post(JOBS, sent, format="json").json()
    assert list(answer) == ["request"] and "can never be admitted" in answer["request"][0]


def test_the_queue_is_the_callers_then_the_labels_then_the_namespace_s_leaf(api, member):
    sent = _built(api, member, RAY_JOB)
    for label in ("caldera.io/queue", "volcano.sh/queue-name"):
        sent["metadata"]["labels"].pop(label, None)
    sent["metadata"]["namespace"] = "text"

    by_namespace = api(member).post(JOBS, sent, format="json")
    assert by_namespace.status_code == 201, by_namespace.json()
    assert by_namespace.json()["queue"] == "root-algorithm-text"

    sent["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] = "root-algorithm-video"
    refused = api(member).post(JOBS, sent, format="json").json()
    assert refused == {
        "metadata.namespace": [
            "the queue root/algorithm/video runs its jobs in the namespace video; leave it "
            "out or name that one"
        ]
    }
    del sent["metadata"]["namespace"]
    by_label = api(member).post(f"{JOBS}", sent, format="json").json()
    assert by_label["queue"] == "root-algorithm-video"
    by_caller = api(member).post(f"{JOBS}?queue=root/algorithm/text", sent, format="json")
    assert by_caller.json()["queue"] == "root-algorithm-text"

    del sent["metadata"]["labels"]["kueue.x-k8s.io/queue-name"]
    nowhere = api(member).post(JOBS, sent, format="json").json()
    assert list(nowhere) == ["queue"] and "names no queue" in nowhere["queue"][0]


def test_places_that_name_different_queues_are_refused(api, member):
    sent = _built(api, member, RAY_JOB)
    sent["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] = "root-algorithm-text"

    answer = api(member).post(JOBS, sent, format="json").json()

    assert answer == {
        "metadata.labels['kueue.x-k8s.io/queue-name']": [
            "names another queue than metadata.labels['caldera.io/queue'] (root-algorithm-video)"
        ]
    }


def test_an_object_caldera_does_not_run_is_refused_by_its_kind(api, member):
    sent = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "x"}, "spec": {}}

    answer = api(member).post(JOBS, sent, format="json").json()

    assert list(answer) == ["kind"] and "not batch/v1 Job" in answer["kind"][0]


def test_a_batch_takes_objects_and_names_their_paths_by_their_place(api, member):
    good = _built(api, member, RAY_JOB)
    bad = copy.deepcopy(good)
    bad["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]["hostNetwork"] = True

    refused = api(member).post(f"{JOBS}batch/", {"jobs": [good, bad]}, format="json")
    assert refused.json() == {
        "jobs[1].spec.rayClusterSpec.headGroupSpec.template.spec.hostNetwork": ["not supported"]
    }
    assert not Job.objects.exists()

    done = api(member).post(f"{JOBS}batch/", {"jobs": [good, RAY_JOB]}, format="json")
    assert done.status_code == 201, done.json()
    assert Job.objects.count() == 2


def test_a_dry_run_reads_an_object_as_a_submission_does(api, member):
    sent = _built(api, member, PYTORCH_JOB)

    answer = api(member).post(f"{JOBS}dry-run/", sent, format="json")

    assert answer.status_code == 200, answer.json()
    assert answer.json()["fits_now"] is True
    assert not Job.objects.exists()


YAML = "application/yaml"


def post_yaml(api, user, text: str):
    return api(user).generic("POST", JOBS, text.encode(), content_type=YAML)


def test_yaml_bodies_keep_the_json_bodies_bounds(api, member, settings):
    laughs = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{b}: &{b} [{', '.join([f'*{a}'] * 9)}]\n" for a, b in zip("abcdef", "bcdefg", strict=True)
    )
    assert post_yaml(api, member, laughs).json() == {
        "body": ["holds more than 200000 values (aliases count each time)"]
    }
    assert post_yaml(api, member, "a: 1\n---\nb: 2\n").json() == {
        "body": ["holds more than one document; send one"]
    }
    assert post_yaml(api, member, 'kind: "\\x01"\n').json() == {
        "kind": [
            "contains the control character U+0001; only tab, line feed and carriage return "
            "are allowed"
        ]
    }
    assert post_yaml(api, member, "name: !!binary aGVsbG8=\n").json() == {
        "name": ["is a YAML bytes, not a JSON value; quote it"]
    }
    assert post_yaml(api, member, "- a\n- b\n").json() == {"body": ["must be a YAML mapping"]}
    settings.YAML_BODY_MAX_BYTES = 1000
    too_large = post_yaml(api, member, "name: " + "x" * 2000 + "\n")
    assert too_large.status_code == 413
    assert too_large.json() == {"body": ["is larger than YAML_BODY_MAX_BYTES (1000 bytes)"]}
    assert not Job.objects.exists()


def test_a_caldera_document_may_come_as_yaml_too(api, member):
    response = post_yaml(api, member, yaml.safe_dump(RAY_JOB))

    assert response.status_code == 201, response.json()
    assert json.loads(json.dumps(job_document(Job.objects.get())))["queue"] == RAY_JOB["queue"]
