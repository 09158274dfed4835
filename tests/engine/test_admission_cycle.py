"""The admission cycle and the cluster sync against the database, on an explicit clock."""

from datetime import timedelta

import psycopg
import pytest
from django.db import connection
from django.test import override_settings
from django.utils import timezone

from jobs.engine.admission.cycle import admission_cycle
from jobs.engine.locks import ADMISSION
from jobs.engine.reconcile import jobs_reconcile
from jobs.engine.sync import cluster_sync
from jobs.engine.transitions import backoff_delay
from jobs.models import JobEvent, SimulatedPod
from jobs.reads.selectors import queue_usage
from jobs.services import job_cancel, job_set_priority

from ..support.database import server_url
from ..support.jobs import RAY_JOB, UNPACKABLE, refresh, submit

pytestmark = pytest.mark.django_db


@pytest.fixture
def now():
    return timezone.now().replace(microsecond=0)


def test_the_seed_scenario_first_dequeued_second_backs_off_with_the_quota_reason(member, now):
    first = submit(member, now)
    second = submit(member, now + timedelta(seconds=1))
    result = admission_cycle(now=now + timedelta(seconds=2))
    assert result.admitted == [first.pk] and result.backed_off == [second.pk]
    first, second = refresh(first), refresh(second)
    assert first.state == "admitted" and first.dequeued_at == now + timedelta(seconds=2)
    assert second.state == "backoff"
    assert second.backoff_reason == (
        "Insufficient quota in root/algorithm/video: cpu requested 12, free 2 (used 12 of max 14)"
    )
    assert second.next_attempt_at == now + timedelta(seconds=2) + backoff_delay(1)
    assert second.dequeued_at is None
    assert list(first.events.values_list("reason", flat=True)) == ["Enqueued", "Dequeued"]
    backoff = second.events.get(reason="Backoff")
    assert backoff.type == "Warning" and "Insufficient quota" in backoff.message


def test_a_cancelled_job_holds_its_quota_until_the_sync_sees_its_objects_gone(member, now):
    first = submit(member, now)
    submit(member, now)  # waits behind it
    admission_cycle(now=now + timedelta(seconds=1))
    job_cancel(user=member, job=refresh(first), now=now + timedelta(seconds=2))
    first = refresh(first)
    assert first.state == "stopping" and first.finished_at is None
    assert first.events.get(reason="Cancelled").message == (
        "Cancelled by alice while admitted; it holds its quota until the cluster confirms "
        "its objects are gone"
    )
    # Its objects are still in the cluster as far as Caldera knows: nothing takes its place.
    assert admission_cycle(now=now + timedelta(seconds=2, milliseconds=1)).admitted == []
    assert queue_usage(first.queue) == {"cpu": 12000, "memory": 12_000_000_000, "pods": 3}


def test_after_the_cancelled_job_is_gone_the_second_is_dequeued_without_waiting_for_backoff(
    member, now
):
    first = submit(member, now)
    second = submit(member, now)
    admission_cycle(now=now + timedelta(seconds=1))
    job_cancel(user=member, job=refresh(first), now=now + timedelta(seconds=2))
    jobs_reconcile([first.pk], now=now + timedelta(seconds=2))
    assert cluster_sync(now=now + timedelta(seconds=2)).left == [first.pk]
    first = refresh(first)
    assert first.state == "cancelled" and first.finished_at == now + timedelta(seconds=2)
    assert first.events.get(reason="Stopped").message == (
        "Its objects left the cluster; its quota is free"
    )
    result = admission_cycle(now=now + timedelta(seconds=2, milliseconds=1))  # before next try
    assert result.admitted == [second.pk]
    assert refresh(second).state == "admitted"


def test_a_backed_off_job_is_not_retried_before_its_next_attempt(member, now):
    submit(member, now)
    second = submit(member, now)
    admission_cycle(now=now)
    assert admission_cycle(now=now + timedelta(seconds=1)).backed_off == []
    assert admission_cycle(now=refresh(second).next_attempt_at).backed_off == [second.pk]


@override_settings(BACKOFF_BASE_SECONDS=2, BACKOFF_MAX_SECONDS=30)
def test_backoff_is_exponential_and_bounded():
    assert [backoff_delay(n).total_seconds() for n in range(1, 8)] == [2, 4, 8, 16, 30, 30, 30]
    # A job tried thousands of times (a long benchmark) stays at the cap: 2**5000 would not
    # fit a float.
    assert backoff_delay(5000).total_seconds() == 30


