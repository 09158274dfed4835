"""About when a pending job starts: the admission rule replayed forward in time.

``estimate_starts`` is a pure function. It starts from what holds quota now, each job
expected to give it back at its dequeue plus its expected hold, and the pending jobs of
every queue in queue order. It admits what the rule (``plan_admissions``) admits, moves
the clock to the next expected end, frees that job's quota, and admits again, until the
jobs it was asked about are admitted.

A job's expected hold is the run time it declared plus what its queue's recent jobs held
their quota beyond the run time they declared (the cluster starting their pods, Caldera
seeing them finish); without a declared run time, the median hold of its queue's recent
jobs; without those, FALLBACK_RUN_SECONDS. It leaves out preemption (a reclaim can start
a job sooner) and jobs submitted later at a higher priority (they can start it later).
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from jobs.engine.admission.inputs import HEADS_PER_QUEUE as WINDOW
from jobs.engine.admission.inputs import cluster_allocatable
from jobs.engine.locks import ESTIMATES, leased
from jobs.models import LEAVING, PENDING, StartEstimate
from jobs.tables.jobs import holding_rows, pending_heads, queue_recent_holds
from kube.quantity import ResourceList, in_pool
from queues.admission import Candidate, QueueHeads, plan_admissions
from queues.quota import Node, path_to_root, tree_pools
from queues.selectors import tree_nodes

RECENT_JOBS = 50  # a queue's typical hold is read from its last this many finished jobs
FALLBACK_RUN_SECONDS = 600.0  # no declared run time and no finished job in the queue
ROUNDS_MAX = 5_000  # rounds replayed at most


@dataclass(frozen=True)
class Holder:
    """A job holding quota, and when it is expected to give it back."""

    key: int
    leaf: str
    request: ResourceList
    ends_at: datetime


@dataclass(frozen=True)
class Waiter:
    """A pending job, in its queue's order, with its expected run time."""

    key: int
    request: ResourceList
    priority: int
    run: timedelta
    pools: tuple[str, ...] = ()  # the node pools it accepts, in order (queues.pools)


@dataclass(frozen=True)
class Line:
    """One queue: its leaf, its policy and its pending jobs in queue order."""

    leaf: str
    policy: str
    jobs: Sequence[Waiter]


@dataclass(frozen=True)
class Start:
    """When a job is expected to start, and what it waits for until then."""

    at: datetime
    ends: int  # jobs holding quota now that are expected to end before it starts
    last_end: datetime | None  # the last of them


def estimate_starts(
    *,
    now: datetime,
    tree: Mapping[str, Node],
    allocatable: Mapping[str, int] | None,
    holders: Sequence[Holder],
    lines: Sequence[Line],
    wanted: set[int],
) -> dict[int, Start]:
    """The expected start of each ``wanted`` job that the replay admits (see module doc);
    a job missing from the answer is not admitted by any expected end (it waits for
    something the replay does not foresee, such as a quota change).

    As the admission cycle does, each round offers the rule the first WINDOW jobs of every
    queue, and goes again while a queue ran out of them admitting. Ends closer together
    than a fiftieth of the time replayed so far (at least a second) free their quota
    together, so a deep queue costs hundreds of rounds, not one per job."""
    used: dict[str, ResourceList] = {}
    pools = tuple(pool.name for pool in tree_pools(tree))
    ends: list[tuple[datetime, int, str, ResourceList]] = []
    running_now = {job.key for job in holders}
    for job in holders:
        _add(used, job.leaf, job.request, +1)
        heapq.heappush(ends, (max(job.ends_at, now), job.key, job.leaf, job.request))
    remaining = [list(line.jobs) for line in lines]
    arrival = {w.key: place for line in lines for place, w in enumerate(line.jobs)}
    started: dict[int, Start] = {}
    clock, ended, last_end = now, 0, None
    for _round in range(ROUNDS_MAX):
        heads = [
            QueueHeads(
                line.leaf,
                [
                    Candidate(
                        w.key,
                        w.request,
                        (-w.priority, arrival[w.key], w.key),
                        priority=w.priority,
                        pools=w.pools,
                    )
                    for w in waiting[:WINDOW]
                ],
                line.policy,
                exhausted=len(waiting) <= WINDOW,
            )  # fmt: skip
            for line, waiting in zip(lines, remaining, strict=True)
            if waiting
        ]
        plan = plan_admissions(
            tree=tree, used=used, allocatable=allocatable, queues=heads, pools=pools
        )
        admitted = {candidate.key for candidate in plan.admitted}
        for index, waiting in enumerate(remaining):
            if not admitted.intersection(w.key for w in waiting[:WINDOW]):
                continue
            for w in [w for w in waiting[:WINDOW] if w.key in admitted]:
                request = in_pool(w.request, plan.placed.get(w.key, ""))
                _add(used, lines[index].leaf, request, +1)
                heapq.heappush(ends, (clock + w.run, w.key, lines[index].leaf, request))
                if w.key in wanted:
                    started[w.key] = Start(clock, ended, last_end)
            remaining[index] = [w for w in waiting if w.key not in admitted]
        if wanted <= started.keys():
            break
        if plan.more and admitted:
            continue  # the same moment: the next jobs of the queues that ran out
        if not ends:
            break
        quantum = max(timedelta(seconds=1), (ends[0][0] - now) / 50)
        clock = ends[0][0]
        while ends and ends[0][0] <= clock + quantum:  # what ends about together frees together
            _when, key, leaf, request = heapq.heappop(ends)
            _add(used, leaf, request, -1)
            if key in running_now:
                ended, last_end = ended + 1, _when
        clock = max(clock, _when)
    return {key: start for key, start in started.items() if key in wanted}


