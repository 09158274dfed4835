"""Fair sharing over time through the database (docs/quotas.md, "Fair sharing over
time"): the decayed usage beat keeps from the ledger of holds, and two departments that
borrow the cluster's spare capacity in turn over a simulated week."""

from __future__ import annotations

import copy
from datetime import timedelta

import pytest
from django.utils import timezone, translation

from jobs.document.schema import job_parse
from jobs.engine.admission.cycle import admission_cycle
from jobs.engine.fair_share import fair_share_record
from jobs.engine.reconcile import jobs_reconcile
from jobs.engine.sync import cluster_sync
from jobs.models import Hold, Job, State
from jobs.reads.waiting import jobs_waiting
from jobs.services import job_cancel, job_submit
from queues import fairness
from queues.models import DecayedUsage
from queues.services import tree_apply

from ..support.jobs import RAY_JOB
from ..support.trees import seed_tree_document

pytestmark = pytest.mark.django_db

DAY = timedelta(days=1)
GI = 1024**3


def shared_tree(half_life: str | None = "1d") -> dict:
    """The seed's departments with small guarantees and the whole cluster as everyone's
    ceiling: most of it is spare capacity that the departments borrow."""
    document = seed_tree_document()
    root = document["spec"]["root"]
    whole = {"cpu": 64, "memory": "256Gi", "nvidia.com/gpu": 16}
    for department in root["children"]:
        department["max"] = dict(whole)
        small = department["name"] != "interns"
        department["min"] = {"cpu": 8, "memory": "32Gi"} if small else {"cpu": 0}
        for index, leaf in enumerate(department["children"]):
            leaf["max"] = dict(whole)
            leaf["min"] = {"cpu": 8, "memory": "32Gi"} if small and index == 0 else {"cpu": 0}
    if half_life:
        document["spec"]["fairSharing"] = {"halfLife": half_life}
    return document


@pytest.fixture
def start():
    return timezone.now().replace(microsecond=0) - 8 * DAY


def submit(user, now, queue, run_seconds):
    body = {**copy.deepcopy(RAY_JOB), "queue": queue, "run_seconds": run_seconds}
    return job_submit(user=user, draft=job_parse(body), now=now)


def test_decayed_usage_weighs_each_held_second_by_its_age(member, start):
    tree_apply(document=shared_tree("1d"))
    job = submit(member, start, "root/algorithm/video", 60)
    now = start + 3 * DAY
    # Two spans: 12 cpu from day 0 to day 1, and again from day 2, still held.
    Hold.objects.bulk_create(
        [
            Hold(job=job, path="root/algorithm/video", request={"cpu": 12000},
                 started_at=start, ended_at=start + DAY),
            Hold(job=job, path="root/algorithm/video", request={"cpu": 12000},
                 started_at=start + 2 * DAY, ended_at=None),
        ]
    )  # fmt: skip
    assert fair_share_record(now=now) > 0

    day = DAY.total_seconds()
    expected = (
        fairness.decayed_fraction(12, 3 * day, 2 * day, day)
        + fairness.decayed_fraction(12, day, 0, day)
    ) / 64  # the simulated cluster's 64 cpu
    usage = {row.path: row for row in DecayedUsage.objects.all()}
    for path in ("root/algorithm/video", "root/algorithm", "root"):
        assert usage[path].resources["cpu"] == pytest.approx(expected)
        assert usage[path].usage == pytest.approx(expected)
    assert usage["root/infrastructure"].usage == 0.0
    assert usage["root/algorithm/video"].computed_at == now


def test_without_a_half_life_nothing_is_kept(member, start):
    tree_apply(document=shared_tree("1d"))
    assert fair_share_record(now=start) > 0
    tree_apply(document=shared_tree(None))
    assert fair_share_record(now=start) == 0
    assert not DecayedUsage.objects.exists()


