"""Nothing destroyed by one click: the jobs page's bulk form and a job page's "Cancel job"
and "Move to head" ask first, naming what would happen, and change nothing until answered.
Without JavaScript the question is a page (these tests); with it, the same question in a
dialog (tests/pages/test_browser.py)."""

from __future__ import annotations

import html
import re

import pytest
from django.urls import reverse

from jobs.bulk import CONFIRM_TYPED_ABOVE
from jobs.models import Job, JobEvent

from ..support.jobs import PYTORCH_JOB, RAY_JOB, submit, submit_document
from ..support.pages import HTMX, confirmed, login

pytestmark = pytest.mark.django_db

BULK = "/jobs/bulk/"
BACK = "/jobs/?q=sweep"
EVERY_SWEEP = {"filter": "q=sweep", "action": "cancel", "scope": "filter", "back": BACK}


@pytest.fixture
def sweep(member, other_member, manager):
    """Four jobs of three people in two queues: alice's two and carol's in video (Ray),
    bob's in text (PyTorch)."""
    return [
        submit_document(member, RAY_JOB, name="sweep-0"),
        submit_document(member, RAY_JOB, name="sweep-1"),
        submit_document(other_member, RAY_JOB, name="sweep-2"),
        submit_document(manager, PYTORCH_JOB, name="sweep-3"),
    ]


def states(jobs) -> list[str]:
    return list(Job.objects.filter(pk__in=[j.pk for j in jobs]).values_list("state", flat=True))


def text(response) -> str:
    return html.unescape(response.content.decode())


def confirm_value(response) -> str:
    return re.search(r'name="confirm" value="(\w+)"', response.content.decode())[1]


def test_it_asks_first_naming_the_jobs_people_and_queues_and_changes_nothing(
    client, manager, sweep
):
    answer = login(client, manager).post(BULK, EVERY_SWEEP)

    assert answer.status_code == 200
    page = text(answer)
    assert '<h1 id="confirm-title">Cancel 4 jobs of 3 people in 2 queues?</h1>' in page
    assert "alice (2), carol (1), you (1)" in page
    assert "root-algorithm-video (3), root-algorithm-text (1)" in page
    assert "3 of them are other people's work." in page
    assert ">Cancel 4 jobs</button>" in page
    assert f'<a class="button" href="{html.escape(BACK)}" data-dismiss>Go back</a>' in (
        answer.content.decode()
    )
    assert 'name="typed"' not in page  # 4 jobs: a click confirms
    for name, value in EVERY_SWEEP.items():  # the question's form sends the same again
        assert f'name="{name}" value="{html.escape(value)}"' in answer.content.decode()
    assert states(sweep) == ["queued"] * 4
    assert not JobEvent.objects.filter(reason="Cancelled").exists()


def test_the_confirmed_post_acts(client, manager, sweep):
    login(client, manager)

    answer = client.post(
        BULK, {**EVERY_SWEEP, "confirm": confirm_value(client.post(BULK, EVERY_SWEEP))}
    )

    assert answer.status_code == 302 and answer["Location"] == BACK
    assert states(sweep) == ["cancelled"] * 4
    assert "4 cancelled" in text(client.get(BACK))


def test_past_the_threshold_the_number_must_be_typed_and_a_wrong_one_is_refused(client, member):
    many = [submit(member, name=f"sweep-{n}") for n in range(CONFIRM_TYPED_ABOVE + 1)]
    count = str(len(many))
    login(client, member)
    asked = client.post(BULK, EVERY_SWEEP)
    assert "Cancel 21 jobs of 1 person in 1 queue?" in text(asked)
    assert f'pattern="{count}"' in text(asked)
    assert "Type 21, the number of jobs, to confirm" in text(asked)
    confirm = {**EVERY_SWEEP, "confirm": confirm_value(asked)}

    for typed in ("", "20", "yes"):
        answer = client.post(BULK, {**confirm, "typed": typed})
        assert answer.status_code == 400
        assert "<code>typed</code>: type 21, the number of jobs, to confirm" in text(answer)
        assert 'aria-invalid="true" aria-describedby="typed-error"' in text(answer)
        assert states(many) == ["queued"] * len(many)
    assert "'20' is not it" in text(client.post(BULK, {**confirm, "typed": "20"}))

    answer = client.post(BULK, {**confirm, "typed": count})
    assert answer.status_code == 302
    assert states(many) == ["cancelled"] * len(many)


