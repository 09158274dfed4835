"""Hold and release: a held job keeps its place and is skipped by admission until released
(docs/jobs.md, "Hold and release")."""

from datetime import timedelta

import pytest
from django.utils import timezone

from jobs.engine.admission import cycle as cycle_module
from jobs.engine.admission.cycle import admission_cycle
from jobs.models import JobEvent
from jobs.reads import estimate, selectors, waiting
from jobs.services import JobConflict, JobPermissionDenied, job_hold, job_release

from ..support.jobs import refresh, submit

pytestmark = pytest.mark.django_db

SMALL = {"head": {"resources": {"cpu": "2", "memory": "1Gi"}}, "workers": []}


@pytest.fixture
def now():
    return timezone.now().replace(microsecond=0)


def test_a_held_job_is_skipped_keeps_its_place_and_is_admitted_once_released(member, now):
    first = submit(member, now, **SMALL)
    second = submit(member, now + timedelta(seconds=1), **SMALL)
    job_hold(user=member, job=first, now=now + timedelta(seconds=2))
    held = refresh(first)
    assert held.held_by == member and held.held_at == now + timedelta(seconds=2)

    result = admission_cycle(now=now + timedelta(seconds=3))
    assert result.admitted == [second.pk] and first.pk not in result.backed_off
    held = refresh(first)
    assert held.state == "queued" and held.enqueued_at == now and held.backoff_count == 0
    assert selectors.job_position(held) == 1
    told = waiting.job_waiting(held, 1)
    assert told is not None and told.reason == waiting.HELD
    assert told.summary.startswith("It is held by alice since ")
    assert estimate.job_estimate(held, 1).basis == "held: no estimate until it is released"

    job_release(user=member, job=held, now=now + timedelta(seconds=4))
    assert refresh(first).held_at is None
    assert admission_cycle(now=now + timedelta(seconds=5)).admitted == [first.pk]
    reasons = list(refresh(first).events.values_list("reason", "message"))
    assert reasons[1:3] == [
        ("Held", "Held by alice: it keeps its place and is not admitted until released"),
        ("Released", "Released by alice after 2.0s held; it is tried again"),
    ]


def test_a_held_head_of_a_strict_queue_does_not_hold_back_the_job_behind_it(member, now):
    """The video queue tries its jobs in order (a refused head stops it); a held head is
    not tried, so the job behind it is the one tried, and told so without the head."""
    big = submit(member, now)  # 12 cpu of the leaf's 14
    behind = submit(member, now + timedelta(seconds=1), **SMALL)
    job_hold(user=member, job=big, now=now + timedelta(seconds=2))
    told = waiting.jobs_waiting([refresh(behind)], now=now + timedelta(seconds=2))[behind.pk]
    assert told.reason == waiting.NEXT and told.ahead == 0
    assert admission_cycle(now=now + timedelta(seconds=3)).admitted == [behind.pk]


def test_a_job_held_after_the_cycle_read_it_is_not_admitted(member, now, monkeypatch):
    """The hold commits after the cycle read its heads, before it writes: the write skips it."""
    job = submit(member, now, **SMALL)
    read = cycle_module.read_holding

    def read_then_hold():
        job_hold(user=member, job=job, now=now)
        return read()

    monkeypatch.setattr(cycle_module, "read_holding", read_then_hold)
    assert admission_cycle(now=now + timedelta(seconds=1)).admitted == []
    assert refresh(job).state == "queued"


def test_who_may_hold_and_release(member, other_member, manager, now):
    job = submit(member, now, **SMALL)
    with pytest.raises(JobPermissionDenied, match="members hold only their own jobs"):
        job_hold(user=other_member, job=job, now=now)
    job_hold(user=manager, job=job, now=now)
    with pytest.raises(JobPermissionDenied, match="held by bob: only the department's managers"):
        job_release(user=member, job=refresh(job), now=now)
    job_release(user=manager, job=refresh(job), now=now)
    job_hold(user=member, job=refresh(job), now=now)  # a member releases their own hold
    job_release(user=member, job=refresh(job), now=now)
    assert JobEvent.objects.filter(job=job, reason="Held").count() == 2


def test_only_a_pending_job_is_held_and_holding_twice_changes_nothing(member, now):
    job = submit(member, now, **SMALL)
    job_hold(user=member, job=job, now=now)
    job_hold(user=member, job=refresh(job), now=now + timedelta(seconds=5))
    assert refresh(job).held_at == now
    job_release(user=member, job=refresh(job), now=now)
    job_release(user=member, job=refresh(job), now=now)  # not held: nothing to release
    assert JobEvent.objects.filter(job=job, reason="Released").count() == 1
    admission_cycle(now=now + timedelta(seconds=1))
    with pytest.raises(JobConflict, match="only a pending job can be held; this one is admitted"):
        job_hold(user=member, job=refresh(job), now=now)
