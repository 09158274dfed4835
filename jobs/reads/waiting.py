"""Why a job waits, and for what: one explanation for the job page, the queue page and
``GET /api/v1/jobs/{id}/`` (its ``waiting`` object).

``explain`` is a pure function of the job, its place in its queue, the tree, the usage and
the jobs holding quota. It asks the admission rule itself (``plan_admissions``) what it
would do with the job if it were tried now: admit it, refuse it at the first node or at
the cluster that has no room, preempt borrowers for it, or have it wait for jobs leaving
the cluster. So the page can never tell a different story from the one the next cycle
acts on. A job behind its queue's head is told what the head waits for; a job backing
off, when it is tried again; a job dequeued but not running, what the cluster last said
of its pods. ``jobs_waiting`` reads what the explanations need once, for many jobs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from jobs.cluster import SCHEDULING_FAILURES
from jobs.engine.admission.inputs import Holding, is_due, read_holding, woken_at
from jobs.models import PENDING, QUEUE_ORDER, Job, JobEvent, State
from jobs.reads.selectors import job_positions
from kube.quantity import ResourceList, in_pool, pool_parts
from queues import phrases
from queues.admission import (
    BEST_EFFORT,
    Admitted,
    Candidate,
    InPools,
    OverPersonLimit,
    QueueHeads,
    Releasing,
    governs,
    plan_admissions,
    within_guarantee,
)
from queues.fairness import format_half_life
from queues.limits import limits_of
from queues.models import Queue
from queues.phrases import Phrase
from queues.quota import Shortfall, Standing, path_standing, shortfall

# What a job waits for, as the API names it.
NEXT = "next"  # it fits: dequeued at the next admission cycle
QUOTA = "quota"  # a max on its path is used up
CLUSTER = "cluster"  # the cluster has no room
RECLAIM = "reclaim"  # the next cycle preempts jobs of borrowers for it
RELEASING = "releasing"  # jobs leaving the cluster still hold what it needs
BEHIND = "behind"  # the jobs ahead of it in its queue go first
BACKOFF = "backoff"  # tried and set aside until its next attempt
STARTING = "starting"  # dequeued: the cluster is placing its pods
CLOSED = "closed"  # its queue admits nothing
HELD = "held"  # its owner or a manager holds it: admission skips it until it is released
STOPPED = "stopped"  # a node on its path has a stopPolicy: its queue admits nothing new
PERSON = "person"  # its owner is at the leaf's perPerson limit
REASONS = (
    NEXT, QUOTA, CLUSTER, RECLAIM, RELEASING, BEHIND, BACKOFF, STARTING, CLOSED, HELD, STOPPED,
    PERSON,
)  # fmt: skip


@dataclass(frozen=True)
class Waiting:
    """A job's explanation: ``reason`` (one of REASONS), a sentence, and the path table.

    ``sentence`` is a phrase (``queues.phrases``): the pages show it in the reader's
    language (``said``), the API in English (``summary``). ``blocking`` is the first node
    (or the cluster) and resource that refuses the job now; ``head`` is the explanation of
    the first job of the queue when this one is behind it.
    """

    reason: str
    sentence: Phrase
    path: tuple[Standing, ...] = ()
    blocking: Shortfall | None = None
    ahead: int = 0
    head: Waiting | None = None
    head_id: int | None = None
    job_id: int | None = None
    leaving: tuple[int, ...] = ()  # the jobs whose leave it waits for
    next_attempt_at: datetime | None = None
    last_failure: JobEvent | None = None  # STARTING: the cluster's last scheduling failure
    start_deadline: datetime | None = None  # STARTING: when the start timeout takes it out
    # What the rule would do with it now (a reason), backing off or not: a head whose owner
    # is at their limit (PERSON) holds back no job behind it.
    tried: str = ""
    _clause: Phrase | None = field(default=None, repr=False)

    @property
    def summary(self) -> str:
        """The sentence in English, times in the active zone."""
        return self.sentence.in_english()

    @property
    def said(self) -> str:
        """The sentence in the active language and zone."""
        return self.sentence.text()

    def rows(self) -> list[tuple[Standing, bool]]:
        """The path table, each row with whether it is the one that blocks."""
        return [(row, self.blocks(row)) for row in self.path]

    def blocks(self, row: Standing) -> bool:
        b = self.blocking
        return b is not None and (row.where, row.resource) == (b.where, b.resource)


@dataclass(frozen=True)
class Place:
    """Where a pending job stands in its queue, as ``explain`` needs it."""

    leaf: str
    position: int  # 1 for the head
    policy: str
    preemption: bool = False
    open: bool = True  # the queue and its node are active
    queue_name: str = ""
    held_ahead: int = 0  # held jobs ahead of it: skipped, so they do not hold it back


def _jobs(keys: Sequence[int]) -> Phrase:
    return Phrase(phrases.WAITING_JOBS, {"count": len(keys), "jobs": phrases.jobs(keys)})


def _short(short: Shortfall) -> Phrase:
    r, limit = short.resource, short.limit
    resource, pool = pool_parts(r)
    args = {
        "resource": resource, "where": short.where,
        "used": phrases.quantity(r, short.used, limit),
        "limit": phrases.quantity(r, limit),
        "asks": phrases.quantity(r, short.requested, limit),
    }  # fmt: skip
    if pool:
        return Phrase(
            phrases.WAITING_CLUSTER_POOL
            if short.where == "cluster"
            else phrases.WAITING_QUOTA_POOL,
            {**args, "pool": pool},
        )
    return Phrase(
        phrases.WAITING_CLUSTER if short.where == "cluster" else phrases.WAITING_QUOTA, args
    )


def _in_pools(refusal: InPools) -> Phrase:
    """What a job placed in no pool it accepts waits for: each pool's shortfall, and the
    pools it does not accept."""
    if not refusal.reasons:
        return refusal.phrase()
    shorts = [_short(short) for short in refusal.shortfalls]
    clause = (
        shorts[0]
        if len(shorts) == 1
        else Phrase(phrases.WAITING_IN_POOLS, {"clauses": phrases.all_of(shorts)})
    )
    if not refusal.unlisted:
        return clause
    return Phrase(
        phrases.WAITING_UNLISTED,
        {"clause": clause.as_json(), "pools": ", ".join(refusal.unlisted),
         "count": len(refusal.unlisted)},
    )  # fmt: skip


def _leaving_jobs(keys: Sequence[int], leaving: Sequence[Admitted]) -> dict[str, Any]:
    """ "2 intern jobs (#12, #13)", named by the leaf they leave."""
    leaves: dict[str, list[int]] = {}
    for job in leaving:
        if job.key in keys:
            leaves.setdefault(job.leaf.rsplit("/", 1)[-1], []).append(job.key)
    parts = [
        Phrase(
            phrases.WAITING_LEAF_JOBS,
            {"count": len(ids), "leaf": leaf, "jobs": phrases.jobs(ids)},
        )
        for leaf, ids in sorted(leaves.items())
    ]
    return phrases.all_of(parts) if parts else _jobs(keys).as_json()


def _tried_now(
    job: Job, place: Place, holding: Holding
) -> tuple[str, Phrase, Shortfall | None, tuple]:
    """What the admission rule would do with the job now: (reason, clause, what blocks it,
    the jobs it waits for)."""
    candidate = Candidate(
        key=job.pk, request=job.request, rank=(-job.priority, 0, job.pk), priority=job.priority,
        pools=tuple(job.pools), owner=job.owner_id,
    )  # fmt: skip
    plan = plan_admissions(
        tree=holding.tree,
        used=holding.used,
        allocatable=holding.allocatable,
        queues=[QueueHeads(place.leaf, [candidate], place.policy, preemption=place.preemption)],
        admitted=holding.admitted,
        leaving=holding.leaving,
        fair=holding.fair,
        pools=holding.pool_names,
    )
    if any(admitted.key == job.pk for admitted in plan.admitted):
        pool = plan.placed.get(job.pk)
        if pool:
            return NEXT, Phrase(phrases.WAITING_FITS_POOL, {"pool": pool}), None, ()
        return NEXT, Phrase(phrases.WAITING_FITS), None, ()
    refusal = plan.refused[job.pk]
    if isinstance(refusal, OverPersonLimit):
        return PERSON, _over_person(refusal), None, ()
    if isinstance(refusal, InPools):
        short = refusal.reasons[0][1] if refusal.reasons else None
        reason = CLUSTER if short is not None and short.where == "cluster" else QUOTA
        return reason, _in_pools(refusal), short, ()
    if not isinstance(refusal, Releasing):
        reason = CLUSTER if refusal.where == "cluster" else QUOTA
        clause = _short(refusal)
        first = _borrows_first(place.leaf, job.request, refusal, holding)
        if first is not None:
            clause = Phrase(phrases.WAITING_FAIR_SHARE, {"clause": clause.as_json(), **first})
        return reason, clause, refusal, ()
    victims = [p for p in plan.preempted if p.by == job.pk]
    if victims:
        keys = tuple(p.victim.key for p in victims)
        borrowers = sorted({p.borrower or p.node for p in victims})
        clause = Phrase(
            phrases.WAITING_RECLAIM,
            {
                "resource": phrases.resource(refusal.now.resource), "leaf": place.leaf,
                "victims": _leaving_jobs(keys, [p.victim for p in victims]),
                "borrowers": ", ".join(borrowers), "count": len(borrowers),
            },
        )  # fmt: skip
        return RECLAIM, clause, refusal.now, keys
    clause = Phrase(
        phrases.WAITING_RELEASING,
        {
            "leaving": _leaving_jobs(refusal.jobs, holding.leaving),
            "short": _short(refusal.now).as_json(),
        },
    )
    return RELEASING, clause, refusal.now, refusal.jobs


def _over_person(refusal: OverPersonLimit) -> Phrase:
    if not refusal.resource:
        return Phrase(
            phrases.WAITING_PERSON_JOBS,
            {"holding": refusal.holding, "leaf": refusal.leaf, "node": refusal.node},
        )
    return Phrase(phrases.WAITING_PERSON_RESOURCES, refusal.args())


def _borrows_first(
    leaf: str, request: ResourceList, short: Shortfall, holding: Holding
) -> dict[str, str] | None:
    """While the tree has a half-life and the job would borrow: the branch beside its own,
    under the node that is short, that borrows now and used less of its share lately (the
    one that used least), which fair sharing serves first; None when there is none."""
    tree, fair = holding.tree, holding.fair
    if not fair or holding.half_life is None:
        return None
    if within_guarantee(leaf, request, tree, holding.used):
        return None
    top = (
        next((p for p in tree if tree[p].parent is None), None)
        if short.where == "cluster"
        else short.where
    )
    if top is None or leaf == top or not leaf.startswith(top + "/"):
        return None
    ours = f"{top}/{leaf[len(top) + 1 :].split('/')[0]}"
    borrowing = [
        path
        for path, node in tree.items()
        if node.parent == top and path != ours and fair.get(path, 0.0) < fair.get(ours, 0.0)
        and any(
            amount > node.min.get(resource, 0)
            for resource, amount in holding.used.get(path, {}).items()
            if governs(node, resource)
        )
    ]  # fmt: skip
    if not borrowing:
        return None
    other = min(borrowing, key=lambda path: (fair.get(path, 0.0), path))
    return {
        "other": other, "theirs": f"{fair.get(other, 0.0):.0%}",
        "ours": ours, "yours": f"{fair.get(ours, 0.0):.0%}",
        "half_life": format_half_life(holding.half_life),
    }  # fmt: skip


def explain(
    job: Job,
    *,
    place: Place | None,
    holding: Holding,
    due: bool = True,
    head: Waiting | None = None,
    last_failure: JobEvent | None = None,
    lent: Mapping[str, ResourceList] | None = None,
) -> Waiting | None:
    """Why ``job`` is not running yet, or None when it is not waiting (running, finished,
    leaving). ``place`` is where a pending job stands (None for others); ``due`` whether a
    backing-off job may be tried at the next cycle; ``head`` the explanation of the first
    job of its queue, when this one is behind it; ``last_failure`` the cluster's last
    scheduling failure of a dequeued job; ``lent`` ``holding.lent()`` when the caller has
    it already."""
    if job.state == State.ADMITTED:
        return _starting(job, last_failure)
    if job.state not in PENDING or place is None:
        return None
    tree, used, allocatable = holding.tree, holding.used, holding.allocatable
    lent = holding.lent() if lent is None else lent

    def standing(pool: str) -> tuple[Standing, ...]:
        """The path table for the job's request as placed in ``pool`` ("" none)."""
        return tuple(
            path_standing(
                leaf=place.leaf, request=in_pool(job.request, pool), tree=tree, used=used,
                allocatable=allocatable, lent=lent,
            )
        )  # fmt: skip

    pools = holding.pool_names
    preferred = next((p for p in job.pools if p in pools), "") if job.pools else ""
    path = standing(preferred or (pools[0] if pools else ""))
    if job.held_at is not None:
        clause = Phrase(
            phrases.WAITING_HELD, {"user": held_by_name(job), "since": phrases.at(job.held_at)}
        )
        return Waiting(HELD, _sentence(clause), path, job_id=job.pk, _clause=clause)
    if not place.open:
        clause = Phrase(phrases.WAITING_CLOSED, {"queue": place.queue_name})
        return Waiting(CLOSED, _sentence(clause), path, _clause=clause)
    limits = limits_of(tree, place.leaf)
    if limits.stop:
        clause = Phrase(phrases.WAITING_STOPPED, {"node": limits.stopped_at, "policy": limits.stop})
        return Waiting(STOPPED, _sentence(clause), path, job_id=job.pk, _clause=clause)
    ahead = place.position - 1 - place.held_ahead
    if (
        ahead
        and head is not None
        and place.policy != BEST_EFFORT
        and head._clause is not None
        and head.tried != PERSON  # the queue passes over it (rule 9), to this job too
    ):
        # Its queue tries the jobs ahead first: what the first waits for is what holds it.
        blocking = shortfall(
            leaf=place.leaf, request=job.request, tree=tree, used=used, allocatable=allocatable
        )
        summary = Phrase(
            phrases.WAITING_BEHIND,
            {
                "ahead": _ahead(ahead).as_json(), "first": _first(head).as_json(),
                "clause": head._clause.as_json(), "own": _own_ask(blocking).as_json(),
            },
        )  # fmt: skip
        return Waiting(BEHIND, summary, path, blocking, ahead, head, head.job_id, _clause=summary)
    reason, clause, blocking, leaving = _tried_now(job, place, holding)
    tried = reason
    if blocking is not None and pool_parts(blocking.resource)[1]:
        path = standing(pool_parts(blocking.resource)[1])
    if job.state == State.BACKOFF and not due:
        backoff = (
            Phrase(job.backoff_code, job.backoff_args).as_json()
            if job.backoff_code in phrases.WORDINGS
            else job.backoff_reason
        )
        clause = Phrase(
            phrases.WAITING_BACKOFF,
            {"until": phrases.at(job.next_attempt_at or timezone.now()), "reason": backoff,
             "clause": clause.as_json()},
        )  # fmt: skip
        reason = BACKOFF
    summary = _sentence(clause)
    if ahead:
        # Best effort: a head that does not fit is set aside, so this job is tried too; in
        # either policy, a head at its owner's limit is passed over.
        summary = Phrase(
            phrases.WAITING_BEST_EFFORT if place.policy == BEST_EFFORT
            else phrases.WAITING_PASSED_OVER,
            {"ahead": _ahead(ahead).as_json(), "clause": clause.as_json()},
        )  # fmt: skip
    return Waiting(
        reason, summary, path, blocking, ahead, leaving=leaving,
        next_attempt_at=job.next_attempt_at if job.state == State.BACKOFF else None,
        job_id=job.pk, tried=tried, _clause=clause,
    )  # fmt: skip


