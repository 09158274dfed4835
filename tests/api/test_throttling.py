"""The API's limits per token and per person (portal/throttling.py): the 429 naming the
limit and its Retry-After, what counts against which limit, and a Redis that fails or does
not answer letting requests through without holding them.

Rates are set per day, so that no window ends during a test; the counts are kept in a
Redis database of this test process's own, emptied before each test.
"""

from __future__ import annotations

import copy
import logging
import math
import time
from urllib.parse import urlsplit, urlunsplit

import pytest
import redis
from rest_framework.test import APIClient

from bench.services import bench_environment
from jobs.models import Job
from portal.throttling import BREAKER, KEY_PREFIX, LIMITS

from ..support.jobs import RAY_JOB
from ..support.outages import closed_port, connections_to, silent_port
from ..support.personas import client_for

pytestmark = pytest.mark.django_db
JOBS = "/api/v1/jobs/"
BATCH = "/api/v1/jobs/batch/"
DAY = 86_400
HIGH = "1000/day"


@pytest.fixture(autouse=True)
def limits(settings, worker_id):
    """Every limit high; a test sets the ones it is about low. The counts go to a Redis
    database of this process's own (1 for the first xdist worker, 2 for the next, ...),
    emptied first, so that neither another process's tests nor the trigger marks the
    other tests clear share them; and the process's breaker is closed."""
    number = 0 if worker_id == "master" else int(worker_id.removeprefix("gw"))
    url = urlunsplit(urlsplit(settings.REDIS_URL)._replace(path=f"/{1 + number}"))
    settings.API_THROTTLE_REDIS_URL = url
    for limit in LIMITS:
        setattr(settings, limit.setting, HIGH)
    counts = redis.Redis.from_url(url)
    counts.flushdb()
    BREAKER.reset()
    yield counts
    BREAKER.reset()


def session_for(user) -> APIClient:
    """A second credential of the person: the browser's session."""
    client = APIClient()
    client.force_login(user)
    return client


def sweep(count: int) -> dict:
    return {"jobs": [{**copy.deepcopy(RAY_JOB), "name": f"sweep-{i}"} for i in range(count)]}


def test_past_a_limit_the_answer_is_429_naming_it_with_retry_after(settings, member):
    settings.API_READ_RATE_PER_TOKEN = "2/day"
    client = client_for(member)
    assert [client.get(JOBS).status_code for _ in range(2)] == [200, 200]

    before = time.time()
    response = client.get(JOBS)
    after = time.time()

    assert response.status_code == 429
    # The seconds until the day's window ends, as the request saw the clock.
    retry_after = int(response["Retry-After"])
    assert math.ceil(DAY - after % DAY) <= retry_after <= math.ceil(DAY - before % DAY)
    assert response.json() == {
        "detail": f"Too many reads: this token's limit is 2 a day; retry in {retry_after} s",
        "limit": "read per token",
        "rate": "2/day",
        "retry_after": retry_after,
    }


def test_a_persons_tokens_and_sessions_share_the_persons_limit(settings, member, other_member):
    settings.API_READ_RATE_PER_TOKEN = "2/day"
    settings.API_READ_RATE_PER_PERSON = "3/day"
    token, session = client_for(member), session_for(member)

    assert [token.get(JOBS).status_code for _ in range(3)] == [200, 200, 429]
    # The token's third read was refused by its own limit and not counted against the
    # person's either: the session has one read left of the person's three.
    assert [session.get(JOBS).status_code for _ in range(2)] == [200, 429]
    refused = session.get(JOBS).json()
    assert refused["limit"] == "read per person"
    assert refused["detail"].startswith(
        "Too many reads: your limit (all your tokens and sessions together) is 3 a day"
    )
    # Another person's token has limits of its own.
    assert client_for(other_member).get(JOBS).status_code == 200


def test_two_tokens_of_a_person_have_limits_of_their_own_within_the_persons(settings, member):
    settings.API_READ_RATE_PER_TOKEN = "2/day"
    settings.API_READ_RATE_PER_PERSON = "3/day"
    first, second = client_for(member), client_for(member)

    assert [first.get(JOBS).status_code for _ in range(2)] == [200, 200]
    assert [second.get(JOBS).status_code for _ in range(2)] == [200, 429]
    assert second.get(JOBS).json()["limit"] == "read per person"


def test_a_session_is_counted_per_person_only(settings, member):
    settings.API_READ_RATE_PER_TOKEN = "1/day"
    session = session_for(member)

    assert [session.get(JOBS).status_code for _ in range(3)] == [200, 200, 200]


def test_a_batch_counts_each_of_its_jobs(settings, api, member):
    settings.API_SUBMIT_RATE_PER_TOKEN = "5/day"
    client = api(member)

    assert client.post(BATCH, sweep(3), format="json").status_code == 201
    refused = client.post(BATCH, sweep(3), format="json")
    assert refused.status_code == 429
    assert refused.json()["limit"] == "submit per token"
    assert refused.json()["detail"].startswith(
        "Too many submissions and changes (a batch counts each of its jobs): "
        "this token's limit is 5 a day; retry in "
    )
    # The refused batch used none of the limit: two jobs more fit, then none.
    assert client.post(BATCH, sweep(2), format="json").status_code == 201
    assert client.post(JOBS, RAY_JOB, format="json").status_code == 429
    assert Job.objects.count() == 5


