"""Usage accounting: what was held, finished, waited and preempted over any period, by
department, leaf, person, runtime or resource, in daily or monthly buckets, beside each
node's ``min`` and ``max`` over the same time.

Where the figures come from (UTC days throughout; a month is the calendar month of them):

- **held**: resource-seconds of the ledger of holds (``Hold``): each span's request times
  its overlap with the day; a span still open counts to now. Admission to finish,
  preemptions and readmissions as separate spans.
- **jobs by final state**: the jobs that finished on the day, by their state.
- **wait**: a job's first span's start less its enqueue time, counted on the day of that
  first admission; kept as a histogram over fixed bounds (``WAIT_BOUNDS``), so that days
  add up and the p90 survives: the p90 given is the upper bound of the bucket in which
  the 90th percentile falls (the wait was at most that).
- **preemptions suffered**: the jobs' ``Preempted`` events of the day. Exact: the cycle
  writes one per preemption. A span's end is not: a start timeout also sends a job back
  to its queue.
- **min and max**: each node's values over time, from the audit of the quota tree's
  changes (before and after per node), integrated over the bucket: resource-hours the
  node was promised, and the most it could have held.

A past day is final once it is over, as spans only close in the present: beat summarises
each completed day once into ``AccountingDay`` rows (``accounting_summarise``), and the day
before again after its next day ended, for late writes, and adds the month's days up again
into ``AccountingMonth`` rows. A read adds up the summary rows of the summarised days (by
person and month, the month rows of its whole months) and computes the others (today) live
from the same statements, so a year answers from a year of summary rows, not from the
ledger.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta

from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from audit.models import AuditEntry
from jobs.models import (
    WAIT_BOUNDS,
    WAIT_BUCKETS,
    AccountingDay,
    AccountingDone,
    AccountingLeafDay,
    Job,
    State,
)
from jobs.tables import accounting as tables
from kube.quantity import QuantityError, parse_quantity, scale
from queues.models import Department, QuotaNode
from queues.quota import path_to_root
from queues.selectors import MANAGER, user_roles

GROUPS = ("department", "leaf", "person", "runtime", "resource")
EVERY = ("day", "month")
DAYS_PER_RUN = 31  # days beat summarises at most in one run, oldest first
NO_DEPARTMENT = ""  # the group of a leaf no department owns


def day_start(day: date) -> datetime:
    return datetime.combine(day, time.min, tzinfo=UTC)


def utc_day(moment: datetime) -> date:
    return moment.astimezone(UTC).date()


@dataclass
class Figures:
    """The figures of a cell or a group: held in resource-seconds of base units."""

    held: dict[str, float] = field(default_factory=dict)
    succeeded: int = 0
    failed: int = 0
    cancelled: int = 0
    preemptions: int = 0
    admissions: int = 0
    wait_seconds: float = 0.0
    waits: list[int] = field(default_factory=lambda: [0] * WAIT_BUCKETS)

    def add(self, other: Figures) -> None:
        for name, seconds in other.held.items():
            self.held[name] = self.held.get(name, 0.0) + seconds
        self.succeeded += other.succeeded
        self.failed += other.failed
        self.cancelled += other.cancelled
        self.preemptions += other.preemptions
        self.admissions += other.admissions
        self.wait_seconds += other.wait_seconds
        self.waits = [a + b for a, b in zip(self.waits, other.waits, strict=True)]

    @property
    def wait_mean(self) -> float | None:
        return self.wait_seconds / self.admissions if self.admissions else None

    @property
    def wait_p90(self) -> int | None:
        """The upper bound of the histogram bucket the 90th percentile falls in (seconds);
        None with no wait, and for the last bucket (a week or more) its lower bound."""
        total = sum(self.waits)
        if not total:
            return None
        reached = 0
        for index, count in enumerate(self.waits):
            reached += count
            if reached * 10 >= total * 9:
                return WAIT_BOUNDS[index] if index < len(WAIT_BOUNDS) else WAIT_BOUNDS[-1]
        return WAIT_BOUNDS[-1]  # pragma: no cover - the loop reaches the total

    def states(self) -> dict[str, int]:
        return {
            State.SUCCEEDED: self.succeeded,
            State.FAILED: self.failed,
            State.CANCELLED: self.cancelled,
        }


def cells_live(*, since: datetime, until: datetime) -> dict[tables.Cell, Figures]:
    """Every (day, leaf, owner, runtime) cell's figures from ``since`` to ``until``, from
    the ledger, the job rows and their events (four statements)."""
    cells: dict[tables.Cell, Figures] = {}

    def cell(key: list) -> Figures:
        day, path, owner, runtime = key
        return cells.setdefault((day, path, owner, runtime), Figures())

    for *key, resource, seconds in tables.held_by_day(since=since, until=until):
        figures = cell(key)
        figures.held[resource] = figures.held.get(resource, 0.0) + float(seconds)
    for *key, state, count in tables.finished_by_day(since=since, until=until):
        figures = cell(key)
        setattr(figures, state, getattr(figures, state) + count)
    for *key, bucket, count, seconds in tables.waits_by_day(since=since, until=until):
        figures = cell(key)
        figures.admissions += count
        figures.wait_seconds += float(seconds)
        figures.waits[bucket] += count
    for *key, count in tables.preemptions_by_day(since=since, until=until):
        cell(key).preemptions += count
    return cells


def day_cells(day: date, *, now: datetime) -> dict[tables.Cell, Figures]:
    """One day's cells, to ``now`` if the day is not over."""
    return cells_live(since=day_start(day), until=min(day_start(day + timedelta(days=1)), now))