def test_repeated_refusals_grow_the_delay_and_record_one_event_per_reason(member, now):
    submit(member, now)
    second = submit(member, now)
    at = now
    delays = []
    for _ in range(3):
        admission_cycle(now=at)
        second = refresh(second)
        if second.state == "backoff":
            delays.append(second.next_attempt_at - at)
            at = second.next_attempt_at
    assert delays[1] > delays[0] and second.backoff_count == 3
    assert second.events.filter(reason="Backoff").count() == 1


def test_a_priority_jump_puts_a_job_first_in_the_next_cycle(member, manager, now):
    first = submit(member, now)
    second = submit(member, now + timedelta(seconds=1))
    job_set_priority(user=manager, job=second, priority=10, now=now + timedelta(seconds=2))
    assert admission_cycle(now=now + timedelta(seconds=3)).admitted == [second.pk]
    assert refresh(first).state == "backoff"


def test_a_cycle_admits_across_queues_in_one_transaction(member, now):
    video = submit(member, now)
    text = submit(member, now, queue="root/algorithm/text")
    assert sorted(admission_cycle(now=now).admitted) == sorted([video.pk, text.pk])


def test_dequeued_jobs_run_on_the_simulated_cluster_and_finish(member, now):
    job = submit(member, now, run_seconds=30)
    admission_cycle(now=now)
    jobs_reconcile([job.pk], now=now)
    assert SimulatedPod.objects.filter(job_id=job.pk).count() == 3
    sync = cluster_sync(now=now + timedelta(seconds=1))
    assert sync.started == [job.pk]
    assert refresh(job).state == "running"
    sync = cluster_sync(now=now + timedelta(seconds=31))
    assert sync.finished == [job.pk]
    job = refresh(job)
    assert job.state == "succeeded" and job.finished_at == now + timedelta(seconds=31)
    assert not SimulatedPod.objects.filter(job_id=job.pk).exists()
    assert list(job.events.values_list("reason", flat=True)) == [
        "Enqueued", "Dequeued", "Running", "Succeeded",
    ]  # fmt: skip


def test_reconcile_and_sync_are_idempotent(member, now):
    job = submit(member, now)
    admission_cycle(now=now)
    jobs_reconcile([job.pk], now=now)
    jobs_reconcile([job.pk], now=now)
    cluster_sync(now=now)
    cluster_sync(now=now)
    assert SimulatedPod.objects.filter(job_id=job.pk).count() == 3
    assert job.events.filter(reason="Running").count() == 1


def test_a_cancelled_running_job_leaves_the_cluster_and_frees_its_quota(member, now):
    first = submit(member, now)
    second = submit(member, now)
    admission_cycle(now=now)
    jobs_reconcile([first.pk], now=now)
    cluster_sync(now=now)
    job_cancel(user=member, job=refresh(first), now=now + timedelta(seconds=5))
    jobs_reconcile([first.pk], now=now + timedelta(seconds=5))
    assert not SimulatedPod.objects.filter(job_id=first.pk).exists()
    assert admission_cycle(now=now + timedelta(seconds=5)).admitted == []  # not seen gone yet
    cluster_sync(now=now + timedelta(seconds=6))
    assert admission_cycle(now=now + timedelta(seconds=6)).admitted == [second.pk]


@override_settings(SIMULATED_CLUSTER_NODES="2xcpu=8,memory=64Gi")
def test_a_gang_the_nodes_cannot_hold_records_gang_failed_scheduling_by_cycle(member, now):
    from jobs.cluster import get_backend

    get_backend.cache_clear()
    try:
        job = submit(member, now, **UNPACKABLE)
        admission_cycle(now=now)
        jobs_reconcile([job.pk], now=now)
        cluster_sync(now=now)
        cluster_sync(now=now)  # the same cycle is not recorded twice
        cluster_sync(now=now + timedelta(seconds=5))
    finally:
        get_backend.cache_clear()
    last = f"rayjob-video-{job.pk}-small-group-worker-1"
    events = list(
        job.events.filter(reason="GangFailedScheduling", involved=f"pod/{last}").order_by("cycle")
    )
    assert [e.cycle for e in events] == [1, 2]
    assert events[0].message == (
        f"{last} in gang failed to be scheduled in cycle 1: "
        "0/2 nodes are available: 2 Insufficient cpu."
    )
    assert events[0].type == "Warning"
    head = job.events.get(cycle=1, involved=f"pod/rayjob-video-{job.pk}-head-0")
    assert head.message.endswith(
        "0/2 nodes are available: 2 node(s) fit the pod but not the whole gang."
    )
    assert refresh(job).state == "admitted"


