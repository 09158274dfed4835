"""The outbox trigger: each state change of a job, whichever statement makes it, owes one
delivery to each active hook that applies, in the change's own transaction."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from hooks.models import Delivery, Webhook
from hooks.services import webhook_create, webhook_pause
from jobs.engine.admission.cycle import admission_cycle
from jobs.models import State
from jobs.services import job_cancel, job_submit_batch
from queues.departments import department_create

from ..support.jobs import RAY_JOB, refresh, submit
from ..support.personas import person

pytestmark = pytest.mark.django_db


@pytest.fixture
def algorithm_hook(receivable, departments, manager, listener):
    hook, _secret = webhook_create(
        department=departments["algorithm"], url=listener.url(), actor=manager
    )
    return hook


def events(hook: Webhook) -> list[tuple[int | None, str]]:
    return list(Delivery.objects.filter(hook=hook).order_by("id").values_list("job_id", "event"))


def test_it_owes_nothing_when_no_hook_exists(member):
    job = submit(member)
    admission_cycle()

    assert refresh(job).state == State.ADMITTED
    assert not Delivery.objects.exists()


def test_it_owes_a_department_hook_each_change_of_its_jobs_raw_sql_and_orm(
    algorithm_hook, member, manager
):
    job = submit(member)
    admission_cycle()  # raw SQL over the cycle's jobs
    job_cancel(user=manager, job=refresh(job))  # one job, saved by the service

    assert events(algorithm_hook) == [
        (job.pk, "job.queued"),
        (job.pk, "job.admitted"),
        (job.pk, "job.stopping"),
    ]
    admitted = Delivery.objects.get(hook=algorithm_hook, event="job.admitted")
    assert (admitted.job_state_before, admitted.job_state) == ("queued", "admitted")
    assert admitted.status == Delivery.Status.PENDING


def test_it_leaves_out_other_departments_and_paused_hooks(
    receivable, departments, algorithm_hook, outsider, member, listener
):
    theirs, _ = webhook_create(
        department=departments["infrastructure"], url=listener.url(), actor=outsider
    )
    webhook_pause(hook=algorithm_hook, reason="by hand")

    submit(member)

    assert events(theirs) == []
    assert events(algorithm_hook) == []


def test_a_job_hook_hears_of_its_job_only(receivable, member, listener):
    job, other = submit(member), submit(member, name="other")
    hook, _ = webhook_create(job=job, url=listener.url(), actor=member)

    admission_cycle()

    # First the state it was added in, so a hook added just after submitting misses nothing.
    assert events(hook) == [(job.pk, "job.queued"), (job.pk, "job.admitted")]
    assert other.pk not in [job_id for job_id, _ in events(hook)]


def test_a_job_hook_added_later_is_told_where_the_job_stands(receivable, member, listener):
    job = submit(member)
    admission_cycle()
    job = refresh(job)

    hook, _ = webhook_create(job=job, url=listener.url(), actor=member)

    assert job.state == State.ADMITTED
    assert list(Delivery.objects.filter(hook=hook).values_list("event", "job_state_before")) == [
        ("job.admitted", "")
    ]


def test_backoff_is_owed_at_most_once_a_minute_per_job(algorithm_hook, member):
    submit(member)  # 12 cpu of video's max 14: the next one waits
    waiting = submit(member, name="second")
    now = timezone.now()
    admission_cycle(now=now)
    assert refresh(waiting).state == State.BACKOFF
    tried_again = refresh(waiting).next_attempt_at + timedelta(seconds=1)
    admission_cycle(now=tried_again)

    assert refresh(waiting).backoff_count == 2
    backoffs = Delivery.objects.filter(hook=algorithm_hook, job=waiting, event="job.backoff")
    assert backoffs.count() == 1
    assert backoffs.get().reason.startswith("Insufficient quota")


def test_a_department_above_hears_of_the_queues_below_it(receivable, tree, departments, member):
    platform = department_create(name="platform", quota_node=tree["root"])
    boss = person(platform, "pat", "manager")
    hook, _ = webhook_create(department=platform, url="http://127.0.0.1:9/", actor=boss)

    job = submit(member)

    assert events(hook) == [(job.pk, "job.queued")]


def test_a_batch_written_with_copy_owes_each_job(algorithm_hook, member):
    jobs = job_submit_batch(
        user=member, documents=[{**RAY_JOB, "name": f"sweep-{n}"} for n in range(3)]
    )

    assert events(algorithm_hook) == [(job.pk, "job.queued") for job in jobs]