def _add(used: dict[str, ResourceList], leaf: str, request: ResourceList, sign: int) -> None:
    for path in path_to_root(leaf):
        node = used.setdefault(path, {})
        for resource, amount in request.items():
            node[resource] = node.get(resource, 0) + sign * amount


@dataclass(frozen=True)
class Estimate:
    """What the pages and the API show: the expected start (None when there is none) and
    how it was reached, in words."""

    at: datetime | None
    basis: str


def describe(
    start: Start | None, *, now: datetime, ahead: int, computed_at: datetime | None = None
) -> Estimate:
    """ "about 12 min: 3 jobs ahead, 2 running jobs expected to end by 14:20". ``computed_at``
    is when the replay ran (``now`` when it runs for this answer)."""
    computed_at = computed_at or now
    if start is None:
        return Estimate(
            None,
            _("no estimate: no running job is expected to end and make room for it"),
        )
    if start.at <= computed_at:
        return Estimate(start.at, _("now: it fits, and is dequeued at the next admission cycle"))
    if start.at <= now:
        expected = timezone.localtime(start.at)
        return Estimate(
            start.at,
            _("any moment: it was expected by %(time)s") % {"time": f"{expected:%H:%M:%S}"},
        )
    # Each case a whole sentence in the reader's language, not pieces put together.
    words = {"duration": _duration(start.at - now), "ahead": ahead, "ends": start.ends}
    if start.ends:
        words["by"] = f"{timezone.localtime(start.last_end):%H:%M}"
    if ahead and start.ends:
        basis = ngettext(
            "about %(duration)s: %(ahead)s job ahead, %(ends)s running jobs expected to end "
            "by %(by)s",
            "about %(duration)s: %(ahead)s jobs ahead, %(ends)s running jobs expected to end "
            "by %(by)s",
            ahead,
        )
        if start.ends == 1:
            basis = ngettext(
                "about %(duration)s: %(ahead)s job ahead, 1 running job expected to end by %(by)s",
                "about %(duration)s: %(ahead)s jobs ahead, 1 running job expected to end by %(by)s",
                ahead,
            )
    elif start.ends:
        basis = ngettext(
            "about %(duration)s: %(ends)s running job expected to end by %(by)s",
            "about %(duration)s: %(ends)s running jobs expected to end by %(by)s",
            start.ends,
        )
    elif ahead:
        basis = ngettext(
            "about %(duration)s: %(ahead)s job ahead",
            "about %(duration)s: %(ahead)s jobs ahead",
            ahead,
        )
    else:
        basis = _("about %(duration)s")
    return Estimate(start.at, basis % words)


def _too_far(ahead: int, depth: int) -> str:
    return _("no estimate: %(ahead)s jobs ahead, past %(depth)s") % {
        "ahead": f"{ahead:,}",
        "depth": f"{depth:,}",
    }


def _duration(span: timedelta) -> str:
    seconds = span.total_seconds()
    if seconds < 90:
        return _("%(count)s s") % {"count": max(round(seconds), 1)}
    if seconds < 90 * 60:
        return _("%(count)s min") % {"count": round(seconds / 60)}
    if seconds < 48 * 3600:
        return _("%(count)s h") % {"count": f"{seconds / 3600:.1f}".removesuffix(".0")}
    return _("%(count)s days") % {"count": f"{seconds / 86400:.1f}".removesuffix(".0")}


