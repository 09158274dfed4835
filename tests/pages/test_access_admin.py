"""Credentials in the admin site: staff make a token for anyone and see it once, find a
leaked one by pasting it, revoke; trust policies are checked as the API checks them."""

from __future__ import annotations

import pytest
from django.urls import reverse

from access.models import AccessToken, TrustPolicy
from access.services import Asked, token_create
from audit.models import AuditEntry

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client(client, staff):
    client.force_login(staff)
    return client


def test_staff_make_a_token_for_anyone_and_see_its_secret_once(admin_client, member):
    response = admin_client.post(
        reverse("admin:access_accesstoken_add"),
        {"user": member.pk, "name": "handed-over", "right": "submit", "all_departments": "on"},
    )

    assert response.status_code == 200 and "no-store" in response["Cache-Control"]
    token = AccessToken.objects.get(user=member)
    page = response.content.decode()
    assert f'value="{token.prefix}' in page
    listing = admin_client.get(reverse("admin:access_accesstoken_changelist")).content.decode()
    assert token.prefix in listing and page.split('value="')[1].split('"')[0] not in listing
    assert AuditEntry.objects.filter(object_type="access token", source="admin").exists()


def test_a_leaked_token_pasted_whole_is_found_and_revoked(admin_client, member, other_member):
    leaked, key = token_create(
        user=member, asked=Asked(name="ci", right="submit"), actor=member, source="page"
    )
    other, _ = token_create(
        user=member, asked=Asked(name="laptop", right="read"), actor=member, source="page"
    )
    token_create(
        user=other_member, asked=Asked(name="ci", right="submit"), actor=other_member, source="page"
    )
    changelist = reverse("admin:access_accesstoken_changelist")

    found = admin_client.get(changelist, {"q": key})
    admin_client.post(changelist, {"action": "revoke", "_selected_action": [leaked.pk], "q": key})

    assert [t.pk for t in found.context["cl"].result_list] == [leaked.pk]
    by_prefix = admin_client.get(changelist, {"q": leaked.prefix})
    assert [t.pk for t in by_prefix.context["cl"].result_list] == [leaked.pk]
    assert AccessToken.objects.get(pk=leaked.pk).revoked_at is not None
    assert AccessToken.objects.get(pk=other.pk).revoked_at is None  # the person's others


def test_a_trust_policy_without_conditions_is_refused_in_the_admin(admin_client, member):
    response = admin_client.post(
        reverse("admin:access_trustpolicy_add"),
        {
            "name": "everyone",
            "issuer": "https://token.actions.githubusercontent.com",
            "audience": "caldera",
            "conditions": "{}",
            "acts_as": member.pk,
            "right": "submit",
            "lifetime_seconds": "900",
            "active": "on",
        },
    )

    assert response.status_code == 200
    assert "without one, every pipeline the issuer signs for would be let in" in (
        response.content.decode()
    )
    assert not TrustPolicy.objects.exists()


def test_a_trust_policy_made_in_the_admin_is_audited(admin_client, member):
    response = admin_client.post(
        reverse("admin:access_trustpolicy_add"),
        {
            "name": "train-main",
            "issuer": "https://token.actions.githubusercontent.com",
            "audience": "caldera",
            "conditions": '{"repository": "org/repo"}',
            "acts_as": member.pk,
            "right": "submit",
            "lifetime_seconds": "900",
            "active": "on",
        },
    )

    assert response.status_code == 302
    assert TrustPolicy.objects.get().conditions == {"repository": "org/repo"}
    assert AuditEntry.objects.filter(object_type="trust policy", source="admin").count() == 1
