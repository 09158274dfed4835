"""The dry run: would a job run if it were submitted now, and when, answered as a queued job
is answered, with nothing stored and nothing triggered."""

from __future__ import annotations

import copy

import pytest

from jobs.models import Job, JobEvent, QueueTicket

from ..support.jobs import RAY_JOB, running

pytestmark = pytest.mark.django_db
DRY_RUN = "/api/v1/jobs/dry-run/"


def nothing_stored() -> bool:
    return not (Job.objects.exists() or JobEvent.objects.exists() or QueueTicket.objects.exists())


def test_a_job_that_fits_is_dequeued_at_the_next_cycle(api, member):
    response = api(member).post(DRY_RUN, RAY_JOB, format="json")

    assert response.status_code == 200, response.json()
    answer = response.json()
    assert (answer["fits_now"], answer["position"], answer["queue"]) == (
        True, 1, "root-algorithm-video"
    )  # fmt: skip
    assert answer["waiting"]["reason"] == "next"
    assert answer["estimate_basis"].startswith("now: it fits")
    assert [o["kind"] for o in answer["objects"]] == ["RayJob"]
    assert answer["objects"][0]["metadata"]["name"] == "rayjob-video-0"
    assert answer["request"]["cpu"] == "12"
    assert nothing_stored()


def test_a_job_that_waits_for_quota_says_why_and_about_when(api, member):
    holder = running(member)
    before = (Job.objects.count(), JobEvent.objects.count())

    answer = api(member).post(DRY_RUN, RAY_JOB, format="json").json()

    assert answer["fits_now"] is False and answer["position"] == 1
    assert answer["waiting"]["reason"] == "quota"
    assert answer["waiting"]["summary"] == (
        "It waits for cpu in root/algorithm/video: used 12 of max 14; it asks for 12"
    )
    assert any(row["blocks"] for row in answer["waiting"]["path"])
    assert answer["estimated_start_at"] is not None  # when the running job is expected to end
    assert "1 running job expected to end" in answer["estimate_basis"]
    assert (Job.objects.count(), JobEvent.objects.count()) == before
    assert Job.objects.get().pk == holder.pk


def test_a_job_behind_a_queued_one_says_its_place(api, member, other_member):
    running(member)
    api(other_member).post("/api/v1/jobs/", RAY_JOB, format="json")

    answer = api(member).post(DRY_RUN, RAY_JOB, format="json").json()

    assert answer["position"] == 2
    assert answer["waiting"]["reason"] == "behind"
    assert answer["waiting"]["summary"].startswith("1 job ahead; the first waits for cpu")


def test_a_job_that_can_never_run_and_a_bad_field_are_refused_as_a_submit_is(api, member):
    huge = copy.deepcopy(RAY_JOB)
    huge["workers"][0]["replicas"] = 20
    bad = {**RAY_JOB, "head": {"resources": {"cpu": "4 cores", "memory": "4G"}}}

    never = api(member).post(DRY_RUN, huge, format="json")
    wrong = api(member).post(DRY_RUN, bad, format="json")

    assert never.status_code == 400
    assert never.json()["request"][0].startswith("can never be admitted")
    assert wrong.status_code == 400 and "head.resources.cpu" in wrong.json()
    assert nothing_stored()
