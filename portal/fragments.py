"""The validator of the pages' refreshing fragments: one ETag, one place, every fragment.

The queue, job and dashboard pages (and the others that poll) ask every 2 s for their
refreshing part with htmx. An unchanged part is answered 304 Not Modified, with no body:
the browser's own cache gives htmx the body it already has, which the morph swap
(idiomorph, templates/base.html) leaves as it is, so focus, selection and scroll survive.

The validator is a hash of the rendered fragment, not of the data behind it. A fragment
depends on more than its rows' last changes: why a job waits reads the whole quota tree's
usage, the expected start reads the clock and the forecast, a namespace's trouble and the
cluster's health come from elsewhere. A validator from the data would have to name all of
that, and would answer a stale 304 the day a template reads one thing more; a hash of the
bytes cannot, since it is what would be sent. It saves the bytes and the swap, not the
render (an open page's bytes and requests a minute: `make bench BENCH_ARGS="--part pages"`).

The hash also covers who asks and how the answer is written for them: the person, their
rights (staff, and their role in each department), the language and the time zone. Two
people shown the same bytes still get different validators, so a browser shared between
them (one logs out, the other in) never reuses the first one's answer. The theme is named
only on the <html> element of whole pages (data-theme, and caldera.css paints either side);
a fragment never carries it, so its bytes do not depend on it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable

from django.http import HttpRequest, HttpResponse
from django.utils import timezone, translation
from django.utils.cache import get_conditional_response, patch_cache_control, patch_vary_headers
from django.utils.http import quote_etag

from queues.selectors import user_roles


def fragment_variant(request: HttpRequest) -> bytes:
    """What a fragment's bytes are written for, beside its data: the person, their rights,
    the language and the time zone."""
    user = request.user
    if user.is_authenticated:
        rights = repr((user.pk, user.is_staff, sorted(user_roles(user).items())))
    else:
        rights = "anonymous"
    return "\n".join(
        [rights, translation.get_language() or "", timezone.get_current_timezone_name()]
    ).encode()


def fragment_etag(request: HttpRequest, content: bytes) -> str:
    """The fragment's validator: a hash of its bytes and of what they are written for."""
    digest = hashlib.blake2b(fragment_variant(request), digest_size=16)
    digest.update(b"\0")
    digest.update(content)
    return quote_etag(digest.hexdigest())


def _is_fragment(request: HttpRequest, response: HttpResponse) -> bool:
    """An htmx GET answered 200 with HTML. A history restore asks for a whole page; a 286
    (stop polling) must reach htmx as itself, never as a cached 200."""
    return (
        request.method == "GET"
        and request.headers.get("HX-Request") == "true"
        and "HX-History-Restore-Request" not in request.headers
        and response.status_code == 200
        and not response.streaming
        and response.get("Content-Type", "").startswith("text/html")
    )


class FragmentValidation:
    """Gives every htmx fragment an ETag (``fragment_etag``) and answers 304 to a request
    whose If-None-Match names it.

    A fragment and its page share a URL, so both vary with HX-Request: the browser keeps
    one of each. A fragment is ``private, no-cache``: kept by the browser only, and asked
    again (revalidated) at every poll.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if request.method in ("GET", "HEAD"):
            patch_vary_headers(response, ["HX-Request"])
        if not _is_fragment(request, response):
            return response
        response["ETag"] = fragment_etag(request, response.content)
        patch_cache_control(response, private=True, no_cache=True)
        conditional = get_conditional_response(request, etag=response["ETag"], response=response)
        assert conditional is not None  # given a response, it answers one
        return conditional


# What a 304 carries (RFC 9110, 15.4.5): the validator, how to keep the answer and what it
# varies with. The browser reuses the stored 200 with every other header of its own (the
# Content-Security-Policy, the language, ...), so sending them again at every poll of an
# open page would be most of its bytes. Cookies are kept: they are not the stored answer's.
NOT_MODIFIED_HEADERS = frozenset({"cache-control", "content-location", "date", "etag",
                                  "expires", "vary"})  # fmt: skip


class BareNotModified:
    """Leaves on every 304 only NOT_MODIFIED_HEADERS (and its cookies): first among the
    middleware, after those that add headers to every answer (security, framing, language)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if response.status_code == 304:
            for header in list(response.headers):
                if header.lower() not in NOT_MODIFIED_HEADERS:
                    del response.headers[header]
        return response
