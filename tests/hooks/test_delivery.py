"""Deliveries by the real Celery worker to a real HTTP receiver: signed so that the README's
five lines verify them, retried with backoff when the receiver fails, the hook paused with
its reason and resumed, redirects not followed, and refused addresses never connected to."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.utils import timezone

from hooks.models import Attempt, Delivery, Webhook
from hooks.services import (
    deliveries_prune,
    deliveries_send,
    webhook_create,
    webhook_test,
)
from hooks.task_names import DELIVER_TASK
from jobs.engine.locks import WEBHOOK_PASS
from jobs.services import job_cancel
from portal.celery import app

from ..support.certificates import authority_and_server
from ..support.database import lease_held_elsewhere
from ..support.hooks import readme_verify
from ..support.jobs import running, submit
from ..support.polling import wait_for
from ..support.receiver import receiver


def beat() -> None:
    """What beat sends every WEBHOOK_BEAT_SECONDS: a delivery pass."""
    app.send_task(DELIVER_TASK)


@pytest.mark.django_db(transaction=True)
def test_it_delivers_each_state_change_signed(
    receivable, celery_worker, departments, manager, member, listener
):
    hook, secret = webhook_create(
        department=departments["algorithm"], url=listener.url(), actor=manager
    )

    job = running(member)  # queued, admitted, running
    beat()

    delivered = Delivery.objects.filter(hook=hook, status=Delivery.Status.DELIVERED)
    wait_for(lambda: delivered.count() == 3, what="three events delivered")
    verify = readme_verify()
    for received in listener.requests:
        assert verify(secret, received.headers, received.body)
        assert not verify("whsec_another", received.headers, received.body)
    events = [json.loads(r.body) for r in listener.requests]
    assert [e["type"] for e in events] == ["job.queued", "job.admitted", "job.running"]
    assert [r.headers["Caldera-Event"] for r in listener.requests] == [e["type"] for e in events]
    running_event = events[2]
    assert running_event["job"]["id"] == job.pk
    assert running_event["job"]["queue"] == "root/algorithm/video"
    assert running_event["job"]["state"] == "running"
    assert running_event["job"]["previous_state"] == "admitted"
    assert running_event["job"]["url"].endswith(f"/jobs/{job.pk}/")
    assert running_event["hook"] == {"id": hook.pk, "department": "algorithm"}
    assert listener.requests[2].headers["Caldera-Delivery"] == running_event["id"]
    assert not Delivery.objects.filter(hook=hook).exclude(status=Delivery.Status.DELIVERED)
    assert (
        list(Attempt.objects.filter(delivery__hook=hook).values_list("status_code", "ok"))
        == [(200, True)] * 3
    )


@pytest.mark.django_db(transaction=True)
def test_a_failing_receiver_is_retried_then_paused_then_resumed(
    receivable, celery_worker, departments, manager, member, listener, api
):
    receivable.WEBHOOK_PAUSE_AFTER_FAILURES = 3
    listener.status = 500
    hook, _secret = webhook_create(
        department=departments["algorithm"], url=listener.url(), actor=manager
    )
    webhook_test(hook=hook)  # its one attempt fails, and does not count towards pausing
    job = submit(member)
    job_cancel(user=member, job=job)  # queued, cancelled: two events
    beat()

    paused = wait_for(
        lambda: Webhook.objects.filter(pk=hook.pk, paused_at__isnull=False).first(),
        what="the hook paused",
    )
    assert (
        paused.pause_reason
        == "3 attempts in a row failed; the last: answered 500 Internal Server Error"
    )
    tries = Attempt.objects.filter(delivery__hook=hook, delivery__job=job)
    assert tries.count() == 3
    assert set(tries.values_list("status_code", flat=True)) == {500}
    first = Delivery.objects.get(hook=hook, event="job.queued")
    assert first.status == Delivery.Status.PENDING and first.attempts >= 2  # retried
    assert Delivery.objects.get(hook=hook, event="test").status == Delivery.Status.FAILED
    beat()  # a paused hook's deliveries wait
    sent_while_paused = len(listener.requests)

    listener.status = 204
    response = api(manager).patch(f"/api/v1/webhooks/{hook.pk}/", {"paused": False}, format="json")

    assert response.status_code == 200
    assert response.json()["paused"] is False
    wait_for(
        lambda: not Delivery.objects.filter(hook=hook, status="pending").exists(),
        what="the waiting deliveries sent",
    )
    assert len(listener.requests) == sent_while_paused + 2
    assert set(Delivery.objects.filter(hook=hook, job=job).values_list("status", flat=True)) == {
        Delivery.Status.DELIVERED
    }
    assert Webhook.objects.get(pk=hook.pk).failures == 0


@pytest.mark.django_db
def test_a_redirect_is_not_followed(receivable, departments, manager, listener):
    listener.status, listener.location = 302, listener.url("/elsewhere")
    hook, _ = webhook_create(department=departments["algorithm"], url=listener.url(), actor=manager)
    delivery = webhook_test(hook=hook)

    deliveries_send()

    assert [r.path for r in listener.requests] == ["/hook"]
    attempt = Attempt.objects.get(delivery=delivery)
    assert attempt.status_code == 302
    assert attempt.error == f"redirect to {listener.url('/elsewhere')} not followed"
    assert Delivery.objects.get(pk=delivery.pk).status == Delivery.Status.FAILED


@pytest.mark.django_db
def test_an_address_no_longer_allowed_is_refused_at_delivery(
    receivable, departments, manager, listener
):
    hook, _ = webhook_create(department=departments["algorithm"], url=listener.url(), actor=manager)
    receivable.WEBHOOK_ALLOWED_NETWORKS = []  # as if its name now resolved to loopback
    delivery = webhook_test(hook=hook)

    deliveries_send()

    assert listener.requests == []
    attempt = Attempt.objects.get(delivery=delivery)
    assert attempt.status_code is None
    assert attempt.error.startswith("refused: 127.0.0.1 is a private, loopback")


@pytest.fixture
def tls_listener(tmp_path, receivable):
    """An https receiver on 127.0.0.1 whose certificate names ``localhost``, signed by an
    authority the settings trust."""
    authority, certificate, key = authority_and_server(tmp_path, "localhost")
    receivable.WEBHOOK_CA_FILE = str(authority)
    with receiver(tls=(certificate, key)) as found:
        yield found


@pytest.mark.django_db
def test_https_goes_to_the_checked_address_and_verifies_the_name(
    tls_listener, departments, manager
):
    hook, secret = webhook_create(
        department=departments["algorithm"], url=tls_listener.url(host="localhost"), actor=manager
    )
    delivery = webhook_test(hook=hook)

    deliveries_send()

    assert Delivery.objects.get(pk=delivery.pk).status == Delivery.Status.DELIVERED
    (received,) = tls_listener.requests
    assert received.headers["Host"] == f"localhost:{tls_listener.port}"
    assert readme_verify()(secret, received.headers, received.body)


@pytest.mark.django_db
def test_a_certificate_for_another_name_is_refused(tls_listener, departments, manager):
    # The same server reached as 127.0.0.1: its certificate names localhost only.
    hook, _ = webhook_create(
        department=departments["algorithm"], url=tls_listener.url(), actor=manager
    )
    delivery = webhook_test(hook=hook)

    deliveries_send()

    assert tls_listener.requests == []
    attempt = Attempt.objects.get(delivery=delivery)
    assert attempt.error == (
        "TLS: CERTIFICATE_VERIFY_FAILED: IP address mismatch, certificate is not valid for "
        "'127.0.0.1'."
    )


@pytest.mark.django_db
def test_an_authority_not_trusted_is_refused(tls_listener, receivable, departments, manager):
    receivable.WEBHOOK_CA_FILE = ""
    hook, _ = webhook_create(
        department=departments["algorithm"], url=tls_listener.url(host="localhost"), actor=manager
    )
    delivery = webhook_test(hook=hook)

    deliveries_send()

    assert tls_listener.requests == []
    assert Attempt.objects.get(delivery=delivery).error.startswith("TLS: CERTIFICATE_VERIFY_FAILED")


@pytest.mark.django_db
def test_a_receiver_that_drips_its_answer_is_cut_off(receivable, departments, manager, listener):
    receivable.WEBHOOK_TIMEOUT_SECONDS = 0.2  # each read waits less; the whole attempt 0.6 s
    listener.drip = True
    hook, _ = webhook_create(department=departments["algorithm"], url=listener.url(), actor=manager)
    delivery = webhook_test(hook=hook)

    deliveries_send()

    attempt = Attempt.objects.get(delivery=delivery)
    assert attempt.error == "no whole answer within 0.6 s"
    assert attempt.status_code is None


@pytest.mark.django_db
def test_old_deliveries_done_with_are_pruned_and_waiting_ones_kept(
    receivable, departments, manager, listener
):
    hook, _ = webhook_create(department=departments["algorithm"], url=listener.url(), actor=manager)
    done, waiting = webhook_test(hook=hook), webhook_test(hook=hook)
    deliveries_send(limit=1)  # the first is delivered
    assert Delivery.objects.get(pk=done.pk).status == Delivery.Status.DELIVERED
    later = timezone.now() + timedelta(days=receivable.WEBHOOK_DELIVERIES_DAYS, seconds=1)

    deliveries_prune(now=later)

    assert list(Delivery.objects.values_list("pk", flat=True)) == [waiting.pk]
    assert not Attempt.objects.exists()


@pytest.mark.django_db
def test_an_answer_is_kept_short_and_as_text(receivable, departments, manager, listener):
    listener.status, listener.answer = 400, b"\x00\xffbad request " + b"x" * 2000
    hook, _ = webhook_create(department=departments["algorithm"], url=listener.url(), actor=manager)
    delivery = webhook_test(hook=hook)

    deliveries_send()

    attempt = Attempt.objects.get(delivery=delivery)
    assert attempt.error == "answered 400 Bad Request"
    assert attempt.answer.startswith("\ufffd\ufffdbad request xxx")
    assert len(attempt.answer) == receivable.WEBHOOK_ANSWER_CHARS


@pytest.mark.django_db
def test_one_pass_runs_at_a_time(receivable, departments, manager, listener):
    hook, _ = webhook_create(department=departments["algorithm"], url=listener.url(), actor=manager)
    webhook_test(hook=hook)
    with lease_held_elsewhere(WEBHOOK_PASS):  # another worker's pass
        assert deliveries_send() == 0
        assert listener.requests == []
    assert deliveries_send() == 1
    assert len(listener.requests) == 1
