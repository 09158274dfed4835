"""Every change of a job's state, each checked against the state machine
(``jobs.models.TRANSITIONS``, drawn in docs/architecture.md section 7).

A job's state changes in one of three ways, all of them here:

- ``step``: one job, loaded and locked by the caller, moved in memory; the caller saves
  it with the other fields it changed (a cancel, a start timeout, a deferral through
  ``leave_for_backoff``).
- ``move``: the jobs a filter picks, through the ORM, compare-and-swap: they are locked
  in id order (the lock order of ``jobs.engine.locks``) and only those whose state may
  become the target move, so a job that moved meanwhile is left as it is (the sync's
  phases, refusals, unrunnable jobs, leaving jobs).
- The admission cycle's statements (``fail_pending``, ``preempt``, ``admit``,
  ``back_off``): raw SQL over a cycle's jobs at once, compare-and-swap the same way, the
  states they move from given by ``movable``. The cycle locks the jobs first.

No other module changes a job's state; tests/engine/test_transitions.py holds that.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Q

from jobs.models import IN_CLUSTER, JOBS, PENDING, TRANSITIONS, Job, State
from queues.phrases import Phrase
from queues.selectors import QUEUES


class IllegalTransition(ValueError):
    """A move the state machine does not allow."""


def sources_of(target: str) -> tuple[str, ...]:
    """The states from which ``target`` may be reached."""
    return tuple(state for state, targets in TRANSITIONS.items() if target in targets)


def movable(target: str, among: Iterable[str]) -> list[str]:
    """The states of ``among`` that may move to ``target``: what a statement takes as its
    ``WHERE state = ANY(...)``, so that it cannot drift from the state machine."""
    allowed = [state for state in among if target in TRANSITIONS[state]]
    if not allowed:
        raise IllegalTransition(f"no state of {tuple(among)} may move to {target}")
    return allowed


def step(job: Job, target: str) -> None:
    """Move one job, in memory, to ``target``; the caller holds its row lock and saves it."""
    if target not in TRANSITIONS[job.state]:
        raise IllegalTransition(f"a {job.state} job cannot become {target}")
    job.state = target


def move(target: str, which: Q, *, among: Iterable[str] | None = None, **stamps) -> list[int]:
    """Move the jobs ``which`` picks (of the states ``among``, default any) to ``target``,
    setting ``stamps`` too; returns the ids that moved, in id order."""
    states = movable(target, TRANSITIONS if among is None else among)
    with transaction.atomic():
        moved = list(
            Job.objects.select_for_update(of=("self",), no_key=True)
            .filter(which, state__in=states)
            .order_by("pk")
            .values_list("pk", flat=True)
        )
        if moved:
            Job.objects.filter(pk__any=moved).update(state=target, **stamps)
    return moved


# A job's way back to its queue in backoff: the reconciler's deferrals and the start
# timeouts take it for one job, the admission cycle's ``back_off`` for many.


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
    "state", "dequeued_at", "last_tried_at", "backoff_reason", "backoff_code", "backoff_args",
    "backoff_count", "next_attempt_at",
)  # fmt: skip

# What a job leaving backoff clears, for a caller's ``move`` or ``update``.
NO_BACKOFF_REASON = {"backoff_reason": "", "backoff_code": "", "backoff_args": {}}


def leave_for_backoff(job: Job, *, reason: Phrase | str, attempts: int, now: datetime) -> None:
    """An admitted job leaves the cluster for its queue, in backoff: tried again after
    ``backoff_delay(attempts)`` with its queue's base and cap, ``reason`` shown meanwhile.
    The caller saves the fields of LEFT_FOR_BACKOFF (``job.queue`` must be loaded)."""
    step(job, State.BACKOFF)
    job.dequeued_at, job.last_tried_at = None, now
    job.set_backoff_reason(reason)
    job.backoff_count += 1
    job.next_attempt_at = now + backoff_delay(
        attempts, base=job.queue.backoff_base_seconds, cap=job.queue.backoff_max_seconds
    )


# The admission cycle's moves, over the jobs it has locked.


def fail_pending(ids: list[int], *, now: datetime) -> list[int]:
    """Pending jobs that can never be admitted fail; the ids that did, in id order."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            UPDATE {JOBS} SET state = %s, finished_at = %s
            WHERE id = ANY(%s) AND state = ANY(%s)
            RETURNING id
            """,
            [State.FAILED, now, ids, movable(State.FAILED, PENDING)],
        )
        return sorted(row[0] for row in cursor.fetchall())


def preempt(ids: list[int], *, now: datetime) -> list[int]:
    """Jobs in the cluster become preempted victims: they hold their quota until the
    reconcile has taken their objects out and the sync has seen them gone (``move`` to
    queued then). The ids that moved."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            UPDATE {JOBS} SET state = %s, preemption_count = preemption_count + 1,
                leaving_since = %s
            WHERE id = ANY(%s) AND state = ANY(%s)
            RETURNING id
            """,
            [State.PREEMPTED, now, ids, movable(State.PREEMPTED, IN_CLUSTER)],
        )
        return [row[0] for row in cursor.fetchall()]


def admit(
    ids: list[int], *, now: datetime, pools: Mapping[int, str] | None = None
) -> list[tuple[int, str, datetime]]:
    """Pending jobs are dequeued into the cluster, each in the node pool ``pools`` places
    it in ("" for none): (id, queue name, enqueue time) of each that moved. A job held
    since the cycle read it stays."""
    placed = [(pools or {}).get(job_id, "") for job_id in ids]
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            UPDATE {JOBS} j
            SET state = %s, dequeued_at = %s, backoff_reason = '', backoff_code = '',
                backoff_args = '{{}}'::jsonb, pool = v.pool,
                next_attempt_at = NULL, last_tried_at = %s, start_clock_at = NULL
            FROM {QUEUES} q, unnest(%s::bigint[], %s::text[]) AS v(id, pool)
            WHERE j.id = v.id AND j.state = ANY(%s) AND j.held_at IS NULL AND q.id = j.queue_id
            RETURNING j.id, q.name, j.enqueued_at
            """,
            [State.ADMITTED, now, now, ids, placed, movable(State.ADMITTED, PENDING)],
        )
        return cursor.fetchall()


