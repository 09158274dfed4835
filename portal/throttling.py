"""Limits of the REST API per token and per person, so that one pipeline gone wrong cannot
take the service from everyone else (the rates: API_*_RATE_PER_* in portal/settings.py).

The rules:

- A request is a *submit* (POST, PUT, PATCH, DELETE: submitting, cancelling, bulk
  actions) or a *read* (GET, HEAD, OPTIONS). Each kind has a rate per token and a rate
  per person, the person's tokens and sessions together: a request made with a token
  counts against both, a session's against the person's only. A request without a user
  is not counted here: the API's permissions refuse it, or it is a sign-in, which
  portal/login_throttle.py limits.
- A request counts one, unless its view says what it costs: ``throttle_cost(request)``
  on the view (jobs.web.api.JobBatchView: a batch counts each of its jobs, as that many
  single submissions would). A bulk action counts one: it changes jobs already counted
  when they were submitted, and how many a filter matches is known only once the view
  has read them.
- Counts are kept in fixed windows (each minute, hour, ... since the epoch), one counter
  per limit, holder and window, in Redis, so that every web process counts in the same
  place: one limit for the whole service. One script checks and counts a request's
  counters together, in one round trip: the request is counted only if it fits under
  each of its limits, so a refused one (a batch larger than what is left) uses none.
- Past a limit, the answer is 429 ``{"detail", "limit", "rate", "retry_after"}`` with
  ``Retry-After``: the seconds until the window of the limit it would pass ends. A
  request that costs more than a whole limit (a batch larger than the rate) can never
  pass: its 429 says so, without ``Retry-After``.
- The limits fail open. A Redis that fails, or does not answer within
  API_THROTTLE_TIMEOUT_SECONDS, lets the request through uncounted, and the process then
  lets every request through uncounted for API_THROTTLE_REST_SECONDS before it tries
  Redis again (``BREAKER``): a hung Redis costs each web process one short wait per
  rest, never one per request. The first failure of an outage is logged as a warning,
  the return of Redis with the number of requests let through meanwhile.

Not DRF's SimpleRateThrottle: it keeps every request's time in a list per holder, read
and written whole at each request (a batch of 1,000 jobs would add 1,000 entries), and
two processes that read the list together each write their own. One class checks every
limit of a request, rather than one class per limit, so that a request takes one round
trip and is counted against all its limits or none; it raises its own 429 rather than
answering False, since DRF's says only how long to wait, not which limit was passed.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from dataclasses import dataclass
from functools import cache

import redis
from django.conf import settings
from django.utils.translation import gettext, gettext_noop
from redis.backoff import NoBackoff
from redis.commands.core import Script
from redis.retry import Retry
from rest_framework import exceptions
from rest_framework.permissions import SAFE_METHODS
from rest_framework.request import Request
from rest_framework.throttling import BaseThrottle

from .rates import Rate, parse_rate

log = logging.getLogger(__name__)

KEY_PREFIX = "caldera:throttle"


SUBMIT = "submit"
READ = "read"
TOKEN = "token"
PERSON = "person"

# A rate as a 429 says it ("3000 a minute"), by its period in seconds (portal.rates).
RATE_SAID = {
    1: gettext_noop("%(count)s a second"),
    60: gettext_noop("%(count)s a minute"),
    3600: gettext_noop("%(count)s an hour"),
    86_400: gettext_noop("%(count)s a day"),
}


@dataclass(frozen=True)
class Limit:
    """One limit, with its 429's two sentences, whole so each language words them its own
    way: ``too_many`` when the window is full (%(rate)s, %(wait)s), ``too_large`` when the
    request alone counts more than the limit (%(cost)s, %(rate)s, %(count)s)."""

    kind: str
    holder: str
    setting: str  # the name of its rate's setting
    too_many: str
    too_large: str

    @property
    def name(self) -> str:
        """How the 429's body names it: "submit per token"."""
        return f"{self.kind} per {self.holder}"

    def rate(self) -> Rate | None:
        """The rate the settings give it now; None: off."""
        return parse_rate(getattr(settings, self.setting))


