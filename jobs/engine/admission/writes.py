"""What an admission cycle writes: dequeues, preemptions, backoffs and failures, in one
transaction that checks the quota promise on every node it added a job to
(``plan_write``); and a job's way back to its queue in backoff (``leave_for_backoff``),
which the reconciler and the start timeouts use too.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection

from jobs.engine.admission.inputs import leaf_usage
from jobs.engine.locks import lock_jobs, retrying
from jobs.models import (
    IN_CLUSTER,
    JOBS,
    PENDING,
    AdmissionWake,
    JobEvent,
    State,
    moving,
)
from kube.quantity import ResourceList, add, human
from queues.admission import Plan, Preemption
from queues.quota import Breach, Node, breaches, rollup
from queues.selectors import QUEUES

log = logging.getLogger(__name__)


def backoff_delay(
    attempts: int, *, base: float | None = None, cap: float | None = None
) -> timedelta:
    """Exponential and bounded: base, 2 x base, 4 x base ... up to the cap.

    ``base`` and ``cap`` are the queue's own when it sets them, else the site's.
    """
    base = settings.BACKOFF_BASE_SECONDS if base is None else base
    cap = settings.BACKOFF_MAX_SECONDS if cap is None else cap
    # Past 2**60 x base every cap is reached; a larger power would not fit a float.
    exponent = min(max(attempts - 1, 0), 60)
    return timedelta(seconds=min(base * 2**exponent, cap))


# The fields ``leave_for_backoff`` changes, for a caller's bulk_update.
LEFT_FOR_BACKOFF = (
    "state", "dequeued_at", "last_tried_at", "backoff_reason", "backoff_count", "next_attempt_at",
)  # fmt: skip


def leave_for_backoff(job, *, reason: str, attempts: int, now: datetime) -> None:
    """An admitted job leaves the cluster for its queue, in backoff: tried again after
    ``backoff_delay(attempts)`` with its queue's base and cap, ``reason`` shown meanwhile.
    The caller saves the fields of LEFT_FOR_BACKOFF (``job.queue`` must be loaded)."""
    job.state, job.dequeued_at, job.last_tried_at = State.BACKOFF, None, now
    job.backoff_reason = reason
    job.backoff_count += 1
    job.next_attempt_at = now + backoff_delay(
        attempts, base=job.queue.backoff_base_seconds, cap=job.queue.backoff_max_seconds
    )


def capacity_changed(*, now: datetime) -> None:
    """Wake every backed-off job for the next cycle: capacity was freed or quotas changed."""
    AdmissionWake.objects.update_or_create(pk=1, defaults={"woken_at": now})


@dataclass
class CycleWrite:
    """What one cycle's write committed (nothing when it was rolled back)."""

    admitted: list[int]
    backed_off: list[int]
    preempted: list[int]
    more: bool


def write_failures(reasons: dict[int, str], now: datetime) -> list[int]:
    """Fail pending jobs with these reasons (compare-and-swap on their state)."""
    if not reasons:
        return []
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            UPDATE {JOBS} SET state = %s, finished_at = %s
            WHERE id = ANY(%s) AND state = ANY(%s)
            RETURNING id
            """,
            [State.FAILED, now, list(reasons), moving(State.FAILED, PENDING)],
        )
        moved = sorted(row[0] for row in cursor.fetchall())
    JobEvent.objects.record(
        ((job_id, "Refused", reasons[job_id]) for job_id in moved), at=now, warning=True
    )
    return moved


class QuotaBreached(Exception):
    """The write of a plan would commit usage above a ``max`` or the cluster's allocatable."""

    def __init__(self, found: list[Breach]):
        super().__init__("; ".join(breach.message() for breach in found))
        self.found = found


def plan_write(
    plan: Plan,
    *,
    tree: Mapping[str, Node],
    allocatable: Mapping[str, int] | None,
    leaf_of: dict[int, str],
    now: datetime,
) -> CycleWrite:
    """Write a plan's preemptions, dequeues and backoffs in one transaction, and commit
    them only if the quota promise holds afterwards.

    After the writes, still in the transaction, the usage of every node is summed again
    from the jobs and judged where the dequeues added to it (``queues.quota.breaches``).
    A breach rolls the whole cycle back and logs the plan that caused it; nothing of it is
    committed and the next cycle plans again from the database. ``leaf_of`` gives each
    candidate's leaf. Every job the plan changes is locked first, by id (``lock_jobs``),
    so the write waits for a bulk action or a sync instead of deadlocking with it.
    """

    def write() -> CycleWrite:
        lock_jobs(
            [p.victim.key for p in plan.preempted]
            + [c.key for c in plan.admitted]
            + list(plan.refused)
        )
        preempted = _write_preemptions(plan.preempted, now)
        dequeued = _write_dequeues([c.key for c in plan.admitted], now)
        backed_off = write_backoffs(plan.refused, now)
        if dequeued:
            added: dict[str, ResourceList] = {}
            requests = {c.key: c.request for c in plan.admitted}
            for key in dequeued:
                added[leaf_of[key]] = add(added.get(leaf_of[key], {}), requests[key])
            found = breaches(
                added=added, tree=tree, used=rollup(leaf_usage()), allocatable=allocatable
            )
            if found:
                raise QuotaBreached(found)
        return CycleWrite(dequeued, backed_off, preempted, plan.more)

    try:
        return retrying(write)
    except QuotaBreached as breach:
        log.error(
            "admission cycle rolled back, it would have broken the quota promise (%s); "
            "the plan: admit %s; preempt %s",
            breach,
            ", ".join(
                f"{c.key} into {leaf_of[c.key]} ({_shown(c.request)})" for c in plan.admitted
            ),
            ", ".join(f"{p.victim.key} of {p.victim.leaf}" for p in plan.preempted) or "none",
        )
        return CycleWrite([], [], [], more=False)


