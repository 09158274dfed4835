"""The device cookie: a browser a person has signed in with before (OWASP's device cookies).

A successful sign-in leaves in the browser a long-lived cookie naming the person, signed
with SECRET_KEY (django.core.signing, with a salt of its own), HttpOnly, SameSite=Lax and,
over HTTPS, Secure. The login throttle's limit per username across all addresses, which a
botnet guessing one person's password reaches, does not hold back a browser carrying that
person's cookie (portal/login_throttle.py): the botnet cannot lock them out of the browsers
they use. The cookie proves an earlier sign-in and nothing more: the password is still
checked, and the limit per username and address still applies.
"""

from __future__ import annotations

from datetime import timedelta

from django.core import signing
from django.http import HttpRequest, HttpResponse

COOKIE_NAME = "caldera_device"
MAX_AGE = timedelta(days=365)
SALT = "portal.device_cookie"
# Set on the request by the login throttle's handler when a sign-in succeeds; the
# middleware, which holds the response, turns it into the cookie.
SIGNED_IN = "device_cookie_username"


def device_cookie_value(username: str) -> str:
    return signing.dumps(username, salt=SALT)


def device_cookie_username(request: HttpRequest) -> str | None:
    """The person the browser's device cookie names, or None if it carries no valid one
    (none, forged, signed for another purpose, or older than MAX_AGE)."""
    value = request.COOKIES.get(COOKIE_NAME)
    if not value:
        return None
    try:
        username = signing.loads(value, salt=SALT, max_age=MAX_AGE)
    except signing.BadSignature:  # SignatureExpired included
        return None
    return username if isinstance(username, str) else None


def carries_device_cookie(request: HttpRequest, username: str | None) -> bool:
    return bool(username) and device_cookie_username(request) == username


def remember_sign_in(request: HttpRequest, username: str) -> None:
    setattr(request, SIGNED_IN, username)


class DeviceCookieMiddleware:
    """Leaves the device cookie on the answer to a successful sign-in (renewed at each)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        username = getattr(request, SIGNED_IN, None)
        if username:
            response.set_cookie(
                COOKIE_NAME,
                device_cookie_value(username),
                max_age=MAX_AGE,
                secure=request.is_secure(),
                httponly=True,
                samesite="Lax",
            )
        return response