@override_settings(SIMULATED_CLUSTER_NODES="2xcpu=8,memory=64Gi", START_TIMEOUT_SECONDS=30)
def test_a_gang_that_cannot_start_in_time_leaves_the_cluster_and_waits_with_the_reason(member, now):
    from jobs.cluster import get_backend

    get_backend.cache_clear()
    try:
        stuck = submit(member, now, **UNPACKABLE)
        admission_cycle(now=now)
        jobs_reconcile([stuck.pk], now=now)
        cluster_sync(now=now)  # scheduling cycle 1
        cluster_sync(now=now + timedelta(seconds=25))  # cycle 2, still within the timeout
        assert refresh(stuck).state == "admitted"

        result = cluster_sync(now=now + timedelta(seconds=30))
    finally:
        get_backend.cache_clear()

    assert result.timed_out == [stuck.pk] and result.freed
    stuck = refresh(stuck)
    assert stuck.state == "backoff" and stuck.dequeued_at is None
    assert stuck.backoff_reason == (
        "Its pods were not all running 30s after its objects were created, so it left the cluster; "
        f"last scheduling failure: rayjob-video-{stuck.pk}-small-group-worker-1 in gang failed "
        "to be scheduled in cycle 3: 0/2 nodes are available: 2 Insufficient cpu."
    )  # cycle 3 was observed by the same sync, just before the timeout
    assert stuck.next_attempt_at == now + timedelta(seconds=30) + backoff_delay(1)
    assert not SimulatedPod.objects.filter(job_id=stuck.pk).exists()
    event = stuck.events.get(reason="StartTimeout")
    assert event.type == "Warning" and event.message.startswith(stuck.backoff_reason)
    assert queue_usage(stuck.queue) == {}  # it holds no quota while it waits


@override_settings(START_TIMEOUT_SECONDS=30)
def test_a_job_whose_pods_run_is_never_timed_out(member, now):
    job = submit(member, now)
    admission_cycle(now=now)
    jobs_reconcile([job.pk], now=now)
    cluster_sync(now=now)

    assert cluster_sync(now=now + timedelta(seconds=120)).timed_out == []
    assert refresh(job).state == "running"


def test_only_one_admission_cycle_runs_at_a_time(member, now):
    submit(member, now)
    # Another worker's cycle: a transaction of another connection that holds the lock.
    with psycopg.connect(server_url(connection.settings_dict["NAME"])) as other:
        other.execute("SELECT pg_advisory_xact_lock(%s)", [ADMISSION])

        assert admission_cycle(now=now) is None
        assert JobEvent.objects.filter(reason="Dequeued").count() == 0
    # Its transaction ended: the lock went with it.
    assert len(admission_cycle(now=now).admitted) == 1


def test_an_autoscaling_job_holds_the_gang_it_starts_with_in_quota(member, now):
    # text: max 24 cpu. The head (4), 2 workers of 4 cpu and KubeRay's autoscaler (0.5)
    # start together and hold 12.5, however far the autoscaler may grow the workers
    # (docs/architecture.md section 4: minReplicas); a plain 12-cpu job then no longer fits.
    group = {**RAY_JOB["workers"][0], "max_replicas": 4}
    job = submit(member, now, queue="root/algorithm/text", workers=[group], run_seconds=30)
    plain = submit(member, now + timedelta(seconds=1), queue="root/algorithm/text")

    result = admission_cycle(now=now + timedelta(seconds=2))

    assert result.admitted == [job.pk] and result.backed_off == [plain.pk]
    assert queue_usage(job.queue)["cpu"] == 12_500
    assert refresh(plain).backoff_reason == (
        "Insufficient quota in root/algorithm/text: cpu requested 12, free 11.5 "
        "(used 12.5 of max 24)"
    )
    jobs_reconcile([job.pk], now=now)
    assert SimulatedPod.objects.filter(job_id=job.pk).count() == 3  # head and 2 workers
    assert cluster_sync(now=now + timedelta(seconds=3)).started == [job.pk]
    assert cluster_sync(now=now + timedelta(seconds=34)).finished == [job.pk]
