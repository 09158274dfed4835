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
    assert answer["waiting"]["summary"].startswith("1 job ahead; the first job ahead, #")


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


# ---- a batch -----------------------------------------------------------------------------

BATCH_DRY_RUN = "/api/v1/jobs/batch/dry-run/"
# 6 cpu: two fit the video leaf's max of 14 together, three do not.
SMALL = {
    **RAY_JOB,
    "head": {"resources": {"cpu": "2", "memory": "2G"}},
    "workers": [{"name": "small-group", "replicas": 2, "resources": {"cpu": "2", "memory": "2G"}}],
}


def dry_run_batch(client, *jobs: dict) -> list[dict]:
    response = client.post(BATCH_DRY_RUN, {"jobs": list(jobs)}, format="json")
    assert response.status_code == 200, response.json()
    return response.json()


def test_a_batchs_jobs_that_fit_together_all_fit_and_stand_in_order(api, member):
    first, second = dry_run_batch(api(member), SMALL, {**SMALL, "name": "second"})

    assert (first["fits_now"], first["position"]) == (True, 1)
    assert (second["fits_now"], second["position"]) == (True, 2)
    # The first taken as dequeued: the second is tried with it holding its 6 cpu.
    assert second["waiting"]["reason"] == "next" and second["waiting"]["ahead"] == 0
    assert second["objects"][0]["metadata"]["name"] == "second-0"
    assert nothing_stored()


def test_a_batchs_second_job_waits_for_the_quota_its_first_would_hold(api, member):
    first, second = dry_run_batch(api(member), RAY_JOB, RAY_JOB)

    assert (first["fits_now"], first["position"]) == (True, 1)
    assert (second["fits_now"], second["position"]) == (False, 2)
    assert second["waiting"]["reason"] == "quota"
    assert second["waiting"]["summary"] == (
        "It waits for cpu in root/algorithm/video: used 12 of max 14; it asks for 12"
    )
    # The replay runs the first before it: it starts when the first is expected to end.
    assert second["estimated_start_at"] > first["estimated_start_at"]
    assert second["estimate_basis"].startswith("about ")
    assert "1 job ahead" in second["estimate_basis"]
    assert nothing_stored()


def test_a_batchs_job_behind_its_first_that_waits_is_told_what_the_first_waits_for(
    api, member, other_member
):
    running(member)
    queued = api(other_member).post("/api/v1/jobs/", SMALL, format="json").json()
    before = (Job.objects.count(), JobEvent.objects.count())

    first, second, other = dry_run_batch(
        api(member), RAY_JOB, RAY_JOB, {**SMALL, "queue": "root/algorithm/text"}
    )

    assert (first["position"], second["position"], other["position"]) == (2, 3, 1)
    assert first["waiting"]["reason"] == second["waiting"]["reason"] == "behind"
    # The first of the queue is the stored one: its id is given.
    assert first["waiting"]["head"]["id"] == queued["id"]
    assert second["waiting"]["summary"].startswith("2 jobs ahead; the first job ahead")
    assert other["fits_now"] is True  # another queue: the video jobs take none of its quota
    assert (Job.objects.count(), JobEvent.objects.count()) == before


def test_a_batchs_job_of_a_higher_priority_stands_before_those_sent_before_it(api, manager):
    running(manager)

    low, high = dry_run_batch(api(manager), RAY_JOB, {**RAY_JOB, "priority": 5})

    assert (high["position"], low["position"]) == (1, 2)
    assert high["waiting"]["reason"] == "quota"
    assert low["waiting"]["reason"] == "behind"
    assert low["waiting"]["head"] == {
        "id": None, "reason": "quota", "summary": high["waiting"]["summary"]
    }  # fmt: skip


def test_a_batch_is_refused_as_a_whole_as_a_submitted_batch_is(api, member):
    bad = {**RAY_JOB, "head": {"resources": {"cpu": "4 cores", "memory": "4G"}}}
    client = api(member)

    refused = client.post(BATCH_DRY_RUN, {"jobs": [RAY_JOB, bad]}, format="json")
    too_large = client.post(
        BATCH_DRY_RUN, {"jobs": [RAY_JOB]}, format="json", CONTENT_LENGTH=str(64 * 2**20)
    )
    not_a_list = client.post(BATCH_DRY_RUN, {"jobs": RAY_JOB}, format="json")
    empty = client.post(BATCH_DRY_RUN, {"jobs": []}, format="json")

    assert refused.status_code == 400
    assert list(refused.json()) == ["jobs[1].head.resources.cpu"]
    assert too_large.status_code == 413
    assert not_a_list.status_code == 400 and "jobs" in not_a_list.json()
    assert empty.status_code == 400 and "must hold 1 to" in empty.json()["jobs"][0]
    assert nothing_stored()
