"""The admission cycle: read queue heads and usage, apply the rule, write the dequeues.

The rule itself is ``queues.admission.plan_admissions``, a pure function; this module is
the database around it. One cycle runs at a time behind an advisory lock, and its write
checks the quota promise on every node it added a job to before it commits
(``plan_write``): a plan that would take a node above its ``max`` or the cluster above its
allocatable is rolled back and logged, never committed.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import NamedTuple

from django.conf import settings
from django.db import connection
from django.utils import timezone

from jobs.cluster import get_backend
from jobs.engine.locks import ADMISSION, advisory_lock, lock_jobs, retrying
from jobs.engine.namespace_health import (
    failed_reason,
    held_reason,
    past_grace,
    unavailable_namespaces,
)
from jobs.engine.triggers import once_per
from jobs.models import (
    HOLDING,
    IN_CLUSTER,
    JOBS,
    LEAVING,
    PENDING,
    PENDING_BLOCKS,
    AdmissionWake,
    JobEvent,
    State,
    moving,
)
from jobs.telemetry import ADMISSION_CYCLE_SECONDS
from kube.quantity import ResourceList, add, human
from queues.admission import Admitted, Candidate, Plan, Preemption, QueueHeads, plan_admissions
from queues.quota import Breach, Node, breaches, rollup
from queues.selectors import QUEUES, QUOTA_NODES, tree_nodes

log = logging.getLogger(__name__)
HEADS_PER_QUEUE = 8


@dataclass
class CycleResult:
    admitted: list[int] = field(default_factory=list)
    backed_off: list[int] = field(default_factory=list)
    preempted: list[int] = field(default_factory=list)
    cycles: int = 0


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


def leaf_usage() -> dict[str, ResourceList]:
    """Requests of the jobs holding quota (admitted, running, and leaving until their
    objects are gone) summed per leaf path, in SQL."""
    return leaf_holding()[0]


def leaf_holding() -> tuple[dict[str, ResourceList], dict[str, ResourceList]]:
    """Per leaf path and resource: what the jobs holding quota use, and how many of them
    hold some of it."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            SELECT n.path, r.key, SUM(r.value::bigint),
                   COUNT(*) FILTER (WHERE r.value::bigint > 0)
            FROM {JOBS} j
            JOIN {QUEUES} q ON q.id = j.queue_id
            JOIN {QUOTA_NODES} n ON n.id = q.node_id
            CROSS JOIN LATERAL jsonb_each_text(j.request) r
            WHERE j.state = ANY(%s)
            GROUP BY n.path, r.key
            """,
            [list(HOLDING)],
        )
        usage: dict[str, ResourceList] = {}
        jobs: dict[str, ResourceList] = {}
        for path, resource, amount, holders in cursor.fetchall():
            usage.setdefault(path, {})[resource] = int(amount)
            if holders:
                jobs.setdefault(path, {})[resource] = holders
    return usage, jobs


def holding_jobs() -> tuple[list[Admitted], list[Admitted]]:
    """Every job holding quota, as two lists: those admitted or running (the pool reclaim
    chooses from) and those leaving (preempted or stopping, their objects not yet gone).

    Their number is bounded by what the cluster runs, not by the number of pending jobs.
    """
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            SELECT j.id, n.path, j.request::text, j.priority, j.dequeued_at, j.state
            FROM {JOBS} j
            JOIN {QUEUES} q ON q.id = j.queue_id
            JOIN {QUOTA_NODES} n ON n.id = q.node_id
            WHERE j.state = ANY(%s)
            """,
            [list(HOLDING)],
        )
        admitted: list[Admitted] = []
        leaving: list[Admitted] = []
        for job_id, path, request, priority, dequeued_at, state in cursor.fetchall():
            job = Admitted(
                key=job_id,
                leaf=path,
                request=request_units(request),
                priority=priority,
                admitted_at=dequeued_at,
            )
            (leaving if state in LEAVING else admitted).append(job)
        return admitted, leaving


def usage_of(admitted: list[Admitted]) -> dict[str, ResourceList]:
    leaves: dict[str, ResourceList] = {}
    for job in admitted:
        leaves[job.leaf] = add(leaves.get(job.leaf, {}), job.request)
    return rollup(leaves)


