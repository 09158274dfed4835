"""Token authentication of the API: who gets in, who is refused, and with what answer."""

import pytest
from rest_framework.test import APIClient

from ..support.personas import client_for

pytestmark = pytest.mark.django_db


def with_token(key: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return client


def test_a_valid_token_acts_as_its_user(member):
    response = client_for(member).get("/api/v1/jobs/?mine=1")

    assert response.status_code == 200


def test_an_unknown_token_is_refused(member):
    response = with_token("0" * 40).get("/api/v1/jobs/")

    assert response.status_code == 401
    assert response.json() == {"detail": "the token is not valid"}


def test_the_token_of_a_deactivated_user_is_refused(member):
    client = client_for(member)
    member.is_active = False
    member.save()

    response = client.get("/api/v1/jobs/")

    assert response.status_code == 401
    assert response.json() == {"detail": "the token's user is inactive"}


def test_no_credentials_ask_for_a_token(db):
    response = APIClient().get("/api/v1/jobs/")

    assert response.status_code == 401
    assert response["WWW-Authenticate"] == "Token"
