"""The quota promise at run time: a cycle's write that would break it is rolled back.

``queues.quota.breaches`` judges usage after a change;
``jobs.engine.admission.writes.plan_write`` calls it inside the cycle's transaction. A plan
written here by hand stands for a planning fault (the one the pure function had: a victim
admitted in the same cycle), since the planner itself no longer makes such plans.
"""

from __future__ import annotations

import copy
import io
import logging
from datetime import timedelta

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from jobs.document.schema import job_parse
from jobs.engine.admission.cycle import admission_cycle
from jobs.engine.admission.writes import plan_write
from jobs.engine.reconcile import jobs_reconcile
from jobs.engine.sync import cluster_sync
from jobs.engine.usage_audit import usage_audit
from jobs.models import Job, JobEvent, PendingBlock
from jobs.reads.selectors import usage_by_path
from jobs.services import job_submit
from queues.admission import Candidate, Plan
from queues.quota import Breach, breaches
from queues.selectors import tree_nodes
from queues.services import tree_apply

from ..support.jobs import RAY_JOB
from ..support.trees import node, request

pytestmark = pytest.mark.django_db

# Pure: what breaks the promise


def small_tree():
    return {
        "root": node("root", max={"cpu": "10"}),
        "root/a": node("root/a", min={"cpu": "6"}, max={"cpu": "10"}),
        "root/a/x": node("root/a/x", max={"cpu": "8"}),
    }


def test_it_finds_a_node_taken_above_its_max():
    used = {"root": request(cpu="9"), "root/a": request(cpu="9"), "root/a/x": request(cpu="9")}
    found = breaches(
        added={"root/a/x": request(cpu="2")}, tree=small_tree(), used=used, allocatable=None
    )
    assert found == [Breach("root/a/x", "cpu", 9000, 8000)]
    assert found[0].message() == "root/a/x: cpu used 9 of max 8"


def test_it_finds_the_cluster_taken_above_its_allocatable():
    used = {path: request(cpu="7") for path in small_tree()}
    found = breaches(
        added={"root/a/x": request(cpu="1")},
        tree=small_tree(),
        used=used,
        allocatable=request(cpu="6"),
    )
    assert [b.message() for b in found] == ["cluster: cpu used 7 of allocatable 6"]


def test_a_node_an_admin_lowered_may_stay_above_its_max_for_what_was_not_added():
    # x was cut to 8 cpu while 9 ran there; a job asking only for GPUs adds no cpu.
    tree = small_tree() | {"root/a/x": node("root/a/x", max={"cpu": "8", "nvidia.com/gpu": "2"})}
    used = {path: request(cpu="9", nvidia_com_gpu="1") for path in tree}
    assert (
        breaches(
            added={"root/a/x": request(nvidia_com_gpu="1")}, tree=tree, used=used, allocatable=None
        )
        == []
    )
    assert breaches(
        added={"root/a/x": request(cpu="1")}, tree=tree, used=used, allocatable=None
    ) == [Breach("root/a/x", "cpu", 9000, 8000)]


def test_a_resource_no_max_names_is_judged_only_against_the_cluster():
    used = {path: request(memory="64Gi") for path in small_tree()}
    added = {"root/a/x": request(memory="1Gi")}
    assert breaches(added=added, tree=small_tree(), used=used, allocatable=None) == []
    assert breaches(
        added=added, tree=small_tree(), used=used, allocatable=request(memory="32Gi")
    ) == [Breach("cluster", "memory", 64 * 2**30, 32 * 2**30)]


# The cycle's write


def submit(user, now):
    return job_submit(user=user, draft=job_parse(copy.deepcopy(RAY_JOB)), now=now)


def over_admitting_plan(*jobs: Job) -> Plan:
    return Plan(
        admitted=[
            Candidate(job.pk, dict(job.request), (0, job.enqueued_at, job.pk)) for job in jobs
        ]
    )


def test_it_rolls_back_a_plan_that_would_take_a_leaf_above_its_max(member, caplog):
    # Two of the seed's 12-cpu RayJobs in video (max 14 cpu): only one fits.
    now = timezone.now()
    first, second = submit(member, now), submit(member, now)
    leaf = first.queue.node.path
    with caplog.at_level(logging.ERROR, logger="jobs.engine.admission.writes"):
        written = plan_write(
            over_admitting_plan(first, second),
            tree=tree_nodes(),
            allocatable=None,
            leaf_of={first.pk: leaf, second.pk: leaf},
            now=now + timedelta(seconds=1),
        )
    assert written.admitted == [] and written.more is False
    assert list(
        Job.objects.filter(pk__in=[first.pk, second.pk]).values_list("state", flat=True)
    ) == [
        "queued",
        "queued",
    ]
    assert not JobEvent.objects.filter(reason="Dequeued").exists()
    [record] = caplog.records
    assert "root/algorithm/video: cpu used 24 of max 14" in record.getMessage()
    assert f"admit {first.pk} into root/algorithm/video (" in record.getMessage()


def test_it_rolls_back_a_plan_that_would_take_the_cluster_above_its_allocatable(member, caplog):
    now = timezone.now()
    job = submit(member, now)
    with caplog.at_level(logging.ERROR, logger="jobs.engine.admission.writes"):
        written = plan_write(
            over_admitting_plan(job),
            tree=tree_nodes(),
            allocatable={"cpu": 8000, "memory": 2**40},
            leaf_of={job.pk: job.queue.node.path},
            now=now,
        )
    assert written.admitted == []
    assert Job.objects.get(pk=job.pk).state == "queued"
    assert "cluster: cpu used 12 of allocatable 8" in caplog.records[0].getMessage()