def is_due(
    state: str,
    next_attempt_at: datetime | None,
    last_tried_at: datetime | None,
    now: datetime,
    woken_at: datetime | None,
) -> bool:
    """Whether a pending job is tried at the next cycle: a queued job always; a backing-off
    one once its next attempt is due, or capacity changed since it was last tried."""
    return state == State.QUEUED or (
        (next_attempt_at is not None and next_attempt_at <= now)
        or (woken_at is not None and (last_tried_at is None or last_tried_at < woken_at))
    )


class PendingRow(NamedTuple):
    leaf: str
    policy: str
    preemption: bool
    queue_id: int
    id: int
    priority: int
    enqueued_at: datetime
    request: ResourceList
    state: str
    next_attempt_at: datetime | None
    last_tried_at: datetime | None
    run_seconds: float | None
    namespace: str


def pending_heads(limit: int) -> list[PendingRow]:
    """The first ``limit`` pending jobs of every active queue, in queue order, in one query
    (the admission cycle reads its candidates so, and the start estimate its waiting jobs)."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            SELECT n.path, q.policy, q.preemption, q.id, h.id, h.priority, h.enqueued_at,
                   h.request::text, h.state, h.next_attempt_at, h.last_tried_at, h.run_seconds,
                   h.namespace
            FROM {QUEUES} q
            JOIN {QUOTA_NODES} n ON n.id = q.node_id
            CROSS JOIN LATERAL (
                SELECT j.id, j.priority, j.ticket, j.enqueued_at, j.request, j.state,
                       j.next_attempt_at, j.last_tried_at, j.run_seconds, j.namespace
                FROM {JOBS} j
                WHERE j.queue_id = q.id AND j.state = ANY(%s)
                ORDER BY j.priority DESC, j.ticket
                LIMIT %s
            ) h
            WHERE q.active AND n.active
            ORDER BY n.path, h.priority DESC, h.ticket
            """,
            [list(PENDING), limit],
        )
        return [PendingRow(*row[:7], request_units(row[7]), *row[8:]) for row in cursor.fetchall()]


def request_units(request: str) -> ResourceList:
    """A job's ``request`` column read as text (``request::text``) as base units."""
    return {resource: int(amount) for resource, amount in json.loads(request).items()}


def _queue_heads(
    rows: list[PendingRow], now: datetime, woken_at: datetime | None, limit: int, held: set[int]
) -> list[QueueHeads]:
    """The first ``limit`` pending jobs of every active queue (``rows``: ``limit`` + 1 of
    each) as candidates, and whether each queue holds more; the ``held`` are not tried."""
    grouped: dict[str, tuple[str, bool, list[Candidate]]] = {}
    for row in rows:
        due = row.id not in held and is_due(
            row.state, row.next_attempt_at, row.last_tried_at, now, woken_at
        )
        candidate = Candidate(
            key=row.id,
            request=row.request,
            rank=(-row.priority, row.enqueued_at, row.id),
            due=due,
            priority=row.priority,
        )
        grouped.setdefault(row.leaf, (row.policy, row.preemption, []))[2].append(candidate)
    return [
        QueueHeads(
            leaf=path,
            policy=policy,
            candidates=candidates[:limit],
            exhausted=len(candidates) <= limit,
            preemption=preemption,
        )
        for path, (policy, preemption, candidates) in grouped.items()
    ]


def admission_cycle(
    *, now: datetime | None = None, before: Callable[[], None] | None = None
) -> CycleResult | None:
    """Run cycles until nothing more can be admitted. None if another process holds the lock.

    ``before`` runs once the lock is held, before anything is read (the trigger clears its
    dirty mark there, so a trigger that arrives later runs another cycle). The caller makes
    the cluster follow: ``result.preempted`` then ``result.admitted`` (see jobs.tasks).
    """
    result = CycleResult()
    with advisory_lock(ADMISSION) as acquired:
        if not acquired:
            return None
        if before is not None:
            before()
        while True:
            with ADMISSION_CYCLE_SECONDS.time():
                cycle = _one_cycle(now or timezone.now())
            result.cycles += 1
            result.admitted += cycle.admitted
            result.backed_off += cycle.backed_off
            result.preempted += cycle.preempted
            if not (cycle.more and cycle.admitted):
                break
        _compact_now_and_then()
    return result


