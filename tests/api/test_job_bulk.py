"""Acting on many jobs at once: the jobs page's bulk form and POST /api/v1/jobs/bulk/."""

from __future__ import annotations

import html

import pytest

from jobs.models import Job, JobEvent, State

from ..support.jobs import RAY_JOB, submit_document
from ..support.pages import confirmed

pytestmark = pytest.mark.django_db

BULK = "/api/v1/jobs/bulk/"
MEMBERS_CANCEL = "members cancel only their own jobs; managers cancel any job"


@pytest.fixture
def sweep(member, other_member, outsider):
    """Four of alice's jobs, two of carol's (both algorithm), one of oscar's (infrastructure)."""
    alices = [submit_document(member, RAY_JOB, name=f"sweep-{n}") for n in range(4)]
    carols = [submit_document(other_member, RAY_JOB, name=f"sweep-{n}") for n in range(2)]
    oscars = [submit_document(outsider, RAY_JOB, queue="root/infrastructure/devops", name="theirs")]
    return alices, carols, oscars


def states(jobs) -> list[str]:
    return [Job.objects.get(pk=job.pk).state for job in jobs]


def test_a_manager_cancels_everything_a_filter_matches(api, manager, sweep):
    alices, carols, oscars = sweep
    answer = api(manager).post(
        BULK, {"filter": {"q": "sweep", "state": "queued"}, "action": "cancel"}, format="json"
    )
    assert answer.status_code == 200, answer.content
    assert answer.json() == {
        "action": "cancel",
        "done": [job.pk for job in alices + carols],
        "copies": [],
        "refused": [],
        "summary": "6 cancelled",
    }
    assert states(alices + carols) == ["cancelled"] * 6
    assert states(oscars) == ["queued"]  # another department's: not matched
    events = JobEvent.objects.filter(reason="Cancelled", actor=manager)
    assert sorted(events.values_list("job_id", flat=True)) == [j.pk for j in alices + carols]


def test_a_member_cancels_their_own_and_is_told_why_the_others_stay(api, member, sweep):
    alices, carols, oscars = sweep
    ids = [alices[0].pk, carols[0].pk, alices[1].pk, oscars[0].pk, carols[1].pk]
    answer = api(member).post(BULK, {"ids": ids, "action": "cancel"}, format="json").json()
    assert answer["done"] == [alices[0].pk, alices[1].pk]
    assert answer["refused"] == [
        {"reason": "no such job", "ids": [oscars[0].pk]},  # not theirs to see: not named
        {"reason": MEMBERS_CANCEL, "ids": [carols[0].pk, carols[1].pk]},
    ]
    assert answer["summary"] == f"2 cancelled; 1 refused: no such job; 2 refused: {MEMBERS_CANCEL}"
    assert states(alices[:2] + carols) == ["cancelled", "cancelled", "queued", "queued"]


def test_priorities_follow_the_same_rights_as_one_jobs(api, member, manager, sweep):
    alices, carols, _ = sweep
    ids = [job.pk for job in alices[:2] + carols[:1]]
    body = {"ids": ids, "action": "priority", "priority": -5}
    answer = api(member).post(BULK, body, format="json").json()
    assert answer["done"] == ids[:2]
    assert answer["refused"] == [{"reason": "members change only their own jobs", "ids": ids[2:]}]
    body = {"ids": ids[:2], "action": "priority", "priority": 3}
    answer = api(member).post(BULK, body, format="json").json()
    assert answer["refused"] == [
        {"reason": "only the department's managers and staff may raise a priority", "ids": ids[:2]}
    ]
    assert [Job.objects.get(pk=pk).priority for pk in ids] == [-5, -5, 0]
    body = {"ids": [alices[3].pk], "action": "move-to-head"}
    answer = api(manager).post(BULK, body, format="json").json()
    assert answer["summary"] == "1 moved to the head"
    assert Job.objects.get(pk=alices[3].pk).priority == 1


def test_a_finished_job_is_named_and_the_others_go_ahead(api, member, sweep):
    alices, _, _ = sweep
    Job.objects.filter(pk=alices[0].pk).update(state=State.SUCCEEDED)
    ids = [job.pk for job in alices]
    answer = api(member).post(BULK, {"ids": ids, "action": "cancel"}, format="json").json()
    assert answer["refused"] == [{"reason": "the job has already succeeded", "ids": ids[:1]}]
    assert answer["done"] == ids[1:]


