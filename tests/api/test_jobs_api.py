"""The jobs API: submit, read, filter, change priority, cancel; tenancy and bad input."""

import copy

import pytest
import yaml

from jobs.models import Job, JobEvent

from ..support import k8s_schema
from ..support.jobs import PYTORCH_JOB, RAY_JOB

pytestmark = pytest.mark.django_db


def submit(api, user, body=RAY_JOB, **changes):
    return api(user).post("/api/v1/jobs/", {**copy.deepcopy(body), **changes}, format="json")


def test_it_submits_the_seeds_rayjob(api, member):
    response = submit(api, member)
    assert response.status_code == 201, response.json()
    data = response.json()
    assert data["state"] == "queued"
    assert data["queue"] == "root-algorithm-video"
    assert data["position"] == 1
    assert data["request"] == {"cpu": "12", "memory": "12G", "pods": "3"}
    assert data["enqueued_at"] and data["dequeued_at"] is None
    assert data["backoff_reason"] is None and data["next_attempt_at"] is None
    assert {"id", "name", "priority"} <= set(data)
    job = Job.objects.get(pk=data["id"])
    assert (job.owner, job.namespace, job.run_seconds) == (member, "video", 600)
    assert list(job.events.values_list("reason", flat=True)) == ["Enqueued"]


def test_it_submits_a_pytorchjob(api, member):
    response = submit(api, member, PYTORCH_JOB)
    assert response.status_code == 201, response.json()
    data = response.json()
    assert data["kind"] == "pytorch" and data["runtime"] == "kubeflow"
    assert data["request"] == {"cpu": "6", "memory": "24Gi", "nvidia.com/gpu": "3", "pods": "3"}
    assert data["command"] == ["torchrun", "train.py"]
    assert data["master"] == {"resources": PYTORCH_JOB["master"]["resources"]}


def test_the_queue_may_be_named_by_queue_name_or_path(api, member):
    assert submit(api, member, queue="root-algorithm-text").json()["queue"] == "root-algorithm-text"


@pytest.mark.parametrize(
    ("changes", "field", "reason"),
    [
        (
            {"head": {"resources": {"cpu": "4 cores"}}},
            "head.resources.cpu",
            "'4 cores' is not a Kubernetes quantity",
        ),
        (
            {"workers": [{"name": "g", "replicas": -1, "resources": {"cpu": "1"}}]},
            "workers[0].replicas",
            "must be between 0 and 1000",
        ),
        (
            {"workers": [{"name": "g", "replicas": 1, "resources": {"cpu": "-1"}}]},
            "workers[0].resources.cpu",
            "is negative",
        ),
        ({"name": "Bad_Name"}, "name", "must be a DNS-1123 label"),
        ({"kind": "tensorflow"}, "kind", "must be one of ray, pytorch"),
        ({"runtime": "kubeflow"}, "runtime", "a ray job runs on kuberay"),
        ({"image": ""}, "image", "is required"),
        ({"entrypoint": ""}, "entrypoint", "is required"),
        ({"priority": "high"}, "priority", "must be an integer"),
        ({"run_seconds": 0}, "run_seconds", "must be between 0.01 and 604800, got 0"),
        ({"run_seconds": "soon"}, "run_seconds", "must be a number, got 'soon'"),
        ({"queue": "root/nowhere"}, "queue", "is not a queue you can submit to"),
        ({"queue": "root/infrastructure/devops"}, "queue", "is not a queue you can submit to"),
        ({"colour": "red"}, "colour", "unknown field"),
        (
            {"head": {"resources": {"cpu": "16"}}},
            "request",
            "can never be admitted: Insufficient quota in root/algorithm/video: cpu requested 24",
        ),
        ({"priority": 5}, "priority", "members submit at priority 0 or below"),
    ],
)
def test_bad_input_gets_400_naming_the_field_and_stores_nothing(
    api, member, changes, field, reason
):
    response = submit(api, member, **changes)
    assert response.status_code == 400
    assert any(reason in message for message in response.json()[field]), response.json()
    assert not Job.objects.exists() and not JobEvent.objects.exists()


def test_a_run_time_may_be_a_fraction_of_a_second(api, member):
    response = submit(api, member, run_seconds=0.2)
    assert response.status_code == 201, response.json()
    assert response.json()["run_seconds"] == 0.2


def test_a_body_that_is_not_an_object_gets_400(api, member):
    response = api(member).post("/api/v1/jobs/", [1, 2], format="json")
    assert response.status_code == 400
    response = api(member).post("/api/v1/jobs/", "{not json", content_type="application/json")
    assert response.status_code == 400


