"""Sign-in through the company's OpenID Connect provider (Keycloak, Okta, Azure AD, Dex).

On when OIDC_ISSUER is set: the login page offers "Sign in with <OIDC_PROVIDER_NAME>",
which runs the authorization code flow (with PKCE) through mozilla-django-oidc. The
provider's endpoints come from its discovery document, so the issuer, a client id and a
secret are all a deployment names.

Caldera checks the ID token itself: its signature against the provider's published keys,
its issuer, its audience (this portal's client id), its expiry and nonce. A person is
found by OIDC_USERNAME_CLAIM (created at their first sign-in) and, at every sign-in,
their memberships follow the groups the provider lists in OIDC_GROUPS_CLAIM, through
OIDC_GROUP_MAP (``{"group": "department:role"}``, or ``"admin"``; see group_map).
Local accounts (username and password) stay for the demo and for break-glass admins while
LOCAL_LOGIN is on.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from urllib.parse import urlencode

import jwt
import requests
from django.conf import settings
from django.contrib import admin, messages
from django.contrib.auth import get_user_model
from django.contrib.auth.backends import ModelBackend
from django.contrib.auth.views import LoginView
from django.core import checks
from django.core.exceptions import ImproperlyConfigured, SuspiciousOperation
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.utils.translation import gettext as _
from django.views.generic import View
from mozilla_django_oidc.auth import OIDCAuthenticationBackend
from mozilla_django_oidc.utils import import_from_settings
from mozilla_django_oidc.views import (
    OIDCAuthenticationCallbackView,
    OIDCAuthenticationRequestView,
)

from access.identities import is_service
from access.models import ServiceIdentity
from queues.departments import person_signed_in
from queues.models import Membership

logger = logging.getLogger(__name__)

ADMIN = "admin"
ROLES = Membership.Role
RANK: dict[str, int] = {
    ROLES.MEMBER: 1,
    ROLES.MANAGER: 2,
}  # a person in two groups of one department
DISCOVERY_SECONDS = 3600  # the provider's discovery document is read again after an hour
# The settings mozilla-django-oidc reads, and where the discovery document has them.
ENDPOINTS = {
    "OIDC_OP_AUTHORIZATION_ENDPOINT": "authorization_endpoint",
    "OIDC_OP_TOKEN_ENDPOINT": "token_endpoint",
    "OIDC_OP_USER_ENDPOINT": "userinfo_endpoint",
    "OIDC_OP_JWKS_ENDPOINT": "jwks_uri",
}


class SignInFailed(Exception):
    """Why a sign-in through the provider was refused, in words for the person."""


# ---- Groups to departments ----------------------------------------------------------


@dataclass(frozen=True)
class Grants:
    """What a person's groups give: a role per department, and admin rights."""

    roles: dict[str, str]
    admin: bool


def group_map(raw: Mapping) -> dict[str, tuple[str, ...]]:
    """OIDC_GROUP_MAP checked: each group names one target or a list of them, a target
    being ``"<department>:member"``, ``"<department>:manager"`` or ``"admin"`` (the admin
    site and every department's jobs)."""
    checked: dict[str, tuple[str, ...]] = {}
    for group, targets in raw.items():
        targets = [targets] if isinstance(targets, str) else targets
        if not isinstance(targets, list) or not targets:
            raise ImproperlyConfigured(
                f"OIDC_GROUP_MAP: group {group!r} must map to a target or a list of them"
            )
        for target in targets:
            department, _, role = str(target).partition(":")
            if target != ADMIN and (not department or role not in RANK):
                raise ImproperlyConfigured(
                    f"OIDC_GROUP_MAP: group {group!r}: {target!r} is not "
                    f"'<department>:member', '<department>:manager' or 'admin'"
                )
        checked[group] = tuple(targets)
    return checked


