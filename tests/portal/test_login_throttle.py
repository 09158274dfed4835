"""Login throttling (django-axes): failed logins hold back the guesser, not the person.

AXES_FAILURE_LIMIT failures for one username from one address refuse that pair, even with
the right password, on the login page and the admin's, with a message that says when to
try again; the person logs in from elsewhere. LOGIN_USERNAME_FAILURE_LIMIT failures from
all addresses together refuse the username everywhere but in a browser holding the
person's device cookie. Refused logins do not prolong a lock; staff lift one in the admin.
Cool-off is passed by moving the recorded attempts back in time, not by waiting.
"""

from __future__ import annotations

import math
import time
from datetime import UTC, datetime, timedelta

import pytest
from axes.models import AccessAttempt
from django.conf import settings
from django.contrib.auth import SESSION_KEY
from django.core import signing
from django.db.models import F
from django.test import Client
from django.urls import reverse

from portal.device_cookie import COOKIE_NAME, MAX_AGE, SALT
from portal.login_throttle import lock_lifts

pytestmark = pytest.mark.django_db

LOGIN = reverse("login")
ADMIN_LOGIN = "/admin/login/"


@pytest.fixture(autouse=True)
def quick_password_hashing(settings):
    """Each login checks a password: a fast hasher keeps a hundred of them quick. Autouse,
    so it is set before the personas' passwords are hashed."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


def log_in(client: Client, username: str, password: str, url: str = LOGIN, **extra):
    return client.post(url, {"username": username, "password": password}, **extra)


def logged_in(client: Client) -> bool:
    return SESSION_KEY in client.session


def move_attempts_back(by: timedelta) -> None:
    AccessAttempt.objects.update(attempt_time=F("attempt_time") - by)


def pass_the_cool_off() -> None:
    move_attempts_back(2 * settings.AXES_COOLOFF_TIME)


def guess_from_many_addresses(username: str, failures: int) -> None:
    """``failures`` wrong passwords for ``username``, from as many addresses as it takes
    to keep each address below the pair's limit."""
    per_address = settings.AXES_FAILURE_LIMIT - 1
    for index in range(failures):
        guesser = Client(REMOTE_ADDR=f"198.51.100.{index // per_address + 1}")
        assert log_in(guesser, username, "wrong").status_code == 200


def test_it_refuses_the_right_password_after_thirty_wrong_ones_and_says_when(client, member):
    for _ in range(30):
        assert log_in(client, "alice", "wrong").status_code in (200, 429)

    response = log_in(client, "alice", "pw-alice")

    assert response.status_code == 429
    assert not logged_in(client)
    seconds = int(response["Retry-After"])
    assert 0 < seconds <= settings.AXES_COOLOFF_TIME.total_seconds()
    page = response.content.decode()
    assert "Too many failed logins for this username from this address" in page
    assert f"Try again in {math.ceil(seconds / 60)} minutes" in page
    # The refused ones were not counted.
    assert AccessAttempt.objects.get().failures_since_start == settings.AXES_FAILURE_LIMIT


def test_it_lets_the_person_in_from_another_address_while_the_guessers_is_locked(client, member):
    guesser = Client(REMOTE_ADDR="10.0.0.66")
    for _ in range(settings.AXES_FAILURE_LIMIT):
        log_in(guesser, "alice", "wrong")
    assert log_in(guesser, "alice", "pw-alice").status_code == 429

    alice = Client(REMOTE_ADDR="10.0.0.1")
    response = log_in(alice, "alice", "pw-alice")

    assert response.status_code == 302 and logged_in(alice)
    attempt = AccessAttempt.objects.get()
    assert (attempt.ip_address, attempt.failures_since_start) == (
        "10.0.0.66",
        settings.AXES_FAILURE_LIMIT,
    )
    assert log_in(guesser, "alice", "pw-alice").status_code == 429
    assert not logged_in(guesser)


def test_it_lets_the_person_in_after_the_cool_off(client, member):
    for _ in range(settings.AXES_FAILURE_LIMIT):
        log_in(client, "alice", "wrong")
    assert log_in(client, "alice", "pw-alice").status_code == 429

    pass_the_cool_off()
    response = log_in(client, "alice", "pw-alice")

    assert response.status_code == 302 and logged_in(client)


def test_it_does_not_prolong_the_cool_off_for_logins_refused_during_it(client, member):
    cool_off = settings.AXES_COOLOFF_TIME
    for _ in range(settings.AXES_FAILURE_LIMIT):
        log_in(client, "alice", "wrong")
    move_attempts_back(cool_off * 2 / 3)
    locked_at = AccessAttempt.objects.get().attempt_time

    for password in ("wrong", "pw-alice", "wrong"):
        response = log_in(client, "alice", password)
        assert response.status_code == 429

    attempt = AccessAttempt.objects.get()
    assert (attempt.attempt_time, attempt.failures_since_start) == (
        locked_at,
        settings.AXES_FAILURE_LIMIT,
    )
    assert int(response["Retry-After"]) <= cool_off.total_seconds() / 3
    move_attempts_back(cool_off / 2)
    assert log_in(client, "alice", "pw-alice").status_code == 302
    assert logged_in(client)


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


def test_it_does_not_shut_out_others_behind_the_guessers_address(client, member, manager):
    for index in range(3):
        for _ in range(settings.AXES_FAILURE_LIMIT):
            log_in(client, f"guess-{index}", "wrong")
    assert log_in(client, "guess-0", "wrong").status_code == 429

    response = log_in(client, "bob", "pw-bob")

    assert response.status_code == 302 and logged_in(client)


# The limit per username, across addresses, and the device cookie.