LIMITS = (
    Limit(
        SUBMIT,
        TOKEN,
        "API_SUBMIT_RATE_PER_TOKEN",
        gettext_noop(
            "Too many submissions and changes (a batch counts each of its jobs): this "
            "token's limit is %(rate)s; retry in %(wait)s s"
        ),
        gettext_noop(
            "This request counts %(cost)s (a batch counts each of its jobs), more than this "
            "token's limit of %(rate)s: send at most %(count)s at once"
        ),
    ),
    Limit(
        SUBMIT,
        PERSON,
        "API_SUBMIT_RATE_PER_PERSON",
        gettext_noop(
            "Too many submissions and changes (a batch counts each of its jobs): your limit "
            "(all your tokens and sessions together) is %(rate)s; retry in %(wait)s s"
        ),
        gettext_noop(
            "This request counts %(cost)s (a batch counts each of its jobs), more than your "
            "limit (all your tokens and sessions together) of %(rate)s: send at most "
            "%(count)s at once"
        ),
    ),
    Limit(
        READ,
        TOKEN,
        "API_READ_RATE_PER_TOKEN",
        gettext_noop("Too many reads: this token's limit is %(rate)s; retry in %(wait)s s"),
        gettext_noop(
            "This request counts %(cost)s (a batch counts each of its jobs), more than this "
            "token's limit of %(rate)s: send at most %(count)s at once"
        ),
    ),
    Limit(
        READ,
        PERSON,
        "API_READ_RATE_PER_PERSON",
        gettext_noop(
            "Too many reads: your limit (all your tokens and sessions together) is %(rate)s; "
            "retry in %(wait)s s"
        ),
        gettext_noop(
            "This request counts %(cost)s (a batch counts each of its jobs), more than your "
            "limit (all your tokens and sessions together) of %(rate)s: send at most "
            "%(count)s at once"
        ),
    ),
)