def test_a_batchs_dry_run_counts_as_the_batch_would(settings, api, member):
    settings.API_SUBMIT_RATE_PER_TOKEN = "5/day"
    client = api(member)

    assert client.post(BATCH + "dry-run/", sweep(3), format="json").status_code == 200
    assert client.post(BATCH, sweep(3), format="json").status_code == 429
    assert client.post(BATCH, sweep(2), format="json").status_code == 201


def test_a_batch_larger_than_the_whole_limit_is_told_that_waiting_will_not_help(
    settings, api, member
):
    settings.API_SUBMIT_RATE_PER_PERSON = "5/day"

    response = api(member).post(BATCH, sweep(6), format="json")

    assert response.status_code == 429
    assert "Retry-After" not in response
    assert response.json() == {
        "detail": "This request counts 6 (a batch counts each of its jobs), more than your "
        "limit (all your tokens and sessions together) of 5 a day: send at most 5 at once",
        "limit": "submit per person",
        "rate": "5/day",
        "retry_after": None,
    }
    assert api(member).post(BATCH, sweep(5), format="json").status_code == 201


def test_reads_and_submissions_are_counted_apart(settings, api, member):
    settings.API_READ_RATE_PER_TOKEN = "1/day"
    settings.API_SUBMIT_RATE_PER_TOKEN = "1/day"
    client = api(member)

    assert client.get(JOBS).status_code == 200
    assert client.post(JOBS, RAY_JOB, format="json").status_code == 201
    assert client.get(JOBS).json()["limit"] == "read per token"
    assert client.post(JOBS, RAY_JOB, format="json").json()["limit"] == "submit per token"


def test_a_limit_turned_off_counts_nothing(settings, api, member, limits):
    for limit in LIMITS:
        setattr(settings, limit.setting, "off")

    assert api(member).get(JOBS).status_code == 200
    assert api(member).post(JOBS, RAY_JOB, format="json").status_code == 201
    assert list(limits.scan_iter(f"{KEY_PREFIX}:*")) == []


@pytest.fixture(params=["hung", "refusing"])
def redis_away(request, settings):
    """The limits' Redis accepting connections and never answering, or refusing them;
    yields its port."""
    if request.param == "hung":
        with silent_port() as port:
            settings.API_THROTTLE_REDIS_URL = f"redis://127.0.0.1:{port}/0"
            yield port
    else:
        port = closed_port()
        settings.API_THROTTLE_REDIS_URL = f"redis://127.0.0.1:{port}/0"
        yield port


def test_without_redis_requests_go_through_and_redis_is_not_asked_again_for_a_while(
    settings, api, member, redis_away, caplog
):
    settings.API_READ_RATE_PER_TOKEN = "1/day"
    settings.API_THROTTLE_REST_SECONDS = 3600  # longer than the test
    client = api(member)

    with connections_to(redis_away) as connected, caplog.at_level(logging.WARNING):
        statuses = [client.get(JOBS).status_code for _ in range(4)]

    assert statuses == [200] * 4  # past the limit, uncounted
    assert len(connected) == 1  # the first asked; the others found the breaker open
    warnings = [r for r in caplog.records if r.name == "portal.throttling"]
    assert len(warnings) == 1
    assert warnings[0].getMessage().startswith("API limits not counted: their Redis")


def test_without_the_rest_every_request_asks_redis_once(settings, api, member, redis_away):
    settings.API_THROTTLE_REST_SECONDS = 0
    client = api(member)

    with connections_to(redis_away) as connected:
        statuses = [client.get(JOBS).status_code for _ in range(3)]

    assert statuses == [200] * 3
    assert len(connected) == 3  # one try each: no retry of redis-py's


def test_once_redis_answers_again_requests_are_counted_again(settings, api, member, limits, caplog):
    settings.API_READ_RATE_PER_TOKEN = "1/day"
    settings.API_THROTTLE_REST_SECONDS = 0
    url = settings.API_THROTTLE_REDIS_URL
    client = api(member)
    settings.API_THROTTLE_REDIS_URL = f"redis://127.0.0.1:{closed_port()}/0"
    assert [client.get(JOBS).status_code for _ in range(2)] == [200, 200]

    settings.API_THROTTLE_REDIS_URL = url
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        assert [client.get(JOBS).status_code for _ in range(2)] == [200, 429]

    assert [r.getMessage() for r in caplog.records if r.name == "portal.throttling"] == [
        "API limits counted again; requests let through uncounted meanwhile: 2"
    ]


def test_the_benchmarks_run_with_every_limit_off():
    env = bench_environment(
        {"DATABASE_URL": "postgres://localhost/caldera", "REDIS_URL": "redis://localhost/0"}
    )

    assert {env[limit.setting] for limit in LIMITS} == {"off"}
