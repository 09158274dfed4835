"""The quota tree's bars and the usage charts, as SVG geometry for the templates.

Pure functions of the figures: no database, no request. The templates draw what these
return with SVG attributes and the classes of ``static/caldera.css`` (the
Content-Security-Policy allows no inline style), so the pages need no JavaScript and no
charting library.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.utils import timezone
from django.utils.dateformat import format as date_format
from django.utils.translation import gettext as _

from access.preferences import zone_label
from jobs.usage.samples import Point, Range
from kube.quantity import human, pool_parts, scale
from queues.phrases import resource_name
from queues.quota import Balance

GIB = 2**30


@dataclass(frozen=True)
class Bar:
    """A resource's bar, in percent of its width: used within ``min``, borrowed above it,
    lent and idle in the rest of ``min``, the ``min`` mark, and below it a strip for the
    pending demand from the end of what is used. The bar ends at ``max`` (or, with no
    limit, at what is used and asked for); a strip that would run past it is cut there
    and marked."""

    used: float
    borrowed_x: float
    borrowed: float
    lent_x: float
    lent: float
    idle_x: float
    idle: float
    min_x: float | None
    pending_x: float
    pending: float
    pending_beyond: bool
    limited: bool


def bar(balance: Balance) -> Bar:
    b = balance
    ends = [b.min, b.used, 1]
    ends += [b.max] if b.max is not None else [b.used + b.pending]
    scale = max(ends)

    def pct(units: int) -> float:
        return round(100 * min(units, scale) / scale, 2)

    within = min(b.used, b.min)
    return Bar(
        used=pct(within),
        borrowed_x=pct(b.min),
        borrowed=round(pct(b.used) - pct(b.min), 2) if b.borrowed else 0.0,
        lent_x=pct(b.used),
        lent=round(pct(b.used + b.lent) - pct(b.used), 2),
        idle_x=pct(b.used + b.lent),
        idle=round(pct(b.min) - pct(b.used + b.lent), 2) if b.unused > b.lent else 0.0,
        min_x=pct(b.min) if b.min else None,
        pending_x=pct(b.used),
        pending=round(pct(b.used + b.pending) - pct(b.used), 2),
        pending_beyond=b.used + b.pending > scale,
        limited=b.max is not None,
    )


# The charts: one per resource, in SVG user units (scaled to the page's width by CSS).
WIDTH, HEIGHT = 380, 170
LEFT, RIGHT, TOP, BOTTOM = 50, 10, 10, 24


@dataclass(frozen=True)
class Tick:
    at: float  # x or y in the chart's units
    label: str


@dataclass(frozen=True)
class Chart:
    """One resource of one node over a range: paths (``d`` attributes) for the used area
    and line, the ``min``, ``max`` and pending demand lines, and the axes' ticks."""

    resource: str
    title: str
    summary: str
    used_area: str
    used_line: str
    min_line: str
    max_line: str
    pending_line: str
    pending_beyond: str  # "", or the words for a pending demand above the scale
    y_ticks: list[Tick]
    x_ticks: list[Tick]
    zone: str  # the time axis's: "Asia/Shanghai, UTC+08:00"
    width: int = WIDTH
    height: int = HEIGHT
    left: int = LEFT
    right: int = WIDTH - RIGHT
    top: int = TOP
    bottom: int = HEIGHT - BOTTOM


def display_unit(resource: str) -> int:
    """Base units per tick step unit: a core, a GiB, or one of the resource."""
    return {"cpu": 1000, "memory": GIB}.get(pool_parts(resource)[0], 1)


def nice_step(value: float) -> float:
    """The smallest of 1, 2, 2.5 or 5 times a power of ten at or above ``value``."""
    power = 10 ** math.floor(math.log10(value))
    return next(f * power for f in (1, 2, 2.5, 5, 10) if f * power >= value)


