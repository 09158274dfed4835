"""Middleware at the edge: unstorable text is a 400, a service that is down is a 503, HTML
is compressed."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator

from django.http import HttpRequest, HttpResponse, HttpResponseBase
from django.middleware.gzip import GZipMiddleware

from jobs.engine.locks import is_contention

from . import errors
from .input import pairs_problem, text_problem

log = logging.getLogger(__name__)

FORM_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data")


def _values(lists: Iterable[tuple[str, list[str]]]) -> Iterator[tuple[str, str]]:
    for name, values in lists:
        for value in values:
            yield name, value


def request_text_problem(request: HttpRequest) -> tuple[str, str] | None:
    """The first (field, reason) of the request that the database could not store.

    The path, the query string and the cookies are names, never free text; a form's
    fields may hold tab and line breaks (the script and env text areas do).
    """
    reason = text_problem(request.path_info, free_text=False)
    if reason is not None:
        return "path", reason
    problem = pairs_problem(_values(request.GET.lists()), free_text=False)
    if problem is not None:
        return problem
    problem = pairs_problem(request.COOKIES.items(), free_text=False)
    if problem is not None:
        return f"cookie {problem[0]}", problem[1]
    if request.method == "POST" and request.content_type in FORM_TYPES:
        # Django parses only POST bodies into request.POST; the API's form parsers check
        # a PUT or PATCH form (portal.input).
        return pairs_problem(_values(request.POST.lists()), free_text=True)
    return None


class RefuseUnstorableText:
    """A NUL, another control character or an unpaired surrogate is refused with a 400
    naming where it was, before any view can hand it to PostgreSQL."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        problem = request_text_problem(request)
        if problem is not None:
            field, reason = problem
            return errors.bad_request(request, {field: [reason]})
        return self.get_response(request)


class ServiceUnavailable:
    """A view that finds the database or the broker down answers 503 with Retry-After;
    one whose transaction kept losing to others' locks answers 503 "busy" (``errors.busy``).

    Only errors that say a service did not answer are caught (``errors.UNAVAILABLE``);
    any other exception is still a 500 and logged as one.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if is_contention(exception):
            log.warning("%s %s: busy: %s", request.method, request.path, exception)
            return errors.busy(request)
        component = errors.unavailable_component(exception)
        if component is None:
            return None
        log.warning("%s %s: the %s is down: %s", request.method, request.path, component, exception)
        return errors.service_unavailable(request, component)


class CompressHtml(GZipMiddleware):
    """Django's GZipMiddleware for HTML answers only: the pages and the fragments they poll,
    which compress to a fifth or less (docs/benchmarks.md). Static files come compressed
    from WhiteNoise; the API's JSON is left to the proxy in front, as its clients choose.

    BREACH recovers a secret repeated in compressed answers that also echo what an
    attacker sends, by watching their lengths over many requests. The pages' secrets do
    not repeat: the CSRF token is masked afresh in every answer (Django's own defence), a
    new API token or webhook secret is shown once, and the session is a cookie, outside
    the body. Django's GZipMiddleware also pads each answer with random bytes (Heal The
    Breach). The polled fragments, which are most of the bytes, carry no secret at all.
    """

    def process_response(
        self, request: HttpRequest, response: HttpResponseBase
    ) -> HttpResponseBase:
        if not response.get("Content-Type", "").startswith("text/html"):
            return response
        return super().process_response(request, response)
