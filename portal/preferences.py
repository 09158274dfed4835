"""The person's language, time zone and theme, applied to every page and fragment.

Each is the person's choice on their page (access.models.Preference) where they made one,
else their browser's: the language from Accept-Language (django's LocaleMiddleware, which
runs before this), the time zone from the cookie static/zone.js sets to the browser's zone,
the theme from prefers-color-scheme (in CSS; the page then names no theme). The API reads
the language the same way, so its refusals come in the client's Accept-Language too.
"""

from __future__ import annotations

from collections.abc import Callable

from django.db import DatabaseError
from django.http import HttpRequest, HttpResponse
from django.utils import timezone, translation

from access.preferences import preference_of, zone_named

# Set by static/zone.js to Intl's name of the browser's zone (Asia/Shanghai), read here.
ZONE_COOKIE = "caldera_tz"


class PersonPreferences:
    """Activates the person's language and time zone for the request, and names their
    theme (``request.theme``: blank for "as the system says", else light or dark)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        try:
            preference = preference_of(request.user)
        except DatabaseError:
            # Down, or not answering: pages read as the browser says, and the view's own
            # read of the database answers 503 (portal.middleware.ServiceUnavailable).
            preference = None
        if preference is not None and preference.language:
            translation.activate(preference.language)
            request.LANGUAGE_CODE = translation.get_language()
        chosen = preference.time_zone if preference is not None else ""
        zone = zone_named(chosen or request.COOKIES.get(ZONE_COOKIE, ""))
        if zone is not None:
            timezone.activate(zone)
        else:
            timezone.deactivate()
        request.zone_chosen = bool(chosen)  # type: ignore[attr-defined]
        request.theme = preference.theme if preference is not None else ""  # type: ignore[attr-defined]
        try:
            return self.get_response(request)
        finally:
            timezone.deactivate()


def appearance(request: HttpRequest) -> dict:
    """For the templates: the theme the page names (blank: the system's), and the zone its
    times are shown in."""
    return {
        "theme": getattr(request, "theme", ""),
        "zone_chosen": getattr(request, "zone_chosen", False),
        "time_zone_name": timezone.get_current_timezone_name(),
    }