def _shown(request: ResourceList) -> str:
    return ", ".join(f"{r} {human(r, amount)}" for r, amount in sorted(request.items()))


def _write_preemptions(preemptions: list[Preemption], now: datetime) -> list[int]:
    """Move victims to ``preempted``: they hold their quota until the reconcile has taken
    their objects out and the sync has seen them gone, which requeues them."""
    if not preemptions:
        return []
    by_key = {p.victim.key: p for p in preemptions}
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            UPDATE {JOBS} SET state = %s, preemption_count = preemption_count + 1,
                leaving_since = %s
            WHERE id = ANY(%s) AND state = ANY(%s)
            RETURNING id
            """,
            [State.PREEMPTED, now, list(by_key), moving(State.PREEMPTED, IN_CLUSTER)],
        )
        moved = [row[0] for row in cursor.fetchall()]
    JobEvent.objects.record(
        ((job_id, JobEvent.Reason.PREEMPTED, by_key[job_id].message()) for job_id in moved),
        at=now,
        warning=True,
    )
    return moved


def _write_dequeues(ids: list[int], now: datetime) -> list[int]:
    if not ids:
        return []
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            UPDATE {JOBS} j
            SET state = %s, dequeued_at = %s, backoff_reason = '',
                next_attempt_at = NULL, last_tried_at = %s, start_clock_at = NULL
            FROM {QUEUES} q
            WHERE j.id = ANY(%s) AND j.state = ANY(%s) AND q.id = j.queue_id
            RETURNING j.id, q.name, j.enqueued_at
            """,
            [State.ADMITTED, now, now, ids, moving(State.ADMITTED, PENDING)],
        )
        rows = cursor.fetchall()
    JobEvent.objects.record(
        (
            (job_id, JobEvent.Reason.DEQUEUED, f"Dequeued from {queue} after waiting {waited:.1f}s")
            for job_id, queue, enqueued in rows
            for waited in [(now - enqueued).total_seconds()]
        ),
        at=now,
    )
    return [row[0] for row in rows]


def write_backoffs(refused: dict, now: datetime) -> list[int]:
    """Put refused jobs into backoff; record an event when the reason is new."""
    if not refused:
        return []
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            SELECT j.id, j.state, j.backoff_reason, j.backoff_count,
                   q.backoff_base_seconds, q.backoff_max_seconds
            FROM {JOBS} j JOIN {QUEUES} q ON q.id = j.queue_id
            WHERE j.id = ANY(%s) AND j.state = ANY(%s)
            ORDER BY j.id
            FOR NO KEY UPDATE OF j
            """,
            [list(refused), moving(State.BACKOFF, PENDING)],
        )
        current = cursor.fetchall()
        values, events = [], []
        for job_id, state, old_reason, count, base, cap in current:
            reason = refused[job_id].message()
            next_at = now + backoff_delay(count + 1, base=base, cap=cap)
            values.append((job_id, reason, next_at))
            if state != State.BACKOFF or reason != old_reason:
                events.append(
                    (job_id, JobEvent.Reason.BACKOFF, f"{reason}; next try at {next_at:%H:%M:%S}")
                )
        if values:
            placeholders = ", ".join(["(%s::bigint, %s::text, %s::timestamptz)"] * len(values))
            cursor.execute(
                f"""
                UPDATE {JOBS} j
                SET state = %s, backoff_reason = v.reason, next_attempt_at = v.next_at,
                    backoff_count = j.backoff_count + 1, last_tried_at = %s
                FROM (VALUES {placeholders}) AS v(id, reason, next_at)
                WHERE j.id = v.id
                """,
                [State.BACKOFF, now, *[item for row in values for item in row]],
            )
    JobEvent.objects.record(events, at=now, warning=True)
    return [row[0] for row in values]