def estimates_refresh(*, now: datetime | None = None) -> int:
    """Replay the rule once for the first ESTIMATE_DEPTH pending jobs of every queue and
    put the result in place of the stored estimates (StartEstimate), in one transaction;
    the number of jobs estimated. Beat runs it every ESTIMATE_SECONDS; one at a time."""
    now = now or timezone.now()
    with leased(ESTIMATES) as lease:
        if lease is None:
            return 0
        holds = _holds()
        holders = _holders(now, holds)
        lines = _lines(settings.ESTIMATE_DEPTH, holds)
        tree = tree_nodes()
        starts = estimate_starts(
            now=now, tree=tree, allocatable=cluster_allocatable(tree_pools(tree)),
            holders=holders, lines=lines, wanted={w.key for line in lines for w in line.jobs},
        )  # fmt: skip
        rows = [
            StartEstimate(
                job_id=w.key,
                ahead=place,
                computed_at=now,
                at=start.at if start else None,
                ends=start.ends if start else 0,
                last_end=start.last_end if start else None,
            )  # fmt: skip
            for line in lines
            for place, w in enumerate(line.jobs)
            for start in [starts.get(w.key)]
        ]
        with transaction.atomic():
            StartEstimate.objects.all().delete()
            StartEstimate.objects.bulk_create(rows, batch_size=5_000)
    return len(rows)


def estimates(jobs: Sequence, positions: Mapping[int, int]) -> dict[int, Estimate]:
    """The stored estimate of each of these pending jobs (by id), in one query, in words
    for now; ``positions`` are their places in their queues now."""
    wanted = [job.pk for job in jobs if job.state in PENDING and job.pk in positions]
    if not wanted:
        return {}
    stored = {row.job_id: row for row in StartEstimate.objects.filter(job_id__any=wanted)}
    held_at = {job.pk: job.held_at for job in jobs}
    now, depth = timezone.now(), settings.ESTIMATE_DEPTH
    answers = {}
    for key in wanted:
        row, ahead = stored.get(key), positions[key] - 1
        if held_at.get(key) is not None:
            answers[key] = Estimate(None, _("held: no estimate until it is released"))
        elif row is not None:
            start = None if row.at is None else Start(row.at, row.ends, row.last_end)
            answers[key] = describe(start, now=now, ahead=ahead, computed_at=row.computed_at)
        elif ahead >= depth:
            answers[key] = Estimate(None, _too_far(ahead, depth))
        else:
            answers[key] = Estimate(
                None,
                _("no estimate yet: one is made every %(seconds)s s")
                % {"seconds": f"{settings.ESTIMATE_SECONDS:g}"},
            )
    return answers


def job_estimate(job, position: int | None) -> Estimate | None:
    if position is None or job.state not in PENDING:
        return None
    return estimates([job], {job.pk: position}).get(job.pk)


@dataclass(frozen=True)
class Newcomer:
    """A job not yet queued (a dry run's), to be estimated as if it were queued now with
    ``ahead`` of the queue's pending jobs before it (those of its priority or higher)."""

    key: int  # not a stored job's id: 0 or below
    leaf: str
    policy: str
    queue_id: int
    request: ResourceList
    priority: int
    run_seconds: float | None
    ahead: int
    pools: tuple[str, ...] = ()
    time_limit: int | None = None


def estimate_newcomers(newcomers: Sequence[Newcomer], *, now: datetime) -> list[Estimate]:
    """About when each job not yet queued would start, were they all queued now, in the
    order given: the same replay as ``estimates_refresh``, with each in its place, behind
    its ``ahead`` pending jobs and behind the newcomers before it in its queue of its
    priority or higher (a batch's dry run); one replay for all of them."""
    depth = settings.ESTIMATE_DEPTH
    holds = _holds()
    placed = [n for n in newcomers if n.ahead < depth]
    lines = {line.leaf: line for line in _lines(depth, holds)}
    joining: dict[str, list[tuple[Waiter, tuple[int, int, int]]]] = {}
    for index, n in enumerate(placed):
        run = holds.get(n.queue_id, Holds()).expected(n.run_seconds, n.time_limit)
        # After the pending jobs of its priority, which were queued before it.
        joining.setdefault(n.leaf, []).append(
            (Waiter(n.key, n.request, n.priority, run, n.pools), (-n.priority, 1, index))
        )
    for leaf, waiters in joining.items():
        line = lines.get(leaf)
        stored = [(w, (-w.priority, 0, i)) for i, w in enumerate(line.jobs)] if line else []
        policy = line.policy if line else next(n.policy for n in placed if n.leaf == leaf)
        merged = sorted([*stored, *waiters], key=lambda pair: pair[1])
        lines[leaf] = Line(leaf, policy, [w for w, _rank in merged])
    tree = tree_nodes()
    starts = estimate_starts(
        now=now, tree=tree, allocatable=cluster_allocatable(tree_pools(tree)),
        holders=_holders(now, holds), lines=list(lines.values()),
        wanted={n.key for n in placed},
    )  # fmt: skip
    answers = []
    for n in newcomers:
        if n.ahead >= depth:
            answers.append(Estimate(None, _too_far(n.ahead, depth)))
            continue
        line = lines[n.leaf]
        ahead = next(i for i, w in enumerate(line.jobs) if w.key == n.key)
        answers.append(describe(starts.get(n.key), now=now, ahead=ahead))
    return answers


