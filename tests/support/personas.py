"""The people of the tests (docs/architecture.md section 1): users, a department's members
and managers, each with password ``pw-<name>``, and an API client signed in with a token.
The fixtures of tests/conftest.py make the four personas from these."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from rest_framework.test import APIClient

from access.services import full_token


def user(username: str, **extra):
    """A user with password ``pw-<username>`` (``extra``: is_staff, is_superuser...)."""
    return get_user_model().objects.create_user(
        username=username, password="pw-" + username, **extra
    )


def person(department, username: str, role: str):
    """A department's member or manager, created as the API does, with password ``pw-<name>``."""
    from queues.departments import membership_set

    membership_set(department=department, username=username, role=role)
    found = get_user_model().objects.get(username=username)
    found.set_password("pw-" + username)
    found.save(update_fields=["password"])
    return found


def client_for(user) -> APIClient:
    """An APIClient authenticated with a token of all ``user``'s rights."""
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {full_token(user, name='tests')}")
    return client
