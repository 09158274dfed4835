"""The API's token check: ``Authorization: Token <key>`` (or ``Bearer <key>``)."""

from __future__ import annotations

from axes.helpers import get_client_ip_address
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.plumbing import build_bearer_security_scheme_object
from rest_framework import exceptions
from rest_framework.authentication import BaseAuthentication, get_authorization_header

from .services import TokenRefused, token_authenticate

KEYWORDS = (b"token", b"bearer")


class AccessTokenAuthentication(BaseAuthentication):
    """An access token (``access.services.token_authenticate``), refused with a 401 that says
    why: malformed, not valid, revoked or expired, never whose it is."""

    def authenticate(self, request):
        words = get_authorization_header(request).split()
        if not words or words[0].lower() not in KEYWORDS:
            return None
        if len(words) != 2:
            raise exceptions.AuthenticationFailed("give the token after the word Token, alone")
        try:
            key = words[1].decode("ascii")
        except UnicodeDecodeError:
            raise exceptions.AuthenticationFailed("the token is malformed") from None
        try:
            return token_authenticate(key, get_client_ip_address(request))
        except TokenRefused as refused:
            raise exceptions.AuthenticationFailed(str(refused)) from None

    def authenticate_header(self, request) -> str:
        return "Token"


class AccessTokenScheme(OpenApiAuthenticationExtension):
    """The schema's word for it: a header ``Authorization: Token <key>``."""

    target_class = AccessTokenAuthentication
    name = "tokenAuth"

    def get_security_definition(self, auto_schema):
        return build_bearer_security_scheme_object(
            header_name="Authorization", token_prefix="Token"
        )
