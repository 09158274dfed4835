"""A person's preferences (access.models.Preference) and the time zones they can name."""

from __future__ import annotations

import zoneinfo
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