def test_a_login_leaves_a_device_cookie_naming_the_person(client, member):
    response = log_in(client, "alice", "pw-alice")

    assert response.status_code == 302
    cookie = response.cookies[COOKIE_NAME]
    assert signing.loads(cookie.value, salt=SALT) == "alice"
    assert cookie["httponly"] and cookie["samesite"] == "Lax" and not cookie["secure"]
    assert int(cookie["max-age"]) == MAX_AGE.total_seconds()
    client.post(reverse("logout"))
    assert client.cookies[COOKIE_NAME].value == cookie.value  # logging out keeps it
    over_https = log_in(Client(), "alice", "pw-alice", secure=True)
    assert over_https.cookies[COOKIE_NAME]["secure"]


def test_it_refuses_a_username_guessed_from_many_addresses_but_not_in_a_known_browser(
    client, member
):
    known = Client(REMOTE_ADDR="192.0.2.1")
    assert log_in(known, "alice", "pw-alice").status_code == 302
    known.post(reverse("logout"))
    guess_from_many_addresses("alice", settings.LOGIN_USERNAME_FAILURE_LIMIT)

    stranger = Client(REMOTE_ADDR="192.0.2.2")
    refused = log_in(stranger, "alice", "pw-alice")
    response = log_in(known, "alice", "pw-alice")

    assert refused.status_code == 429 and not logged_in(stranger)
    assert "for this username from many addresses" in refused.content.decode()
    assert response.status_code == 302 and logged_in(known)
    failures = sum(AccessAttempt.objects.values_list("failures_since_start", flat=True))
    assert failures == settings.LOGIN_USERNAME_FAILURE_LIMIT  # the refusal was not counted


def test_a_forged_expired_or_someone_elses_device_cookie_does_not_help(client, member, manager):
    bobs_browser = Client(REMOTE_ADDR="192.0.2.3")
    assert log_in(bobs_browser, "bob", "pw-bob").status_code == 302
    bobs_cookie = bobs_browser.cookies[COOKIE_NAME].value

    class SignedLongAgo(signing.TimestampSigner):
        def timestamp(self):
            return signing.b62_encode(int(time.time() - MAX_AGE.total_seconds() - 60))

    guess_from_many_addresses("alice", settings.LOGIN_USERNAME_FAILURE_LIMIT)
    cookies = [
        bobs_cookie,
        # alice's name under the signature of bob's
        signing.b64_encode(b'"alice"').decode() + bobs_cookie[bobs_cookie.index(":") :],
        signing.dumps("alice"),  # signed, but not as a device cookie
        signing.dumps("alice", salt=SALT, key="not-the-secret-key"),
        SignedLongAgo(salt=SALT).sign_object("alice"),
        "alice",
    ]

    for cookie in cookies:
        browser = Client(REMOTE_ADDR="192.0.2.4")
        browser.cookies[COOKIE_NAME] = cookie
        response = log_in(browser, "alice", "pw-alice")
        assert response.status_code == 429, cookie
        assert not logged_in(browser)


def test_a_known_browsers_wrong_passwords_still_lock_its_address(client, member):
    assert log_in(client, "alice", "pw-alice").status_code == 302
    client.post(reverse("logout"))
    for _ in range(settings.AXES_FAILURE_LIMIT):
        log_in(client, "alice", "wrong")

    response = log_in(client, "alice", "pw-alice")

    assert response.status_code == 429 and not logged_in(client)


def test_a_lock_lifts_a_cool_off_after_the_failure_that_reached_the_limit():
    noon = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
    times = [noon - timedelta(minutes=m) for m in range(5)]
    newest_first = list(zip(times, [1, 2, 3, 4, 5], strict=True))
    cool_off = timedelta(minutes=15)

    assert lock_lifts(newest_first, limit=6, cool_off=cool_off) == times[2] + cool_off
    assert lock_lifts(newest_first, limit=1, cool_off=cool_off) == times[0] + cool_off
    assert lock_lifts(newest_first, limit=16, cool_off=cool_off) is None
    assert lock_lifts([], limit=1, cool_off=cool_off) is None


# What a locked-out login sees, who is not counted, and who lifts a lock.


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


def test_sign_ins_through_the_identity_provider_are_not_counted(client, provider):
    for _ in range(settings.AXES_FAILURE_LIMIT + 1):
        client.get("/oidc/authenticate/")
        state = list(client.session["oidc_states"])[-1]
        answer = client.get(f"/oidc/callback/?code=forged&state={state}")
        assert answer.status_code == 302 and answer["Location"] == "/accounts/login/"

    assert not AccessAttempt.objects.exists()


def test_staff_see_lockouts_in_the_admin_and_lift_one(client, staff, member):
    guesser = Client(REMOTE_ADDR="10.0.0.66")
    for _ in range(settings.AXES_FAILURE_LIMIT):
        log_in(guesser, "alice", "wrong")
    assert log_in(guesser, "alice", "pw-alice").status_code == 429
    client.force_login(staff)
    attempts = reverse("admin:axes_accessattempt_changelist")

    index = client.get(reverse("admin:index"))
    listed = client.get(attempts)
    attempt = AccessAttempt.objects.get()
    deleted = client.post(
        reverse("admin:axes_accessattempt_delete", args=[attempt.pk]), {"post": "yes"}
    )

    assert index.status_code == 200 and attempts in index.content.decode()
    assert listed.status_code == 200
    page = listed.content.decode()
    assert "alice" in page and "10.0.0.66" in page and "Locked Out" in page
    assert deleted.status_code == 302
    assert not AccessAttempt.objects.exists()
    assert log_in(guesser, "alice", "pw-alice").status_code == 302
    assert logged_in(guesser)
