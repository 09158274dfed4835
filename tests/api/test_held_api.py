"""Hold and release through the API, the bulk endpoint and webhooks; submitted held."""

from __future__ import annotations

import copy

import pytest

from hooks.models import Delivery
from hooks.services import webhook_create
from jobs.engine.admission.cycle import admission_cycle
from jobs.models import Job, JobEvent

from ..support.jobs import RAY_JOB

pytestmark = pytest.mark.django_db

SMALL = {"head": {"resources": {"cpu": "2", "memory": "1Gi"}}, "workers": []}


def submitted(api, user, query: str = "", **changes) -> dict:
    body = {**copy.deepcopy(RAY_JOB), **SMALL, **changes}
    response = api(user).post(f"/api/v1/jobs/{query}", body, format="json")
    assert response.status_code == 201, response.json()
    return response.json()


def test_a_job_submitted_held_says_so_and_waits_until_released(api, member):
    job = submitted(api, member, "?held=true")
    assert (job["held"], job["held_by"], job["state"], job["position"]) == (
        True, "alice", "queued", 1,
    )  # fmt: skip
    assert admission_cycle().admitted == []
    answer = api(member).get(f"/api/v1/jobs/{job['id']}/").json()
    assert answer["waiting"]["reason"] == "held"
    assert answer["waiting"]["summary"].startswith("It is held by alice since ")
    assert answer["estimate_basis"] == "held: no estimate until it is released"
    first = JobEvent.objects.filter(job_id=job["id"]).first()
    assert first.message == "Enqueued held in root-algorithm-video by alice at priority 0"

    released = api(member).post(f"/api/v1/jobs/{job['id']}/release/")
    assert released.status_code == 200, released.json()
    assert (released.json()["held"], released.json()["held_by"]) == (False, None)
    assert admission_cycle().admitted == [job["id"]]


def test_hold_and_release_answer_the_job_and_refuse_with_reasons(api, member, other_member):
    job = submitted(api, member)
    held = api(member).post(f"/api/v1/jobs/{job['id']}/hold/")
    assert held.status_code == 200, held.json()
    assert (held.json()["held"], held.json()["held_by"], held.json()["position"]) == (
        True, "alice", 1,
    )  # fmt: skip
    assert held.json()["held_at"]
    refused = api(other_member).post(f"/api/v1/jobs/{job['id']}/release/")
    assert refused.status_code == 403
    assert "members release only their own jobs" in refused.json()["detail"]
    api(member).post(f"/api/v1/jobs/{job['id']}/release/")
    admission_cycle()
    late = api(member).post(f"/api/v1/jobs/{job['id']}/hold/")
    assert late.status_code == 409
    assert late.json()["detail"] == "only a pending job can be held; this one is admitted"


def test_a_held_query_that_is_not_a_yes_or_no_is_refused_by_name(api, member):
    response = api(member).post("/api/v1/jobs/?held=maybe", RAY_JOB, format="json")
    assert response.status_code == 400
    assert "held" in response.json() and "maybe" in str(response.json()["held"])
    assert not Job.objects.exists()


def test_a_batch_is_held_and_released_in_bulk(api, member, manager):
    body = {"jobs": [{**copy.deepcopy(RAY_JOB), **SMALL, "name": f"sweep-{n}"} for n in range(3)]}
    batch = api(member).post("/api/v1/jobs/batch/?held=1", body, format="json")
    assert batch.status_code == 201, batch.json()
    ids = [job["id"] for job in batch.json()["jobs"]]
    assert Job.objects.filter(pk__in=ids, held_at__isnull=False).count() == 3
    answer = (
        api(manager)
        .post("/api/v1/jobs/bulk/", {"ids": ids[:2], "action": "release"}, format="json")
        .json()
    )
    assert answer["done"] == ids[:2] and answer["summary"] == "2 released"
    assert sorted(admission_cycle().admitted) == ids[:2]
    again = api(member).post("/api/v1/jobs/bulk/", {"ids": ids, "action": "hold"}, format="json")
    assert again.json()["summary"] == (
        "1 held; 2 refused: only a pending job can be held; this one is admitted"
    )


def test_a_department_hook_is_told_of_a_hold_and_a_release(
    api, receivable, departments, manager, member, listener
):
    hook, _secret = webhook_create(
        department=departments["algorithm"], url=listener.url(), actor=manager
    )
    job = submitted(api, member)
    api(member).post(f"/api/v1/jobs/{job['id']}/hold/")
    api(manager).post(f"/api/v1/jobs/{job['id']}/release/")
    deliveries = Delivery.objects.filter(hook=hook).order_by("id")
    assert [(d.event, d.job_state) for d in deliveries] == [
        ("job.queued", "queued"),
        ("job.held", "queued"),
        ("job.released", "queued"),
    ]