def head_starts(
    *, now: datetime, leaves: set[str], trees: Sequence[tuple[Mapping[str, Node], set[int]]]
) -> dict[str, tuple[int, list[Start | None]]]:
    """The first pending job of each of ``leaves``' queues, and its expected start under
    each (tree, jobs taken as gone) in ``trees``: what a change of the tree would do to
    when each queue moves on (``jobs.reads.quota_preview``). One read, a replay per tree."""
    holds = _holds()
    holders = _holders(now, holds)
    lines = _lines(settings.ESTIMATE_DEPTH, holds)
    heads = {line.leaf: line.jobs[0].key for line in lines if line.leaf in leaves and line.jobs}
    answers: dict[str, tuple[int, list[Start | None]]] = {
        leaf: (key, []) for leaf, key in heads.items()
    }
    for tree, gone in trees:
        allocatable = cluster_allocatable(tree_pools(tree))
        starts = estimate_starts(
            now=now, tree=tree, allocatable=allocatable,
            holders=[holder for holder in holders if holder.key not in gone],
            lines=[line for line in lines if line.leaf in tree], wanted=set(heads.values()),
        )  # fmt: skip
        for key, found in answers.values():
            found.append(starts.get(key))
    return answers


@dataclass(frozen=True)
class Holds:
    """How long a queue's jobs hold their quota, from dequeue to the release the cluster
    confirms, read from its recent jobs: the median hold, and the median time it takes
    beyond the run time the jobs declared (starting their pods, seeing them finish)."""

    median: float | None = None
    beyond_declared: float = 0.0

    def expected(self, run_seconds: float | None, time_limit: int | None = None) -> timedelta:
        """A job's expected hold: its declared run time and what the queue's jobs take
        beyond it, else the queue's median; never beyond its time limit, past which it is
        stopped (and what stopping takes beyond it)."""
        if run_seconds is not None:
            seconds = run_seconds + self.beyond_declared
        else:
            seconds = FALLBACK_RUN_SECONDS if self.median is None else self.median
        if time_limit is not None:
            seconds = min(seconds, time_limit + self.beyond_declared)
        return timedelta(seconds=seconds)


def _holds() -> dict[int, Holds]:
    """Each queue's Holds over its last RECENT_JOBS jobs that ran to the end."""
    return {
        queue_id: Holds(median, max(beyond or 0.0, 0.0))
        for queue_id, median, beyond in queue_recent_holds(RECENT_JOBS)
    }


def _holders(now: datetime, holds: Mapping[int, Holds]) -> list[Holder]:
    """Every job holding quota, expected to end at its dequeue plus its expected hold; a
    leaving job is taken to be gone now."""
    holders = []
    for row in holding_rows():
        hold = holds.get(row.queue_id, Holds()).expected(row.run_seconds, row.time_limit)
        since = row.dequeued_at
        ends = now if row.state in LEAVING or since is None else since + hold
        holders.append(Holder(row.id, row.leaf, in_pool(row.request, row.pool), ends))
    return holders


def _lines(depth: int, holds: Mapping[int, Holds]) -> list[Line]:
    """The first ``depth`` pending jobs of every active queue, in queue order."""
    grouped: dict[str, tuple[str, list[Waiter]]] = {}
    for row in pending_heads(depth):
        run = holds.get(row.queue_id, Holds()).expected(row.run_seconds, row.time_limit)
        waiter = Waiter(row.id, row.request, row.priority, run, row.pools)
        grouped.setdefault(row.leaf, (row.policy, []))[1].append(waiter)
    return [Line(leaf, policy, jobs) for leaf, (policy, jobs) in grouped.items()]
