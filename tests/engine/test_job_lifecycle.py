"""A job's whole life on the simulated cluster (docs/jobs.md): a drained leaf's running jobs
back in their queue and nothing admitted until it is resumed; a job past its time limit
failed with its reason and its quota freed; a person at their limit waiting while another
person's job in the same leaf is admitted; a job with 2 retries that fails three times, in
three numbered attempts."""

from datetime import timedelta

import pytest
from django.utils import timezone

from jobs.engine.admission.cycle import admission_cycle
from jobs.engine.admission.inputs import leaf_usage
from jobs.engine.reconcile import jobs_reconcile
from jobs.engine.sync import cluster_sync
from jobs.models import JobEvent
from jobs.reads import estimate, waiting
from jobs.services import JobInvalid, job_cancel
from queues.services import tree_apply, tree_export, tree_find

from ..support.jobs import refresh, submit

pytestmark = pytest.mark.django_db

SMALL = {"head": {"resources": {"cpu": "2", "memory": "1Gi"}}, "workers": [], "run_seconds": 600}
VIDEO = "root/algorithm/video"
FAILING = {"CALDERA_SIMULATED_EXIT_CODE": "3"}


@pytest.fixture
def now():
    return timezone.now().replace(microsecond=0)


def set_node(path: str, **fields) -> None:
    """Apply the tree with these fields of the node at ``path`` (None: removed)."""
    document = tree_export()
    node = tree_find(document, path)
    for key, value in fields.items():
        if value is None:
            node.pop(key, None)
        else:
            node[key] = value
    tree_apply(document=document)


def run(job, at):
    """Admit, create and sync the job's objects at ``at``: it runs."""
    admission_cycle(now=at)
    jobs_reconcile([job.pk], now=at)
    cluster_sync(now=at)
    return refresh(job)


def test_a_drained_leaf_s_jobs_go_back_to_their_queue_and_nothing_is_admitted_until_resumed(
    member, now
):
    jobs = [submit(member, now + timedelta(seconds=i), **SMALL) for i in range(2)]
    admission_cycle(now=now)
    jobs_reconcile([job.pk for job in jobs], now=now)
    cluster_sync(now=now + timedelta(seconds=2))
    assert {refresh(job).state for job in jobs} == {"running"}

    set_node(VIDEO, stopPolicy="HoldAndDrain")
    result = admission_cycle(now=now + timedelta(seconds=3))
    assert sorted(result.preempted) == [job.pk for job in jobs] and result.admitted == []
    drained = refresh(jobs[0]).events.filter(reason="Preempted").get().message
    assert drained.startswith(
        "Preempted: root/algorithm/video is drained (stopPolicy HoldAndDrain); back in its queue"
    )
    jobs_reconcile(result.preempted, now=now + timedelta(seconds=3))
    cluster_sync(now=now + timedelta(seconds=4))
    assert [refresh(job).state for job in jobs] == ["queued", "queued"]
    assert refresh(jobs[0]).enqueued_at == now  # its place kept
    assert admission_cycle(now=now + timedelta(seconds=5)).admitted == []
    told = waiting.job_waiting(refresh(jobs[0]), 1)
    assert told.reason == waiting.STOPPED
    assert told.summary == (
        "It waits for root/algorithm/video to be resumed: its stopPolicy is HoldAndDrain, so "
        "its queue admits nothing new until then"
    )

    set_node(VIDEO, stopPolicy=None)
    assert sorted(admission_cycle(now=now + timedelta(seconds=6)).admitted) == [
        job.pk for job in jobs
    ]


def test_a_held_subtree_admits_nothing_new_and_its_running_jobs_go_on(member, now):
    running = run(submit(member, now, **SMALL), now)
    waiting_job = submit(member, now + timedelta(seconds=1), **SMALL)
    set_node("root/algorithm", stopPolicy="Hold")
    result = admission_cycle(now=now + timedelta(seconds=2))
    assert result.admitted == [] and result.preempted == []
    assert refresh(running).state == "running"
    told = waiting.job_waiting(refresh(waiting_job), 1)
    assert told.reason == waiting.STOPPED and "root/algorithm to be resumed" in told.summary


def test_a_job_past_its_time_limit_fails_with_its_reason_and_frees_its_quota(member, now):
    job = run(submit(member, now, time_limit="30s", **SMALL), now)
    assert job.state == "running" and job.time_limit == 30
    assert leaf_usage()[VIDEO]["cpu"] == 2000

    cluster_sync(now=now + timedelta(seconds=29))
    assert refresh(job).state == "running"
    cluster_sync(now=now + timedelta(seconds=31))  # stopped, its objects removed
    assert refresh(job).state == "stopping"
    assert VIDEO in leaf_usage()  # it holds its quota until its objects are gone
    cluster_sync(now=now + timedelta(seconds=32))
    job = refresh(job)
    assert job.state == "failed" and job.finished_at == now + timedelta(seconds=32)
    assert VIDEO not in leaf_usage()
    messages = list(job.events.values_list("reason", "message"))
    assert ("TimeLimitExceeded", "Ran past its limit of 30s: it is stopped, and fails once its "
            "objects are gone") in messages  # fmt: skip
    assert messages[-1] == ("Failed", "Ran past its limit of 30s; its quota is freed")
    assert job.log_tail and job.log_tail_at is not None  # its end was kept as it was stopped


