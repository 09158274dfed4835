"""The quota tree's figures, now and over time.

Now: every node's ``Balance`` per resource (used, min, max, borrowed, lent, pending demand;
defined in ``queues.quota``), from the live jobs. The quota tree page draws its bars
from them.

Over time: beat records the same figures, with the number of admitted jobs, every
USAGE_HISTORY_SECONDS (``usage_record``), one row per node and resource, and deletes rows
older than USAGE_HISTORY_DAYS in the same task. A chart, the CSV and the API read one
node's rows over the last hour, day or week (``usage_series``), downsampled in SQL to a
few hundred points per resource, each the highest value of its bucket so that a short
peak is never smoothed away.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import cast

from django.conf import settings
from django.utils import timezone
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _
from django_stubs_ext import StrOrPromise

from jobs.document.params import Choice, Text, params
from jobs.document.validation import JobInvalid
from jobs.models import UsageSample
from jobs.reads.selectors import leaf_loads
from jobs.tables.usage import EPOCH, usage_buckets
from kube.quantity import ResourceList
from queues import fairness
from queues.models import QuotaNode
from queues.quota import Balance, Node, balances, rollup
from queues.selectors import decayed_usage, half_life, tree_nodes


@dataclass(frozen=True)
class TreeFigures:
    """The active tree, each node's ``Balance`` per resource, and how many jobs under
    each node hold some of each resource."""

    tree: dict[str, Node]
    balances: dict[str, dict[str, Balance]]
    admitted: dict[str, ResourceList]


def tree_resources(tree: Mapping[str, Node]) -> set[str]:
    """Every resource the tree names in a ``min`` or a ``max``."""
    return {name for node in tree.values() for name in (*node.min, *node.max)}


def tree_figures() -> TreeFigures:
    """The figures of every active node, from the live jobs (three queries)."""
    tree = tree_nodes()
    loads = leaf_loads(resources=tree_resources(tree))
    return TreeFigures(
        tree=tree,
        balances=balances(tree=tree, used=rollup(loads.used), pending=rollup(loads.pending)),
        admitted=rollup(loads.admitted),
    )


@dataclass(frozen=True)
class FairShareFigures:
    """One node's standing under fair sharing over time (``queues.fairness``), as the
    quota tree page shows it: its decayed usage of the cluster, its entitled share, and
    the part of that share it used lately (the first two as fractions of the cluster)."""

    usage: float
    share: float
    used: float
    weight: float


def fair_share_figures(
    tree: Mapping[str, Node],
) -> tuple[timedelta | None, dict[str, FairShareFigures]]:
    """The tree's half-life and every node's figures, as beat last computed the decayed
    usage; (None, {}) while the tree has no half-life."""
    half = half_life()
    if half is None:
        return None, {}
    usage = {path: row.usage for path, row in decayed_usage().items()}
    shares = fairness.entitled_shares(tree)
    used = fairness.shares_used(tree, usage)
    return half, {
        path: FairShareFigures(usage.get(path, 0.0), shares[path], used[path], node.weight)
        for path, node in tree.items()
    }


def interval_start(moment: datetime) -> datetime:
    """The start of the USAGE_HISTORY_SECONDS interval ``moment`` falls in (from the Unix
    epoch, so that every process agrees on it)."""
    seconds = settings.USAGE_HISTORY_SECONDS
    elapsed = int((moment - EPOCH).total_seconds())
    return EPOCH + timedelta(seconds=elapsed - elapsed % seconds)


def usage_record(*, now: datetime | None = None) -> int:
    """Record every node's figures per resource for the interval ``now`` falls in, in one
    INSERT, and delete rows older than USAGE_HISTORY_DAYS; returns the rows offered.

    A second recording in the same interval adds nothing (the unique key of node, time
    and resource, ON CONFLICT DO NOTHING), so two beats or two workers cannot double a
    sample, and the first one's figures stand.
    """
    now = now or timezone.now()
    at = interval_start(now)
    figures = tree_figures()
    rows = [
        UsageSample(
            at=at,
            node=path,
            resource=resource,
            used=balance.used,
            min=balance.min,
            max=balance.max,
            pending=balance.pending,
            admitted=figures.admitted.get(path, {}).get(resource, 0),
        )
        for path, resources in figures.balances.items()
        for resource, balance in resources.items()
    ]
    UsageSample.objects.bulk_create(rows, ignore_conflicts=True)
    usage_prune(now=now)
    return len(rows)


def usage_prune(*, now: datetime) -> int:
    """Delete the samples older than USAGE_HISTORY_DAYS; returns how many went."""
    cutoff = now - timedelta(days=settings.USAGE_HISTORY_DAYS)
    deleted, _ = UsageSample.objects.filter(at__lt=cutoff).delete()
    return deleted


@dataclass(frozen=True)
class Range:
    """A chart's span and its bucket: the span over the bucket is its number of points."""

    name: str
    span: timedelta
    bucket: timedelta
    label: StrOrPromise  # "the last hour"
    title: StrOrPromise  # "Hour", on the chart's range links