@dataclass(frozen=True)
class Counter:
    """One limit's count of one holder's requests in the window that holds ``now``."""

    limit: Limit
    rate: Rate
    key: str
    ends_at: float  # when the window ends, seconds since the epoch

    @classmethod
    def of(cls, limit: Limit, rate: Rate, holder_id: str, now: float) -> Counter:
        window = int(now // rate.seconds)
        # The window's length is in the key, so that a changed rate starts counting afresh.
        names = [limit.kind, limit.holder, holder_id, rate.seconds, window]
        key = ":".join([KEY_PREFIX, *map(str, names)])
        return cls(limit=limit, rate=rate, key=key, ends_at=(window + 1) * rate.seconds)


def token_id(auth: object) -> str | None:
    """What names the request's token in a counter: its row's id (``request.auth`` is the
    AccessToken; its key, a credential, is never written to Redis). None without a token:
    a session's request."""
    pk = getattr(auth, "pk", None)
    return None if pk is None else str(pk)


def request_counters(request: Request, now: float) -> list[Counter]:
    """The counters an authenticated request counts against: its kind's limits that are
    on, for the holders it has."""
    kind = READ if request.method in SAFE_METHODS else SUBMIT
    holders = {TOKEN: token_id(request.auth), PERSON: str(request.user.pk)}
    counters = []
    for limit in LIMITS:
        rate, holder_id = limit.rate(), holders[limit.holder]
        if limit.kind == kind and rate is not None and holder_id is not None:
            counters.append(Counter.of(limit, rate, holder_id, now))
    return counters


def request_cost(request: Request, view: object) -> int:
    """What the request counts: what its view's ``throttle_cost`` says, else one."""
    cost = getattr(view, "throttle_cost", None)
    return max(1, cost(request)) if callable(cost) else 1


# Counts a request against its counters, all or none. KEYS: the counters; ARGV[1]: the
# request's cost, then each counter's limit, then each counter's lifetime in seconds (its
# window's: a counter is never read after its window). Returns the positions (from 1) of
# the counters the cost would take past their limit, having counted nothing; or none,
# having added the cost to every counter.
COUNT_SCRIPT = """
local cost = tonumber(ARGV[1])
local n = #KEYS
local over = {}
for i = 1, n do
  if tonumber(redis.call('GET', KEYS[i]) or '0') + cost > tonumber(ARGV[1 + i]) then
    over[#over + 1] = i
  end
end
if #over == 0 then
  for i = 1, n do
    if redis.call('INCRBY', KEYS[i], cost) == cost then
      redis.call('EXPIRE', KEYS[i], ARGV[1 + n + i])
    end
  end
end
return over
"""


@cache
def _count_script(url: str, timeout: float) -> Script:
    # One try: a retry would hold the request for one more timeout. (from_url's default
    # today, written out because redis.Redis()'s own default retries ten times.)
    client = redis.Redis.from_url(
        url, socket_connect_timeout=timeout, socket_timeout=timeout, retry=Retry(NoBackoff(), 0)
    )
    return client.register_script(COUNT_SCRIPT)


def count_script() -> Script:
    """The counting script on the limits' Redis; one client per URL and timeout, so a
    changed setting takes effect at the next request."""
    return _count_script(settings.API_THROTTLE_REDIS_URL, settings.API_THROTTLE_TIMEOUT_SECONDS)


def counted(counters: list[Counter], cost: int) -> list[Counter]:
    """Counts ``cost`` against every counter if it fits under each; else counts nothing and
    gives those it would pass. Raises redis.RedisError when Redis fails or is late."""
    keys = [counter.key for counter in counters]
    limits = [counter.rate.count for counter in counters]
    lifetimes = [counter.rate.seconds for counter in counters]
    over = count_script()(keys=keys, args=[cost, *limits, *lifetimes])
    return [counters[int(position) - 1] for position in over]


class Breaker:
    """Whether this process rests from Redis after it failed, and what it logs.

    While it rests, requests go through uncounted without asking Redis: a Redis that does
    not answer then costs one timeout per rest, not one per request. Per process, as each
    process has its own connections.
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.reset()

    def reset(self) -> None:
        """Closed: the next request asks Redis (a new process's state)."""
        with self.lock:
            self.resting_until = 0.0
            self.failing = False  # since the last answer
            self.uncounted = 0  # requests let through since then

    def resting(self) -> bool:
        """Whether to let the request through uncounted without asking Redis."""
        with self.lock:
            if time.monotonic() >= self.resting_until:
                return False
            self.uncounted += 1
            return True

    def failed(self, error: redis.RedisError) -> None:
        with self.lock:
            rest = settings.API_THROTTLE_REST_SECONDS
            self.resting_until = time.monotonic() + rest
            self.uncounted += 1
            first, self.failing = not self.failing, True
        if first:
            log.warning(
                "API limits not counted: their Redis (API_THROTTLE_REDIS_URL) failed (%s); "
                "requests go through uncounted, and Redis is asked again every %g s",
                error,
                rest,
            )

    def answered(self) -> None:
        if not self.failing:  # no lock: the common case reads one attribute
            return
        with self.lock:
            uncounted, self.failing, self.uncounted = self.uncounted, False, 0
        log.warning(
            "API limits counted again; requests let through uncounted meanwhile: %d", uncounted
        )


BREAKER = Breaker()


class LimitReached(exceptions.Throttled):
    """429 naming the limit the request would pass, with ``Retry-After`` when waiting
    helps (DRF's exception handler writes ``wait`` as the header); portal.api's answers
    with ``body``."""

    def __init__(self, counter: Counter, *, cost: int, now: float):
        rate, limit = counter.rate, counter.limit
        said = RATE_SAID.get(rate.seconds)
        rate_said = gettext(said) % {"count": rate.count} if said else f"{rate.count} {rate.per}"
        if cost > rate.count:
            wait = None
            detail = gettext(limit.too_large) % {
                "cost": cost,
                "rate": rate_said,
                "count": rate.count,
            }
        else:
            wait = max(1, math.ceil(counter.ends_at - now))
            detail = gettext(limit.too_many) % {"rate": rate_said, "wait": wait}
        super().__init__(detail=detail)  # no wait: DRF would add its own sentence
        self.wait = wait
        self.body = {
            "detail": detail,
            "limit": counter.limit.name,
            "rate": rate.text,
            "retry_after": wait,
        }


class ApiThrottle(BaseThrottle):
    """The API's limits (the module's docstring), in REST_FRAMEWORK's
    DEFAULT_THROTTLE_CLASSES."""

    def allow_request(self, request, view) -> bool:
        if not request.user.is_authenticated:
            return True
        now = time.time()
        counters = request_counters(request, now)
        if not counters:
            return True
        cost = request_cost(request, view)
        too_large = [counter for counter in counters if cost > counter.rate.count]
        if too_large:
            raise LimitReached(too_large[0], cost=cost, now=now)
        if BREAKER.resting():
            return True
        try:
            over = counted(counters, cost)
        except redis.RedisError as error:
            BREAKER.failed(error)
            return True
        BREAKER.answered()
        if over:
            latest = max(over, key=lambda counter: counter.ends_at)
            raise LimitReached(latest, cost=cost, now=now)
        return True