def backoff_candidates(ids: list[int]) -> list[tuple]:
    """Of these jobs, those that may go into backoff, locked, in id order: (id, state,
    backoff reason, backoff count, the queue's backoff base and cap)."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            SELECT j.id, j.state, j.backoff_reason, j.backoff_count,
                   q.backoff_base_seconds, q.backoff_max_seconds
            FROM {JOBS} j JOIN {QUEUES} q ON q.id = j.queue_id
            WHERE j.id = ANY(%s) AND j.state = ANY(%s) AND j.held_at IS NULL
            ORDER BY j.id
            FOR NO KEY UPDATE OF j
            """,
            [ids, movable(State.BACKOFF, PENDING)],
        )
        return cursor.fetchall()


def back_off(reasons: list[tuple[int, Phrase, str, datetime]], *, now: datetime) -> None:
    """Put pending jobs into backoff, each (id, reason, its English text, next attempt) its
    own: the text with the reason's code and arguments. The rows go as one JSON document, so
    the statement has four parameters however many jobs back off."""
    if not reasons:
        return
    rows = [
        {
            "id": job_id,
            "reason": text,
            "code": reason.code,
            "args": dict(reason.args),
            "next_at": next_at.isoformat(),
        }
        for job_id, reason, text, next_at in reasons
    ]
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            UPDATE {JOBS} j
            SET state = %s, backoff_reason = v.reason, backoff_code = v.code,
                backoff_args = v.args, next_attempt_at = v.next_at,
                backoff_count = j.backoff_count + 1, last_tried_at = %s
            FROM jsonb_to_recordset(%s::jsonb)
                AS v(id bigint, reason text, code text, args jsonb, next_at timestamptz)
            WHERE j.id = v.id AND j.state = ANY(%s)
            """,
            [State.BACKOFF, now, json.dumps(rows), movable(State.BACKOFF, PENDING)],
        )