# Summarising ------------------------------------------------------------------------------


def days_to_summarise(*, now: datetime) -> list[date]:
    """The completed days beat has not summarised yet (from the first job's day, or the day
    after the last summarised one), and a summarised day whose next day has ended since
    (late writes); oldest first, at most DAYS_PER_RUN."""
    today = utc_day(now)
    last_done = AccountingDone.objects.order_by("-day").first()
    if last_done is None:
        first_job = Job.objects.order_by("id").values_list("enqueued_at", flat=True).first()
        if first_job is None:
            return []
        start = utc_day(first_job)
    else:
        start = last_done.day + timedelta(days=1)
    days = [start + timedelta(days=n) for n in range(max(0, (today - start).days))]
    again = [
        done.day
        for done in AccountingDone.objects.filter(day__gte=today - timedelta(days=3))
        if done.summarised_at < day_start(done.day + timedelta(days=2)) <= now
    ]
    return sorted(set(days + again))[:DAYS_PER_RUN]


def accounting_summarise(*, now: datetime | None = None) -> list[date]:
    """Summarise the days ``days_to_summarise`` names, each in its own transaction under
    the accounting lock (two workers at once: the second waits, then writes the same rows
    again over the first's, through the unique key); returns the days written."""
    now = now or timezone.now()
    days = days_to_summarise(now=now)
    for day in days:
        day_summarise(day, now=now)
    return days


def day_summarise(day: date, *, now: datetime) -> int:
    """Write one completed day's summary rows (replacing any), and mark it summarised."""
    with transaction.atomic():
        tables.summary_lock()
        cells = day_cells(day, now=now)
        rows = [
            AccountingDay(day=key[0], path=key[1], owner_id=key[2], runtime=key[3], **fields(f))
            for key, f in sorted(cells.items())
        ]
        leaves: dict[tuple[date, str, str], Figures] = {}
        for (day_, path, _owner, runtime), figures in cells.items():
            leaves.setdefault((day_, path, runtime), Figures()).add(figures)
        leaf_rows = [
            AccountingLeafDay(day=key[0], path=key[1], runtime=key[2], **fields(f))
            for key, f in sorted(leaves.items())
        ]
        AccountingDay.objects.filter(day=day).delete()
        AccountingLeafDay.objects.filter(day=day).delete()
        AccountingDay.objects.bulk_create(rows, batch_size=2000)
        AccountingLeafDay.objects.bulk_create(leaf_rows, batch_size=2000)
        tables.month_rollup(day.replace(day=1))
        AccountingDone.objects.update_or_create(day=day, defaults={"summarised_at": now})
    return len(rows)


