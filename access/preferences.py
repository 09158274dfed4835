"""A person's preferences (access.models.Preference) and the time zones they can name."""

from __future__ import annotations

import zoneinfo
from datetime import datetime
from functools import cache

from .models import Preference


@cache
def zone_names() -> frozenset[str]:
    """The IANA zone names this system knows."""
    return frozenset(zoneinfo.available_timezones())


def zone_named(name: str) -> zoneinfo.ZoneInfo | None:
    """The zone of that name, or None for a blank or unknown one (a cookie is sent by
    whoever likes)."""
    if name not in zone_names():
        return None
    return zoneinfo.ZoneInfo(name)


def preference_of(user) -> Preference | None:
    """The person's preferences, or None for one who made no choice (or is signed out)."""
    if not user.is_authenticated:
        return None
    return Preference.objects.filter(user_id=user.pk).first()


def zone_label(moment: datetime) -> str:
    """The zone ``moment`` is written in, as a page names it: "Asia/Shanghai, UTC+08:00",
    or "UTC". Its offset is the one at that moment (summer time included)."""
    name = str(moment.tzinfo)
    offset = moment.utcoffset()
    if offset is None or name == "UTC":
        return "UTC"
    minutes = int(offset.total_seconds()) // 60
    sign = "+" if minutes >= 0 else "-"
    hours, minutes = divmod(abs(minutes), 60)
    return f"{name}, UTC{sign}{hours:02d}:{minutes:02d}"
