"""Queue order and positions: priority first, then arrival; exact at any depth.

Positions are read from the pending blocks that database triggers append to
(jobs.PendingBlock), so these tests check them against the plain definition (count the
pending jobs ahead) after every kind of write: submits, batches, cancels, priority
changes, backoff, dequeue, requeue and deletion, across more than one block of tickets,
both before and after the admission cycle folds the blocks.
"""

import random
import re

import pytest
from django.db import connection
from django.db.models import Sum
from django.utils import timezone

from jobs import services
from jobs.document.schema import job_parse
from jobs.models import PENDING, TICKET_BLOCK, Job, PendingBlock, State
from jobs.reads import selectors
from jobs.tables.blocks import compact_pending_blocks

from ..support.jobs import RAY_JOB

pytestmark = pytest.mark.django_db

SMALL = {**RAY_JOB, "head": {"resources": {"cpu": "1"}}, "workers": []}


def submit_many(user, count: int, **changes) -> list[Job]:
    jobs = []
    for start in range(0, count, services.BATCH_MAX):
        documents = [
            {**SMALL, "name": f"job-{start + i}", **changes}
            for i in range(min(services.BATCH_MAX, count - start))
        ]
        jobs += services.job_submit_batch(user=user, documents=documents)
    return jobs


def expected_positions() -> dict[int, int]:
    """The definition: pending jobs of each queue sorted by (-priority, ticket), from 1."""
    positions, seen = {}, {}
    for job in Job.objects.filter(state__in=PENDING).order_by("queue_id", "-priority", "ticket"):
        seen[job.queue_id] = seen.get(job.queue_id, 0) + 1
        positions[job.pk] = seen[job.queue_id]
    return positions


def assert_positions_exact() -> None:
    """Exact with the appended rows as they are, and again once folded."""
    _assert_exact()
    compact_pending_blocks()
    _assert_exact()
    keys = PendingBlock.objects.values_list("queue_id", "priority", "block")
    assert len(keys) == len(set(keys))  # one row per key once folded


def _assert_exact() -> None:
    jobs = list(Job.objects.all())
    assert selectors.job_positions(jobs) == expected_positions()
    by_queue = {
        row["queue_id"]: row["n"]
        for row in PendingBlock.objects.values("queue_id").annotate(n=Sum("jobs"))
    }
    actual = {}
    for job in jobs:
        if job.state in PENDING:
            actual[job.queue_id] = actual.get(job.queue_id, 0) + 1
    assert {queue: n for queue, n in by_queue.items() if n} == actual


def test_tickets_count_arrivals_per_queue(member):
    video = submit_many(member, 3)
    text = submit_many(member, 2, queue="root/algorithm/text")

    tickets = dict(Job.objects.values_list("id", "ticket"))

    assert [tickets[j.pk] for j in video] == [1, 2, 3]
    assert [tickets[j.pk] for j in text] == [1, 2]


def test_a_higher_priority_goes_ahead_and_equal_priorities_keep_arrival_order(member, manager):
    first, second = submit_many(member, 2)
    urgent = services.job_submit(
        user=manager, draft=job_parse({**SMALL, "name": "urgent", "priority": 10})
    )

    assert selectors.job_position(urgent) == 1
    assert selectors.job_position(first) == 2
    assert selectors.job_position(second) == 3


def test_positions_stay_exact_through_every_kind_of_write(member, manager):
    """Three blocks deep, then a random mix of the writes the product makes."""
    rng = random.Random(7)
    jobs = submit_many(member, 2 * TICKET_BLOCK + 300)
    submit_many(member, 50, queue="root/algorithm/text")
    assert_positions_exact()

    for job in rng.sample(jobs, 40):  # cancels anywhere in the queue
        services.job_cancel(user=member, job=job)
    assert_positions_exact()

    pending = list(Job.objects.filter(state=State.QUEUED, queue=jobs[0].queue))
    for job in rng.sample(pending, 30):  # priority jumps and drops
        services.job_set_priority(user=manager, job=job, priority=rng.choice([-5, 3, 9]))
    services.job_move_to_head(user=manager, job=pending[-1])
    assert_positions_exact()
    assert selectors.job_position(Job.objects.get(pk=pending[-1].pk)) == 1

    ids = [job.pk for job in rng.sample(pending, 200)]
    Job.objects.filter(pk__in=ids[:100]).update(state=State.BACKOFF)  # tried, did not fit
    Job.objects.filter(pk__in=ids[100:]).update(state=State.ADMITTED)  # dequeued
    assert_positions_exact()

    Job.objects.filter(pk__in=ids[150:]).update(state=State.PREEMPTED)
    Job.objects.filter(pk__in=ids[150:]).update(state=State.QUEUED)  # requeued in place
    assert_positions_exact()

    Job.objects.filter(pk__in=ids[:20]).delete()
    assert_positions_exact()


def test_a_requeued_job_returns_to_its_place(member):
    jobs = submit_many(member, 5)
    Job.objects.filter(pk=jobs[1].pk).update(state=State.ADMITTED, dequeued_at=timezone.now())
    assert selectors.job_position(Job.objects.get(pk=jobs[2].pk)) == 2

    Job.objects.filter(pk=jobs[1].pk).update(state=State.PREEMPTED)
    Job.objects.filter(pk=jobs[1].pk).update(state=State.QUEUED)

    assert selectors.job_position(Job.objects.get(pk=jobs[1].pk)) == 2
    assert selectors.job_position(Job.objects.get(pk=jobs[2].pk)) == 3


def test_queue_counts_come_from_the_blocks(member):
    jobs = submit_many(member, TICKET_BLOCK + 10)
    Job.objects.filter(pk__in=[j.pk for j in jobs[:4]]).update(state=State.BACKOFF)
    Job.objects.filter(pk__in=[j.pk for j in jobs[4:6]]).update(state=State.RUNNING)

    counts = selectors.queue_counts(jobs[0].queue)

    assert counts[State.QUEUED] == TICKET_BLOCK + 4
    assert counts[State.BACKOFF] == 4
    assert counts[State.RUNNING] == 2
    assert selectors.pending_counts([jobs[0].queue_id]) == {jobs[0].queue_id: TICKET_BLOCK + 8}


def test_the_database_counts_blocks_and_pending_states_as_the_models_declare():
    """The triggers of migration 0004 are SQL frozen in a migration; the model's block size
    and pending states must be what the installed functions use."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT prosrc FROM pg_proc WHERE proname = 'jobs_pending_blocks'")
        (source,) = cursor.fetchone()

    assert set(re.findall(r"ticket / (\d+)", source)) == {str(TICKET_BLOCK)}
    states = set(re.findall(r"state IN \(([^)]*)\)", source))
    assert states == {", ".join(f"'{state}'" for state in PENDING)}
