"""Every error answers in the asker's language: JSON under /api/, a page for a person.

The API's shapes are those of ``portal.api``: ``{"field": ["reason", ...]}`` for bad input
and ``{"detail": "..."}`` otherwise; a service that is down adds ``component`` and a
``Retry-After`` header. Pages come from ``templates/error.html``, which needs neither the
database nor the request's context processors, so it renders while PostgreSQL is down.
These are also Django's handler400/403/404/500 (``portal/urls.py``), so an error raised
outside a view gets the same treatment.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Mapping

import psycopg
import redis
from django.core.exceptions import BadRequest
from django.db import InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.template.loader import render_to_string
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
BUSY_DETAIL = "busy: other changes to the same jobs went first; try again"
DATABASE = "database"
BROKER = "broker"
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


def _page(status: int, title: str, message: str, **context) -> HttpResponse:
    html = render_to_string(
        "error.html", {"title": title, "message": message, "status": status, **context}
    )
    return HttpResponse(html, status=status)


def bad_request(request: HttpRequest, errors: Mapping[str, list[str]]) -> HttpResponse:
    """400 naming each field and its reasons."""
    if is_api(request):
        return JsonResponse(dict(errors), status=400)
    return _page(400, "Bad request", "The request could not be used:", errors=errors)


def service_unavailable(request: HttpRequest, component: str) -> HttpResponse:
    """503 with the component that is down and when to try again."""
    detail = f"the {component} is not answering; try again shortly"
    if is_api(request):
        response: HttpResponse = JsonResponse(
            {"detail": detail, "component": component}, status=503
        )
    else:
        response = _page(
            503,
            "Temporarily unavailable",
            f"Caldera cannot reach its {component} right now. Nothing you submitted "
            "before is lost.",
            retry_after=RETRY_AFTER_SECONDS,
        )
    response["Retry-After"] = str(RETRY_AFTER_SECONDS)
    return response


def busy(request: HttpRequest) -> HttpResponse:
    """503 for a request whose transaction kept losing to others' locks: nothing of it was
    committed, and the same request shortly succeeds."""
    if is_api(request):
        response: HttpResponse = JsonResponse({"detail": BUSY_DETAIL, "reason": "busy"}, status=503)
    else:
        response = _page(
            503, "Busy", BUSY_DETAIL[:1].upper() + BUSY_DETAIL[1:] + ". Nothing was changed."
        )
    response["Retry-After"] = str(BUSY_RETRY_AFTER_SECONDS)
    return response


def _detail(request: HttpRequest, status: int, detail: str, title: str) -> HttpResponse:
    if is_api(request):
        return JsonResponse({"detail": detail}, status=status)
    return _page(status, title, detail[:1].upper() + detail[1:] + ".")


def bad_request_handler(request: HttpRequest, exception: Exception) -> HttpResponse:
    """handler400: a view's BadRequest says what was wrong (``offset: must be at most
    ...``); a suspicious request (a bad Host, too many fields) is told no more than that."""
    if isinstance(exception, BadRequest) and str(exception):
        return _detail(request, 400, str(exception), "Bad request")
    return _detail(request, 400, "the request is malformed", "Bad request")


def permission_denied_handler(request: HttpRequest, exception: Exception) -> HttpResponse:
    return _detail(request, 403, "you do not have permission to do this", "Forbidden")


def not_found_handler(request: HttpRequest, exception: Exception) -> HttpResponse:
    return _detail(request, 404, "not found", "Not found")


def server_error_handler(request: HttpRequest) -> HttpResponse:
    """handler500: a database or broker outage outside a view is still a 503, and so is
    contention (``busy``)."""
    if is_contention(sys.exc_info()[1]):
        return busy(request)
    component = unavailable_component(sys.exc_info()[1])
    if component is not None:
        return service_unavailable(request, component)
    return _detail(request, 500, "an internal error occurred; it has been logged", "Error")
