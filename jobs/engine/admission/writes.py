"""What an admission cycle writes: dequeues, preemptions, backoffs and failures with
their events, in one transaction that checks the quota promise on every node it added a
job to (``plan_write``). The state changes themselves are ``jobs.engine.transitions``'.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from jobs.engine import transitions
from jobs.engine.admission.inputs import leaf_usage
from jobs.engine.locks import lock_jobs, retrying
from jobs.models import AdmissionWake, JobEvent, State
from kube.quantity import ResourceList, add, human, in_pool
from queues import phrases
from queues.admission import Plan, Preemption
from queues.phrases import Phrase
from queues.quota import Breach, Node, breaches, rollup

log = logging.getLogger(__name__)


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


def write_failures(reasons: Mapping[int, Phrase | str], now: datetime) -> list[int]:
    """Fail pending jobs with these reasons (compare-and-swap on their state)."""
    if not reasons:
        return []
    moved = transitions.fail_pending(list(reasons), now=now)
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
        dequeued = _write_dequeues([c.key for c in plan.admitted], now, plan.placed)
        backed_off = write_backoffs(plan.refused, now)
        if dequeued:
            added: dict[str, ResourceList] = {}
            requests = {
                c.key: in_pool(c.request, plan.placed.get(c.key, "")) for c in plan.admitted
            }
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
    moved = transitions.preempt(list(by_key), now=now)
    JobEvent.objects.record(
        ((job_id, JobEvent.Reason.PREEMPTED, by_key[job_id].phrase()) for job_id in moved),
        at=now,
        warning=True,
    )
    return moved


def _write_dequeues(ids: list[int], now: datetime, pools: Mapping[int, str]) -> list[int]:
    if not ids:
        return []
    rows = transitions.admit(ids, now=now, pools=pools)
    JobEvent.objects.record(
        (
            (
                job_id,
                JobEvent.Reason.DEQUEUED,
                Phrase(
                    phrases.DEQUEUED,
                    {"queue": queue, "waited": phrases.seconds((now - enqueued).total_seconds())},
                ),
            )
            for job_id, queue, enqueued in rows
        ),
        at=now,
    )
    return [row[0] for row in rows]


def write_backoffs(refused: Mapping[int, Refusal], now: datetime) -> list[int]:
    """Put refused jobs into backoff; record an event when the reason is new."""
    if not refused:
        return []
    values, events = [], []
    for job_id, state, old_reason, count, base, cap in transitions.backoff_candidates(
        list(refused)
    ):
        reason = refused[job_id].phrase()
        text = reason.english()  # rendered once: a pooled reason names every pool
        next_at = now + transitions.backoff_delay(count + 1, base=base, cap=cap)
        values.append((job_id, reason, text, next_at))
        if state != State.BACKOFF or text != old_reason:
            events.append((job_id, JobEvent.Reason.BACKOFF, next_try(reason, next_at)))
    transitions.back_off(values, now=now)
    JobEvent.objects.record(events, at=now, warning=True)
    return [row[0] for row in values]


def next_try(reason: Phrase | str, next_at: datetime) -> Phrase:
    """A backoff's event: its reason and when it is tried again (in the reader's zone)."""
    return Phrase(
        phrases.NEXT_TRY, {"reason": phrases.argument(reason), "next_at": phrases.at(next_at)}
    )


class Refusal(Protocol):
    """Why the cycle set a job aside: a quota shortfall, a wait for leaving jobs, a hold."""

    def phrase(self) -> Phrase: ...