def queue_place(queue: Queue, position: int, held_ahead: int = 0) -> Place:
    """Where a pending job of ``queue`` stands at ``position`` (its ``node`` loaded), with
    ``held_ahead`` held jobs before it."""
    return Place(
        leaf=queue.node.path, position=position, policy=queue.policy,
        preemption=queue.preemption, open=queue.active and queue.node.active,
        queue_name=queue.name, held_ahead=held_ahead,
    )  # fmt: skip


def held_by_name(job: Job) -> str:
    """Who holds the job ("" once that account is gone)."""
    return job.held_by.get_username() if job.held_by is not None else ""


def _held_ahead(jobs: Sequence[Job]) -> Mapping[int, int]:
    """How many held jobs stand before each of these pending jobs in its queue: held jobs are
    few, so theirs are read once for every queue of ``jobs``."""
    pending = [job for job in jobs if job.state in PENDING and job.held_at is None]
    if not pending:
        return {}
    held: dict[int, list[tuple[int, int]]] = {}
    rows = Job.objects.filter(
        queue_id__in={job.queue_id for job in pending}, state__in=PENDING, held_at__isnull=False
    ).values_list("queue_id", "priority", "ticket")
    for queue_id, priority, ticket in rows:
        held.setdefault(queue_id, []).append((-priority, ticket or 0))
    return {
        job.pk: sum(1 for order in held[job.queue_id] if order < (-job.priority, job.ticket or 0))
        for job in pending
        if job.queue_id in held
    }


