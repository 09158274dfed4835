"""The seed's intern story and the queue policies, through the database and the simulated
cluster (docs/architecture.md sections 5 and 6), on an explicit clock."""

import copy
from datetime import timedelta

import pytest
import yaml
from django.utils import timezone

from jobs.document.schema import job_parse
from jobs.engine.admission.cycle import admission_cycle
from jobs.engine.reconcile import jobs_reconcile
from jobs.engine.sync import cluster_sync
from jobs.models import Job, SimulatedPod
from jobs.services import job_submit
from queues.models import Queue
from queues.services import tree_apply

from ..support.jobs import INTERN_JOB, RAY_JOB
from ..support.trees import SEED_TREE

pytestmark = pytest.mark.django_db


@pytest.fixture
def now():
    return timezone.now().replace(microsecond=0)


def submit(user, body, now, **changes):
    return job_submit(user=user, draft=job_parse({**copy.deepcopy(body), **changes}), now=now)


def run(job_ids, now):
    """What the worker does after a cycle: reconcile the jobs, then read the cluster."""
    jobs_reconcile(job_ids, now=now)
    cluster_sync(now=now)


def interns_fill_the_cluster(intern, now) -> list[Job]:
    jobs = [submit(intern, INTERN_JOB, now + timedelta(seconds=i)) for i in range(4)]
    result = admission_cycle(now=now + timedelta(seconds=5))
    assert sorted(result.admitted) == [job.pk for job in jobs]
    run(result.admitted, now + timedelta(seconds=5))
    assert set(Job.objects.values_list("state", flat=True)) == {"running"}
    return jobs


def test_interns_are_preempted_when_video_submits_within_its_guarantee(intern, member, now):
    interns = interns_fill_the_cluster(intern, now)
    video = submit(member, RAY_JOB, now + timedelta(seconds=10))

    result = admission_cycle(now=now + timedelta(seconds=10))
    # 12 cpu are needed and each intern job holds 16: one is enough, the newest.
    assert result.preempted == [interns[3].pk]
    victim = Job.objects.get(pk=interns[3].pk)
    assert victim.state == "preempted" and victim.preemption_count == 1
    event = victim.events.get(reason="Preempted")
    assert event.type == "Warning"
    assert event.message.startswith(
        "Preempted: root/algorithm/video reclaimed its guaranteed quota (min) from root/interns"
    )
    # The victim still holds its quota: video waits for it to leave the cluster.
    assert result.admitted == [] and result.backed_off == [video.pk]
    assert Job.objects.get(pk=video.pk).backoff_reason.startswith(
        f"Waiting for 1 job leaving the cluster (#{victim.pk}) to release their quota; "
        "until then: Insufficient quota in root"
    )
    # A cycle before the sync saw it gone preempts nobody else.
    again = admission_cycle(now=now + timedelta(seconds=10, milliseconds=500))
    assert again.preempted == [] and again.admitted == []

    run(result.preempted, now + timedelta(seconds=11))
    victim.refresh_from_db()
    assert victim.state == "queued"
    assert victim.enqueued_at == interns[3].enqueued_at  # its original place in the queue
    assert victim.dequeued_at is None
    assert not SimulatedPod.objects.filter(job_id=victim.pk).exists()
    assert [e.reason for e in victim.events.order_by("created_at", "id")][-2:] == [
        "Preempted",
        "Requeued",
    ]
    # Its quota is free now: video goes first (within its guarantee), the intern job waits.
    later = admission_cycle(now=now + timedelta(seconds=12))
    assert later.admitted == [video.pk]
    assert later.backed_off == [victim.pk] and later.preempted == []
    run(later.admitted, now + timedelta(seconds=12))
    assert Job.objects.get(pk=video.pk).state == "running"


def test_a_borrowing_submission_does_not_preempt(intern, member, now):
    interns_fill_the_cluster(intern, now)
    # 24 cpu in text is above text's min of 12: it borrows, so it waits instead.
    big = submit(member, RAY_JOB, now, queue="root/algorithm/text", workers=[
        {"name": "g", "replicas": 5, "resources": {"cpu": "4", "memory": "4G"}}
    ])  # fmt: skip
    result = admission_cycle(now=now + timedelta(seconds=10))
    assert result.preempted == [] and result.backed_off == [big.pk]


def test_lowering_a_quota_below_its_usage_reclaims_at_the_next_cycle(intern, now):
    interns = interns_fill_the_cluster(intern, now)
    document = yaml.safe_load(SEED_TREE.read_text())
    interns_node = document["spec"]["root"]["children"][2]
    assert interns_node["name"] == "interns"
    interns_node["max"]["cpu"] = 32
    for leaf in interns_node["children"]:
        leaf["max"]["cpu"] = 32
    tree_apply(document=document)

    result = admission_cycle(now=now + timedelta(seconds=10))
    assert sorted(result.preempted) == sorted([interns[3].pk, interns[2].pk])  # the newest two
    message = Job.objects.get(pk=interns[3].pk).events.get(reason="Preempted").message
    assert message == (
        "Preempted: the quota of root/interns/intern-video was lowered below its usage; "
        "released cpu 16, memory 16G, pods 4"
    )


def test_a_queue_with_preemption_lets_a_manager_priority_job_evict_a_lower_one(
    member, manager, now
):
    Queue.objects.filter(name="root-algorithm-video").update(preemption=True)
    low = submit(member, RAY_JOB, now)
    admission_cycle(now=now)
    urgent = submit(manager, RAY_JOB, now + timedelta(seconds=1), priority=10)
    result = admission_cycle(now=now + timedelta(seconds=2))
    assert result.preempted == [low.pk] and result.admitted == []
    assert "higher priority in the same queue" in low.events.get(reason="Preempted").message
    run([low.pk], now + timedelta(seconds=3))
    assert admission_cycle(now=now + timedelta(seconds=4)).admitted == [urgent.pk]


def test_without_preemption_the_priority_job_waits_at_the_head(member, manager, now):
    submit(member, RAY_JOB, now)
    admission_cycle(now=now)
    urgent = submit(manager, RAY_JOB, now + timedelta(seconds=1), priority=10)
    result = admission_cycle(now=now + timedelta(seconds=2))
    assert result.preempted == [] and result.backed_off == [urgent.pk]


def test_a_queue_sets_its_own_backoff_base_and_cap(member, now):
    Queue.objects.filter(name="root-algorithm-video").update(
        backoff_base_seconds=10, backoff_max_seconds=15
    )
    submit(member, RAY_JOB, now)
    waiting = submit(member, RAY_JOB, now)
    admission_cycle(now=now)
    waiting.refresh_from_db()
    assert waiting.next_attempt_at == now + timedelta(seconds=10)
    admission_cycle(now=now + timedelta(seconds=10))
    waiting.refresh_from_db()
    assert waiting.next_attempt_at == now + timedelta(seconds=10 + 15)  # 20 capped at 15


def test_the_queue_api_shows_its_policies(api, member):
    Queue.objects.filter(name="root-algorithm-video").update(
        policy="BestEffort", preemption=True, backoff_max_seconds=15, priority_class="high"
    )
    data = api(member).get("/api/v1/queues/root-algorithm-video/").json()
    assert (data["policy"], data["preemption"], data["priority_class"]) == (
        "BestEffort",
        True,
        "high",
    )
    assert (data["backoff_base_seconds"], data["backoff_max_seconds"]) == (2.0, 15.0)