def test_managers_may_submit_at_a_higher_priority(api, manager):
    assert submit(api, manager, priority=10).json()["priority"] == 10


def test_outsiders_get_404_for_every_job_endpoint(api, member, outsider):
    job_id = submit(api, member).json()["id"]
    client = api(outsider)
    for url in ["", "events/", "manifest/"]:
        assert client.get(f"/api/v1/jobs/{job_id}/{url}").status_code == 404
    assert (
        client.patch(f"/api/v1/jobs/{job_id}/", {"priority": -1}, format="json").status_code == 404
    )
    assert client.post(f"/api/v1/jobs/{job_id}/cancel/").status_code == 404
    assert client.get("/api/v1/jobs/").json()["results"] == []
    assert client.get("/api/v1/queues/root-algorithm-video/").status_code == 404
    assert Job.objects.get(pk=job_id).state == "queued"


def test_the_list_filters_by_state_queue_and_mine(api, member, manager):
    mine = submit(api, member).json()["id"]
    theirs = submit(api, manager, queue="root/algorithm/text").json()["id"]
    client = api(member)
    ids = lambda url: [job["id"] for job in client.get(url).json()["results"]]  # noqa: E731
    assert ids("/api/v1/jobs/") == [theirs, mine]
    assert ids("/api/v1/jobs/?mine=true") == [mine]
    assert ids("/api/v1/jobs/?queue=root-algorithm-text") == [theirs]
    assert ids("/api/v1/jobs/?state=queued,backoff") == [theirs, mine]
    assert ids("/api/v1/jobs/?state=running") == []
    assert client.get("/api/v1/jobs/?state=sleeping").status_code == 400


def test_the_list_costs_the_same_queries_for_many_jobs(api, member, django_assert_max_num_queries):
    for _ in range(20):
        submit(api, member, queue="root/algorithm/text")
    client = api(member)
    client.get("/api/v1/jobs/")  # a token's first use from an address is recorded, once
    with django_assert_max_num_queries(8):
        response = client.get("/api/v1/jobs/")
    positions = sorted(job["position"] for job in response.json()["results"])
    assert positions == list(range(1, 21))


def test_positions_follow_priority_then_enqueue_time(api, member, manager):
    first = submit(api, member).json()["id"]
    second = submit(api, member).json()["id"]
    jumper = submit(api, manager, priority=5).json()["id"]
    position = lambda job_id: api(member).get(f"/api/v1/jobs/{job_id}/").json()["position"]  # noqa: E731
    assert [position(jumper), position(first), position(second)] == [1, 2, 3]


def test_a_manager_raises_a_priority_and_the_job_moves_up(api, member, manager):
    first = submit(api, member).json()["id"]
    second = submit(api, member).json()["id"]
    response = api(manager).patch(f"/api/v1/jobs/{second}/", {"priority": 10}, format="json")
    assert response.status_code == 200, response.json()
    assert response.json()["position"] == 1
    assert api(member).get(f"/api/v1/jobs/{first}/").json()["position"] == 2
    event = JobEvent.objects.get(job_id=second, reason="PriorityChanged")
    assert event.message == "bob changed priority from 0 to 10"
    assert event.actor == manager


def test_a_member_may_not_raise_a_priority(api, member):
    job_id = submit(api, member).json()["id"]
    response = api(member).patch(f"/api/v1/jobs/{job_id}/", {"priority": 10}, format="json")
    assert response.status_code == 403
    assert "managers and staff" in response.json()["detail"]
    assert Job.objects.get(pk=job_id).priority == 0


def test_a_member_may_lower_their_own_jobs_priority_but_not_anothers(api, member, other_member):
    job_id = submit(api, member).json()["id"]
    assert (
        api(member)
        .patch(f"/api/v1/jobs/{job_id}/", {"priority": -5}, format="json")
        .json()["priority"]
        == -5
    )
    response = api(other_member).patch(f"/api/v1/jobs/{job_id}/", {"priority": -9}, format="json")
    assert response.status_code == 403
    assert Job.objects.get(pk=job_id).priority == -5


def test_patch_accepts_only_priority(api, manager):
    job_id = submit(api, manager).json()["id"]
    response = api(manager).patch(f"/api/v1/jobs/{job_id}/", {"image": "x"}, format="json")
    assert response.status_code == 400 and "image" in response.json()
    response = api(manager).patch(f"/api/v1/jobs/{job_id}/", {"priority": "up"}, format="json")
    assert response.status_code == 400 and "priority" in response.json()