COMPACT_EVERY_SECONDS = 1.0


def _compact_now_and_then() -> None:
    if once_per("compact-pending-blocks", COMPACT_EVERY_SECONDS):
        compact_pending_blocks()


def compact_pending_blocks() -> None:
    """Fold the appended changes of each (queue, priority, block) into one row.

    Run under the admission lock, so by one process at a time. Rows that writers append
    meanwhile are not in this statement's snapshot and stay, so no count is lost.
    """
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            WITH folded AS (
                DELETE FROM {PENDING_BLOCKS} b
                USING (
                    SELECT queue_id, priority, block FROM {PENDING_BLOCKS}
                    GROUP BY 1, 2, 3 HAVING COUNT(*) > 1 OR SUM(jobs) = 0
                ) k
                WHERE (b.queue_id, b.priority, b.block) = (k.queue_id, k.priority, k.block)
                RETURNING b.queue_id, b.priority, b.block, b.jobs
            )
            INSERT INTO {PENDING_BLOCKS} (queue_id, priority, block, jobs)
            SELECT queue_id, priority, block, SUM(jobs) FROM folded
            GROUP BY 1, 2, 3 HAVING SUM(jobs) <> 0
            """
        )


@dataclass
class CycleWrite:
    """What one cycle's write committed (nothing when it was rolled back)."""

    admitted: list[int]
    backed_off: list[int]
    preempted: list[int]
    more: bool


def _one_cycle(now: datetime) -> CycleWrite:
    tree = tree_nodes()
    wake = AdmissionWake.objects.filter(pk=1).values_list("woken_at", flat=True).first()
    rows = pending_heads(HEADS_PER_QUEUE + 1)
    held = _hold(rows, now, wake)
    heads = _queue_heads(rows, now, wake, HEADS_PER_QUEUE, held)
    admitted, leaving = holding_jobs()
    allocatable = get_backend().allocatable()
    plan = plan_admissions(
        tree=tree,
        used=usage_of(admitted + leaving),
        allocatable=allocatable,
        queues=heads,
        admitted=admitted,
        leaving=leaving,
    )
    leaf_of = {c.key: q.leaf for q in heads for c in q.candidates}
    return plan_write(plan, tree=tree, allocatable=allocatable, leaf_of=leaf_of, now=now)


@dataclass(frozen=True)
class _Held:
    """Why a pending job is held, as ``_write_backoffs`` reads a refusal."""

    reason: str

    def message(self) -> str:
        return self.reason


def _hold(rows: list[PendingRow], now: datetime, woken_at: datetime | None) -> set[int]:
    """Pending jobs of a namespace in trouble (``jobs.engine.namespace_health``) are not tried:
    each one due is put back in backoff with the namespace's reason, and fails once the
    namespace has been unavailable for NAMESPACE_GRACE_SECONDS. Returns the ids held."""
    unavailable = unavailable_namespaces()
    held = [row for row in rows if row.namespace in unavailable]
    if not held:
        return set()
    late = {
        row.id: failed_reason(unavailable[row.namespace])
        for row in held
        if past_grace(unavailable[row.namespace], now=now)
    }
    waiting = {
        row.id: _Held(held_reason(unavailable[row.namespace]))
        for row in held
        if row.id not in late
        and is_due(row.state, row.next_attempt_at, row.last_tried_at, now, woken_at)
    }
    if late or waiting:

        def write() -> None:
            lock_jobs([*late, *waiting])
            _write_backoffs(waiting, now)
            _write_failures(late, now)

        retrying(write)
    return {row.id for row in held}


def _write_failures(reasons: dict[int, str], now: datetime) -> list[int]:
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
    tree: dict[str, Node],
    allocatable: ResourceList | None,
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
        backed_off = _write_backoffs(plan.refused, now)
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


def _write_backoffs(refused: dict, now: datetime) -> list[int]:
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
