"""Every error answers in the asker's language: JSON under /api/, a page for a person.

The API's shapes are those of ``portal.api``: ``{"field": ["reason", ...]}`` for bad input
and ``{"detail": "..."}`` otherwise; a service that is down adds ``component`` and a
``Retry-After`` header. Pages come from ``templates/error.html``, in the site's layout: it
needs neither the database nor the request's context processors, so it renders while
PostgreSQL is down (then without the navigation, which needs to know who is asking).
These are also Django's handler400/403/404/500 (``portal/urls.py``), so an error raised
outside a view gets the same treatment.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Mapping

import psycopg
import redis
from django.core.exceptions import BadRequest
from django.db import InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.middleware.csrf import get_token
from django.template.loader import render_to_string
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from kombu.exceptions import OperationalError as BrokerOperationalError

from jobs.engine.locks import is_contention

log = logging.getLogger(__name__)

API_PREFIX = "/api/"
# How long a client should wait before trying again when a backing service is down:
# about the time PostgreSQL or Redis takes to restart.
RETRY_AFTER_SECONDS = 10
# A transaction that lost to others' locks was already tried again (jobs.engine.locks.retrying);
# the same request a moment later finds the rows free.
BUSY_RETRY_AFTER_SECONDS = 1
DATABASE = "database"
BROKER = "broker"
# The component's name in a person's words (the API's ``component`` stays the code).
COMPONENT_NAMES = {DATABASE: gettext_lazy("database"), BROKER: gettext_lazy("broker")}
# The errors that mean "the service did not answer", not "the request was wrong".
UNAVAILABLE: tuple[tuple[tuple[type[BaseException], ...], str], ...] = (
    (
        (OperationalError, InterfaceError, psycopg.OperationalError, psycopg.InterfaceError),
        DATABASE,
    ),
    ((redis.ConnectionError, redis.TimeoutError, BrokerOperationalError), BROKER),
)


def is_api(request: HttpRequest) -> bool:
    return request.path_info.startswith(API_PREFIX)


def unavailable_component(error: BaseException | None) -> str | None:
    """``database`` or ``broker`` when ``error`` says that service is down, else None.

    A deadlock or a serialization failure is an OperationalError too, but the database
    answered it: that is contention (``busy``), not an outage."""
    if is_contention(error):
        return None
    for types, component in UNAVAILABLE:
        if isinstance(error, types):
            return component
    return None


def _page(
    request: HttpRequest, status: int, title: str, message: str, *, who: bool = True, **context
) -> HttpResponse:
    """The error page; with ``who``, the top bar's navigation for the person asking, when
    the database says who that is (a page about an outage does not ask)."""
    viewer = _viewer(request) if who else None
    html = render_to_string(
        "error.html",
        {
            "title": title,
            "message": message,
            "status": status,
            "user": viewer,
            "request": request,
            # The top bar's "Log out" and a kept form post with it (no database needed).
            "csrf_token": get_token(request) if viewer is not None else "",
            # The person's theme, read with who they are (portal.preferences); else the
            # page follows the system's scheme.
            "theme": getattr(request, "theme", "") if viewer is not None else "",
            **context,
        },
    )
    return HttpResponse(html, status=status)


def _viewer(request: HttpRequest):
    """The person asking, signed in, or None: when the error came before sign-in was read
    (a bad Host) or the session or the user cannot be read, the page goes without them."""
    try:
        user = request.user  # lazy: the session and the user are read here
        return user if user.is_authenticated else None
    except Exception:  # whatever failed, the error page itself must render
        return None


def bad_request(request: HttpRequest, errors: Mapping[str, list[str]]) -> HttpResponse:
    """400 naming each field and its reasons."""
    if is_api(request):
        return JsonResponse(dict(errors), status=400)
    return _page(request, 400, _("Bad request"), _("The request could not be used:"), errors=errors)


def service_unavailable(request: HttpRequest, component: str) -> HttpResponse:
    """503 with the component that is down and when to try again."""
    name = COMPONENT_NAMES.get(component, component)
    detail = _("the %(component)s is not answering; try again shortly") % {"component": name}
    if is_api(request):
        response: HttpResponse = JsonResponse(
            {"detail": detail, "component": component}, status=503
        )
    else:
        response = _page(
            request,
            503,
            _("Temporarily unavailable"),
            _(
                "Caldera cannot reach its %(component)s right now. Nothing you submitted "
                "before is lost."
            )
            % {"component": name},
            retry_after=RETRY_AFTER_SECONDS,
            who=False,
        )
    response["Retry-After"] = str(RETRY_AFTER_SECONDS)
    return response


def busy(request: HttpRequest) -> HttpResponse:
    """503 for a request whose transaction kept losing to others' locks: nothing of it was
    committed, and the same request shortly succeeds."""
    if is_api(request):
        detail = _("busy: other changes to the same jobs went first; try again")
        response: HttpResponse = JsonResponse({"detail": detail, "reason": "busy"}, status=503)
    else:
        response = _page(
            request,
            503,
            _("Busy"),
            _("Other changes to the same jobs went first; try again. Nothing was changed."),
            who=False,
        )
    response["Retry-After"] = str(BUSY_RETRY_AFTER_SECONDS)
    return response


def _detail(
    request: HttpRequest, status: int, detail: str, title: str, *, sentence: str = ""
) -> HttpResponse:
    """The API's ``detail``, or a page saying it (``sentence``, when a person is told more
    than a script)."""
    if is_api(request):
        return JsonResponse({"detail": detail}, status=status)
    return _page(
        request,
        status,
        title,
        sentence or _("%(detail)s.") % {"detail": detail[:1].upper() + detail[1:]},
    )


def bad_request_handler(request: HttpRequest, exception: Exception) -> HttpResponse:
    """handler400: a view's BadRequest says what was wrong (``offset: must be at most
    ...``); a suspicious request (a bad Host, too many fields) is told no more than that."""
    if isinstance(exception, BadRequest) and str(exception):
        return _detail(request, 400, str(exception), _("Bad request"))
    return _detail(request, 400, _("the request is malformed"), _("Bad request"))


def permission_denied_handler(request: HttpRequest, exception: Exception) -> HttpResponse:
    return _detail(request, 403, _("you do not have permission to do this"), _("Forbidden"))


def not_found_handler(request: HttpRequest, exception: Exception) -> HttpResponse:
    """What was not found, by its address: the same words whether it does not exist or
    belongs to a department the person is not in, so a page tells no one what exists."""
    return _detail(
        request,
        404,
        _("not found"),
        _("Not found"),
        sentence=_(
            "There is nothing at %(path)s that you may see: it may have been removed, or "
            "belong to a department you are not in. The navigation above leads to your jobs "
            "and queues."
        )
        % {"path": request.path},
    )


# Fields a kept form never carries back into a page.
_NOT_KEPT = ("csrfmiddlewaretoken", "password")


def csrf_failure(request: HttpRequest, reason: str = "") -> HttpResponse:
    """CSRF_FAILURE_VIEW: a form sent from a page that is out of date (its person signed in
    or out since, perhaps in another tab) is refused, as it must be, but what they typed is
    not lost: the page shows it and sends it again with a fresh token, once they say so.
    Passwords and files are not kept."""
    if is_api(request):
        return JsonResponse(
            {"detail": _("the CSRF check failed: send the session's CSRF token, or use a token")},
            status=403,
        )
    if request.headers.get("HX-Request") == "true":
        return _renewed(request)
    kept = [
        (name, value)
        for name, values in request.POST.lists()
        for value in values
        if not any(word in name.lower() for word in _NOT_KEPT)
    ]
    signed_in = _viewer(request) is not None
    # Whole sentences each (word order differs between languages).
    if not kept:
        message = _(
            "Caldera could not trust this form: the page it came from is older than your "
            "sign-in (you signed in or out since, perhaps in another tab). Nothing was "
            "changed; open the page again and repeat what you did."
        )
    elif signed_in:
        message = _(
            "Caldera could not trust this form: the page it came from is older than your "
            "sign-in (you signed in or out since, perhaps in another tab). Nothing was "
            "changed. What you typed is kept below: check it and send it again."
        )
    else:
        message = _(
            "Caldera could not trust this form: the page it came from is older than your "
            "sign-in (you signed in or out since, perhaps in another tab). Nothing was "
            "changed, and you are signed out: sign in (in another tab), then send what you "
            "typed again from here."
        )
    return _page(
        request,
        403,
        _("This form is out of date"),
        message,
        kept=kept,
        typed=[(name, value) for name, value in kept if value.strip()],  # what to list
        kept_action=request.get_full_path(),
        back=request.path,
    )


# What static/csrf.js shows when a part of a page was refused for an out-of-date token.
RENEWED = gettext_lazy(
    "Nothing was changed: this page was older than your sign-in (you signed in or out "
    "since, perhaps in another tab). It has been brought up to date; do it again."
)


def _renewed(request: HttpRequest) -> HttpResponse:
    """A part of a page (htmx) refused by the CSRF check: the page gets the session's
    token (static/csrf.js puts it where the page's requests take it from) and says so,
    and a part that only shows something (the submit form's preview) asks again by
    itself. Nothing is sent again without the person: the token is no secret from them,
    and a page of another site cannot read this answer."""
    said = str(RENEWED)
    response = HttpResponse(said, status=403, content_type="text/plain; charset=utf-8")
    response["HX-Trigger"] = json.dumps(
        {"caldera:csrf-renewed": {"token": get_token(request), "message": said}}
    )
    return response


def server_error_handler(request: HttpRequest) -> HttpResponse:
    """handler500: a database or broker outage outside a view is still a 503, and so is
    contention (``busy``)."""
    if is_contention(sys.exc_info()[1]):
        return busy(request)
    component = unavailable_component(sys.exc_info()[1])
    if component is not None:
        return service_unavailable(request, component)
    return _detail(request, 500, _("an internal error occurred; it has been logged"), _("Error"))