def test_a_leaf_gives_its_default_time_limit_and_refuses_one_above_its_ceiling(member, now):
    set_node(VIDEO, limits={"defaultTime": "2h", "maxTime": "1d"})
    assert submit(member, now, **SMALL).time_limit == 7200
    assert submit(member, now, time_limit="90m", **SMALL).time_limit == 5400
    with pytest.raises(JobInvalid) as refused:
        submit(member, now, time_limit="2d", **SMALL)
    assert refused.value.errors == {
        "time_limit": ["2d is above the longest root/algorithm/video allows: 1d (limits.maxTime)"]
    }
    with pytest.raises(JobInvalid) as refused:
        submit(member, now, time_limit="2 days", retries=11, **SMALL)
    assert refused.value.errors == {
        "time_limit": ["must be a duration from 1s to 365d, such as 2h or 1h30m"],
        "retries": ["must be between 0 and 10, got 11"],
    }
    set_node(VIDEO, limits={"maxRetries": 1})
    with pytest.raises(JobInvalid) as refused:
        submit(member, now, retries=2, **SMALL)
    assert refused.value.errors == {
        "retries": ["2 retries is more than root/algorithm/video allows: 1 (limits.maxRetries)"]
    }


def test_a_person_at_their_limit_waits_while_another_person_s_job_is_admitted(
    member, other_member, now
):
    set_node("root/algorithm", limits={"perPerson": {"jobs": 1}})
    first = submit(member, now, **SMALL)
    second = submit(member, now + timedelta(seconds=1), **SMALL)
    theirs = submit(other_member, now + timedelta(seconds=2), **SMALL)
    result = admission_cycle(now=now + timedelta(seconds=3))
    assert sorted(result.admitted) == [first.pk, theirs.pk]
    assert result.backed_off == [second.pk]
    second = refresh(second)
    assert second.backoff_reason == (
        "Its owner has 1 job holding quota in root/algorithm/video, the most one person may "
        "have there (perPerson of root/algorithm: 1)"
    )
    told = waiting.job_waiting(second, 1)
    assert told.reason == waiting.BACKOFF or told.reason == waiting.PERSON
    assert "they have 1 job holding quota in root/algorithm/video" in told.summary


def test_a_job_with_2_retries_that_fails_three_times_has_3_attempts_and_fails(member, now):
    job = submit(member, now, retries=2, env=FAILING, **{**SMALL, "run_seconds": 5})
    at = now
    for attempt in (1, 2, 3):
        job = run(job, at)
        assert job.state == "running" and job.attempt == attempt
        at += timedelta(seconds=10)
        cluster_sync(now=at)  # the attempt failed: retrying (objects removed), or failed
        job = refresh(job)
        if attempt < 3:
            assert job.state == "stopping" and job.ends_as == "retry"
            at += timedelta(seconds=1)
            cluster_sync(now=at)  # its objects gone: the next attempt waits its backoff
            job = refresh(job)
            assert job.state == "backoff" and job.attempt == attempt + 1
            assert job.backoff_reason == (
                f"attempt {attempt} of 3 failed: Pod rayjob-video-{job.pk}-head exited with code 3"
            ) or job.backoff_reason.startswith(f"attempt {attempt} of 3 failed: ")
            at = job.next_attempt_at + timedelta(seconds=1)
    assert job.state == "failed" and job.attempt == 3
    assert [a["attempt"] for a in job.attempts] == [1, 2]
    assert all("exited with code 3" in a["reason"] for a in job.attempts)
    # Each failed attempt keeps its exit code and the end of its log; the last is the job's.
    assert [a["exit_code"] for a in job.attempts] == [3, 3]
    assert all(a["log_tail"] for a in job.attempts)
    assert job.exit_code == 3 and job.log_tail
    retried = list(job.events.filter(reason="Retrying").values_list("message", flat=True))
    assert len(retried) == 2 and retried[0].startswith("Attempt 1 of 3 failed: ")
    assert job.events.filter(reason="Preempted").count() == 0


def test_a_job_stopping_between_attempts_can_be_cancelled(member, now):
    job = run(submit(member, now, retries=1, env=FAILING, **{**SMALL, "run_seconds": 5}), now)
    cluster_sync(now=now + timedelta(seconds=10))
    assert refresh(job).ends_as == "retry"
    job_cancel(user=member, job=refresh(job), now=now + timedelta(seconds=11))
    cluster_sync(now=now + timedelta(seconds=12))
    assert refresh(job).state == "cancelled"
    assert JobEvent.objects.filter(job=job, reason="Cancelled").exists()


def test_the_estimate_counts_a_job_s_time_limit(member, now):
    holder = run(submit(member, now, time_limit="5m", **{**SMALL, "run_seconds": 3600}), now)
    waiting_job = submit(member, now, **{**SMALL, "head": {"resources": {"cpu": "13"}}})
    estimate.estimates_refresh(now=now)
    guess = estimate.job_estimate(refresh(waiting_job), 1)
    assert guess.at is not None
    assert guess.at <= holder.started_at + timedelta(minutes=5, seconds=5)


def test_a_job_behind_a_head_at_its_owner_s_limit_is_told_it_is_tried_now(
    member, other_member, now
):
    set_node(VIDEO, limits={"perPerson": {"jobs": 1}})
    run(submit(member, now, **SMALL), now)
    limited = submit(member, now + timedelta(seconds=1), **SMALL)
    theirs = submit(other_member, now + timedelta(seconds=2), **SMALL)
    told = waiting.jobs_waiting([refresh(limited), refresh(theirs)], now=now)
    assert told[limited.pk].reason == waiting.PERSON
    assert told[theirs.pk].reason == waiting.NEXT
    assert told[theirs.pk].summary.startswith(
        "1 job ahead, the first at its owner's limit and passed over (perPerson); it fits now"
    )
    assert admission_cycle(now=now + timedelta(seconds=3)).admitted == [theirs.pk]