def fields(figures: Figures) -> dict:
    """A summary row's figures."""
    return {
        "held": figures.held,
        "succeeded": figures.succeeded,
        "failed": figures.failed,
        "cancelled": figures.cancelled,
        "preemptions": figures.preemptions,
        "admissions": figures.admissions,
        "wait_seconds": figures.wait_seconds,
        "waits": figures.waits,
    }


# Reading ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Visibility:
    """What a reader may see: everything (staff), or the leaves under ``managed`` (the
    nodes of the departments they manage) and their own jobs under ``own`` (the nodes of
    all their departments)."""

    everything: bool
    managed: tuple[str, ...] = ()
    owner: int | None = None
    own: tuple[str, ...] = ()

    def sees(self, path: str, owner: int) -> bool:
        if self.everything:
            return True
        return _under(path, self.managed) or (owner == self.owner and _under(path, self.own))


def _under(path: str, nodes: Iterable[str]) -> bool:
    return any(path == node or path.startswith(node + "/") for node in nodes)


def visibility_for(user) -> Visibility:
    """Staff see every figure; a manager every job under the departments they manage; a
    member (or a read-only token) their own jobs in their departments."""
    if user.is_staff:
        return Visibility(everything=True)
    roles = user_roles(user)
    managed = tuple(sorted(path for path, role in roles.items() if role == MANAGER))
    return Visibility(everything=False, managed=managed, owner=user.pk, own=tuple(sorted(roles)))


@dataclass
class Row:
    """One group in one bucket: its figures, and the min and max of its node over the
    bucket (resource-seconds of base units; None: no node, or no limit part of the time)."""

    start: date
    group: str
    figures: Figures
    min: dict[str, float] | None = None
    max: dict[str, float | None] | None = None
    with_jobs: bool = True  # False when grouped by resource: the jobs are not split by it


@dataclass(frozen=True)
class Report:
    since: date
    until: date  # the last day, included
    group: str
    every: str
    computed_to: datetime  # now, or the period's end if it is over
    rows: list[Row]

    @property
    def resources(self) -> list[str]:
        names = {name for row in self.rows for name in row.figures.held}
        names |= {name for row in self.rows for name in (row.min or {})}
        return sorted(names, key=lambda name: (name != "cpu", name))


def bucket_of(day: date, every: str) -> date:
    return day.replace(day=1) if every == "month" else day


def bucket_end(start: date, every: str) -> date:
    """The first day after the bucket."""
    if every == "day":
        return start + timedelta(days=1)
    return tables.next_month(start)


def accounting_report(
    *,
    since: date,
    until: date,
    group: str,
    every: str,
    visibility: Visibility,
    within: str | None = None,
    now: datetime | None = None,
) -> Report:
    """The figures of the days ``since`` to ``until`` (both in) by ``group`` and bucket,
    as ``visibility`` lets its reader see them, of the leaves under the node ``within``
    (its path) or of all. Summarised days are read from the summary (two statements per
    read); the others up to now are computed live (four each)."""
    now = now or timezone.now()
    today = utc_day(now)
    last = min(until, today)
    groups = _Grouping(group, every)
    if since <= last:
        for read in _summary_reads(group, visibility):
            resources, found = tables.summary_read(
                first=since,
                last=last,
                bucket=every,
                by_path=group in ("department", "leaf"),
                by_owner=group == "person",
                by_runtime=group == "runtime",
                within=within,
                **read,
            )
            held_from = 6 + WAIT_BUCKETS
            for start, path, owner, runtime, *numbers in found:
                held = zip(resources, numbers[held_from:], strict=True)
                figures = Figures(
                    held={name: seconds for name, seconds in held if seconds is not None},
                    succeeded=int(numbers[0]),
                    failed=int(numbers[1]),
                    cancelled=int(numbers[2]),
                    preemptions=int(numbers[3]),
                    admissions=int(numbers[4]),
                    wait_seconds=float(numbers[5]),
                    waits=[int(count) for count in numbers[6:held_from]],
                )
                groups.add(start, path, owner, runtime, figures)
        done = set(
            AccountingDone.objects.filter(day__gte=since, day__lte=last).values_list(
                "day", flat=True
            )
        )
        for first, end in _runs(since, last, done):
            cells = cells_live(since=day_start(first), until=min(day_start(end), now))
            for (day, path, owner, runtime), figures in cells.items():
                if visibility.sees(path, owner) and (within is None or _under(path, [within])):
                    groups.add(bucket_of(day, every), path, owner, runtime, figures)
    computed_to = min(now, day_start(until + timedelta(days=1)))
    rows = groups.rows()
    _quota_figures(rows, group=group, every=every, since=since, until=computed_to)
    return Report(
        since=since, until=until, group=group, every=every, computed_to=computed_to, rows=rows
    )


