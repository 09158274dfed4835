"""What a locked-out login sees (django-axes' AXES_LOCKOUT_CALLABLE).

django-axes counts failed logins per username and per address and refuses the next
login once either reaches AXES_FAILURE_LIMIT; this says so in words, with when to try
again, on the page the person used (the login page or the admin's), and as JSON for a
script. A refused attempt restarts the cool-off, so "again" is counted from now.
"""

from __future__ import annotations

from axes.helpers import get_cool_off
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.utils import timezone

LOCKED_OUT_STATUS = 429


def lockout_message(minutes: int) -> str:
    return (
        "Too many failed logins for this username or from this address. "
        f"Try again in {minutes} minute{'s' if minutes != 1 else ''}."
    )


def lockout_response(
    request: HttpRequest, original_response: HttpResponse | None, credentials: dict | None
) -> HttpResponse:
    cool_off = get_cool_off(request)
    seconds = int(cool_off.total_seconds()) if cool_off else 0
    minutes = max(1, -(-seconds // 60))
    message = lockout_message(minutes)
    wants_json = request.headers.get("x-requested-with") == "XMLHttpRequest" or (
        "application/json" in request.headers.get("accept", "")
    )
    if wants_json:
        response = JsonResponse({"detail": message}, status=LOCKED_OUT_STATUS)
    else:
        context = {"message": message, "until": timezone.now() + cool_off if cool_off else None}
        response = render(
            request, "registration/locked_out.html", context, status=LOCKED_OUT_STATUS
        )
    if seconds:
        response["Retry-After"] = str(seconds)
    return response