def test_cancel_by_owner_and_by_manager_but_not_by_another_member(
    api, member, other_member, manager
):
    mine = submit(api, member).json()["id"]
    other = submit(api, member).json()["id"]
    assert api(other_member).post(f"/api/v1/jobs/{mine}/cancel/").status_code == 403
    response = api(member).post(f"/api/v1/jobs/{mine}/cancel/")
    assert response.status_code == 200 and response.json()["state"] == "cancelled"
    assert api(member).post(f"/api/v1/jobs/{mine}/cancel/").status_code == 200  # idempotent
    assert api(manager).post(f"/api/v1/jobs/{other}/cancel/").json()["state"] == "cancelled"
    event = JobEvent.objects.get(job_id=mine, reason="Cancelled")
    assert event.message == "Cancelled by alice while queued"


def test_a_priority_change_of_a_finished_job_is_a_conflict(api, manager):
    job_id = submit(api, manager).json()["id"]
    api(manager).post(f"/api/v1/jobs/{job_id}/cancel/")
    response = api(manager).patch(f"/api/v1/jobs/{job_id}/", {"priority": 3}, format="json")
    assert response.status_code == 409
    assert "only a pending job" in response.json()["detail"]


def test_the_events_endpoint_lists_the_history(api, member):
    job_id = submit(api, member).json()["id"]
    api(member).post(f"/api/v1/jobs/{job_id}/cancel/")
    events = api(member).get(f"/api/v1/jobs/{job_id}/events/").json()
    assert [e["reason"] for e in events] == ["Enqueued", "Cancelled"]
    assert events[1]["actor"] == "alice"


def test_the_manifest_endpoint_returns_the_rayjob(api, member):
    job_id = submit(api, member, script="print('hi')\n").json()["id"]
    objects = api(member).get(f"/api/v1/jobs/{job_id}/manifest/").json()
    assert [o["kind"] for o in objects] == ["ConfigMap", "RayJob"]
    rayjob = objects[1]
    assert rayjob["apiVersion"] == "ray.io/v1"
    assert rayjob["metadata"]["namespace"] == "video"
    assert "kube-queue/job-enqueue-timestamp" in rayjob["metadata"]["annotations"]


def test_the_queue_list_and_detail_show_quota_and_positions(api, member):
    submit(api, member)
    queues = {q["name"]: q for q in api(member).get("/api/v1/queues/").json()}
    assert set(queues) == {"root-algorithm-video", "root-algorithm-text"}
    assert queues["root-algorithm-video"]["pending"] == 1
    detail = api(member).get("/api/v1/queues/root-algorithm-video/").json()
    assert detail["min"] == {"cpu": "12", "memory": "12Gi", "nvidia.com/gpu": "2"}
    assert detail["max"] == {"cpu": "14", "memory": "14Gi", "nvidia.com/gpu": "4"}
    assert detail["used"] == {}
    assert [(a["position"], a["priority"]) for a in detail["active"]] == [(1, 0)]
    assert detail["backoff"] == [] and detail["admitted"] == []
    assert (
        api(member).get("/api/v1/queues/root/algorithm/video/").json()["name"]
        == "root-algorithm-video"
    )


def test_the_openapi_schema_and_docs_are_served(client, api, member):
    schema = api(member).get("/api/schema/")
    assert schema.status_code == 200
    assert b"/api/v1/jobs/" in schema.content
    assert client.get("/api/docs/").status_code == 200


def test_a_ray_job_can_run_on_volcano_and_its_manifest_is_a_volcano_job(api, member):
    response = submit(api, member, runtime="volcano")

    assert response.status_code == 201, response.json()
    assert response.json()["runtime"] == "volcano"
    manifest = api(member).get(f"/api/v1/jobs/{response.json()['id']}/manifest/").json()
    assert [(o["apiVersion"], o["kind"]) for o in manifest] == [
        ("batch.volcano.sh/v1alpha1", "Job")
    ]
    assert manifest[0]["spec"]["plugins"] == {"ray": [], "svc": []}


def test_a_pytorch_job_can_run_on_volcano(api, member):
    response = submit(api, member, PYTORCH_JOB, runtime="volcano")

    assert response.status_code == 201, response.json()
    manifest = api(member).get(f"/api/v1/jobs/{response.json()['id']}/manifest/").json()
    assert "pytorch" in manifest[-1]["spec"]["plugins"]


def test_only_the_runtimes_the_cluster_offers_are_accepted(api, member, settings):
    settings.CLUSTER_RUNTIMES = ["kuberay", "kubeflow"]

    refused = submit(api, member, runtime="volcano")
    default = submit(api, member)

    assert refused.status_code == 400
    assert refused.json() == {"runtime": ["this cluster runs ray jobs on kuberay, not 'volcano'"]}
    assert default.json()["runtime"] == "kuberay"