def test_it_commits_a_plan_that_keeps_the_promise(member):
    now = timezone.now()
    job = submit(member, now)
    written = plan_write(
        over_admitting_plan(job),
        tree=tree_nodes(),
        allocatable=None,
        leaf_of={job.pk: job.queue.node.path},
        now=now,
    )
    assert written.admitted == [job.pk]
    assert Job.objects.get(pk=job.pk).state == "admitted"


SMALL_TREE = {
    "spec": {
        "root": {
            "name": "root",
            "max": {"cpu": 10, "memory": "64Gi"},
            "min": {"cpu": 10, "memory": "64Gi"},
            "children": [
                {
                    "name": "a",
                    "min": {"cpu": 6, "memory": "32Gi"},
                    "max": {"cpu": 10},
                    "children": [
                        {
                            "name": "x",
                            "min": {"cpu": 6, "memory": "32Gi"},
                            "max": {"cpu": 10},
                            "namespaces": ["x"],
                        }
                    ],
                },
                {
                    "name": "b",
                    "max": {"cpu": 10},
                    "children": [{"name": "y", "max": {"cpu": 10}, "namespaces": ["y"]}],
                },
            ],
        }
    }
}


def test_a_borrower_admitted_in_a_cycle_is_reclaimed_only_by_a_later_cycle(staff, caplog):
    # The example that once went above max: x holds jobs of 2 and 4 cpu (within a's min
    # of 6), y one of 6.
    tree_apply(document=SMALL_TREE)
    now = timezone.now()

    def job(queue, cpu, at):
        body = copy.deepcopy(RAY_JOB) | {"queue": queue, "workers": []}
        body["head"] = {"resources": {"cpu": cpu, "memory": "1Gi"}}
        return job_submit(user=staff, draft=job_parse(body), now=now + timedelta(seconds=at))

    two, four, six = job("root-a-x", "2", 0), job("root-a-x", "4", 1), job("root-b-y", "6", 2)
    with caplog.at_level(logging.ERROR, logger="jobs.engine.admission.writes"):
        first = admission_cycle(now=now + timedelta(seconds=3))
        assert sorted(first.admitted) == [two.pk, six.pk] and first.preempted == []
        assert first.backed_off == [four.pk]
        assert usage_by_path()["root"] == {"cpu": 8000, "memory": 2 * 2**30, "pods": 2}
        # Next cycle, the borrower held its quota before it: a's guarantee takes it back.
        Job.objects.filter(pk=four.pk).update(next_attempt_at=now)
        second = admission_cycle(now=now + timedelta(seconds=4))
        assert second.preempted == [six.pk] and second.admitted == []
        # The victim holds its 6 cpu until the cluster has let it go; four waits for it.
        assert usage_by_path()["root"]["cpu"] == 8000
        assert Job.objects.get(pk=four.pk).backoff_reason.startswith(
            f"Waiting for 1 job leaving the cluster (#{six.pk}) to release their quota"
        )
        jobs_reconcile([six.pk], now=now + timedelta(seconds=5))
        assert cluster_sync(now=now + timedelta(seconds=5)).left == [six.pk]
        third = admission_cycle(now=now + timedelta(seconds=6))
    assert third.admitted == [four.pk] and third.preempted == []
    assert usage_by_path()["root"]["cpu"] == 6000
    assert caplog.records == []


# The audit


def test_the_audit_finds_nothing_wrong_in_a_state_the_cycle_wrote(member):
    now = timezone.now()
    for _ in range(3):
        submit(member, now)
    admission_cycle(now=now)
    report = usage_audit()
    assert report.clean, report.lines()


def test_the_audit_reports_a_node_above_its_max_and_a_drifted_count(member, caplog):
    now = timezone.now()
    first, second = submit(member, now), submit(member, now)
    # Written behind the rules' back: both 12-cpu jobs admitted in video (max 14), and a
    # pending block that counts a job nobody submitted.
    Job.objects.filter(pk__in=[first.pk, second.pk]).update(state="admitted", dequeued_at=now)
    PendingBlock.objects.create(queue=first.queue, priority=0, block=0, jobs=1)
    with caplog.at_level(logging.ERROR, logger="jobs.engine.usage_audit"):
        report = usage_audit()
    assert Breach("root/algorithm/video", "cpu", 24000, 14000) in report.over_quota
    assert report.count_drift == {first.queue_id: (0, 1)}
    logged = [record.getMessage() for record in caplog.records]
    assert "usage audit: above its limit: root/algorithm/video: cpu used 24 of max 14" in logged
    assert f"usage audit: queue {first.queue_id}: 0 pending jobs, but its blocks say 1" in logged


def test_manage_py_usage_audit_fails_on_a_finding(member):
    now = timezone.now()
    job = submit(member, now)
    call_command("usage_audit", stdout=io.StringIO())  # clean: no error
    PendingBlock.objects.create(queue=job.queue, priority=0, block=0, jobs=-1)
    out = io.StringIO()
    with pytest.raises(CommandError, match="1 findings"):
        call_command("usage_audit", stdout=out)
    assert f"FAIL queue {job.queue_id}: 1 pending jobs, but its blocks say 0" in out.getvalue()