def _ahead(count: int) -> Phrase:
    return Phrase(phrases.WAITING_AHEAD, {"count": phrases.number(count)})


def _first(head: Waiting) -> Phrase:
    """The subject of the head's clause, named so that its "it" is not read as this job:
    "the first job ahead, #58," (a job of a batch's dry run has no number yet)."""
    if head.job_id:
        return Phrase(phrases.WAITING_FIRST_NUMBERED, {"job": head.job_id})
    return Phrase(phrases.WAITING_FIRST)


def _own_ask(blocking: Shortfall | None) -> Phrase:
    """What this job, behind the head, would need itself: "this job asks for cpu 7", or
    that it would fit were it first."""
    if blocking is None:
        return Phrase(phrases.WAITING_OWN_FITS)
    r = blocking.resource
    return Phrase(
        phrases.WAITING_OWN_ASK,
        {"resource": phrases.resource(r), "amount": phrases.quantity(r, blocking.requested)},
    )


def _sentence(clause: Phrase) -> Phrase:
    return Phrase(phrases.WAITING, {"clause": clause.as_json()})


def _starting(job: Job, last_failure: JobEvent | None) -> Waiting:
    if job.start_clock_at is None:
        clause = Phrase(phrases.WAITING_CREATING)
        return Waiting(STARTING, _sentence(clause), _clause=clause)
    deadline = job.start_clock_at + timedelta(seconds=settings.START_TIMEOUT_SECONDS)
    last: dict | str = ""
    if last_failure is not None:
        message = last_failure.message.rstrip(".")
        last = (
            Phrase(
                phrases.WAITING_LAST_WORD_CYCLE, {"cycle": last_failure.cycle, "message": message}
            ).as_json()
            if last_failure.cycle
            else Phrase(phrases.WAITING_LAST_WORD, {"message": message}).as_json()
        )
    clause = Phrase(phrases.WAITING_PLACING, {"last": last, "deadline": phrases.at(deadline)})
    return Waiting(
        STARTING, _sentence(clause), last_failure=last_failure, start_deadline=deadline,
        _clause=clause,
    )  # fmt: skip