RANGES = {
    r.name: r
    for r in (
        Range(
            "hour", timedelta(hours=1), timedelta(minutes=1), _("the last hour"), _("Hour")
        ),  # 60
        Range("day", timedelta(days=1), timedelta(minutes=5), _("the last day"), _("Day")),  # 288
        Range(
            "week", timedelta(days=7), timedelta(minutes=30), _("the last week"), _("Week")
        ),  # 336
    )
}
DEFAULT_RANGE = "day"


# Which history: the API's, the CSV's and the quota tree page's parameters; a queue's page
# names its node itself and reads RANGE_QUERY.
RANGE = Choice(
    name="range",
    choices=list(RANGES),
    default=DEFAULT_RANGE,
    description="the last hour, day or week",
)
RANGE_QUERY = params(RANGE)
NODE_MAX = cast(int, QuotaNode._meta.get_field("path").max_length)
HISTORY_QUERY = params(
    Text(
        name="node",
        max_length=NODE_MAX,
        description='a node\'s path, root/algorithm (default: the root); "cluster" is no node',
    ),
    RANGE,
)


@dataclass(frozen=True)
class HistoryQuery:
    node: str
    range: Range


def history_query(source: Mapping, *, default_node: str | None = None) -> HistoryQuery:
    """``node`` (a node's path, retired ones too; the root when absent) and ``range``
    (hour, day or week; a day when absent) read from a request's parameters;
    ``JobInvalid`` names each one that is wrong."""
    values = HISTORY_QUERY.read(source)
    node = values["node"] or default_node or root_path()
    if not node:
        raise JobInvalid({"node": gettext("there is no quota tree yet")})
    node_known(node)
    return HistoryQuery(node=node, range=RANGES[values["range"]])


def node_known(node: str) -> None:
    """``JobInvalid`` naming ``node`` unless a node of the tree (a retired one too) has
    this path."""
    if not QuotaNode.objects.filter(path=node).exists():
        raise JobInvalid(
            {"node": gettext("%(node)s is no node of the quota tree") % {"node": repr(node[:200])}}
        )


def root_path() -> str | None:
    return QuotaNode.objects.filter(active=True, parent=None).values_list("path", flat=True).first()


@dataclass(frozen=True)
class Point:
    """One bucket of one resource: the highest of each figure among its samples."""

    at: datetime
    node: str
    resource: str
    used: int
    min: int
    max: int | None
    pending: int
    admitted: int


@dataclass(frozen=True)
class Series:
    node: str
    range: Range
    since: datetime
    until: datetime
    step: timedelta  # the bucket: the range's, or the sampling interval if longer
    points: list[Point]  # by resource (cpu first), then time

    @property
    def step_seconds(self) -> int:
        return int(self.step.total_seconds())

    def by_resource(self) -> dict[str, list[Point]]:
        grouped: dict[str, list[Point]] = {}
        for point in self.points:
            grouped.setdefault(point.resource, []).append(point)
        return grouped


def range_for_history(node: str, *, now: datetime | None = None) -> Range:
    """The shortest range that holds the node's whole history, so that a young history
    fills its chart instead of a sliver at its right edge: an hour's, a day's, else a week.
    One row read, by the index that charts read by (node, at)."""
    first = UsageSample.objects.filter(node=node).order_by("at").values_list("at", flat=True)
    oldest = first.first()
    age = (now or timezone.now()) - oldest if oldest is not None else timedelta(0)
    return next((r for r in RANGES.values() if age <= r.span), RANGES["week"])


def usage_series(*, node: str, window: Range, now: datetime | None = None) -> Series:
    """One node's history over ``window``, one point per bucket and resource, in one query
    (``usage_buckets``): buckets aligned on the epoch, a bucket without samples missing."""
    now = now or timezone.now()
    step = max(window.bucket, timedelta(seconds=settings.USAGE_HISTORY_SECONDS))
    since = EPOCH + (now - window.span - EPOCH) // step * step  # the first bucket's start
    rows = usage_buckets(node=node, step=step, since=since, now=now)
    points = [
        Point(at, node, resource, used, low, high, pending, admitted)
        for at, resource, used, low, high, pending, admitted in rows
    ]
    return Series(node=node, range=window, since=since, until=now, step=step, points=points)
