"""Login throttling (django-axes): which failed logins refuse which later ones, and what a
refused login sees.

The rules, on the login page and the admin's (settings in portal/settings.py):

- AXES_FAILURE_LIMIT failed logins for one username from one address refuse that pair
  (AXES_LOCKOUT_PARAMETERS), right password or not. Whoever guesses locks out only
  themselves: the person signs in from their own address, and the others behind the
  guesser's address (a proxy) are not held back.
- LOGIN_USERNAME_FAILURE_LIMIT failed logins for one username from all addresses
  together, a much higher number, refuse that username from everywhere, so that many
  addresses (a botnet) cannot guess one password for ever; but not in a browser carrying
  that person's device cookie (portal/device_cookie.py), so they cannot lock the person
  out either.
- A failure counts for AXES_COOLOFF_TIME. A refused login is not a failure
  (AXES_RESET_COOL_OFF_ON_FAILURE_DURING_LOCKOUT is off), so a lock lifts one cool-off
  after the failure that reached the limit, however often it is knocked on meanwhile. A
  success clears its own pair's failures.
- Only password logins count: the identity provider's callback carries no username, and
  the provider's own protections apply to it (is_not_a_password_login).

django-axes checks every lockout parameter set against the one AXES_FAILURE_LIMIT, so the
limit per username is checked here, by the handler (AXES_HANDLER), beside axes' own check
of the pair. lockout_response (AXES_LOCKOUT_CALLABLE) says which limit refused the login
and when it lifts, on the page the person used or as JSON for a script.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from axes.attempts import get_cool_off_threshold
from axes.handlers.database import AxesDatabaseHandler
from axes.helpers import get_client_username, get_cool_off, get_failure_limit
from axes.models import AccessAttempt
from django.conf import settings
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.utils import timezone
from django.utils.translation import ngettext

from .device_cookie import carries_device_cookie, remember_sign_in

LOCKED_OUT_STATUS = 429


@dataclass(frozen=True)
class Lockout:
    until: datetime
    everywhere: bool  # the username's limit across all addresses, not the pair's


def lock_lifts(
    failures: Iterable[tuple[datetime, int]], *, limit: int, cool_off: timedelta
) -> datetime | None:
    """When failures (times and counts, newest first) stop refusing logins, or None if
    they do not reach ``limit``: one cool-off after the failure that brings the newest of
    them to the limit, when it stops counting."""
    counted = 0
    for attempt_time, count in failures:
        counted += count
        if counted >= limit:
            return attempt_time + cool_off
    return None


def _newest_first(attempts: QuerySet) -> Iterable[tuple[datetime, int]]:
    return attempts.order_by("-attempt_time").values_list("attempt_time", "failures_since_start")


def is_not_a_password_login(request: HttpRequest, credentials: dict | None) -> bool:
    """AXES_WHITELIST_CALLABLE: a login that names no username is the identity provider's
    callback, neither counted nor refused here. Counted, its failures from one address (a
    forged code, an expired state) would refuse every sign-in through the provider from
    that address."""
    return not get_client_username(request, credentials)


class LoginThrottle(AxesDatabaseHandler):
    """django-axes' database handler, with the limit per username across addresses."""

    def lockout(self, request: HttpRequest, credentials: dict | None = None) -> Lockout | None:
        """The lock that refuses this login now, or None."""
        cool_off = get_cool_off(request)
        limit = get_failure_limit(request, credentials)
        # axes' own sets (AXES_LOCKOUT_PARAMETERS: the pair), as its check at a failure.
        pair = [
            lock_lifts(_newest_first(attempts), limit=limit, cool_off=cool_off)
            for attempts in self.get_user_attempts(request, credentials)
        ]
        everywhere = None
        username = get_client_username(request, credentials)
        if username and not carries_device_cookie(request, username):
            attempts = AccessAttempt.objects.filter(
                username=username, attempt_time__gte=get_cool_off_threshold(request)
            )
            everywhere = lock_lifts(
                _newest_first(attempts),
                limit=settings.LOGIN_USERNAME_FAILURE_LIMIT,
                cool_off=cool_off,
            )
        locks = [until for until in [*pair, everywhere] if until]
        if not locks:
            return None
        return Lockout(until=max(locks), everywhere=everywhere is not None)

    def is_locked(self, request: HttpRequest, credentials: dict | None = None) -> bool:
        return self.lockout(request, credentials) is not None

    def user_logged_in(self, sender, request, user, **kwargs):
        super().user_logged_in(sender, request, user, **kwargs)
        remember_sign_in(request, user.get_username())


def lockout_message(minutes: int, *, everywhere: bool) -> str:
    if everywhere:
        return ngettext(
            "Too many failed logins for this username from many addresses. You can still "
            "log in from a browser you have logged in with before, or here in %(minutes)d "
            "minute.",
            "Too many failed logins for this username from many addresses. You can still "
            "log in from a browser you have logged in with before, or here in %(minutes)d "
            "minutes.",
            minutes,
        ) % {"minutes": minutes}
    return ngettext(
        "Too many failed logins for this username from this address. Try again in "
        "%(minutes)d minute.",
        "Too many failed logins for this username from this address. Try again in "
        "%(minutes)d minutes.",
        minutes,
    ) % {"minutes": minutes}


def lockout_response(
    request: HttpRequest, original_response: HttpResponse | None, credentials: dict | None
) -> HttpResponse:
    now = timezone.now()
    # None only if the failures were cleared since axes refused this login (a success of
    # the same pair, staff in the admin meanwhile): a cool-off is then the most it takes.
    lockout = LoginThrottle().lockout(request, credentials) or Lockout(
        until=now + get_cool_off(request), everywhere=False
    )
    seconds = max(1, math.ceil((lockout.until - now).total_seconds()))
    message = lockout_message(math.ceil(seconds / 60), everywhere=lockout.everywhere)
    wants_json = request.headers.get("x-requested-with") == "XMLHttpRequest" or (
        "application/json" in request.headers.get("accept", "")
    )
    if wants_json:
        response: HttpResponse = JsonResponse({"detail": message}, status=LOCKED_OUT_STATUS)
    else:
        context = {"message": message, "until": lockout.until}
        response = render(
            request, "registration/locked_out.html", context, status=LOCKED_OUT_STATUS
        )
    response["Retry-After"] = str(seconds)
    return response