def test_a_cluster_with_volcano_only_runs_ray_jobs_on_volcano_by_default(api, member, settings):
    settings.CLUSTER_RUNTIMES = ["volcano"]

    assert submit(api, member, runtime=None).json()["runtime"] == "volcano"


def test_a_volcano_job_takes_one_worker_group(api, member):
    group = {"name": "g", "replicas": 1, "resources": {"cpu": "1"}}

    response = submit(api, member, runtime="volcano", workers=[group, {**group, "name": "h"}])

    assert response.status_code == 400
    assert response.json() == {
        "workers": ["a Volcano Job has one worker task: give one worker group"]
    }


def test_a_rayjob_carries_its_volcano_queue_only_on_a_cluster_with_volcano(api, member, settings):
    def labels() -> dict:
        job = submit(api, member).json()
        return (
            api(member).get(f"/api/v1/jobs/{job['id']}/manifest/").json()[-1]["metadata"]["labels"]
        )

    assert labels()["volcano.sh/queue-name"] == "root-algorithm-video"
    settings.CLUSTER_RUNTIMES = ["kuberay", "kubeflow"]
    assert "volcano.sh/queue-name" not in labels()


def test_pip_packages_and_env_vars_become_the_rayjobs_runtime_environment(api, member):
    response = submit(api, member, pip=["torch==2.4.0", "pandas"], env={"MODE": "fast", "B": "1"})

    assert response.status_code == 201, response.json()
    data = response.json()
    assert data["pip"] == ["torch==2.4.0", "pandas"] and data["env"] == {"MODE": "fast", "B": "1"}
    (rayjob,) = api(member).get(f"/api/v1/jobs/{data['id']}/manifest/").json()
    assert yaml.safe_load(rayjob["spec"]["runtimeEnvYAML"]) == {
        "pip": ["torch==2.4.0", "pandas"],
        "env_vars": {"B": "1", "MODE": "fast"},
    }
    assert k8s_schema.errors(rayjob) == []


def test_a_pytorch_job_gets_its_env_vars_in_every_container(api, member):
    response = submit(api, member, PYTORCH_JOB, env={"NCCL_DEBUG": "INFO"})

    (pytorchjob,) = api(member).get(f"/api/v1/jobs/{response.json()['id']}/manifest/").json()
    for replica in pytorchjob["spec"]["pytorchReplicaSpecs"].values():
        container = replica["template"]["spec"]["containers"][0]
        assert container["env"] == [{"name": "NCCL_DEBUG", "value": "INFO"}]


@pytest.mark.parametrize(
    ("changes", "errors"),
    [
        (
            {"runtime": "volcano", "pip": ["torch"]},
            {"pip": ["pip packages go into a Ray runtime environment (runtime kuberay); "
                     "on volcano, install them in the image"]},
        ),
        ({"pip": ["torch pandas"]}, {"pip[0]": ["'torch pandas' is not one requirement "
                                                "(no spaces, 200 at most)"]}),
        ({"pip": "torch"}, {"pip": ['must be a list of requirements, such as ["torch==2.4.0"]']}),
        ({"env": {"1X": "a"}}, {"env.1X": [
            "is not a variable name (letters, digits, _; not first a digit)"]}),
        ({"env": {"N": 3}}, {"env.N": ["must be a string, got 3"]}),
    ],
)  # fmt: skip
def test_bad_pip_and_env_are_refused_by_name(api, member, changes, errors):
    response = submit(api, member, **changes)

    assert response.status_code == 400
    assert response.json() == errors
    assert not Job.objects.exists()


def test_a_batch_keeps_each_jobs_environment(api, member):
    jobs = [{**RAY_JOB, "name": f"sweep-{i}", "env": {"SEED": str(i)}} for i in range(3)]

    response = api(member).post("/api/v1/jobs/batch/", {"jobs": jobs}, format="json")

    assert response.status_code == 201
    assert [job.env for job in Job.objects.order_by("id")] == [{"SEED": str(i)} for i in range(3)]


def autoscaling(body=RAY_JOB, max_replicas=4) -> list[dict]:
    """The body's worker groups, the first one autoscaling up to ``max_replicas``."""
    first, *rest = copy.deepcopy(body["workers"])
    return [{**first, "max_replicas": max_replicas}, *rest]