TICK_LABEL_MAX = 6  # characters: what fits left of the plot
DECIMAL = [("E", 10**18), ("P", 10**15), ("T", 10**12), ("G", 10**9), ("M", 10**6), ("k", 10**3)]
BINARY = [("Ei", 2**60), ("Pi", 2**50), ("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)]


def tick_label(resource: str, units: int) -> str:
    """A y tick's label: the quantity as people read it, shortened to three significant
    digits and a suffix when it would not fit (1500000 cores: 1.5M; 75000Gi: 73.2Ti)."""
    label = human(resource, units)
    if len(label) <= TICK_LABEL_MAX:
        return label
    value = units / scale(resource)
    for suffix, size in BINARY if pool_parts(resource)[0] == "memory" else DECIMAL:
        if value >= size:
            return f"{value / size:.3g}{suffix}"
    return f"{value:.3g}"


def y_scale(resource: str, highest: int) -> tuple[int, list[int]]:
    """The top of the y axis and its ticks, in base units: about four nice steps of the
    resource's unit, whole base units each (whole devices for a GPU)."""
    unit = display_unit(resource)
    highest = highest or unit  # nothing yet: one core, one GiB, one device
    step = nice_step(highest / unit / 4) * unit
    step = max(math.ceil(step), 1)
    count = max(math.ceil(highest / step), 1)
    return step * count, [step * i for i in range(count + 1)]


def _x_ticks(window: Range, since: datetime, until: datetime) -> list[tuple[datetime, str]]:
    """The time axis's ticks in the zone the page is shown in, on its whole quarter hours,
    hours or days (its local midnight, not UTC's), labelled as Django writes dates in the
    page's language ("H:i", "D": Mon, 周一)."""
    every, fmt = {
        "hour": (timedelta(minutes=15), "H:i"),
        "day": (timedelta(hours=6), "H:i"),
        "week": (timedelta(days=1), "D"),
    }[window.name]
    zone = timezone.get_current_timezone()
    day = timezone.localtime(since, zone).date()
    ticks: list[tuple[datetime, str]] = []
    while True:
        # Each day from its own midnight: a day of summer time starts or ends is 23 or 25
        # hours long, and the ticks stay on its local hours.
        start = datetime(day.year, day.month, day.day, tzinfo=zone)
        moment = start
        while moment.date() == day:
            if moment > until:
                return ticks
            if moment >= since:
                ticks.append((moment, date_format(moment, fmt)))
            moment = timezone.localtime(moment + every, zone)
        day += timedelta(days=1)


def chart(
    *,
    node: str,
    resource: str,
    points: Sequence[Point],
    window: Range,
    since: datetime,
    until: datetime,
    step: timedelta,
) -> Chart:
    """The chart of ``points`` (one resource, in time order, one per bucket of ``step``).

    Each point is drawn as a level across its bucket (it is the bucket's highest value),
    and the lines break where buckets are missing rather than bridge a gap in the record.
    """
    # Used, min and max share the scale; pending demand may be far above them (a backlog
    # of thousands of cores beside a max of 14), so it is drawn on it up to the top and
    # said in words beyond, rather than flattening the rest onto the axis.
    limits = [p.max for p in points if p.max is not None]
    highest = max([0, *(max(p.used, p.min) for p in points), *limits])
    if not limits:  # no ceiling to read against: the demand is the scale
        highest = max([highest, *(p.pending for p in points)])
    top, y_values = y_scale(resource, highest)
    span = (until - since).total_seconds()
    x0, x1, y0, y1 = LEFT, WIDTH - RIGHT, TOP, HEIGHT - BOTTOM

    def x(moment: datetime) -> float:
        share = (moment - since).total_seconds() / span
        return round(x0 + min(max(share, 0.0), 1.0) * (x1 - x0), 1)

    def y(units: int) -> float:
        return round(y1 - min(units, top) / top * (y1 - y0), 1)

    def line(value) -> str:
        """A level per bucket, joined to the next one unless a bucket is missing between
        them or ``value`` is None (no limit)."""
        parts, previous = [], None
        for point in points:
            level = value(point)
            if level is None:
                previous = None
                continue
            if previous is not None and point.at - previous.at <= step:
                parts.append(f"V{y(level)}")
            else:
                parts.append(f"M{x(point.at)} {y(level)}")
            parts.append(f"H{x(point.at + step)}")
            previous = point
        return " ".join(parts)

    def area() -> str:
        """The used line closed down to the axis, one shape per unbroken run."""
        parts, previous = [], None
        for point in points:
            if previous is None or point.at - previous.at > step:
                if previous is not None:
                    parts.append(f"V{y1} Z")
                parts.append(f"M{x(point.at)} {y1}")
            parts.append(f"V{y(point.used)} H{x(point.at + step)}")
            previous = point
        if previous is not None:
            parts.append(f"V{y1} Z")
        return " ".join(parts)

    last = points[-1] if points else None
    zone = zone_label(timezone.localtime(until))
    return Chart(
        resource=resource_name(resource),
        title=_("%(resource)s of %(node)s over %(range)s")
        % {"resource": resource_name(resource), "node": node, "range": window.label},
        summary=_summary(resource, points, last),
        used_area=area(),
        used_line=line(lambda p: p.used),
        min_line=line(lambda p: p.min),
        max_line=line(lambda p: p.max),
        pending_line=line(lambda p: p.pending),
        pending_beyond=_beyond(resource, points, top),
        y_ticks=[Tick(y(value), tick_label(resource, value)) for value in y_values],
        x_ticks=[Tick(x(moment), label) for moment, label in _x_ticks(window, since, until)],
        zone=zone,
    )


def _beyond(resource: str, points: Sequence[Point], top: int) -> str:
    """Where the pending demand leaves the top of the scale: its highest, in words."""
    peak = max((p.pending for p in points), default=0)
    if peak <= top:
        return ""
    return _("pending demand off the top, up to %(peak)s") % {"peak": human(resource, peak)}


def _summary(resource: str, points: Sequence[Point], last: Point | None) -> str:
    if last is None:
        return _("No samples in this range yet.")

    def h(units: int) -> str:
        return human(resource, units)

    figures = {
        "used": h(last.used),
        "used_highest": h(max(p.used for p in points)),
        "min": h(last.min),
        "pending": h(last.pending),
        "pending_highest": h(max(p.pending for p in points)),
        "admitted": max(p.admitted for p in points),
    }
    if last.max is None:
        return (
            _(
                "Used %(used)s at the last sample (highest %(used_highest)s), min %(min)s, "
                "no limit; pending demand %(pending)s (highest %(pending_highest)s); "
                "up to %(admitted)s jobs admitted."
            )
            % figures
        )
    return _(
        "Used %(used)s at the last sample (highest %(used_highest)s), min %(min)s, "
        "max %(max)s; pending demand %(pending)s (highest %(pending_highest)s); "
        "up to %(admitted)s jobs admitted."
    ) % (figures | {"max": h(last.max)})
