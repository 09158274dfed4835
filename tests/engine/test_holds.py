"""The ledger of quota held (jobs.models.Hold): the database opens a span as a statement
moves a job into a state that holds quota and closes it as one moves it out, whichever
writer it is, so what each leaf held and when is kept however often a job is preempted."""

from __future__ import annotations

import copy
from datetime import timedelta

import pytest
from django.utils import timezone

from jobs.document.schema import job_parse
from jobs.engine.admission.cycle import admission_cycle
from jobs.engine.reconcile import jobs_reconcile
from jobs.engine.sync import cluster_sync
from jobs.models import Hold, Job, State
from jobs.services import job_cancel, job_submit

from ..support.jobs import INTERN_JOB, RAY_JOB

pytestmark = pytest.mark.django_db


@pytest.fixture
def now():
    return timezone.now().replace(microsecond=0) - timedelta(hours=1)


def submit(user, body, now, **changes):
    return job_submit(user=user, draft=job_parse({**copy.deepcopy(body), **changes}), now=now)


def run(job_ids, now):
    jobs_reconcile(job_ids, now=now)
    cluster_sync(now=now)


def spans(job: Job) -> list[tuple]:
    return list(
        Hold.objects.filter(job=job).order_by("id").values_list("path", "started_at", "ended_at")
    )


def test_a_job_holds_its_quota_from_its_dequeue_to_its_finish(member, now):
    job = submit(member, RAY_JOB, now, run_seconds=60)
    assert spans(job) == []  # waiting holds nothing
    admission_cycle(now=now + timedelta(seconds=1))
    assert spans(job) == [("root/algorithm/video", now + timedelta(seconds=1), None)]
    run([job.pk], now + timedelta(seconds=2))

    cluster_sync(now=now + timedelta(seconds=90))
    job.refresh_from_db()
    assert job.state == State.SUCCEEDED
    assert spans(job) == [("root/algorithm/video", now + timedelta(seconds=1), job.finished_at)]
    assert Hold.objects.get(job=job).request == job.request


def test_a_preempted_job_holds_until_it_has_left_and_again_once_readmitted(intern, member, now):
    interns = [submit(intern, INTERN_JOB, now + timedelta(seconds=i)) for i in range(4)]
    first = admission_cycle(now=now + timedelta(seconds=5))
    assert Hold.objects.filter(ended_at=None).count() == 4  # one statement, four spans
    run(first.admitted, now + timedelta(seconds=5))
    video = submit(member, RAY_JOB, now + timedelta(seconds=10))

    result = admission_cycle(now=now + timedelta(seconds=10))
    victim = Job.objects.get(pk=interns[3].pk)
    assert result.preempted == [victim.pk] and victim.state == State.PREEMPTED
    # Leaving, it still holds its quota: the span stays open.
    assert spans(victim) == [("root/interns/intern-video", now + timedelta(seconds=5), None)]

    run(result.preempted, now + timedelta(seconds=11))
    assert Job.objects.get(pk=victim.pk).state == State.QUEUED
    [(path, started, ended)] = spans(victim)
    assert path == "root/interns/intern-video" and ended is not None and ended >= started

    assert admission_cycle(now=now + timedelta(seconds=12)).admitted == [video.pk]
    run([video.pk], now + timedelta(seconds=12))
    job_cancel(job=Job.objects.get(pk=video.pk), user=member, now=now + timedelta(seconds=15))
    assert spans(Job.objects.get(pk=video.pk))[0][2] is None  # stopping: still holds
    run([video.pk], now + timedelta(seconds=20))
    assert Job.objects.get(pk=video.pk).state == State.CANCELLED
    assert spans(Job.objects.get(pk=video.pk))[0][2] is not None
    assert admission_cycle(now=now + timedelta(seconds=21)).admitted == [victim.pk]
    assert [span[1:] for span in spans(victim)][1] == (now + timedelta(seconds=21), None)
    assert len(spans(victim)) == 2


def test_a_job_written_straight_into_a_holding_state_holds_from_its_dequeue(member, now):
    job = submit(member, RAY_JOB, now)
    Job.objects.filter(pk=job.pk).update(state=State.ADMITTED, dequeued_at=now)
    Job.objects.filter(pk=job.pk).update(state=State.RUNNING)  # no new span
    assert spans(job) == [("root/algorithm/video", now, None)]
    Job.objects.filter(pk=job.pk).update(state=State.FAILED, finished_at=now + timedelta(hours=1))
    assert spans(job) == [("root/algorithm/video", now, now + timedelta(hours=1))]
