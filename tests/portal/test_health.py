"""The probes: /healthz (the web process and database answer; the broker and workers are
reported), /livez (the process answers) and /readyz (the database and the broker answer),
each dependency within PROBE_TIMEOUT_SECONDS. The arbiter's /livez on the probe port is in
tests/portal/test_web_server.py."""

import pytest
from celery.contrib.testing.worker import start_worker
from django.db import connection
from django.test.utils import CaptureQueriesContext

from jobs.engine.triggers import redis_client
from portal.celery import app as celery_app
from portal.health import probe_redis
from portal.heartbeat import WORKERS_KEY, beat, live_workers

from ..support.outages import broker_down, broker_hung, database_down
from ..support.polling import wait_for

pytestmark = pytest.mark.django_db


def test_it_answers_200_with_the_state_of_each_part(client):
    response = client.get("/healthz")
    assert response.status_code == 200
    body = response.json()
    assert body["web"] == "ok" and body["database"] == "ok" and body["broker"] == "ok"
    assert isinstance(body["workers"], int)


def test_it_reports_a_broker_that_does_not_answer(client, settings):
    from jobs.engine.triggers import process_redis_client

    settings.REDIS_URL = "redis://127.0.0.1:1/0"
    process_redis_client.cache_clear()
    try:
        body = client.get("/healthz").json()
    finally:
        process_redis_client.cache_clear()
    assert body["broker"] == "down" and body["workers"] == 0


def test_it_counts_a_running_worker_from_its_heartbeat(client, celery_worker):
    assert wait_for(lambda: client.get("/healthz").json()["workers"] == 1)
    assert celery_worker.hostname in {
        name.decode() for name in redis_client().zrange(WORKERS_KEY, 0, -1)
    }


def test_a_stopped_worker_is_no_longer_counted(client, transactional_db):
    with start_worker(celery_app, pool="solo", perform_ping_check=False, shutdown_timeout=10):
        assert wait_for(lambda: live_workers() == 1)
    # Its heartbeat goes as it stops, which a loaded machine may finish after the block.
    assert wait_for(lambda: client.get("/healthz").json()["workers"] == 0)


def test_a_worker_that_stopped_beating_ages_out(settings):
    """A worker killed with SIGKILL never removes itself: its last beat expires."""
    settings.WORKER_HEARTBEAT_SECONDS = 0.3  # live for one second after its last beat
    beat("killed-worker@host")
    assert live_workers() == 1
    assert wait_for(lambda: live_workers() == 0, timeout=10)


def test_it_reads_the_database_once_and_asks_no_worker(client):
    beat("some-worker@host")
    with CaptureQueriesContext(connection) as queries:
        body = client.get("/healthz").json()
    assert body["workers"] == 1
    statements = [q["sql"] for q in queries.captured_queries if "SAVEPOINT" not in q["sql"]]
    # The statement timeout, SELECT 1 and the cluster's last answer.
    assert len(statements) == 3 and statements[1] == "SELECT 1"


# -- the probes ------------------------------------------------------------------------


def test_livez_answers_while_the_process_does_reading_nothing(client, django_assert_num_queries):
    with django_assert_num_queries(0):
        assert client.get("/livez").json() == {"web": "ok"}
    with database_down():
        assert client.get("/livez").status_code == 200  # an outage restarts no web pod


def test_readyz_is_ready_when_the_database_and_the_broker_answer(client):
    response = client.get("/readyz")
    assert response.status_code == 200
    assert response.json() == {"database": "ok", "broker": "ok"}


def test_readyz_names_the_broker_that_does_not_answer(client, settings):
    with broker_down(settings):
        response = client.get("/readyz")
    assert response.status_code == 503
    assert response.json() == {"database": "ok", "broker": "down"}


def test_readyz_names_the_database_that_does_not_answer(client, transactional_db):
    with database_down():
        response = client.get("/readyz")
    assert response.status_code == 503
    assert response.json()["database"] == "down"


@pytest.mark.parametrize("path", ["/readyz", "/healthz"])
def test_a_hung_broker_is_reported_down_after_the_probe_timeout(path, client, settings):
    """A stopped Redis accepts the connection and never answers: the probe's client gives
    up after PROBE_TIMEOUT_SECONDS, not after the broker's own timeout."""
    settings.PROBE_TIMEOUT_SECONDS = 0.2
    with broker_hung(settings):
        response = client.get(path)
        used = probe_redis().connection_pool.connection_kwargs
    assert response.json()["broker"] == "down" and response.json()["database"] == "ok"
    assert response.status_code == (503 if path == "/readyz" else 200)
    assert used["socket_timeout"] == used["socket_connect_timeout"] == 0.2


def test_the_database_check_runs_under_the_probe_timeout(client, settings):
    settings.PROBE_TIMEOUT_SECONDS = 0.25
    with CaptureQueriesContext(connection) as queries:
        assert client.get("/readyz").status_code == 200
    [limit] = [q["sql"] for q in queries.captured_queries if "statement_timeout" in q["sql"]]
    assert "'250'" in limit and "true" in limit  # 250 ms, for this transaction only
