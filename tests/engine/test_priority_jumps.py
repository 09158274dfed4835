"""Priority jumps as first-class actions: move to head and set priority
(docs/architecture.md section 5)."""

import copy

import pytest
from django.urls import reverse

from jobs.document.validation import JobInvalid
from jobs.models import Job, JobEvent
from jobs.services import JobPermissionDenied, job_set_priority
from queues.models import Queue

from ..support.jobs import RAY_JOB
from ..support.pages import confirmed

pytestmark = pytest.mark.django_db


def submit(api, user, **changes):
    response = api(user).post("/api/v1/jobs/", {**copy.deepcopy(RAY_JOB), **changes}, format="json")
    assert response.status_code == 201, response.json()
    return response.json()["id"]


def position(api, user, job_id):
    return api(user).get(f"/api/v1/jobs/{job_id}/").json()["position"]


def test_a_manager_moves_a_job_to_the_head_above_every_priority(api, member, manager):
    submit(api, member)
    urgent = submit(api, manager, priority=7)
    last = submit(api, member)
    response = api(manager).post(f"/api/v1/jobs/{last}/move-to-head/")
    assert response.status_code == 200, response.json()
    assert (response.json()["position"], response.json()["priority"]) == (1, 8)
    assert position(api, member, urgent) == 2
    event = JobEvent.objects.get(job_id=last, reason="PriorityChanged")
    assert event.message == "bob moved the job to the head: priority from 0 to 8"
    assert event.actor == manager


def test_moving_the_head_to_the_head_changes_nothing(api, member, manager):
    first = submit(api, member)
    submit(api, member)
    response = api(manager).post(f"/api/v1/jobs/{first}/move-to-head/")
    assert response.json()["priority"] == 0
    assert not JobEvent.objects.filter(job_id=first, reason="PriorityChanged").exists()


def test_a_job_ties_with_an_earlier_head_so_it_goes_one_above(api, manager):
    submit(api, manager, priority=3)
    second = submit(api, manager, priority=3)
    assert api(manager).post(f"/api/v1/jobs/{second}/move-to-head/").json()["priority"] == 4


def test_members_may_not_move_a_job_to_the_head_not_even_their_own(api, member):
    submit(api, member)
    mine = submit(api, member)
    response = api(member).post(f"/api/v1/jobs/{mine}/move-to-head/")
    assert response.status_code == 403
    assert "managers and staff" in str(response.json())
    assert position(api, member, mine) == 2


def test_staff_may_move_any_job(api, member, staff):
    submit(api, member)
    mine = submit(api, member)
    assert api(staff).post(f"/api/v1/jobs/{mine}/move-to-head/").json()["position"] == 1


def test_outsiders_cannot_see_let_alone_move_a_job(api, member, outsider):
    job_id = submit(api, member)
    assert api(outsider).post(f"/api/v1/jobs/{job_id}/move-to-head/").status_code == 404


def test_a_job_behind_the_highest_priority_cannot_jump_past_it(api, member, manager):
    submit(api, manager, priority=1000)
    last = submit(api, member)
    response = api(manager).post(f"/api/v1/jobs/{last}/move-to-head/")
    assert response.status_code == 409
    assert "highest priority, 1000" in str(response.json())


def test_the_job_page_offers_move_to_head_to_managers_only(client, api, member, manager):
    submit(api, member)
    job_id = submit(api, member)
    url = reverse("job-detail", args=[job_id])
    client.force_login(member)
    assert "Move to head" not in client.get(url).content.decode()
    client.force_login(manager)
    assert "Move to head" in client.get(url).content.decode()
    # It asks first (another person's job goes ahead of others'), then moves it.
    response = confirmed(client, reverse("job-move-to-head", args=[job_id]), {}, follow=True)
    assert "Moved to the head of its queue (priority 0 to 1)." in response.content.decode()
    assert position(api, member, job_id) == 1


def test_a_queues_priority_class_is_written_into_the_objects(api, member):
    Queue.objects.filter(name="root-algorithm-video").update(priority_class="research-high")
    job_id = submit(api, member)
    rayjob = api(member).get(f"/api/v1/jobs/{job_id}/manifest/").json()[-1]
    assert rayjob["metadata"]["labels"]["ray.io/priority-class-name"] == "research-high"


def test_a_raise_is_judged_against_the_locked_row_not_the_callers_copy(api, member, manager):
    """A member's copy read before a manager lowered the job: -5 looks like lowering it
    from 0 but would raise it from -10, which only managers may do."""
    job_id = submit(api, member)
    stale = Job.objects.get(pk=job_id)
    job_set_priority(user=manager, job=Job.objects.get(pk=job_id), priority=-10)

    with pytest.raises(JobPermissionDenied):
        job_set_priority(user=member, job=stale, priority=-5)

    assert Job.objects.get(pk=job_id).priority == -10
    # And the other way: a member's copy read before a manager raised the job may lower it.
    stale = Job.objects.get(pk=job_id)
    job_set_priority(user=manager, job=Job.objects.get(pk=job_id), priority=20)
    assert job_set_priority(user=member, job=stale, priority=10).priority == 10


def test_the_service_refuses_a_priority_out_of_range_whoever_asks(api, manager):
    """The range is the service's rule, so the page, the API and any other caller agree."""
    job_id = submit(api, manager)
    with pytest.raises(JobInvalid) as refused:
        job_set_priority(user=manager, job=Job.objects.get(pk=job_id), priority=1001)
    assert refused.value.errors == {"priority": ["must be between -1000 and 1000, got 1001"]}
    assert Job.objects.get(pk=job_id).priority == 0
