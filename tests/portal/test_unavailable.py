"""A backing service that is down: 503 with Retry-After and the component, never a 500;
a broker that hangs: writes answer without waiting on it.

The database is taken away for one request by pointing the connection at a port nothing
listens on; the broker by making a Celery app on such a port the current one and pointing
REDIS_URL there, or at a socket that accepts and never answers (tests/support/outages.py).
Both are restored before the test ends, so no other test sees them.
"""

from __future__ import annotations

import copy
import json
import threading

import pytest
import redis
from django.test import RequestFactory
from django.utils import timezone

from jobs.models import Job, State
from portal.errors import RETRY_AFTER_SECONDS
from portal.middleware import ServiceUnavailable

from ..support.jobs import RAY_JOB
from ..support.outages import broker_down, broker_hung, connections_to, database_down
from ..support.polling import wait_for


def test_it_answers_an_api_client_503_json_with_retry_after_when_the_database_is_down(
    api, member, transactional_db
):
    client = api(member)
    with database_down():
        response = client.get("/api/v1/jobs/")

    assert response.status_code == 503
    assert response["Retry-After"] == str(RETRY_AFTER_SECONDS)
    assert response.json()["component"] == "database"
    assert "not answering" in response.json()["detail"]
    assert client.get("/api/v1/jobs/").status_code == 200  # and it is back


def test_it_shows_a_person_a_503_page_when_the_database_is_down(client, member, transactional_db):
    client.force_login(member)
    with database_down():
        response = client.get("/")

    assert response.status_code == 503
    assert response["Retry-After"] == str(RETRY_AFTER_SECONDS)
    assert response["Content-Type"].startswith("text/html")
    page = response.content.decode()
    assert "Temporarily unavailable" in page and "database" in page
    assert client.get("/").status_code == 200


@pytest.mark.parametrize(
    ("path", "error", "component"),
    [
        ("/api/v1/jobs/", redis.ConnectionError("Connection refused"), "broker"),
        ("/jobs/new/", redis.TimeoutError("Timeout reading from socket"), "broker"),
    ],
)
def test_a_broker_error_that_reaches_a_view_is_a_503_too(path, error, component):
    request = RequestFactory().get(path)
    middleware = ServiceUnavailable(lambda request: None)

    response = middleware.process_exception(request, error)

    assert response.status_code == 503
    assert response["Retry-After"] == str(RETRY_AFTER_SECONDS)
    if path.startswith("/api/"):
        assert json.loads(response.content)["component"] == component


def test_other_errors_are_left_to_be_a_500():
    request = RequestFactory().get("/api/v1/jobs/")
    middleware = ServiceUnavailable(lambda request: None)

    assert middleware.process_exception(request, ValueError("a bug")) is None


def test_it_cancels_a_running_job_while_the_broker_is_down(api, member, settings, transactional_db):
    """Committed for real (transactional_db), so the after-commit request runs in the
    request, as in production, where it used to turn the done cancel into a 500."""
    created = api(member).post("/api/v1/jobs/", copy.deepcopy(RAY_JOB), format="json")
    job_id = created.json()["id"]
    # Admitted: cancelling it must ask the cluster to remove its objects (a reconcile).
    Job.objects.filter(pk=job_id).update(state=State.ADMITTED, dequeued_at=timezone.now())

    with broker_down(settings):
        response = api(member).post(f"/api/v1/jobs/{job_id}/cancel/")

    assert response.status_code == 200, response.content
    assert response.json()["state"] == "stopping"
    job = Job.objects.get(pk=job_id)
    assert job.state == State.STOPPING  # cancelled once the sync sees its objects gone
    assert job.events.filter(reason="Cancelled").exists()


def test_a_submit_a_priority_change_and_a_cancel_leave_a_hung_broker_to_the_sender(
    api, member, settings, transactional_db
):
    """A stopped Redis accepts connections and never answers. Committed for real
    (transactional_db), so each request's after-commit requests for the worker run in the
    request, as in production, where each waited out the broker's timeout."""
    client = api(member)
    with broker_hung(settings) as port, connections_to(port) as connected:
        created = client.post("/api/v1/jobs/", copy.deepcopy(RAY_JOB), format="json")
        assert created.status_code == 201, created.content
        job_id = created.json()["id"]
        lowered = client.patch(f"/api/v1/jobs/{job_id}/", {"priority": -1}, format="json")
        assert lowered.status_code == 200, lowered.content
        # Admitted: cancelling it asks the cluster to remove its objects (a reconcile).
        Job.objects.filter(pk=job_id).update(state=State.ADMITTED, dequeued_at=timezone.now())
        cancelled = client.post(f"/api/v1/jobs/{job_id}/cancel/")
        assert cancelled.status_code == 200, cancelled.content

        # No request opened a connection to the broker: each handed its request for the
        # worker to the sender thread, which is the one that connects and waits.
        assert threading.get_ident() not in {ident for ident, _ in connected}
        wait_for(lambda: {name for _, name in connected} == {"caldera-broker-sender"})

    job = Job.objects.get(pk=job_id)
    assert job.state == State.STOPPING and job.priority == -1
    assert job.events.filter(reason="Cancelled").exists()