def jobs_waiting(
    jobs: Sequence[Job],
    *,
    now: datetime | None = None,
    positions: Mapping[int, int] | None = None,
) -> dict[int, Waiting]:
    """The explanation of each of these jobs that waits (pending or starting), by job id,
    reading the tree, the usage, the positions and the heads of their queues once. The
    jobs' ``queue`` and its ``node`` must be loaded; ``positions`` are theirs when the
    caller has them already."""
    now = now or timezone.now()
    waiting_jobs = [job for job in jobs if job.state in PENDING or job.state == State.ADMITTED]
    if not waiting_jobs:
        return {}
    holding = read_holding()
    lent = holding.lent()
    positions = job_positions(waiting_jobs) if positions is None else positions
    woken = woken_at()
    queues = {job.queue_id: job.queue for job in waiting_jobs}
    held_ahead = _held_ahead(waiting_jobs)

    def tell(job: Job, position: int, head: Waiting | None = None) -> Waiting | None:
        due = job.state not in PENDING or is_due(
            job.state, job.next_attempt_at, job.last_tried_at, now, woken
        )
        place = queue_place(queues[job.queue_id], position, held_ahead.get(job.pk, 0))
        return explain(job, place=place, holding=holding, due=due, head=head, lent=lent)

    heads: dict[int, Waiting | None] = {}
    for job in waiting_jobs:
        if positions.get(job.pk, 1) - held_ahead.get(job.pk, 0) > 1 and job.queue_id not in heads:
            # The first job tried in its queue: held jobs are skipped.
            pending = Job.objects.filter(
                queue_id=job.queue_id, state__in=PENDING, held_at__isnull=True
            )
            first = pending.order_by(*QUEUE_ORDER).first()
            heads[job.queue_id] = tell(first, 1) if first is not None else None
    failures = _last_failures([job.pk for job in waiting_jobs if job.state == State.ADMITTED])
    answers = {}
    for job in waiting_jobs:
        if job.state == State.ADMITTED:
            answer = explain(job, place=None, holding=holding, last_failure=failures.get(job.pk))
        elif job.pk in positions:
            answer = tell(job, positions[job.pk], heads.get(job.queue_id))
        else:
            continue
        if answer is not None:
            answers[job.pk] = answer
    return answers


def job_waiting(job: Job, position: int | None) -> Waiting | None:
    """Why ``job`` waits; ``position`` is its place in its queue (``job_position``)."""
    positions = {} if position is None else {job.pk: position}
    return jobs_waiting([job], positions=positions).get(job.pk)


def _last_failures(job_ids: list[int]) -> dict[int, JobEvent]:
    """The newest scheduling failure the cluster reported for each of these jobs."""
    if not job_ids:
        return {}
    events = (
        JobEvent.objects.filter(Q(job_id__any=job_ids), reason__in=SCHEDULING_FAILURES)
        .order_by("job_id", "-created_at", "-id")
        .distinct("job_id")
    )
    return {event.job_id: event for event in events}