def test_finished_jobs_are_resubmitted_as_copies_of_the_users(api, member, sweep):
    alices, carols, _ = sweep
    finished = [alices[0], alices[1], carols[0]]
    Job.objects.filter(pk__in=[job.pk for job in finished]).update(state=State.SUCCEEDED)
    Job.objects.filter(pk=alices[1].pk).update(state=State.FAILED, priority=-5)
    ids = [alices[0].pk, alices[1].pk, carols[0].pk, alices[2].pk]
    answer = api(member).post(BULK, {"ids": ids, "action": "resubmit"}, format="json").json()
    assert answer["done"] == ids[:2]
    assert answer["refused"] == [
        {
            "reason": "members resubmit only their own jobs; managers resubmit any job",
            "ids": [carols[0].pk],
        },
        {"reason": "only finished jobs are resubmitted; this one is queued", "ids": [alices[2].pk]},
    ]
    copies = {entry["of"]: Job.objects.get(pk=entry["id"]) for entry in answer["copies"]}
    assert list(copies) == ids[:2]
    for original, copy in ((alices[0], copies[ids[0]]), (alices[1], copies[ids[1]])):
        assert copy.state == State.QUEUED and copy.owner == member
        assert (copy.name, copy.queue_id, copy.request) == (
            original.name,
            original.queue_id,
            original.request,
        )
        event = JobEvent.objects.get(job=original, reason="Resubmitted")
        assert event.message == f"Resubmitted by alice as #{copy.pk}" and event.actor == member
    assert copies[ids[1]].priority == -5  # the copy keeps what the job was given
    assert answer["summary"].startswith(f"2 resubmitted as #{copies[ids[0]].pk}, #")


def test_a_copy_is_checked_as_a_new_submission(api, member, sweep):
    """A member cannot resubmit a job that a manager raised above 0: the copy would be a
    priority jump. The refusal names the field, and nothing is queued for it."""
    alices, _, _ = sweep
    Job.objects.filter(pk=alices[0].pk).update(state=State.CANCELLED, priority=7)
    before = Job.objects.count()
    answer = api(member).post(BULK, {"ids": [alices[0].pk], "action": "resubmit"}, format="json")
    assert answer.json()["refused"] == [
        {
            "reason": "priority: members submit at priority 0 or below; ask a manager to raise it",
            "ids": [alices[0].pk],
        }
    ]
    assert Job.objects.count() == before
    assert not JobEvent.objects.filter(reason="Resubmitted").exists()


@pytest.mark.parametrize(
    ("body", "field", "reason"),
    [
        ({"ids": [1], "action": "delete"}, "action", '"delete" is not a valid choice'),
        ({"ids": [1], "action": "priority"}, "priority", "is required"),
        (
            {"ids": [1], "action": "priority", "priority": 5000},
            "priority",
            "must be between -1000 and 1000, got 5000",
        ),
        ({"ids": [1], "action": "priority", "priority": "5"}, "priority", "must be an integer"),
        ({"action": "cancel"}, "ids", "give either ids or filter"),
        ({"ids": [1], "filter": {}, "action": "cancel"}, "ids", "give either ids or filter"),
        ({"ids": ["one"], "action": "cancel"}, "ids", "A valid integer is required"),  # ids[0]
        ({"ids": [2**70], "action": "cancel"}, "ids", "less than or equal"),
        ({"filter": {"state": "asleep"}, "action": "cancel"}, "filter.state", "unknown state"),
        ({"filter": {"q": "nothing-like-it"}, "action": "cancel"}, "filter", "names no job"),
    ],
)
def test_a_request_wrong_as_a_whole_changes_nothing(api, member, sweep, body, field, reason):
    answer = api(member).post(BULK, body, format="json")
    assert answer.status_code == 400
    errors = answer.json()
    assert reason in str(errors) and any(key.split("[")[0] == field for key in errors), errors
    if field == "ids" and "ids[0]" in errors:
        assert list(errors) == ["ids[0]"]  # the item's path, as elsewhere
    alices, carols, _ = sweep
    assert states(alices + carols) == ["queued"] * 6
    assert not JobEvent.objects.filter(reason__in=["Cancelled", "PriorityChanged"]).exists()


def test_the_jobs_page_acts_on_the_chosen_rows_or_the_whole_filter(client, member, sweep):
    alices, carols, _ = sweep
    client.force_login(member)
    back = "/jobs/?q=sweep"
    page = client.get(back).content.decode()
    assert f'name="ids" value="{carols[0].pk}"' in page and "Apply to all 6 matching" in page
    answer = confirmed(
        client,
        "/jobs/bulk/",
        {
            "ids": [alices[0].pk, carols[0].pk],
            "action": "cancel",
            "scope": "selected",
            "back": back,
        },
    )
    assert answer.status_code == 302 and answer["Location"] == back
    shown = html.unescape(client.get(back).content.decode())
    assert f"1 cancelled; 1 refused: {MEMBERS_CANCEL}" in shown
    answer = confirmed(
        client,
        "/jobs/bulk/",
        {"filter": "q=sweep&state=queued", "action": "cancel", "scope": "filter", "back": back},
    )
    shown = html.unescape(client.get(back).content.decode())
    assert f"3 cancelled; 2 refused: {MEMBERS_CANCEL}" in shown
    assert states(alices) == ["cancelled"] * 4
    answer = client.post(
        "/jobs/bulk/", {"action": "priority", "priority": "high", "ids": [alices[0].pk]}
    )
    assert answer["Location"] == "/jobs/"  # no back: the list
    shown = html.unescape(client.get("/jobs/").content.decode())
    assert "Nothing was changed: priority: must be an integer, got 'high'" in shown