def grants_for(groups: Iterable[str], mapping: Mapping[str, tuple[str, ...]]) -> Grants:
    """The roles and admin rights ``groups`` give: the higher role where two groups name
    one department; groups the map does not name give nothing."""
    roles: dict[str, str] = {}
    admin = False
    for group in groups:
        for target in mapping.get(group, ()):
            if target == ADMIN:
                admin = True
                continue
            department, _, role = target.partition(":")
            if RANK[role] > RANK.get(roles.get(department, ""), 0):
                roles[department] = role
    return Grants(roles=roles, admin=admin)


def governed_departments(mapping: Mapping[str, tuple[str, ...]]) -> set[str]:
    """The departments whose memberships follow the provider's groups."""
    return {target.partition(":")[0] for targets in mapping.values() for target in targets} - {
        ADMIN
    }


# ---- The provider -----------------------------------------------------------------------

_discovered: dict[str, tuple[float, dict]] = {}


def provider_document() -> dict:
    """The provider's discovery document (``<issuer>/.well-known/openid-configuration``),
    read once an hour per process."""
    issuer = settings.OIDC_ISSUER
    if issuer in _discovered and time.monotonic() - _discovered[issuer][0] < DISCOVERY_SECONDS:
        return _discovered[issuer][1]
    url = f"{issuer}/.well-known/openid-configuration"
    try:
        response = requests.get(url, timeout=settings.OIDC_TIMEOUT)
        response.raise_for_status()
        document = response.json()
    except (requests.RequestException, ValueError) as error:
        raise SignInFailed(f"the identity provider did not answer ({url}: {error})") from error
    if not isinstance(document, dict) or document.get("issuer") != issuer:
        raise SignInFailed(
            f"the identity provider's discovery document ({url}) does not name "
            f"{issuer!r} (OIDC_ISSUER) as its issuer"
        )
    missing = [key for key in ENDPOINTS.values() if not document.get(key)]
    if missing:
        raise SignInFailed(f"the identity provider's discovery document has no {missing[0]}")
    _discovered[issuer] = (time.monotonic(), document)
    return document


def sign_in_setting(name: str, *default):
    """A setting as mozilla-django-oidc asks for it: the provider's endpoints from its
    discovery document, everything else from the settings."""
    if name in ENDPOINTS:
        return provider_document()[ENDPOINTS[name]]
    return import_from_settings(name, *default)


def _token_refused(error: jwt.InvalidTokenError, token: str) -> str:
    claims = jwt.decode(token, options={"verify_signature": False})
    if isinstance(error, jwt.InvalidSignatureError):
        return "its signature does not match the keys the identity provider publishes"
    if isinstance(error, jwt.InvalidAudienceError):
        return (
            f"it was issued for another application (audience {claims.get('aud')!r}, "
            f"this portal is {settings.OIDC_RP_CLIENT_ID!r})"
        )
    if isinstance(error, jwt.InvalidIssuerError):
        return f"it was issued by {claims.get('iss')!r}, not {settings.OIDC_ISSUER!r}"
    if isinstance(error, jwt.ExpiredSignatureError):
        return "it has expired"
    return str(error)


def _provider_refused(response: requests.Response) -> str:
    """The provider's OAuth error (RFC 6749 5.2) in words, or its status."""
    try:
        body = response.json()
    except ValueError:
        body = {}
    if not isinstance(body, dict) or "error" not in body:
        return f"the identity provider answered {response.status_code} at {response.url}"
    described = body.get("error_description")
    return f"the identity provider refused: {body['error']!r}" + (
        f" ({described})" if described else ""
    )