def _summary_reads(group: str, visibility: Visibility) -> list[dict]:
    """Which summary rows a report reads: by person, the rows per person as the reader may
    see them; else the rows per leaf (all for staff, a manager's subtrees), and a reader's
    own jobs elsewhere from the rows per person."""
    if visibility.everything:
        return [{"managed": None}]
    if group == "person":
        return [{"managed": visibility.managed, "owner": visibility.owner, "own": visibility.own}]
    reads = [{"managed": visibility.managed}] if visibility.managed else []
    own = {"owner": visibility.owner, "own": visibility.own, "not_under": visibility.managed}
    return [*reads, {"managed": (), **own}]


def _runs(first: date, last: date, done: set[date]) -> list[tuple[date, date]]:
    """The runs of consecutive days from ``first`` to ``last`` not in ``done``, each as
    (its first day, the day after its last)."""
    runs: list[tuple[date, date]] = []
    day = first
    while day <= last:
        if day in done:
            day += timedelta(days=1)
            continue
        start = day
        while day <= last and day not in done:
            day += timedelta(days=1)
        runs.append((start, day))
    return runs


class _Grouping:
    """Adds cells up into (bucket, group) rows as they come."""

    def __init__(self, group: str, every: str) -> None:
        self.group, self.every = group, every
        self.merged: dict[tuple[date, str | int], Figures] = {}
        self._departments: dict[str, str] = {}  # leaf path -> its department's name
        self._owners: dict[str, str] = {}  # node path -> the department owning it
        if group == "department":
            for node, name in Department.objects.values_list("quota_node__path", "name"):
                self._owners.setdefault(node, name)

    def add(self, start, path: str, owner: int | None, runtime: str, figures: Figures) -> None:
        """Add a cell's figures (which the grouping may keep and add to)."""
        if self.group == "resource":
            for resource, seconds in figures.held.items():
                held = self.merged.setdefault((start, resource), Figures()).held
                held[resource] = held.get(resource, 0.0) + seconds
            return
        key = (start, self.key(path, owner or 0, runtime))
        found = self.merged.get(key)
        if found is None:
            self.merged[key] = figures
        else:
            found.add(figures)

    def rows(self) -> list[Row]:
        names: dict[str | int, str] = {}
        if self.group == "person":
            owners = {owner for _, owner in self.merged}
            names.update(
                get_user_model().objects.filter(pk__any=list(owners)).values_list("pk", "username")
            )
        found = [
            (start, names.get(key, f"#{key}") if self.group == "person" else key, figures)
            for (start, key), figures in self.merged.items()
        ]
        jobs = self.group != "resource"
        return [
            Row(start=start, group=str(key), figures=figures, with_jobs=jobs)
            for start, key, figures in sorted(found, key=lambda item: (item[0], item[1]))
        ]

    def key(self, path: str, owner: int, runtime: str) -> str | int:
        if self.group == "leaf":
            return path
        if self.group == "runtime":
            return runtime
        if self.group == "person":
            return owner
        return self.department(path)

    def department(self, path: str) -> str:
        """The department owning the nearest node on the leaf's path to the root."""
        name = self._departments.get(path)
        if name is None:
            name = next(
                (self._owners[node] for node in path_to_root(path) if node in self._owners),
                NO_DEPARTMENT,
            )
            self._departments[path] = name
        return name


