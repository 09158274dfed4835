"""GET /healthz: the web process and database answer; the broker and workers are reported."""

import pytest

pytestmark = pytest.mark.django_db


def test_it_answers_200_with_the_state_of_each_part(client):
    response = client.get("/healthz")
    assert response.status_code == 200
    body = response.json()
    assert body["web"] == "ok" and body["database"] == "ok" and body["broker"] == "ok"
    assert isinstance(body["workers"], int)


def test_it_reports_a_broker_that_does_not_answer(client, settings):
    from jobs.triggers import _redis

    settings.REDIS_URL = "redis://127.0.0.1:1/0"
    _redis.cache_clear()
    try:
        body = client.get("/healthz").json()
    finally:
        _redis.cache_clear()
    assert body["broker"] == "down" and body["workers"] == 0
