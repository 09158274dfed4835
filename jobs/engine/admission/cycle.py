"""The admission cycle: read its inputs, apply the rule, write the plan.

The rule itself is ``queues.admission.plan_admissions``, a pure function; this package is
the database around it: ``inputs`` reads what the rule is given, ``writes`` commits what it
decided. One cycle runs at a time, in one transaction that holds an advisory lock of
its own (``jobs.engine.locks``), and its write checks the quota promise on every node it
added a job to before it commits: a plan that would take a node above its ``max`` or the
cluster above its allocatable is rolled back and logged, never committed.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial

from django.db import transaction
from django.utils import timezone

from jobs.engine.admission.inputs import (
    HEADS_PER_QUEUE,
    is_due,
    queue_heads,
    read_holding,
    woken_at,
)
from jobs.engine.admission.writes import CycleWrite, plan_write, write_backoffs, write_failures
from jobs.engine.locks import (
    ADMISSION,
    ADMISSION_DONE,
    lock_jobs,
    retrying,
    transaction_lock,
    work_done,
)
from jobs.engine.namespace_health import (
    failed_reason,
    held_reason,
    past_grace,
    unavailable_namespaces,
)
from jobs.engine.triggers import once_per
from jobs.tables.blocks import compact_pending_blocks
from jobs.tables.jobs import PendingRow, pending_heads
from jobs.telemetry import ADMISSION_CYCLE_SECONDS
from queues.admission import plan_admissions
from queues.phrases import Phrase

log = logging.getLogger(__name__)


@dataclass
class CycleResult:
    admitted: list[int] = field(default_factory=list)
    backed_off: list[int] = field(default_factory=list)
    preempted: list[int] = field(default_factory=list)
    cycles: int = 0


def admission_cycle(
    *, now: datetime | None = None, before: Callable[[], None] | None = None
) -> CycleResult | None:
    """Run cycles until nothing more can be admitted. None if another process holds the lock.

    Each cycle reads, plans and writes in one transaction that holds the admission lock
    (``transaction_lock``), so it is exclusive behind any pooler, and one that loses to
    other writers' row locks is planned again from what they committed. ``before`` runs
    once the first cycle holds the lock, before anything is read (the trigger clears its
    dirty mark there, so a trigger that arrives later runs another cycle). The caller
    makes the cluster follow: ``result.preempted`` then ``result.admitted`` (see
    jobs.tasks).
    """
    result = CycleResult()
    while True:
        first = before if result.cycles == 0 else None
        cycle = retrying(partial(_locked_cycle, now or timezone.now(), first))
        if cycle is None:  # another process holds the lock: it carries on from here
            return result if result.cycles else None
        result.cycles += 1
        result.admitted += cycle.admitted
        result.backed_off += cycle.backed_off
        result.preempted += cycle.preempted
        if not (cycle.more and cycle.admitted):
            break
    _compact_now_and_then()
    return result


def _locked_cycle(now: datetime, before: Callable[[], None] | None) -> CycleWrite | None:
    """One cycle, in the caller's transaction, if it can take the admission lock."""
    if not transaction_lock(ADMISSION):
        return None
    if before is not None:
        before()
    with ADMISSION_CYCLE_SECONDS.time():
        cycle = _one_cycle(now)
    # In the cycle's transaction: when it last ended well costs no commit of its own.
    work_done(ADMISSION_DONE)
    return cycle


COMPACT_EVERY_SECONDS = 1.0


def _compact_now_and_then() -> None:
    """The pending blocks are compacted as a cycle would change them: under its lock."""
    if not once_per("compact-pending-blocks", COMPACT_EVERY_SECONDS):
        return
    with transaction.atomic():
        if transaction_lock(ADMISSION):
            compact_pending_blocks()


def _one_cycle(now: datetime) -> CycleWrite:
    wake = woken_at()
    rows = pending_heads(HEADS_PER_QUEUE + 1)
    held = _hold(rows, now, wake)
    heads = queue_heads(rows, now, wake, HEADS_PER_QUEUE, held)
    holding = read_holding()
    plan = plan_admissions(
        tree=holding.tree,
        used=holding.used,
        allocatable=holding.allocatable,
        queues=heads,
        admitted=holding.admitted,
        leaving=holding.leaving,
        fair=holding.fair,
        pools=holding.pool_names,
    )
    leaf_of = {c.key: q.leaf for q in heads for c in q.candidates}
    return plan_write(
        plan, tree=holding.tree, allocatable=holding.allocatable, leaf_of=leaf_of, now=now
    )


@dataclass(frozen=True)
class _Held:
    """Why a pending job is held, as ``write_backoffs`` reads a refusal."""

    reason: Phrase

    def phrase(self) -> Phrase:
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
            write_backoffs(waiting, now)
            write_failures(late, now)

        retrying(write)
    return {row.id for row in held}