def test_two_departments_borrow_spare_capacity_in_turn_over_a_week(member, outsider, start):
    """Each phase, both departments ask for three 12-cpu jobs beyond their 8-cpu
    guarantee and the 64-cpu cluster holds five: the fifth place goes to the department
    that used less of the cluster lately, whoever asked first."""
    tree_apply(document=shared_tree("1d"))
    video, devops = "root/algorithm/video", "root/infrastructure/devops"

    said: list[str] = []

    def phase(now, first, second, run_seconds) -> dict[str, int]:
        cluster_sync(now=now)  # the last phase's jobs end
        fair_share_record(now=now)
        jobs = [submit(user, now + timedelta(seconds=i), queue, run_seconds)
                for user, queue in (first, second) for i in range(3)]  # fmt: skip
        admitted = admission_cycle(now=now + timedelta(seconds=5)).admitted
        jobs_reconcile(admitted, now=now + timedelta(seconds=5))
        cluster_sync(now=now + timedelta(seconds=6))
        running = {queue: 0 for queue in (video, devops)}
        for job in Job.objects.filter(pk__in=[j.pk for j in jobs]).select_related("queue__node"):
            if job.state == State.RUNNING:
                running[job.queue.node.path] += 1
            else:  # the one left waiting says why, then gives up before the next phase
                with translation.override("en"):
                    said.append(jobs_waiting([job], now=now + timedelta(seconds=6))[job.pk].said)
                job_cancel(job=job, user=job.owner, now=now + timedelta(seconds=7))
        return running

    three_days = int(3 * DAY.total_seconds()) - 60  # over before the next phase
    # Day 0: nobody has used anything; the queue order decides, and algorithm asked first.
    assert phase(start, (member, video), (outsider, devops), three_days) == {video: 3, devops: 2}
    assert "borrows first" not in said[-1]  # nobody used more of the share than the other
    # Day 3: algorithm held more for three days; infrastructure gets the fifth place
    # although algorithm asks first again.
    assert phase(start + 3 * DAY, (member, video), (outsider, devops), 4 * 86400 - 60) == {
        video: 2,
        devops: 3,
    }
    usage = {row.path: row.usage for row in DecayedUsage.objects.all()}
    assert usage["root/algorithm"] > usage["root/infrastructure"] > 0
    shares = {path: f"{used * 3:.0%}" for path, used in usage.items()}  # a third each
    assert said[-1].endswith(
        f"root/infrastructure borrows first: its recent usage (half-life 1d) is "
        f"{shares['root/infrastructure']} of its share, root/algorithm's "
        f"{shares['root/algorithm']}"
    ), said[-1]
    # Day 7: infrastructure held more over the last four days, which weigh most; now
    # algorithm gets the fifth place, though infrastructure asks first.
    assert phase(start + 7 * DAY, (outsider, devops), (member, video), 3600) == {
        video: 3,
        devops: 2,
    }
    usage = {row.path: row.usage for row in DecayedUsage.objects.all()}
    assert usage["root/infrastructure"] > usage["root/algorithm"]
    assert "root/algorithm borrows first: its recent usage (half-life 1d) is" in said[-1]


def test_without_a_half_life_the_queue_order_alone_decides(member, outsider, start):
    tree_apply(document=shared_tree(None))
    for day in (0, 3):
        now = start + day * DAY
        cluster_sync(now=now)
        fair_share_record(now=now)
        jobs = [submit(user, now + timedelta(seconds=i), queue, int(3 * DAY.total_seconds()) - 60)
                for user, queue in ((member, "root/algorithm/video"),
                                    (outsider, "root/infrastructure/devops"))
                for i in range(3)]  # fmt: skip
        admitted = set(admission_cycle(now=now + timedelta(seconds=5)).admitted)
        assert [job.pk in admitted for job in jobs] == [True] * 3 + [True, True, False]
        jobs_reconcile(sorted(admitted), now=now + timedelta(seconds=5))
        cluster_sync(now=now + timedelta(seconds=6))
        job_cancel(job=jobs[-1], user=outsider, now=now + timedelta(seconds=7))
