"""The usage charts' time axis: in the zone the page is shown in, on its local hours and
days, with the zone named (jobs/usage/charts.py)."""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

from django.utils import timezone, translation

from jobs.usage.charts import chart
from jobs.usage.samples import RANGES, Point

UNTIL = datetime(2026, 11, 27, 10, 30, tzinfo=UTC)  # 18:30 in Shanghai


def _chart(window: str, until: datetime = UNTIL):
    r = RANGES[window]
    point = Point(
        at=until - r.bucket,
        node="root",
        resource="cpu",
        used=1000,
        min=2000,
        max=4000,
        pending=0,
        admitted=1,
    )
    return chart(
        node="root", resource="cpu", points=[point], window=r,
        since=until - r.span, until=until, step=r.bucket,
    )  # fmt: skip


def _labels(drawn) -> list[str]:
    return [tick.label for tick in drawn.x_ticks]


def test_the_day_is_marked_at_the_viewers_local_hours_and_its_zone_is_named():
    with timezone.override(ZoneInfo("Asia/Shanghai")):
        drawn = _chart("day")
    assert _labels(drawn) == ["00:00", "06:00", "12:00", "18:00"]
    assert drawn.zone == "Asia/Shanghai, UTC+08:00"
    # Local midnight is 16:00 UTC: 5.5 of the day's 24 hours from its left edge.
    width = drawn.right - drawn.left
    assert drawn.x_ticks[0].at == round(drawn.left + width * 5.5 / 24, 1)

    with timezone.override(UTC):
        assert _labels(_chart("day")) == ["12:00", "18:00", "00:00", "06:00"]


def test_a_day_summer_time_ends_keeps_its_ticks_on_local_hours():
    # New York leaves summer time at 02:00 on 1 November 2026: that day has 25 hours.
    until = datetime(2026, 11, 2, 4, 0, tzinfo=UTC)  # 23:00 on the 1st, local
    with timezone.override(ZoneInfo("America/New_York")):
        drawn = _chart("day", until)
    assert _labels(drawn) == ["00:00", "06:00", "12:00", "18:00"]
    assert drawn.zone == "America/New_York, UTC-05:00"


def test_the_weeks_days_are_local_days_named_in_the_pages_language():
    with timezone.override(ZoneInfo("Asia/Shanghai")), translation.override("zh-hans"):
        drawn = _chart("week")
    # Seven local midnights after 18:30 on Friday the 20th, from Saturday on.
    assert len(drawn.x_ticks) == 7
    with translation.override("zh-hans"):
        saturday = translation.gettext("Sat")
    assert drawn.x_ticks[0].label == saturday
    assert saturday != "Sat"
