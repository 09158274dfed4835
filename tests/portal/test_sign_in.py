"""Sign-in through a real OpenID provider, over real HTTP.

The provider is django-oidc-provider in a process of its own (tests/support/identity_provider),
with its own database, users and groups. The browser's part of the flow (to the provider's
login page and back) is played with ``requests`` against the provider and Django's test
client against Caldera; Caldera's part (the code for tokens, the user info, the keys) goes
over HTTP to the provider as it would to Keycloak. test_browser.py runs it in Chromium.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

import pytest
import requests
from django.contrib.auth import get_user_model
from django.core.exceptions import ImproperlyConfigured

from audit.models import AuditEntry
from portal.sign_in import Grants, grants_for, group_map, sign_in_checks
from queues.models import Department, Membership

from ..support.identity import GROUP_MAP, Provider

pytestmark = pytest.mark.django_db


def sign_in(client, provider: Provider, username: str):
    """The browser's part: Caldera sends it to the provider, it signs in there, the provider
    sends it back to Caldera's callback. Returns Caldera's answer to the callback."""
    started = client.get("/oidc/authenticate/?next=/queues/")
    assert started.status_code == 302, started.content
    assert started["Location"].startswith(f"{provider.issuer}/authorize?")
    browser = requests.Session()
    login_page = browser.get(started["Location"], timeout=10)  # -> the provider's login page
    assert "Company sign-in" in login_page.text
    answer = browser.post(
        login_page.url,
        data={
            "username": username,
            "password": "idp-" + username,
            "next": re.search(r'name="next" value="([^"]*)"', login_page.text)[1].replace(
                "&amp;", "&"
            ),
            "csrfmiddlewaretoken": browser.cookies["idp_csrftoken"],
        },
        allow_redirects=False,
        timeout=10,
    )
    while not answer.headers["Location"].startswith("http://testserver/"):
        assert answer.status_code == 302, answer.text
        answer = browser.get(
            requests.compat.urljoin(answer.url, answer.headers["Location"]),
            allow_redirects=False,
            timeout=10,
        )
    callback = urlsplit(answer.headers["Location"])
    assert callback.path == "/oidc/callback/"
    return client.get(f"{callback.path}?{callback.query}")


def roles_of(username: str) -> dict[str, str]:
    return dict(
        Membership.objects.filter(user__username=username).values_list("department__name", "role")
    )


def test_a_first_sign_in_creates_the_person_in_the_departments_their_groups_map_to(
    client, provider
):
    provider.person(
        "dana",
        ["/caldera/algorithm", "/caldera/algorithm-leads", "/caldera/interns", "/other/team"],
        email="dana@example.com",
        first_name="Dana",
        last_name="Scully",
    )
    answer = sign_in(client, provider, "dana")

    assert answer.status_code == 302 and answer["Location"] == "/queues/"
    dana = get_user_model().objects.get(username="dana")
    assert (dana.email, dana.first_name, dana.last_name) == ("dana@example.com", "Dana", "Scully")
    assert not dana.has_usable_password() and not dana.is_staff
    assert roles_of("dana") == {"algorithm": "manager", "interns": "member"}  # the higher role
    assert client.get("/queues/").status_code == 200
    entries = AuditEntry.objects.filter(source=AuditEntry.Source.SIGN_IN).order_by("object_key")
    assert [(e.object_key, e.after, e.actor) for e in entries] == [
        ("algorithm/dana", {"role": "manager"}, dana),
        ("interns/dana", {"role": "member"}, dana),
    ]


def test_each_sign_in_keeps_the_memberships_in_step_with_the_groups(client, provider, member):
    # alice became a member of algorithm through the admin; she is also in infrastructure,
    # which the map does not govern, so the provider's groups do not touch it.
    Membership.objects.create(
        department=Department.objects.get(name="infrastructure"), user=member, role="manager"
    )
    provider.person("alice", ["/caldera/algorithm-leads", "/caldera/admins"])
    assert sign_in(client, provider, "alice").status_code == 302
    alice = get_user_model().objects.get(username="alice")
    assert roles_of("alice") == {"algorithm": "manager", "infrastructure": "manager"}
    assert alice.is_staff and alice.is_superuser
    assert alice.has_usable_password()  # her local account stays what it was

    client.logout()
    provider.person("alice", ["/caldera/interns"])  # the group removed at the provider
    assert sign_in(client, provider, "alice").status_code == 302
    alice.refresh_from_db()
    assert roles_of("alice") == {"interns": "member", "infrastructure": "manager"}
    assert not alice.is_staff and not alice.is_superuser
    changes = [
        (e.object_type, e.object_key, e.action, e.before, e.after)
        for e in AuditEntry.objects.filter(source=AuditEntry.Source.SIGN_IN).order_by("id")
    ]
    assert changes == [
        ("person", "alice", "updated", {"admin": False}, {"admin": True}),
        ("membership", "algorithm/alice", "updated", {"role": "member"}, {"role": "manager"}),
        ("person", "alice", "updated", {"admin": True}, {"admin": False}),
        ("membership", "algorithm/alice", "deleted", {"role": "manager"}, None),
        ("membership", "interns/alice", "created", None, {"role": "member"}),
    ]

    client.logout()
    assert sign_in(client, provider, "alice").status_code == 302  # nothing changed: no entry
    assert AuditEntry.objects.filter(source=AuditEntry.Source.SIGN_IN).count() == len(changes)


def test_an_id_token_signed_with_a_key_the_provider_does_not_publish_is_refused(client, provider):
    provider.person("eve", ["/caldera/algorithm"])
    provider.control(faults={"unpublished_key": True})

    answer = sign_in(client, provider, "eve")

    assert answer.status_code == 302 and answer["Location"] == "/accounts/login/"
    page = client.get("/accounts/login/").content.decode()
    assert (
        "Sign-in through Company SSO failed: the ID token was refused: its signature does "
        "not match the keys the identity provider publishes." in page
    )
    assert not get_user_model().objects.filter(username="eve").exists()
    assert client.get("/queues/").status_code == 302  # not signed in


def test_an_id_token_issued_for_another_application_is_refused(client, provider):
    provider.person("eve", ["/caldera/algorithm"])
    provider.control(faults={"audience": "payroll"})

    answer = sign_in(client, provider, "eve")

    assert answer["Location"] == "/accounts/login/"
    page = client.get("/accounts/login/").content.decode()
    assert (
        "the ID token was refused: it was issued for another application (audience "
        "&#x27;payroll&#x27;, this portal is &#x27;caldera&#x27;)" in page
    )
    assert not get_user_model().objects.filter(username="eve").exists()


def test_a_callback_with_a_forged_code_or_a_state_from_elsewhere_signs_nobody_in(client, provider):
    client.get("/oidc/authenticate/")
    state = next(iter(client.session["oidc_states"]))
    answer = client.get(f"/oidc/callback/?code=forged&state={state}")
    assert answer["Location"] == "/accounts/login/"
    assert (
        "the identity provider refused: &#x27;invalid_grant&#x27; (The provided authorization "
        "grant or refresh token is invalid" in client.get("/accounts/login/").content.decode()
    )
    answer = client.get("/oidc/callback/?code=forged&state=not-mine")
    assert answer["Location"] == "/accounts/login/"
    assert "started in another browser" in client.get("/accounts/login/").content.decode()
    answer = client.get("/oidc/callback/?error=access_denied&error_description=No+access")
    page = client.get("/accounts/login/").content.decode()
    assert "the identity provider answered &#x27;access_denied&#x27; (No access)" in page
    assert client.get("/queues/").status_code == 302


def test_local_accounts_can_be_turned_off(client, provider, member, settings):
    page = client.get("/accounts/login/").content.decode()
    assert "Sign in with Company SSO" in page and 'name="password"' in page
    password = {"username": "alice", "password": "pw-alice"}
    assert client.post("/accounts/login/", password)["Location"] == "/"
    assert client.get("/queues/").status_code == 200

    settings.LOCAL_LOGIN = False
    assert client.get("/queues/").status_code == 302  # the password session ended
    assert client.post("/accounts/login/", password).status_code == 200  # refused
    page = client.get("/accounts/login/").content.decode()
    assert "Sign in with Company SSO" in page and 'name="password"' not in page
    assert (
        client.get("/admin/login/?next=/admin/")["Location"] == "/accounts/login/?next=%2Fadmin%2F"
    )
    provider.person("alice", ["/caldera/algorithm"])
    assert sign_in(client, provider, "alice")["Location"] == "/queues/"
    assert client.get("/queues/").status_code == 200


def test_without_a_provider_the_sign_in_urls_are_not_there(client, db):
    assert client.get("/oidc/authenticate/").status_code == 404
    assert client.get("/oidc/callback/?code=x&state=y").status_code == 404
    assert "Sign in with" not in client.get("/accounts/login/").content.decode()


def test_groups_map_to_the_higher_role_and_admin():
    mapping = group_map(GROUP_MAP)
    assert grants_for(["/caldera/algorithm-leads", "/caldera/algorithm"], mapping) == Grants(
        roles={"algorithm": "manager"}, admin=False
    )
    assert grants_for(["/caldera/admins", "/elsewhere"], mapping) == Grants(roles={}, admin=True)
    assert grants_for([], mapping) == Grants(roles={}, admin=False)


@pytest.mark.parametrize(
    "raw, message",
    [
        ({"g": "algorithm:owner"}, "OIDC_GROUP_MAP: group 'g': 'algorithm:owner' is not"),
        ({"g": "algorithm"}, "OIDC_GROUP_MAP: group 'g': 'algorithm' is not"),
        ({"g": []}, "group 'g' must map to a target or a list of them"),
        ({"g": {"department": "algorithm"}}, "group 'g' must map to a target"),
    ],
)
def test_a_bad_group_map_is_named_at_start(raw, message, settings):
    with pytest.raises(ImproperlyConfigured, match=re.escape(message)):
        group_map(raw)
    settings.OIDC_GROUP_MAP = raw
    assert [error.id for error in sign_in_checks()] == ["caldera.E101"]


def test_a_sign_in_nobody_could_use_is_named_at_start(settings):
    settings.LOCAL_LOGIN = False
    settings.OIDC_ISSUER = ""
    assert [error.id for error in sign_in_checks()] == ["caldera.E103"]
    settings.OIDC_ISSUER = "https://sso.example.com/realms/company"
    settings.OIDC_RP_CLIENT_SECRET = ""
    assert [error.id for error in sign_in_checks()] == ["caldera.E102"]
