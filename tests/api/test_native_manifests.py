"""The objects a team already has, submitted unchanged: every job of the operators' samples
(k8s/samples) and of the seed documents (tests/support/manifests), as the file is, through
POST /api/v1/jobs/?queue=. Each is kept as sent; its quota request is what Kubernetes counts
for its pods; the objects Caldera creates are the ones sent plus only Caldera's additions
and the replacements the answer lists, and validate against the CRDs. What Caldera cannot
let a tenant have is refused by path, every problem at once; nothing is stored half-way."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import yaml

from jobs.cluster import get_backend
from jobs.cluster.kinds import main_pod_selector
from jobs.document.schema import job_document
from jobs.engine.admission.cycle import admission_cycle
from jobs.engine.objects import job_head, job_spec, jobs_for_specs, object_ref, refs_removable
from jobs.engine.reconcile import jobs_reconcile
from jobs.models import Job, SimulatedPod
from kube import schema

from ..support import k8s_schema
from ..support.jobs import PYTORCH_JOB, RAY_JOB, submit_document

pytestmark = pytest.mark.django_db
JOBS = "/api/v1/jobs/"
YAML = "application/yaml"
MANIFESTS = Path(__file__).parent.parent / "support" / "manifests"
# A cluster with the seed 002's MetaX GPU nodes beside the default ones.
NODES = "4xcpu=16,memory=64Gi,nvidia.com/gpu=4;8xcpu=64,memory=256Gi,metax-tech.com/gpu=8"

# Every file that holds a job, with what its gang asks for, counted by hand from the file as
# Kubernetes counts a pod (requests; limits where nothing is requested), every pod of it.
REQUESTS = {
    "kubeflow-pytorch-mnist-nccl.yaml": {"nvidia.com/gpu": "2", "pods": "2"},
    "kubeflow-pytorch-simple.yaml": {"pods": "2"},
    # Head: requests 1 cpu / 2Gi (limits 5Gi); one worker requesting 200m under a limit of 1.
    "kuberay-ray-job.sample.yaml": {"cpu": "1200m", "memory": "2Gi", "pods": "2"},
    "kuberay-ray-job.shutdown.yaml": {"cpu": "2", "memory": "3Gi", "pods": "2"},
    "kuberay-ray-job.volcano-scheduler-queue.yaml": {"cpu": "3", "memory": "4Gi", "pods": "3"},
    "volcano-job.yaml": {"cpu": "6", "pods": "6"},
    "volcano-pytorch-plugin.yaml": {"pods": "3"},
    "volcano-ray-example.yaml": {"pods": "3"},
    "volcano-ray-plugin.yaml": {"pods": "3"},
    "seed-001-pytorchjob.yaml": {"cpu": "12", "memory": "48Gi", "nvidia.com/gpu": "3", "pods": "3"},
    "seed-001-volcano-ray.yaml": {"cpu": "6", "memory": "12Gi", "pods": "3"},
    "seed-002-pytorchjob.yaml": {"metax-tech.com/gpu": "64", "pods": "8"},
    "seed-002-volcano-pytorch.yaml": {"metax-tech.com/gpu": "64", "pods": "8"},
    "seed-003-rayjob.yaml": {"cpu": "12", "memory": "12G", "pods": "3"},
    "seed-004-rayjob.yaml": {"cpu": "3", "memory": "4Gi", "pods": "3"},
    "seed-004-volcano-ray.yaml": {"pods": "3"},
}
# What each file says that the cluster will not do as written.
WARNINGS = {
    "seed-001-pytorchjob.yaml": {
        "spec.cleanPodPolicy",  # runPolicy.cleanPodPolicy in kubeflow.org/v1 since 1.4
        # The master mounts workspace, a volume only the workers declare.
        "spec.pytorchReplicaSpecs.Master.template.spec.containers[0].volumeMounts[0].name",
    },
}
JOB_KINDS = ("RayJob", "PyTorchJob", "Job")
SUSPEND = {("spec", "suspend"), ("spec", "runPolicy", "suspend")}


def path_of(name: str) -> Path:
    return MANIFESTS / name if name.startswith("seed-") else k8s_schema.SAMPLES / name


def documents(name: str) -> list[dict]:
    return [obj for obj in yaml.safe_load_all(path_of(name).read_text()) if obj]


def the_job(objects: list[dict]) -> dict:
    (job,) = [obj for obj in objects if obj["kind"] in JOB_KINDS]
    return job


def leaves(value: object, where: tuple = ()) -> dict[tuple, object]:
    """Every path of an object down to a value that is not a non-empty map or list."""
    if isinstance(value, dict | list) and value:
        found: dict[tuple, object] = {}
        for key, item in value.items() if isinstance(value, dict) else enumerate(value):
            found |= leaves(item, (*where, key))
        return found
    return {where: value}


def addition(where: tuple) -> bool:
    """Whether Caldera may add or set this path of a job it creates: its namespace, its
    labels and annotations (on the object and on its pod templates), the job's suspend flag,
    its Volcano queue (a label, a Volcano Job's spec.queue, a PyTorchJob's scheduling queue)."""
    last = where[-1]
    if where == ("metadata", "namespace"):
        return True
    if len(where) >= 2 and where[-2] in ("labels", "annotations"):
        return last.startswith(("caldera.io/", "kube-queue/")) or last == "volcano.sh/queue-name"
    return where in SUSPEND | {
        ("spec", "queue"),
        ("spec", "runPolicy", "schedulingPolicy", "queue"),
    }


@pytest.fixture
def metax_nodes(settings):
    settings.SIMULATED_CLUSTER_NODES = NODES
    get_backend.cache_clear()


def test_every_sample_and_seed_file_of_a_job_is_listed():
    files = {
        path.name
        for path in [*k8s_schema.SAMPLES.glob("*.yaml"), *MANIFESTS.glob("seed-*.yaml")]
        if any(obj and obj.get("kind") in JOB_KINDS for obj in yaml.safe_load_all(path.read_text()))
    }
    assert files == set(REQUESTS)


@pytest.mark.parametrize("name", sorted(REQUESTS))
def test_a_file_is_queued_as_it_is_and_created_with_caldera_s_additions_alone(
    api, member, metax_nodes, name
):
    text = path_of(name).read_bytes()

    response = api(member).generic(
        "POST", f"{JOBS}?queue=root/algorithm/text", text, content_type=YAML
    )

    assert response.status_code == 201, response.json()
    answer = response.json()
    assert answer["request"] == REQUESTS[name]
    assert answer["sent_as"] == "object"
    assert set(answer["warnings"]) == WARNINGS.get(name, set())
    job = Job.objects.get(pk=answer["id"])
    assert (job.namespace, job.queue.name) == ("text", "root-algorithm-text")
    sent = documents(name)
    kept = api(member).get(f"{JOBS}{job.pk}/manifest/?as=sent").json()
    created = api(member).get(f"{JOBS}{job.pk}/manifest/").json()
    # The job and every ConfigMap of the file are kept (a Volcano Queue is the queue's own).
    kinds = sorted(obj["kind"] for obj in sent if obj["kind"] != "Queue")
    assert sorted(obj["kind"] for obj in kept) == kinds == sorted(o["kind"] for o in created)
    assert created[-1]["kind"] in JOB_KINDS  # its ConfigMaps are created first

    replaced = answer["replaced"]
    theirs, ours = leaves(the_job(sent)), leaves(the_job(created))
    at = "" if len(sent) == 1 else f"items[{sent.index(the_job(sent))}]."
    for where, value in theirs.items():
        if where in SUSPEND:
            continue  # Caldera's: the job's state sets it
        told = replaced.get(at + schema.render(where))
        if told is not None:
            assert (told["from"], ours.get(where)) == (value, told["to"]), where
        else:
            assert ours.get(where, "missing") == value, where
    for where in set(ours) - set(theirs):
        named = where == ("metadata", "name") and ("metadata", "generateName") in theirs
        assert named or addition(where) or theirs.get(where[:-1]) == {}, where
    assert ours[("metadata", "labels", "caldera.io/job-id")] == str(job.pk)
    assert ours[("metadata", "namespace")] == "text"
    for obj in created:
        problems = schema.object_problems(obj)
        assert set(problems) <= WARNINGS.get(name, set()), problems


def test_the_reconcile_reads_every_kind_of_job_in_three_queries_and_describes_it_as_whole(
    api, member, other_member, metax_nodes, django_assert_num_queries
):
    for n, name in enumerate(sorted(REQUESTS)):
        sent = documents(name)
        if "name" in the_job(sent)["metadata"]:  # some files name their jobs alike
            the_job(sent)["metadata"]["name"] += f"-{n}"
        text = yaml.safe_dump_all(sent)
        answer = api(member).generic("POST", f"{JOBS}?queue=root/algorithm/text", text, YAML)
        assert answer.status_code == 201, answer.json()
    submit_document(member, RAY_JOB, script="print('hi')", script_filename="main.py")
    submit_document(other_member, PYTORCH_JOB, env={"EPOCHS": "3"})
    everyone = Job.objects.order_by("pk")

    # The jobs, their queues with their quota nodes, their owners: no query per job, which
    # a column job_spec reads and jobs_for_specs leaves out would send.
    with django_assert_num_queries(3):
        read = jobs_for_specs(everyone)
        specs = [job_spec(job) for job in read]
        refs = [object_ref(job) for job in read]

    whole = list(everyone.select_related("queue__node", "owner"))
    assert specs == [job_spec(job) for job in whole]
    assert refs == [object_ref(job) for job in whole]
    assert {spec.owner for spec in specs} == {"alice", "carol"}


def test_the_request_counts_init_containers_sidecars_and_overhead_as_kubernetes_does(api, member):
    job = the_job(documents("kubeflow-pytorch-simple.yaml"))
    master = job["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]
    master["containers"][0]["resources"] = {"requests": {"cpu": "1"}, "limits": {"memory": "2Gi"}}
    master["initContainers"] = [
        {"name": "fetch", "image": "busybox", "resources": {"requests": {"cpu": "3"}}},
        {
            "name": "proxy",
            "image": "envoy",
            "restartPolicy": "Always",
            "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}},
        },
    ]
    master["overhead"] = {"cpu": "100m"}
    del job["spec"]["pytorchReplicaSpecs"]["Worker"]

    answer = api(member).post(f"{JOBS}?queue=root/algorithm/text", job, format="json").json()

    # max(1 + 0.5 sidecar, 3 fetching) + 0.1 overhead cpu; 2Gi limit + 1Gi sidecar memory.
    assert answer["request"] == {"cpu": "3100m", "memory": "3Gi", "pods": "1"}


def test_a_ray_group_that_autoscales_counts_at_its_minimum_with_kuberay_s_autoscaler(api, member):
    job = the_job(documents("kuberay-ray-job.shutdown.yaml"))
    cluster = job["spec"]["rayClusterSpec"]
    cluster["enableInTreeAutoscaling"] = True
    cluster["workerGroupSpecs"][0].update(replicas=3, minReplicas=1, maxReplicas=5)

    answer = api(member).post(f"{JOBS}?queue=root/algorithm/text", job, format="json").json()

    # head 1 cpu / 2Gi + the autoscaler's 500m / 512Mi, and one 1 cpu / 1Gi worker.
    assert answer["request"] == {"cpu": "2500m", "memory": "3584Mi", "pods": "2"}
    created = the_job(api(member).get(f"{JOBS}{answer['id']}/manifest/").json())
    group = created["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]
    assert (group["replicas"], group["minReplicas"], group["maxReplicas"]) == (3, 1, 5)


def test_a_file_of_several_yaml_documents_is_read_as_kubectl_reads_it(api, member):
    text = path_of("kuberay-ray-job.sample.yaml").read_text()

    response = api(member).generic(
        "POST", f"{JOBS}?queue=root/algorithm/text", text.encode(), content_type=YAML
    )

    assert response.status_code == 201, response.json()
    kept = api(member).get(f"{JOBS}{response.json()['id']}/manifest/?as=sent").json()
    assert [obj["kind"] for obj in kept] == ["RayJob", "ConfigMap"]
    assert kept[1]["data"] == documents("kuberay-ray-job.sample.yaml")[1]["data"]


def test_without_the_queue_named_the_namespace_must_be_the_queue_s(api, member):
    text = path_of("seed-003-rayjob.yaml").read_bytes()

    by_namespace = api(member).generic("POST", JOBS, text, content_type=YAML)

    assert by_namespace.status_code == 201, by_namespace.json()
    assert (by_namespace.json()["queue"], by_namespace.json()["replaced"]) == (
        "root-algorithm-video", {}
    )  # fmt: skip
    elsewhere = api(member).generic(
        "POST", f"{JOBS}?queue=root/algorithm/text", text, content_type=YAML
    )
    assert elsewhere.json()["replaced"] == {
        "items[0].metadata.namespace": {"from": "video", "to": "text"},
        "items[1].metadata.namespace": {"from": "video", "to": "text"},
    }
    sample = the_job(documents("kubeflow-pytorch-simple.yaml"))  # namespace kubeflow
    sample["metadata"]["labels"] = {"volcano.sh/queue-name": "root-algorithm-video"}
    refused = api(member).post(JOBS, sample, format="json").json()
    assert refused == {
        "metadata.namespace": [
            "the queue runs its jobs in the namespace video; leave it out, name that one, or "
            "send ?queue= to run it there"
        ]
    }
    assert Job.objects.count() == 2


def test_a_volcano_queue_in_the_file_is_replaced_only_when_the_queue_is_named(api, member):
    text = path_of("kuberay-ray-job.volcano-scheduler-queue.yaml").read_bytes()

    refused = api(member).generic("POST", JOBS, text, content_type=YAML).json()

    assert refused == {
        "items[1].metadata.labels['volcano.sh/queue-name']": [
            "'kuberay-test-queue' is not a queue you can submit to"
        ]
    }
    placed = (
        api(member)
        .generic("POST", f"{JOBS}?queue=root/algorithm/video", text, content_type=YAML)
        .json()
    )
    assert placed["replaced"] == {
        "items[0]": {"from": "scheduling.volcano.sh/v1beta1 Queue kuberay-test-queue", "to": None},
        "items[1].metadata.labels['volcano.sh/queue-name']": {
            "from": "kuberay-test-queue", "to": "root-algorithm-video"
        },
    }  # fmt: skip


def test_the_object_keeps_its_name_and_one_live_job_of_a_namespace_has_it(api, member):
    sample = the_job(documents("kuberay-ray-job.shutdown.yaml"))
    first = api(member).post(f"{JOBS}?queue=root/algorithm/video", sample, format="json")
    assert first.status_code == 201, first.json()
    assert (
        the_job(api(member).get(f"{JOBS}{first.json()['id']}/manifest/").json())["metadata"]["name"]
        == "rayjob-sample-shutdown"
    )

    again = api(member).post(f"{JOBS}?queue=root/algorithm/video", sample, format="json")

    assert again.status_code == 400
    assert again.json() == {
        "metadata.name": [
            f"job #{first.json()['id']}, queued or running, already has an object named "
            "rayjob-sample-shutdown in the namespace video; name this one otherwise, or give a "
            "generateName"
        ]
    }
    elsewhere = api(member).post(f"{JOBS}?queue=root/algorithm/text", sample, format="json")
    assert elsewhere.status_code == 201, elsewhere.json()
    both = api(member).post(
        f"{JOBS}batch/?queue=root/algorithm/text",
        {
            "jobs": [
                dict(sample, metadata={"name": "twin"}),
                dict(sample, metadata={"name": "twin"}),
            ]
        },
        format="json",
    )
    assert both.json() == {
        "jobs[1].metadata.name": ["jobs[0] of this batch has the object name twin in text"]
    }
    generated = dict(sample, metadata={"generateName": "rayjob-sample-"})
    twice = [
        api(member).post(f"{JOBS}?queue=root/algorithm/video", generated, format="json").json()
        for _ in range(2)
    ]
    names = [
        the_job(api(member).get(f"{JOBS}{job['id']}/manifest/").json())["metadata"]["name"]
        for job in twice
    ]
    assert names == [f"rayjob-sample-{job['id']}" for job in twice]


def test_caldera_s_keys_an_early_start_and_another_priority_class_are_refused_by_path(
    api, member, metax_nodes
):
    job = the_job(documents("seed-002-pytorchjob.yaml"))
    job["metadata"]["labels"] = {"caldera.io/job-id": "7"}
    job["metadata"]["annotations"] = {"kube-queue/job-enqueue-timestamp": "now"}
    job["spec"]["runPolicy"] = {"suspend": False, "schedulingPolicy": {"priorityClass": "vip"}}
    master = job["spec"]["pytorchReplicaSpecs"]["Master"]["template"]
    master["spec"]["priorityClassName"] = "system-node-critical"

    answer = api(member).post(f"{JOBS}?queue=root/algorithm/text", job, format="json").json()

    assert answer == {
        "metadata.labels['caldera.io/job-id']": [
            "Caldera's own key: it writes it on the objects it creates; leave it out"
        ],
        "metadata.annotations['kube-queue/job-enqueue-timestamp']": [
            "Caldera's own key: it writes it on the objects it creates; leave it out"
        ],
        "spec.runPolicy.suspend": [
            "Caldera releases the job when its queue admits it; leave suspend out or true"
        ],
        "spec.runPolicy.schedulingPolicy.priorityClass": [
            "the queue sets no priority class; leave it out"
        ],
        "spec.pytorchReplicaSpecs.Master.template.spec.priorityClassName": [
            "the queue sets no priority class; leave it out"
        ],
    }
    assert not Job.objects.exists()


def test_every_problem_of_a_body_is_named_at_once_by_schema_and_path(api, member):
    job = the_job(documents("volcano-ray-plugin.yaml"))
    job["spec"]["tasks"][0]["replicas"] = "one"
    job["spec"]["tasks"][1]["template"]["spec"]["containers"][0]["resources"] = {
        "requests": {"cpu": "lots"}
    }
    job["spec"]["tasks"][1]["template"]["spec"]["hostNetwork"] = True
    job["spec"]["tasks"][1]["template"]["spec"]["nodeSelecter"] = {"gpu": "a100"}

    answer = api(member).post(f"{JOBS}?queue=root/algorithm/text", job, format="json").json()

    worker = "spec.tasks[1].template.spec"
    assert answer == {
        "spec.tasks[0].replicas": ["must be an integer"],
        f"{worker}.containers[0].resources.requests.cpu": [
            "'lots' is not a Kubernetes quantity (examples: 500m, 2, 1.5, 4Gi, 4G)"
        ],
    }  # the schema's problems at once, before what the rules would say of them
    job["spec"]["tasks"][0]["replicas"] = 1
    job["spec"]["tasks"][1]["template"]["spec"]["containers"][0]["resources"] = {}
    job["spec"]["tasks"][1]["template"]["spec"]["serviceAccountName"] = "deployer"
    answer = api(member).post(f"{JOBS}?queue=nowhere", job, format="json").json()
    assert answer == {
        "queue": ["'nowhere' is not a queue you can submit to"],
        f"{worker}.hostNetwork": [
            "not allowed by the Pod Security Standards' baseline profile (Host Namespaces): a "
            "pod may not share the node's network, PID or IPC"
        ],
    }  # the queue's refusal with the pods' own
    answer = api(member).post(f"{JOBS}?queue=root/algorithm/text", job, format="json").json()
    assert answer == {
        f"{worker}.serviceAccountName": [
            "the queue's pods run as default; Caldera creates them and may not lend them "
            "another ServiceAccount"
        ],
        f"{worker}.hostNetwork": [
            "not allowed by the Pod Security Standards' baseline profile (Host Namespaces): a "
            "pod may not share the node's network, PID or IPC"
        ],
    }
    del job["spec"]["tasks"][1]["template"]["spec"]["hostNetwork"]
    del job["spec"]["tasks"][1]["template"]["spec"]["serviceAccountName"]
    placed = api(member).post(f"{JOBS}?queue=root/algorithm/text", job, format="json").json()
    assert placed["warnings"] == {
        f"{worker}.nodeSelecter": [
            "is not a field here: the Job CRD does not declare it, so the API server drops it"
        ]
    }


def test_an_object_caldera_does_not_run_is_refused_by_its_kind(api, member):
    sent = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "x"}, "spec": {}}
    answer = api(member).post(JOBS, sent, format="json").json()
    assert list(answer) == ["kind"] and "not batch/v1 Job" in answer["kind"][0]

    cluster = documents("kuberay-ray-cluster.volcano-scheduler.yaml")[0]
    answer = api(member).post(JOBS, cluster, format="json").json()
    assert list(answer) == ["kind"] and "send a RayJob" in answer["kind"][0]


def test_a_batch_takes_objects_and_names_their_paths_by_their_place(api, member):
    good = the_job(documents("volcano-ray-plugin.yaml"))
    bad = copy.deepcopy(good)
    bad["metadata"]["name"] = "other"
    bad["spec"]["tasks"][0]["template"]["spec"]["hostPID"] = True

    refused = api(member).post(
        f"{JOBS}batch/?queue=root/algorithm/text", {"jobs": [good, bad]}, format="json"
    )
    assert list(refused.json()) == ["jobs[1].spec.tasks[0].template.spec.hostPID"]
    assert not Job.objects.exists()

    done = api(member).post(
        f"{JOBS}batch/?queue=root/algorithm/text", {"jobs": [good, RAY_JOB]}, format="json"
    )
    assert done.status_code == 201, done.json()
    assert Job.objects.count() == 2


def test_a_dry_run_reads_an_object_as_a_submission_does(api, member):
    sent = the_job(documents("kubeflow-pytorch-mnist-nccl.yaml"))

    answer = api(member).post(f"{JOBS}dry-run/?queue=root/algorithm/text", sent, format="json")

    assert answer.status_code == 200, answer.json()
    assert answer.json()["fits_now"] is True
    (created,) = answer.json()["objects"]
    assert created["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0][
        "args"
    ] == ["--backend", "nccl"]
    assert not Job.objects.exists()


def test_a_document_job_sent_no_object(api, member):
    job = api(member).post(JOBS, PYTORCH_JOB, format="json").json()

    assert job["sent_as"] == "document"
    answer = api(member).get(f"{JOBS}{job['id']}/manifest/?as=sent")
    assert answer.status_code == 409
    assert "written as Caldera's document" in answer.json()["detail"]


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
        "items[0]": ["must be a Kubernetes object with apiVersion and kind"],
        "items[1]": ["must be a Kubernetes object with apiVersion and kind"],
    }
    assert post_yaml(api, member, "---\n".join(["a: 1\n"] * 51)).json() == {
        "body": ["holds more than 50 documents"]
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


def test_an_operator_may_not_delete_a_finished_job_before_caldera_reads_how_it_ended(api, member):
    pytorchjob = the_job(documents("kubeflow-pytorch-simple.yaml"))
    pytorchjob["spec"]["runPolicy"] = {"ttlSecondsAfterFinished": 0}
    rayjob = the_job(documents("kuberay-ray-job.shutdown.yaml"))
    rayjob["spec"]["deletionStrategy"] = {
        "deletionRules": [{"condition": {"jobStatus": "SUCCEEDED"}, "policy": "DeleteSelf"}]
    }

    refused = [
        api(member).post(f"{JOBS}?queue=root/algorithm/text", job, format="json").json()
        for job in (pytorchjob, rayjob)
    ]

    assert [list(answer) for answer in refused] == [
        ["spec.runPolicy.ttlSecondsAfterFinished"],
        ["spec.deletionStrategy.deletionRules[0].condition.ttlSeconds"],
    ]
    assert refused[0]["spec.runPolicy.ttlSecondsAfterFinished"][0].startswith(
        "must be at least 300"
    )
    pytorchjob["spec"]["runPolicy"] = {"ttlSecondsAfterFinished": 600}
    kept = api(member).post(f"{JOBS}?queue=root/algorithm/text", pytorchjob, format="json")
    assert kept.status_code == 201, kept.json()


# Two CPU nodes and two GPU nodes kept for what asks for the a100 pool and tolerates them.
GPU_POOL = (
    "2xcpu=16,memory=64Gi;"
    "2xcpu=32,memory=128Gi,nvidia.com/gpu=8 labels:pool=a100 taints:dedicated=ml:NoSchedule"
)


def test_a_job_no_node_takes_is_refused_naming_its_selector_and_one_that_fits_runs_there(
    api, member, settings
):
    settings.SIMULATED_CLUSTER_NODES = GPU_POOL
    get_backend.cache_clear()
    job = the_job(documents("kubeflow-pytorch-simple.yaml"))
    pods = {
        kind: spec["template"]["spec"] for kind, spec in job["spec"]["pytorchReplicaSpecs"].items()
    }
    for pod in pods.values():
        pod["nodeSelector"] = {"pool": "h100"}
    at = "spec.pytorchReplicaSpecs.Master.template.spec"

    answer = api(member).post(f"{JOBS}?queue=root/algorithm/text", job, format="json")
    assert answer.status_code == 400
    assert answer.json() == {
        f"{at}.nodeSelector": [
            "can never run: master asks for nodes with nodeSelector pool=h100; no node has "
            "those labels"
        ]
    }
    for pod in pods.values():
        pod["nodeSelector"] = {"pool": "a100"}
    answer = api(member).post(f"{JOBS}?queue=root/algorithm/text", job, format="json")
    assert answer.json() == {
        f"{at}.tolerations": [
            "can never run: master can run on no node: each node it selects has a taint it "
            "does not tolerate, such as {dedicated: ml}"
        ]
    }
    assert not Job.objects.exists()

    for pod in pods.values():
        pod["tolerations"] = [{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}]
    answer = api(member).post(f"{JOBS}?queue=root/algorithm/text", job, format="json")
    assert answer.status_code == 201, answer.json()
    admission_cycle()
    jobs_reconcile([answer.json()["id"]])
    placed = SimulatedPod.objects.filter(job_id=answer.json()["id"])
    assert placed.count() == 2 and {pod.node for pod in placed} <= {"node-3", "node-4"}
    created = the_job(api(member).get(f"{JOBS}{answer.json()['id']}/manifest/").json())
    master = created["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]
    assert (
        master["nodeSelector"] == {"pool": "a100"}
        and master["tolerations"] == pods["Master"]["tolerations"]
    )


def test_a_volcano_job_s_log_is_looked_for_on_its_leading_task_by_the_task_s_own_name(api, member):
    """Volcano labels a task's pods with the task's name (volcano.sh/task-spec): the main
    pod of the sample, whose one task is default-nginx, is found by that name."""
    text = path_of("volcano-job.yaml").read_bytes()
    answer = api(member).generic(
        "POST", f"{JOBS}?queue=root/algorithm/text", text, content_type=YAML
    )
    assert answer.status_code == 201, answer.json()
    job = Job.objects.get(pk=answer.json()["id"])

    assert job_head(job) == job_spec(job).head.name == "default-nginx"
    assert main_pod_selector(
        "volcano", object_name="test-job", job_id=job.pk, head=job_head(job)
    ) == (
        f"caldera.io/job-id={job.pk},volcano.sh/job-name=test-job,volcano.sh/task-spec=default-nginx"
    )
    admission_cycle()
    jobs_reconcile([job.pk])
    assert SimulatedPod.objects.filter(job_id=job.pk, index=0).get().name == (
        "test-job-default-nginx-0"
    )


def test_jobs_sent_with_one_configmap_share_it_and_it_goes_with_the_last_of_them(api, member):
    """Seed 003 submits many RayJobs from one file (generateName) with one script's
    ConfigMap: as `kubectl create` twice, the jobs share that ConfigMap; another job that
    names it with other data is refused, since the cluster keeps one object of a name."""
    text = path_of("seed-003-rayjob.yaml").read_bytes()
    first, second = (
        api(member).generic("POST", f"{JOBS}?queue=root/algorithm/video", text, content_type=YAML)
        for _ in range(2)
    )
    assert (first.status_code, second.status_code) == (201, 201), second.json()
    one, two = (Job.objects.get(pk=answer.json()["id"]) for answer in (first, second))

    # Removing the first's objects leaves the ConfigMap the second still mounts.
    assert refs_removable([(one.pk, object_ref(one))])[0].config_maps == ()
    changed = text.replace(b"import ray\n", b"import ray  # another script\n", 1)
    refused = api(member).generic(
        "POST", f"{JOBS}?queue=root/algorithm/video", changed, content_type=YAML
    )
    assert refused.status_code == 400
    assert refused.json() == {
        "items[0].metadata.name": [
            f"job #{one.pk}, queued or running, has a ConfigMap named rayjob-video in the "
            "namespace video with other data, and the cluster keeps one object of a name: send "
            "the same data, or give this one another name (and the volumes that mount it)"
        ]
    }
    for job in (one, two):
        assert api(member).post(f"{JOBS}{job.pk}/cancel/").status_code == 200
    # The last of them takes it along; a new job may name it with any data.
    assert refs_removable([(two.pk, object_ref(two))])[0].config_maps == ("rayjob-video",)
    again = api(member).generic(
        "POST", f"{JOBS}?queue=root/algorithm/video", changed, content_type=YAML
    )
    assert again.status_code == 201, again.json()


def test_a_batch_refuses_a_second_configmap_of_one_name_with_other_data(api, member):
    objects = documents("seed-003-rayjob.yaml")
    other = copy.deepcopy(objects)
    other[0]["data"]["sample_code.py"] += "# another script\n"
    jobs = [{"kind": "List", "apiVersion": "v1", "items": items} for items in (objects, other)]

    refused = api(member).post(
        f"{JOBS}batch/?queue=root/algorithm/video", {"jobs": jobs}, format="json"
    )
    assert refused.status_code == 400
    assert refused.json() == {
        "jobs[1].items[0].metadata.name": [
            "an earlier job of this batch has a ConfigMap named rayjob-video in the namespace "
            "video with other data, and the cluster keeps one object of a name: send the same "
            "data, or give this one another name (and the volumes that mount it)"
        ]
    }
    same = api(member).post(
        f"{JOBS}batch/?queue=root/algorithm/video", {"jobs": [jobs[0], jobs[0]]}, format="json"
    )
    assert same.status_code == 201, same.json()