def test_a_filter_that_matches_other_jobs_by_the_answer_is_asked_about_again(
    client, manager, sweep
):
    login(client, manager)
    confirm = confirm_value(client.post(BULK, EVERY_SWEEP))
    later = submit(manager, name="sweep-4")

    answer = client.post(BULK, {**EVERY_SWEEP, "confirm": confirm})

    assert answer.status_code == 409
    assert "Cancel 5 jobs of 3 people in 2 queues?" in text(answer)
    assert "have changed since you were asked" in text(answer)
    assert states([*sweep, later]) == ["queued"] * 5


def test_the_dialog_gets_the_question_alone(client, manager, sweep):
    answer = login(client, manager).post(BULK, EVERY_SWEEP, headers=HTMX)

    assert answer.status_code == 200
    page = text(answer)
    assert page.lstrip().startswith('<div class="confirm">')
    assert '<h2 id="confirm-title">Cancel 4 jobs of 3 people in 2 queues?</h2>' in page
    assert "<html" not in page and "<nav" not in page
    assert states(sweep) == ["queued"] * 4


def test_nothing_ticked_says_what_to_do(client, member, sweep):
    login(client, member)
    nothing = {"action": "cancel", "scope": "selected", "back": BACK}

    answer = client.post(BULK, nothing)
    assert answer.status_code == 302 and answer["Location"] == BACK
    told = "Nothing was changed: tick the jobs to act on, or apply to all matching."
    assert told in text(client.get(BACK))
    answer = client.post(BULK, nothing, headers=HTMX)  # the whole page goes back, not the dialog
    assert answer.status_code == 200 and answer["HX-Redirect"] == BACK
    assert "choose one of cancel" in text(
        client.post(BULK, {**EVERY_SWEEP, "action": ""}, follow=True)
    )
    assert states(sweep) == ["queued"] * 4


def test_the_bulk_form_has_no_default_action_and_asks_through_the_dialog(client, member, sweep):
    page = login(client, member).get(BACK).content.decode()

    assert '<select name="action" required>' in page
    assert '<option value="" selected disabled>Choose…</option>' in page
    assert 'hx-post="/jobs/bulk/" hx-target="#confirm-dialog"' in page
    assert '<dialog id="confirm-dialog" class="confirm-dialog"' in page
    assert re.search(r'<script src="/static/confirm(\.\w+)?\.js" defer>', page)


def test_a_jobs_cancel_and_move_to_head_ask_first(client, manager, other_member):
    first, job = submit(other_member), submit(other_member, name="late")
    login(client, manager)
    cancel = reverse("job-cancel", args=[job.pk])
    move = reverse("job-move-to-head", args=[job.pk])
    assert f'hx-post="{cancel}" hx-target="#confirm-dialog"' in text(
        client.get(reverse("job-detail", args=[job.pk]))
    )

    asked = client.post(cancel)
    assert asked.status_code == 200
    assert f"Cancel late #{job.pk} (carol's, in root-algorithm-video)?" in text(asked)
    assert f">Cancel job #{job.pk}</button>" in text(asked)
    asked = client.post(move)
    assert f"Move late #{job.pk} (carol's, in root-algorithm-video) to the head of the queue?" in (
        text(asked)
    )
    assert states([first, job]) == ["queued", "queued"]

    assert confirmed(client, move, {}).status_code == 302
    job.refresh_from_db()
    assert job.priority > first.priority
    assert confirmed(client, cancel, {}).status_code == 302
    assert states([job]) == ["cancelled"]
