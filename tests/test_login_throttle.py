"""Login throttling (django-axes): repeated failures lock a username or an address out.

AXES_FAILURE_LIMIT failures within AXES_COOLOFF_TIME refuse the next login, even with the
right password, on the login page and the admin's, with a message that says when to try
again. Cool-off is passed by moving the recorded attempts back in time, not by waiting.
"""

from __future__ import annotations

import pytest
from axes.models import AccessAttempt
from django.conf import settings
from django.contrib.auth import SESSION_KEY
from django.db.models import F
from django.test import Client
from django.urls import reverse

pytestmark = pytest.mark.django_db

LOGIN = reverse("login")
ADMIN_LOGIN = "/admin/login/"


@pytest.fixture(autouse=True)
def quick_password_hashing(settings):
    """Each login checks a password: a fast hasher keeps a hundred of them quick. Autouse,
    so it is set before the personas' passwords are hashed."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


def log_in(client: Client, username: str, password: str, url: str = LOGIN):
    return client.post(url, {"username": username, "password": password})


def logged_in(client: Client) -> bool:
    return SESSION_KEY in client.session


def pass_the_cool_off() -> None:
    AccessAttempt.objects.update(
        attempt_time=F("attempt_time") - settings.AXES_COOLOFF_TIME - settings.AXES_COOLOFF_TIME
    )


def test_it_refuses_the_right_password_after_thirty_wrong_ones_and_says_when(client, member):
    for _ in range(30):
        assert log_in(client, "alice", "wrong").status_code in (200, 429)

    response = log_in(client, "alice", "pw-alice")

    assert response.status_code == 429
    assert not logged_in(client)
    page = response.content.decode()
    assert "Too many failed logins" in page
    minutes = int(settings.AXES_COOLOFF_TIME.total_seconds() // 60)
    assert f"Try again in {minutes} minutes" in page
    assert response["Retry-After"] == str(int(settings.AXES_COOLOFF_TIME.total_seconds()))


def test_it_lets_the_person_in_after_the_cool_off(client, member):
    for _ in range(settings.AXES_FAILURE_LIMIT):
        log_in(client, "alice", "wrong")
    assert log_in(client, "alice", "pw-alice").status_code == 429

    pass_the_cool_off()
    response = log_in(client, "alice", "pw-alice")

    assert response.status_code == 302 and logged_in(client)


def test_failures_below_the_limit_still_let_the_right_password_in(client, member):
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        assert log_in(client, "alice", "wrong").status_code == 200

    assert log_in(client, "alice", "pw-alice").status_code == 302
    assert logged_in(client)


def test_a_success_clears_the_count(client, member):
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        log_in(client, "alice", "wrong")
    assert log_in(client, "alice", "pw-alice").status_code == 302
    client.logout()
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        log_in(client, "alice", "wrong")

    assert log_in(client, "alice", "pw-alice").status_code == 302


def test_the_admin_login_is_throttled_too(client, staff):
    for _ in range(settings.AXES_FAILURE_LIMIT):
        log_in(client, "root-admin", "wrong", ADMIN_LOGIN)

    response = log_in(client, "root-admin", "pw-root-admin", ADMIN_LOGIN)

    assert response.status_code == 429
    assert "Too many failed logins" in response.content.decode()
    assert not logged_in(client)


def test_one_address_guessing_many_usernames_is_locked_out(client, member, manager):
    for index in range(settings.AXES_FAILURE_LIMIT):
        log_in(client, f"guess-{index}", "wrong")

    assert log_in(client, "bob", "pw-bob").status_code == 429
    # Another address is not held back by this one's failures.
    other = Client(REMOTE_ADDR="10.0.0.7")
    assert log_in(other, "bob", "pw-bob").status_code == 302


def test_a_script_is_told_in_json(client, member):
    for _ in range(settings.AXES_FAILURE_LIMIT):
        log_in(client, "alice", "wrong")

    response = client.post(
        LOGIN, {"username": "alice", "password": "pw-alice"}, headers={"Accept": "application/json"}
    )

    assert response.status_code == 429
    assert "Too many failed logins" in response.json()["detail"]


def test_token_calls_to_the_api_are_not_logins(client, api, member):
    for _ in range(30):
        response = client.get("/api/v1/jobs/", headers={"Authorization": "Token " + "0" * 40})
        assert response.status_code == 401

    assert api(member).get("/api/v1/jobs/").status_code == 200
    assert not AccessAttempt.objects.exists()
    assert log_in(client, "alice", "pw-alice").status_code == 302
