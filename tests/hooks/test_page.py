"""The webhooks page of a department: its managers and staff add a hook and see its secret
this once, send a test event, resume a paused hook; a member gets 404."""

from __future__ import annotations

import pytest
from django.test import Client

from hooks.models import Delivery, Webhook
from hooks.services import webhook_create, webhook_pause

pytestmark = pytest.mark.django_db
PAGE = "/departments/algorithm/webhooks/"


def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_it_shows_the_secret_once(receivable, manager, listener):
    client = signed_in(manager)

    made = client.post(PAGE, {"url": listener.url(), "description": "CI"})

    assert made.status_code == 200
    hook = Webhook.objects.get()
    assert hook.secret in made.content.decode()
    assert made["Cache-Control"] == "no-store"
    again = client.get(PAGE)
    assert again.status_code == 200
    assert listener.url() in again.content.decode()
    assert hook.secret not in again.content.decode()


def test_it_names_the_url_it_refuses(settings, manager):
    settings.WEBHOOK_ALLOWED_NETWORKS = []
    response = signed_in(manager).post(PAGE, {"url": "https://10.0.0.1/"})
    assert response.status_code == 400
    assert "10.0.0.1 is a private, loopback" in response.content.decode()
    assert not Webhook.objects.exists()


def test_a_member_gets_404(member):
    assert signed_in(member).get(PAGE).status_code == 404


def test_the_department_page_links_to_it(manager):
    page = signed_in(manager).get("/departments/algorithm/")
    assert PAGE in page.content.decode()


def test_test_event_and_resume_buttons(receivable, departments, manager, listener):
    hook, _ = webhook_create(department=departments["algorithm"], url=listener.url(), actor=manager)
    webhook_pause(hook=hook, reason="20 attempts in a row failed; the last: answered 500")
    client = signed_in(manager)
    page = client.get(PAGE).content.decode()
    assert "Paused" in page and "answered 500" in page and "Resume" in page

    sent = client.post(f"{PAGE}{hook.pk}/test/")
    resumed = client.post(f"{PAGE}{hook.pk}/resume/")

    assert sent.status_code == resumed.status_code == 302
    assert Delivery.objects.get(hook=hook).event == "test"
    assert Webhook.objects.get(pk=hook.pk).paused_at is None
    assert "Send a test event" in client.get(PAGE).content.decode()
