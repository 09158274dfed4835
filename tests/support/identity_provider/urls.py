"""The provider's endpoints under /openid/, its login page, and /control/ for the tests."""

import json

import jwt
from cryptography.hazmat.primitives.asymmetric import rsa
from django.contrib.auth import views as auth_views
from django.contrib.auth.models import Group, User
from django.http import HttpRequest, JsonResponse
from django.urls import include, path
from django.views.decorators.csrf import csrf_exempt
from oidc_provider.models import Client, ResponseType, RSAKey
from oidc_provider.views import JwksView

from .claims import FAULTS

# With FAULTS["unpublished_key"], the JWKS publishes this key under the signing key's kid:
# every signature the provider makes then fails to verify, as after a key leak or a
# misconfigured rotation.
OTHER_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048).public_key()


def jwks(request: HttpRequest):
    if not FAULTS["unpublished_key"]:
        return JwksView.as_view()(request)
    numbers = OTHER_KEY.public_numbers()
    keys = [
        {
            "kty": "RSA",
            "alg": "RS256",
            "use": "sig",
            "kid": key.kid,
            "n": jwt.utils.to_base64url_uint(numbers.n).decode("ascii"),
            "e": jwt.utils.to_base64url_uint(numbers.e).decode("ascii"),
        }
        for key in RSAKey.objects.all()
    ]
    return JsonResponse({"keys": keys})


@csrf_exempt
def control(request: HttpRequest):
    """POST {"client": {...}} registers the relying party, {"user": {...}} creates or updates
    a user with their groups, {"faults": {...}} sets how the provider misbehaves."""
    body = json.loads(request.body)
    if "client" in body:
        wanted = body["client"]
        client, _ = Client.objects.update_or_create(
            client_id=wanted["client_id"],
            defaults={
                "name": wanted["client_id"],
                "client_secret": wanted["client_secret"],
                "client_type": "confidential",
                "jwt_alg": "RS256",
                "require_consent": False,
                "_redirect_uris": "\n".join(wanted["redirect_uris"]),
                "_scope": "openid email profile groups",
            },
        )
        client.response_types.set([ResponseType.objects.get(value="code")])
    if "user" in body:
        wanted = body["user"]
        user, _ = User.objects.get_or_create(username=wanted["username"])
        user.email = wanted.get("email", "")
        user.first_name = wanted.get("first_name", "")
        user.last_name = wanted.get("last_name", "")
        user.set_password(wanted["password"])
        user.save()
        user.groups.set([Group.objects.get_or_create(name=name)[0] for name in wanted["groups"]])
    if "faults" in body:
        FAULTS.update(body["faults"])
    return JsonResponse({"ok": True})


urlpatterns = [
    path("openid/jwks", jwks),
    path("openid/", include("oidc_provider.urls", namespace="oidc_provider")),
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("control/", control),
]