class ProviderBackend(OIDCAuthenticationBackend):
    """The authorization code flow's last step: the code exchanged for tokens, the ID token
    checked, the person found or created and their memberships made to follow their groups."""

    get_settings = staticmethod(sign_in_setting)

    def __init__(self, *args, **kwargs):
        # Django makes a backend for every session's request: the provider's endpoints are
        # read at a sign-in (authenticate), not here.
        self.UserModel = get_user_model()

    def authenticate(self, request, **kwargs):
        if not settings.OIDC_ISSUER or request is None or "code" not in request.GET:
            return None
        try:
            for name in ENDPOINTS:
                setattr(self, name, sign_in_setting(name))
            self.OIDC_RP_CLIENT_ID = settings.OIDC_RP_CLIENT_ID
            self.OIDC_RP_CLIENT_SECRET = settings.OIDC_RP_CLIENT_SECRET
            self.OIDC_RP_SIGN_ALGO = settings.OIDC_RP_SIGN_ALGO
            self.OIDC_RP_IDP_SIGN_KEY = None
            return super().authenticate(request, **kwargs)
        except SignInFailed as error:
            reason = str(error)
        except SuspiciousOperation as error:
            reason = f"its answer was refused: {error}"
        except requests.HTTPError as error:
            reason = _provider_refused(error.response)
        except requests.RequestException as error:
            reason = f"the identity provider did not answer ({error})"
        logger.warning("sign-in through %s refused: %s", settings.OIDC_ISSUER, reason)
        request.sign_in_failure = reason
        return None

    def _verify_jws(self, payload, key):
        algorithm = jwt.get_unverified_header(payload).get("alg")
        if algorithm != self.OIDC_RP_SIGN_ALGO:
            raise SignInFailed(
                f"the ID token is signed with {algorithm!r}, not {self.OIDC_RP_SIGN_ALGO!r}"
            )
        try:
            return jwt.decode(
                payload,
                key,
                algorithms=[algorithm],
                audience=self.OIDC_RP_CLIENT_ID,
                issuer=settings.OIDC_ISSUER,
                leeway=settings.OIDC_LEEWAY_SECONDS,
                options={"require": ["exp", "iat", "iss", "aud", "sub"]},
            )
        except jwt.InvalidTokenError as error:
            raise SignInFailed(
                f"the ID token was refused: {_token_refused(error, payload)}"
            ) from error

    def get_or_create_user(self, access_token, id_token, payload):
        claims = self.get_userinfo(access_token, id_token, payload)
        if claims.get("sub") != payload.get("sub"):
            raise SignInFailed("the provider's user info is about someone else than its ID token")
        username = claims.get(settings.OIDC_USERNAME_CLAIM)
        if not isinstance(username, str) or not username:
            raise SignInFailed(
                f"the provider sent no {settings.OIDC_USERNAME_CLAIM!r} claim to name you by"
            )
        mapping = group_map(settings.OIDC_GROUP_MAP)
        groups = claims.get(settings.OIDC_GROUPS_CLAIM)
        if mapping and not (
            isinstance(groups, list) and all(isinstance(group, str) for group in groups)
        ):
            raise SignInFailed(
                f"the provider sent no {settings.OIDC_GROUPS_CLAIM!r} claim listing your "
                f"groups, which say your departments (an admin adds it to the provider's "
                f"client)"
            )
        if ServiceIdentity.objects.filter(user__username=username).exists():
            raise SignInFailed(
                f"{username} is a department's service identity: it acts only with its tokens"
            )
        grants = grants_for(groups or [], mapping)
        user, unknown = person_signed_in(
            username=username,
            profile={
                "email": claims.get("email") or "",
                "first_name": claims.get("given_name") or "",
                "last_name": claims.get("family_name") or "",
            },
            roles=grants.roles,
            departments=governed_departments(mapping),
            admin=grants.admin if any(ADMIN in targets for targets in mapping.values()) else None,
        )
        if unknown:
            logger.warning(
                "OIDC_GROUP_MAP names departments that do not exist: %s", ", ".join(unknown)
            )
        return user


class LocalAccounts(ModelBackend):
    """Username and password, while LOCAL_LOGIN is on; turned off, their sessions end too."""

    def authenticate(self, request, username=None, password=None, **kwargs):
        if not settings.LOCAL_LOGIN:
            return None
        return super().authenticate(request, username=username, password=password, **kwargs)

    def get_user(self, user_id):
        return super().get_user(user_id) if settings.LOCAL_LOGIN else None

    def user_can_authenticate(self, user) -> bool:
        """Not a service identity, whatever password someone gave it: it has tokens only."""
        return super().user_can_authenticate(user) and not is_service(user)


# ---- Views ------------------------------------------------------------------------------


