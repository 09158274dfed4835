"""A person's own page (their tokens) and a department's page for its managers (members,
service identities and their tokens)."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from rest_framework.test import APIClient

from access.identities import service_identity_create
from access.models import AccessToken, ServiceIdentity
from jobs.models import Job
from portal.sign_in import LocalAccounts

from ..support.jobs import RAY_JOB
from ..support.pages import login

pytestmark = pytest.mark.django_db


def bearer(key: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return client


def created_key(page: str) -> str:
    start = page.index('id="made-secret"')
    value = page.index('value="', start) + len('value="')
    return page[value : page.index('"', value)]


def test_a_person_makes_a_read_token_for_one_department_and_sees_it_once(client, member):
    login(client, member)

    response = client.post(
        "/account/",
        {
            "name": "dashboards",
            "right": "read",
            "scope": "chosen",
            "departments": ["algorithm"],
            "expires": "30",
        },
    )

    assert response.status_code == 200
    assert response["Cache-Control"] == "no-store"
    key = created_key(response.content.decode())
    token = AccessToken.objects.get(user=member)
    assert key.startswith(token.prefix) and token.right == "read"
    assert [d.name for d in token.departments.all()] == ["algorithm"]
    assert bearer(key).get("/api/v1/jobs/").status_code == 200
    again = client.get("/account/").content.decode()
    assert key not in again and token.prefix in again


def test_a_bad_token_form_names_the_field(client, member):
    login(client, member)

    response = client.post(
        "/account/", {"name": "", "right": "admin", "scope": "all", "expires": "30"}
    )

    assert response.status_code == 400
    page = response.content.decode()
    assert "This field is required." in page and "Select a valid choice." in page
    assert not AccessToken.objects.exists()


def test_a_person_revokes_their_token_on_their_page_but_not_anothers(client, member, other_member):
    login(client, other_member)
    created_key(client.post("/account/", {"name": "x", "right": "read", "scope": "all",
                                          "expires": "30"}).content.decode())  # fmt: skip
    theirs = AccessToken.objects.get()
    login(client, member)

    assert client.post(f"/account/tokens/{theirs.pk}/revoke/").status_code == 404
    theirs.refresh_from_db()
    assert theirs.revoked_at is None
    login(client, other_member)
    assert client.post(f"/account/tokens/{theirs.pk}/revoke/").status_code == 302
    theirs.refresh_from_db()
    assert theirs.revoked_at is not None


def test_the_department_page_is_for_its_managers(client, manager, member):
    login(client, member)
    assert client.get("/departments/algorithm/").status_code == 404
    login(client, manager)

    page = client.get("/departments/algorithm/").content.decode()

    assert "alice" in page and "bob" in page and "Service identities" in page


def test_a_manager_gives_the_departments_pipelines_an_identity_that_submits(client, manager):
    login(client, manager)
    made = client.post(
        "/departments/algorithm/service-identities/",
        {"name": "nightly", "description": "the nightly sweep"},
    )
    assert made.status_code == 302
    identity = ServiceIdentity.objects.get()
    assert identity.user.username == "svc-algorithm-nightly"
    assert not identity.user.has_usable_password()

    manage = client.post(
        "/departments/algorithm/service-identities/svc-algorithm-nightly/tokens/",
        {"name": "ci", "right": "manage", "expires": "30"},
    )
    response = client.post(
        "/departments/algorithm/service-identities/svc-algorithm-nightly/tokens/",
        {"name": "ci", "right": "submit", "expires": "30"},
    )

    assert manage.status_code == 400  # a service identity's tokens submit at most
    key = created_key(response.content.decode())
    submitted = bearer(key).post("/api/v1/jobs/", RAY_JOB, format="json")
    assert submitted.status_code == 201
    job = Job.objects.get()
    assert job.owner == identity.user
    page = client.get(f"/jobs/{job.pk}/").content.decode()
    assert "pipeline svc-algorithm-nightly" in page
    assert AccessToken.objects.get(user=identity.user).prefix in page


def test_a_service_identity_never_signs_in_with_a_password(manager):
    identity = service_identity_create(
        department=manager.departments.get(), name="sweep", actor=manager, source="page"
    )
    user = get_user_model().objects.get(pk=identity.user_id)
    user.set_password("given-by-someone")
    user.save()

    assert (
        LocalAccounts().authenticate(None, username=user.username, password="given-by-someone")
        is None
    )
