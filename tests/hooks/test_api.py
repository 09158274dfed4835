"""The webhooks API: a department's hooks are its managers' (and staff's); a member, another
department's manager and an outsider get 404; a token acts within its scope; the secret is
answered once; a job's owner names the job's own hooks."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from access.services import Asked, token_create
from hooks.models import Webhook
from queues.scope import Right

from ..support.jobs import submit
from ..support.personas import person

pytestmark = pytest.mark.django_db
HOOKS = "/api/v1/departments/algorithm/webhooks/"


@pytest.fixture
def made(receivable, api, manager, listener):
    response = api(manager).post(HOOKS, {"url": listener.url()}, format="json")
    assert response.status_code == 201, response.json()
    return response.json()


def test_it_lets_a_manager_make_a_hook_and_answers_its_secret_once(made, api, manager):
    assert made["secret"].startswith("whsec_")
    assert made["department"] == "algorithm"
    assert Webhook.objects.get(pk=made["id"]).secret == made["secret"]

    listed = api(manager).get(HOOKS)
    one = api(manager).get(f"/api/v1/webhooks/{made['id']}/")

    assert listed.status_code == one.status_code == 200
    assert [hook["id"] for hook in listed.json()] == [made["id"]]
    assert "secret" not in listed.json()[0] and "secret" not in one.json()


def test_it_refuses_a_member(receivable, api, member, listener):
    response = api(member).post(HOOKS, {"url": listener.url()}, format="json")
    assert response.status_code == 404
    assert not Webhook.objects.exists()


def test_another_departments_manager_and_an_outsider_see_nothing(made, api, departments, outsider):
    theirs = person(departments["infrastructure"], "ivan", "manager")
    for someone in (theirs, outsider):
        assert api(someone).get(HOOKS).status_code == 404
        assert api(someone).get(f"/api/v1/webhooks/{made['id']}/").status_code == 404
        assert api(someone).delete(f"/api/v1/webhooks/{made['id']}/").status_code == 404
    assert Webhook.objects.filter(pk=made["id"]).exists()


def test_staff_manage_any_departments_hooks(made, api, staff):
    assert api(staff).get(HOOKS).status_code == 200
    assert api(staff).delete(f"/api/v1/webhooks/{made['id']}/").status_code == 204
    assert not Webhook.objects.exists()


def test_a_read_token_reads_but_does_not_change(made, manager):
    _token, key = token_create(
        user=manager, asked=Asked(name="ro", right=Right.READ), actor=manager, source="api"
    )
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")

    assert client.get(f"/api/v1/webhooks/{made['id']}/deliveries/").status_code == 200
    refused = client.post(f"/api/v1/webhooks/{made['id']}/test/")
    assert refused.status_code == 403
    assert refused.json()["detail"] == "this token's scope is read; this needs manage"
    assert client.post(HOOKS, {"url": "https://example.com/"}, format="json").status_code == 403


def test_it_refuses_a_private_address_naming_url(settings, api, manager):
    settings.WEBHOOK_ALLOWED_NETWORKS = []
    response = api(manager).post(HOOKS, {"url": "https://169.254.169.254/"}, format="json")
    assert response.status_code == 400
    assert list(response.json()) == ["url"]
    assert "169.254.169.254 is a private" in response.json()["url"][0]


def test_it_refuses_http_where_the_settings_say_https_only(settings, api, manager):
    settings.WEBHOOK_ALLOW_HTTP = False
    response = api(manager).post(HOOKS, {"url": "http://example.com/"}, format="json")
    assert response.status_code == 400
    assert response.json() == {"url": ["only https URLs are allowed"]}


def test_a_department_holds_at_most_its_limit(receivable, api, manager, listener):
    receivable.WEBHOOKS_PER_DEPARTMENT = 1
    assert api(manager).post(HOOKS, {"url": listener.url()}, format="json").status_code == 201
    second = api(manager).post(HOOKS, {"url": listener.url()}, format="json")
    assert second.status_code == 400
    assert second.json() == {"url": ["department algorithm has 1 webhooks, the most it may have"]}


def test_pause_resume_test_and_deliveries(made, api, manager):
    hook = f"/api/v1/webhooks/{made['id']}/"
    paused = api(manager).patch(hook, {"paused": True}, format="json")
    assert paused.status_code == 200
    assert paused.json()["paused"] is True
    assert paused.json()["pause_reason"] == "paused by bob"

    sent = api(manager).post(hook + "test/")
    assert sent.status_code == 202
    assert sent.json()["event"] == "test"
    listed = api(manager).get(hook + "deliveries/")
    assert [d["id"] for d in listed.json()] == [sent.json()["id"]]

    resumed = api(manager).patch(hook, {"paused": False}, format="json")
    assert resumed.json()["paused"] is False
    assert resumed.json()["pause_reason"] == ""


def test_a_jobs_owner_names_its_hooks_and_others_cannot(
    receivable, api, member, other_member, manager, listener
):
    job = submit(member)
    url = f"/api/v1/jobs/{job.pk}/webhooks/"

    mine = api(member).post(url, {"url": listener.url()}, format="json")
    assert mine.status_code == 201
    assert mine.json()["job"] == job.pk and mine.json()["secret"].startswith("whsec_")
    assert api(other_member).post(url, {"url": listener.url()}, format="json").status_code == 404
    assert api(other_member).get(f"/api/v1/webhooks/{mine.json()['id']}/").status_code == 404
    assert api(manager).get(url).status_code == 200  # who manages its queue