def _refused(request: HttpRequest, reason: str) -> HttpResponse:
    messages.error(
        request,
        _("Sign-in through %(provider)s failed: %(reason)s.")
        % {"provider": settings.OIDC_PROVIDER_NAME, "reason": reason},
    )
    return redirect(settings.LOGIN_URL)


class ProviderSignIn(OIDCAuthenticationRequestView):
    """GET /oidc/authenticate/: off to the provider's sign-in page."""

    get_settings = staticmethod(sign_in_setting)

    def __init__(self, **kwargs):
        View.__init__(self, **kwargs)  # the endpoint is read per request, not per process

    def get(self, request):
        if not settings.OIDC_ISSUER:
            raise Http404("sign-in through an identity provider is not configured")
        try:
            self.OIDC_OP_AUTH_ENDPOINT = sign_in_setting("OIDC_OP_AUTHORIZATION_ENDPOINT")
        except SignInFailed as error:
            return _refused(request, str(error))
        self.OIDC_RP_CLIENT_ID = settings.OIDC_RP_CLIENT_ID
        return super().get(request)


class ProviderCallback(OIDCAuthenticationCallbackView):
    """GET /oidc/callback/: where the provider sends the person back with a code."""

    def get(self, request):
        if not settings.OIDC_ISSUER:
            raise Http404("sign-in through an identity provider is not configured")
        try:
            return super().get(request)
        except SuspiciousOperation:  # a state this browser's session did not start
            request.sign_in_failure = _(
                "the sign-in was started in another browser or has expired; please sign in again"
            )
            return self.login_failure()

    def login_failure(self):
        request = self.request
        user = getattr(self, "user", None)
        if user is not None and not user.is_active:
            reason = _("your account is deactivated in Caldera")
        elif request.GET.get("error"):
            described = request.GET.get("error_description")
            reason = _("the identity provider answered %(error)r") % {"error": request.GET["error"]}
            if described:
                reason = _("%(reason)s (%(description)s)") % {
                    "reason": reason,
                    "description": described,
                }
        else:
            reason = getattr(request, "sign_in_failure", _("the identity provider sent no code"))
        return _refused(request, reason)


def sign_in_checks(app_configs=None, **kwargs) -> list[checks.CheckMessage]:
    """``manage.py check`` (and every start): the sign-in settings hold together."""
    errors: list[checks.CheckMessage] = []
    try:
        group_map(settings.OIDC_GROUP_MAP)
    except ImproperlyConfigured as error:
        errors.append(checks.Error(str(error), id="caldera.E101"))
    if settings.OIDC_ISSUER and not (settings.OIDC_RP_CLIENT_ID and settings.OIDC_RP_CLIENT_SECRET):
        errors.append(
            checks.Error(
                "OIDC_ISSUER is set but OIDC_CLIENT_ID or OIDC_CLIENT_SECRET is not",
                hint="register Caldera as a confidential client of the provider",
                id="caldera.E102",
            )
        )
    if not settings.LOCAL_LOGIN and not settings.OIDC_ISSUER:
        errors.append(
            checks.Error(
                "LOCAL_LOGIN is off and no OIDC_ISSUER is set: nobody can sign in",
                id="caldera.E103",
            )
        )
    return errors


class LoginPage(LoginView):
    """The one login page: the provider's button and, while LOCAL_LOGIN is on, the form."""

    def get_context_data(self, **kwargs):
        return super().get_context_data(
            provider=settings.OIDC_PROVIDER_NAME if settings.OIDC_ISSUER else None,
            local_login=settings.LOCAL_LOGIN,
            **kwargs,
        )


def admin_login(request: HttpRequest) -> HttpResponse:
    """The admin site's login: its own form while it is the only way in, else the login
    page, which offers the provider too."""
    if settings.LOCAL_LOGIN and not settings.OIDC_ISSUER:
        return admin.site.login(request)
    target = request.GET.get("next") or reverse("admin:index")
    return redirect(f"{reverse(settings.LOGIN_URL)}?{urlencode({'next': target})}")
