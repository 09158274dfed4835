"""The engine at a platform's scale: one admission cycle in which more than 20,000 jobs back
off, and the reconcile and the sync over thousands of jobs, with no statement whose
parameters grow with the jobs (PostgreSQL refuses a statement past 65,535 of them)."""

from __future__ import annotations

from contextlib import contextmanager
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from bench.kueue import quota_tree
from jobs.engine.admission.cycle import admission_cycle
from jobs.engine.reconcile import jobs_reconcile
from jobs.engine.sync import cluster_sync
from jobs.models import Job, State
from jobs.services import BATCH_MAX, job_submit_batch
from queues.models import Queue
from queues.services import tree_apply

pytestmark = pytest.mark.django_db

LEAVES = 2_600
HEADS = 8  # jobs.engine.admission.inputs.HEADS_PER_QUEUE: all refused, 20,800 in one cycle
# A statement's parameters are its columns and its settings, never one per job.
MOST_PARAMETERS = 20


@contextmanager
def parameters_counted():
    """The statements sent meanwhile with more than MOST_PARAMETERS parameters, as
    (count, the statement's start)."""
    over: list[tuple[int, str]] = []

    def count(execute, sql, params, many, context):
        for sent in params if many else [params]:
            if len(sent or ()) > MOST_PARAMETERS:
                over.append((len(sent), " ".join(sql.split())[:160]))
        return execute(sql, params, many, context)

    with connection.execute_wrapper(count):
        yield over


def _job(leaf: int) -> dict:
    return {
        "queue": f"root/l{leaf}",
        "kind": "ray",
        "runtime": "kuberay",
        "name": f"sweep-{leaf}",
        "image": "rayproject/ray:2.36.1",
        "entrypoint": "python train.py",
        "head": {"resources": {"cpu": "1", "memory": "1Gi"}},
    }


def _submit(user, documents, now):
    for start in range(0, len(documents), BATCH_MAX):
        job_submit_batch(user=user, documents=documents[start : start + BATCH_MAX], now=now)


def test_it_backs_off_more_than_20000_jobs_in_one_cycle(staff, settings):
    """2,600 full leaves, 8 heads each: every head is refused in the same cycle, and each
    of the reconcile, the sync and the cycle sends a bounded number of parameters."""
    settings.SIMULATED_CLUSTER_NODES = f"{LEAVES // 100}xcpu=100,memory={100 * 1024}Gi"
    children = [
        {"name": f"l{i}", "min": {"cpu": 0}, "max": {"cpu": 1}, "namespaces": [f"l{i}"]}
        for i in range(LEAVES)
    ]
    tree_apply(document=quota_tree(min_cpu=0, max_cpu=LEAVES, children=children))
    Queue.objects.update(policy=Queue.Policy.BEST_EFFORT)
    now = timezone.now()
    _submit(staff, [_job(i) for i in range(LEAVES)], now)
    # One job moved alone first, as a worker's connection has done before a cycle: the
    # triggers on the job table are planned again for each statement's own rows, not kept
    # from this one (a nested loop over 20,800 x 20,800 rows took 139 s).
    Job.objects.filter(pk=Job.objects.earliest("pk").pk).update(priority=0)
    with parameters_counted() as counted:
        first = admission_cycle(now=now + timedelta(seconds=1))
        jobs_reconcile(first.admitted, now=now + timedelta(seconds=1))
        cluster_sync(now=now + timedelta(seconds=2))
    assert len(first.admitted) == LEAVES  # every leaf is now full
    assert Job.objects.filter(state=State.RUNNING).count() == LEAVES
    assert counted == []

    waiting = [_job(i) for i in range(LEAVES) for _ in range(HEADS)]
    _submit(staff, waiting, now + timedelta(seconds=3))
    with parameters_counted() as counted:
        result = admission_cycle(now=now + timedelta(seconds=4))
    assert result.cycles == 1 and result.admitted == []
    assert len(result.backed_off) == LEAVES * HEADS > 20_000
    backing_off = Job.objects.filter(state=State.BACKOFF)
    assert backing_off.count() == LEAVES * HEADS
    assert backing_off.filter(backoff_code="").count() == 0
    assert counted == []