# The quota over time --------------------------------------------------------------------

Quota = tuple[dict[str, int], dict[str, int]] | None  # (min, max) in base units; None: absent


def _parsed(snapshot: Mapping | None) -> Quota:
    if not snapshot:
        return None

    def units(values: Mapping) -> dict[str, int]:
        parsed = {}
        for name, value in (values or {}).items():
            try:
                parsed[name] = parse_quantity(name, value)
            except QuantityError:
                continue
        return parsed

    return units(snapshot.get("min") or {}), units(snapshot.get("max") or {})


def quota_timelines(paths: Iterable[str]) -> dict[str, list[tuple[datetime, Quota]]]:
    """Each node's (from when, min and max) over time, oldest first, from the audit of the
    tree's changes: before its first entry a node had that entry's ``before`` (None: it did
    not exist); a node the audit never names has its values now all along."""
    paths = sorted(set(paths))
    entries = (
        AuditEntry.objects.filter(
            object_type=AuditEntry.ObjectType.QUOTA_NODE, object_key__any=paths
        )
        .order_by("at", "id")
        .values_list("object_key", "at", "before", "after")
    )
    timelines: dict[str, list[tuple[datetime, Quota]]] = {}
    for path, at, before, after in entries:
        timeline = timelines.setdefault(path, [(datetime.min.replace(tzinfo=UTC), _parsed(before))])
        timeline.append((at, _parsed(after)))
    missing = [path for path in paths if path not in timelines]
    for node in QuotaNode.objects.filter(path__any=missing).filter(Q(active=True)):
        timelines[node.path] = [(datetime.min.replace(tzinfo=UTC), (node.min, node.max))]
    return timelines


def quota_seconds(
    timeline: list[tuple[datetime, Quota]], *, since: datetime, until: datetime
) -> tuple[dict[str, float], dict[str, float | None]]:
    """The min and max of a node integrated from ``since`` to ``until``: resource-seconds
    in base units. A max is None when some of that time the node set none for it."""
    starts = [at for at, _ in timeline]
    index = max(0, bisect.bisect_right(starts, since) - 1)
    segments = []
    for position in range(index, len(timeline)):
        begin = max(timeline[position][0], since)
        end = timeline[position + 1][0] if position + 1 < len(timeline) else until
        end = min(end, until)
        if end > begin:
            segments.append(((end - begin).total_seconds(), timeline[position][1]))
    names = {n for _, quota in segments if quota for values in quota for n in values}
    low: dict[str, float] = dict.fromkeys(names, 0.0)
    high: dict[str, float | None] = dict.fromkeys(names, 0.0)
    for seconds, quota in segments:
        if quota is None:  # the node did not exist: nothing promised, nothing allowed
            continue
        lows, highs = quota
        for name in names:
            low[name] = (low[name] or 0.0) + lows.get(name, 0) * seconds
            if name not in highs:
                high[name] = None  # no limit set for part of the time
            elif high[name] is not None:
                high[name] = high[name] + highs[name] * seconds  # type: ignore[operator]
    return low, high


def _quota_figures(rows: list[Row], *, group: str, every: str, since: date, until: datetime):
    """Each leaf's or department's row gets its node's min and max over its bucket (the
    part of it within the period, up to now)."""
    if group not in ("leaf", "department"):
        return
    if group == "department":
        nodes = dict(Department.objects.values_list("name", "quota_node__path"))
    else:
        nodes = {row.group: row.group for row in rows}
    timelines = quota_timelines(nodes.values())
    for row in rows:
        node = nodes.get(row.group)
        if node is None or node not in timelines:
            continue
        begin = max(day_start(row.start), day_start(since))
        end = min(day_start(bucket_end(row.start, every)), until)
        row.min, row.max = quota_seconds(timelines[node], since=begin, until=end)


def hours(resource: str, seconds: float | None) -> float | None:
    """Resource-seconds of base units as resource-hours of the resource's unit (cores for
    cpu, bytes for memory, devices for GPUs), to 4 decimals."""
    if seconds is None:
        return None
    return round(seconds / 3600 / scale(resource), 4)