def test_a_ray_job_on_kuberay_autoscales_a_worker_group_up_to_its_max_replicas(api, member):
    fixed = {"name": "fixed-group", "replicas": 1, "resources": {"cpu": "2", "memory": "2G"}}
    workers = [*autoscaling(max_replicas=4), fixed]

    response = submit(api, member, queue="root/algorithm/text", workers=workers)

    assert response.status_code == 201, response.json()
    data = response.json()
    assert data["workers"] == workers  # max_replicas kept where given, and only there
    assert "max_replicas" not in data["workers"][1]
    # Quota counts the gang that starts: head 4 + 2 workers x 4 + 1 x 2 cpu, and KubeRay's
    # autoscaler beside the head (500m, 512Mi): 14G + 512Mi is 14,196,163Ki exactly.
    assert data["request"] == {"cpu": "14500m", "memory": "14196163Ki", "pods": "4"}
    assert Job.objects.get().workers == workers
    read = api(member).get(f"/api/v1/jobs/{data['id']}/").json()
    assert read["workers"][0]["max_replicas"] == 4 and read["request"] == data["request"]
    (rayjob,) = api(member).get(f"/api/v1/jobs/{data['id']}/manifest/").json()
    cluster = rayjob["spec"]["rayClusterSpec"]
    assert cluster["enableInTreeAutoscaling"] is True
    assert cluster["autoscalerOptions"]["resources"]["requests"] == {
        "cpu": "500m",
        "memory": "512Mi",
    }
    assert [
        (g["groupName"], g["replicas"], g["minReplicas"], g["maxReplicas"])
        for g in cluster["workerGroupSpecs"]
    ] == [("small-group", 2, 2, 4), ("fixed-group", 1, 1, 1)]
    assert k8s_schema.errors(rayjob) == []


@pytest.mark.parametrize(
    ("body", "changes", "reason"),
    [
        (PYTORCH_JOB, {}, "autoscaling needs Ray on KubeRay; a PyTorchJob has a fixed number "
                          "of pods"),
        (RAY_JOB, {"runtime": "volcano"}, "autoscaling needs Ray on KubeRay; a Volcano Job has "
                                          "a fixed number of pods"),
        (PYTORCH_JOB, {"runtime": "volcano"}, "autoscaling needs Ray on KubeRay; a Volcano Job "
                                              "has a fixed number of pods"),
    ],
)  # fmt: skip
def test_only_ray_on_kuberay_may_autoscale(api, member, body, changes, reason):
    response = submit(api, member, body, workers=autoscaling(body), **changes)

    assert response.status_code == 400
    assert response.json() == {"workers[0].max_replicas": [reason]}
    assert not Job.objects.exists()


@pytest.mark.parametrize(
    ("max_replicas", "reason"),
    [
        (1, "must be between replicas (2) and 1000, got 1"),
        (1001, "must be between replicas (2) and 1000, got 1001"),
        ("4", "must be an integer, got '4'"),
        (2.5, "must be an integer, got 2.5"),
        (True, "must be an integer, got True"),
    ],
)
def test_max_replicas_is_an_integer_from_replicas_to_the_limit(api, member, max_replicas, reason):
    response = submit(api, member, workers=autoscaling(max_replicas=max_replicas))

    assert response.status_code == 400
    assert response.json() == {"workers[0].max_replicas": [reason]}
    assert not Job.objects.exists()


def test_an_autoscaling_job_is_counted_at_the_gang_it_starts_with(api, member):
    # video: max 14 cpu. Head 4 + 2 workers x 4 + the autoscaler's 0.5 = 12.5 starts
    # together and fits, however far the autoscaler may grow it (docs/architecture.md
    # section 4: minReplicas, as kube-queue counts).
    grows = submit(api, member, workers=autoscaling(max_replicas=10))
    too_many_to_start = submit(
        api, member, workers=[{**autoscaling(max_replicas=10)[0], "replicas": 3}]
    )

    assert grows.status_code == 201 and grows.json()["request"]["cpu"] == "12500m"
    assert too_many_to_start.status_code == 400
    assert too_many_to_start.json() == {
        "request": [
            "can never be admitted: Insufficient quota in root/algorithm/video: cpu requested "
            "16.5, free 14 (used 0 of max 14)"
        ]
    }
    assert Job.objects.count() == 1


def test_the_openapi_schema_documents_max_replicas(api, member):
    schema = api(member).get("/api/schema/?format=json").json()

    workers = schema["components"]["schemas"]["JobSubmissionRequest"]["properties"]["workers"]
    group = schema["components"]["schemas"][workers["items"]["$ref"].rsplit("/", 1)[-1]]
    max_replicas = group["properties"]["max_replicas"]
    assert max_replicas["type"] == "integer" and max_replicas["maximum"] == 1000
    assert "Ray on kuberay only" in max_replicas["description"]
    assert "Quota counts its replicas" in max_replicas["description"]
