"""POST /api/v1/jobs/batch/: a CI pipeline's sweep, all jobs accepted or none."""

import copy

import pytest

from jobs.models import Job, JobEvent
from jobs.services import BATCH_MAX

from ..support.jobs import PYTORCH_JOB, RAY_JOB

pytestmark = pytest.mark.django_db
BATCH = "/api/v1/jobs/batch/"


def sweep(count: int, body=RAY_JOB, **changes) -> list[dict]:
    return [{**copy.deepcopy(body), "name": f"sweep-{i}", **changes} for i in range(count)]


def test_it_queues_every_job_of_a_sweep_in_order(api, member):
    response = api(member).post(BATCH, {"jobs": sweep(3) + sweep(1, PYTORCH_JOB)}, format="json")

    assert response.status_code == 201, response.json()
    data = response.json()
    assert data["count"] == 4
    assert [j["name"] for j in data["jobs"]] == ["sweep-0", "sweep-1", "sweep-2", "sweep-0"]
    assert {j["state"] for j in data["jobs"]} == {"queued"}
    jobs = Job.objects.filter(pk__in=[j["id"] for j in data["jobs"]]).order_by("id")
    assert [j.pk for j in jobs] == [j["id"] for j in data["jobs"]]
    assert [j.owner for j in jobs] == [member] * 4
    assert jobs[3].kind == "pytorch" and jobs[3].request["nvidia.com/gpu"] == 3
    for job in jobs:
        assert list(job.events.values_list("reason", "actor")) == [("Enqueued", member.pk)]


def test_the_batch_keeps_its_order_in_the_queue(api, member):
    ids = [
        j["id"] for j in api(member).post(BATCH, {"jobs": sweep(3)}, format="json").json()["jobs"]
    ]

    positions = [api(member).get(f"/api/v1/jobs/{pk}/").json()["position"] for pk in ids]

    assert positions == [1, 2, 3]


def test_one_bad_job_stores_nothing_and_every_problem_is_named(api, member):
    jobs = sweep(4)
    jobs[1]["name"] = "Bad_Name"
    jobs[3]["head"] = {"resources": {"cpu": "16"}}  # more than the leaf's max, ever

    response = api(member).post(BATCH, {"jobs": jobs}, format="json")

    assert response.status_code == 400
    errors = response.json()
    assert set(errors) == {"jobs[1].name", "jobs[3].request"}
    assert "DNS-1123" in errors["jobs[1].name"][0]
    assert errors["jobs[3].request"][0].startswith("can never be admitted")
    assert not Job.objects.exists() and not JobEvent.objects.exists()


def test_a_queue_the_user_cannot_use_refuses_the_whole_batch(api, member):
    jobs = sweep(2)
    jobs[1]["queue"] = "root/infrastructure/devops"

    response = api(member).post(BATCH, {"jobs": jobs}, format="json")

    assert response.status_code == 400
    assert response.json() == {
        "jobs[1].queue": ["'root/infrastructure/devops' is not a queue you can submit to"]
    }
    assert not Job.objects.exists()


def test_a_member_cannot_jump_the_queue_in_a_batch(api, member, manager):
    refused = api(member).post(BATCH, {"jobs": sweep(1, priority=5)}, format="json")
    accepted = api(manager).post(BATCH, {"jobs": sweep(1, priority=5)}, format="json")

    assert refused.status_code == 400 and "jobs[0].priority" in refused.json()
    assert accepted.status_code == 201 and accepted.json()["jobs"][0]["priority"] == 5


@pytest.mark.parametrize(
    ("body", "field", "reason"),
    [
        ({}, "jobs", "must be a list of job objects"),
        ({"jobs": "sweep"}, "jobs", "must be a list of job objects"),
        ({"jobs": []}, "jobs", f"must hold 1 to {BATCH_MAX} jobs, got 0"),
        ({"jobs": [{}] * (BATCH_MAX + 1)}, "jobs", f"must hold 1 to {BATCH_MAX} jobs, got 1001"),
        ({"jobs": [7]}, "jobs[0].body", "must be a JSON object"),
    ],
)
def test_a_malformed_batch_is_refused_with_the_field_named(api, member, body, field, reason):
    response = api(member).post(BATCH, body, format="json")

    assert response.status_code == 400
    assert response.json()[field] == [reason]


def test_a_full_batch_of_a_thousand_is_accepted(api, member):
    response = api(member).post(
        BATCH, {"jobs": sweep(BATCH_MAX, head={"resources": {"cpu": "1"}})}, format="json"
    )

    assert response.status_code == 201
    assert Job.objects.count() == JobEvent.objects.count() == BATCH_MAX


def test_a_body_over_the_size_limit_is_refused_before_it_is_read(api, member):
    response = api(member).post(
        BATCH, {"jobs": sweep(1)}, format="json", CONTENT_LENGTH=str(64 * 2**20)
    )

    assert response.status_code == 413
    assert "smaller batches" in response.json()["body"][0]


def test_the_batch_needs_a_token(client):
    assert client.post(BATCH, {"jobs": sweep(1)}, content_type="application/json").status_code in (
        401,
        403,
    )


def test_a_batch_names_the_job_whose_worker_group_may_not_autoscale(api, member):
    jobs = sweep(2) + sweep(1, PYTORCH_JOB)
    jobs[1]["workers"][0]["max_replicas"] = 1  # below its 2 replicas
    jobs[2]["workers"][0]["max_replicas"] = 4  # a PyTorchJob

    response = api(member).post(BATCH, {"jobs": jobs}, format="json")

    assert response.status_code == 400
    assert response.json() == {
        "jobs[1].workers[0].max_replicas": ["must be between replicas (2) and 1000, got 1"],
        "jobs[2].workers[0].max_replicas": [
            "autoscaling needs Ray on KubeRay; a PyTorchJob has a fixed number of pods"
        ],
    }
    assert not Job.objects.exists()


def test_a_batch_keeps_max_replicas_and_counts_each_job_at_its_starting_gang(api, member):
    jobs = sweep(2, queue="root/algorithm/text")
    jobs[0]["workers"][0]["max_replicas"] = 4
    jobs[1]["workers"][0]["max_replicas"] = 6

    accepted = api(member).post(BATCH, {"jobs": jobs}, format="json")

    assert accepted.status_code == 201, accepted.json()
    stored = list(Job.objects.order_by("pk").values_list("workers", "request"))
    assert [workers[0]["max_replicas"] for workers, _ in stored] == [4, 6]
    # head 4 + 2 workers x 4 + KubeRay's autoscaler 0.5
    assert [request["cpu"] for _, request in stored] == [12_500, 12_500]
