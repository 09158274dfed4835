"""REST API of credentials: a person's own access tokens, listed, made and revoked; trust
policies (staff); and the exchange of a CI job's ID token for an access token."""

from __future__ import annotations

from typing import cast

from axes.helpers import get_client_ip_address
from django.contrib.auth import get_user_model
from django.http import Http404
from django.shortcuts import get_object_or_404
from django.utils.translation import gettext as _
from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import serializers, status
from rest_framework.permissions import AllowAny
from rest_framework.response import Response
from rest_framework.views import APIView

from audit.models import AuditEntry
from queues.api_base import STAFF_ONLY, Body, json_parsers, refusals
from queues.models import Department
from queues.scope import RIGHTS, Right, scope_of

from . import oidc, services
from .exchange import PolicyIn, exchange, policy_delete, policy_save
from .models import TOKEN_STATES, AccessToken, TrustPolicy

API = AuditEntry.Source.API


DEPARTMENT_NAME = cast(int, Department._meta.get_field("name").max_length)
MOST_DEPARTMENTS = 1000


@extend_schema_field(
    {
        "type": "array",
        "items": {"type": "string", "maxLength": DEPARTMENT_NAME},
        "minItems": 1,
        "maxItems": MOST_DEPARTMENTS,
    }
)
class DepartmentNames(serializers.Field):
    """A list of department names, refused as a whole with one reason (the API's errors
    name a field, not an item of it)."""

    def to_internal_value(self, data):
        if not isinstance(data, list) or not 1 <= len(data) <= MOST_DEPARTMENTS:
            raise serializers.ValidationError(
                _("a list of 1 to %(most)d department names") % {"most": MOST_DEPARTMENTS}
            )
        for name in data:
            if not isinstance(name, str) or len(name) > DEPARTMENT_NAME:
                raise serializers.ValidationError(
                    _("department names are strings of at most %(most)d characters")
                    % {"most": DEPARTMENT_NAME}
                )
        return data

    def to_representation(self, value):
        return value


class TokenIn(Body):
    name = serializers.CharField(max_length=services.NAME_LENGTH, help_text="what it is for")
    right = serializers.ChoiceField(
        choices=RIGHTS,
        help_text="read: lists, pages' data, logs; submit: read, and submit, cancel and "
        "resubmit your own jobs; manage: everything you may do in its departments; admin: "
        "your staff rights too (staff only)",
    )
    departments = DepartmentNames(
        required=False,
        help_text="the departments it acts in, of yours; leave it out for all of yours, "
        "later ones too",
    )
    expires_in_days = serializers.IntegerField(
        required=False,
        allow_null=True,
        min_value=1,
        help_text="default ACCESS_TOKEN_DEFAULT_DAYS; at most ACCESS_TOKEN_MAX_DAYS; null: "
        "never, where ACCESS_TOKEN_ALLOW_NEVER allows it",
    )

    class Meta:
        ref_name = "AccessTokenIn"


class TokenOut(serializers.Serializer):
    id = serializers.IntegerField()
    prefix = serializers.CharField(help_text="its first characters, which name it")
    name = serializers.CharField()
    user = serializers.CharField(source="user.username", help_text="whose token it is")
    kind = serializers.ChoiceField(choices=AccessToken.Kind.choices)
    right = serializers.ChoiceField(choices=RIGHTS)
    departments = serializers.SerializerMethodField()
    state = serializers.SerializerMethodField()
    created_at = serializers.DateTimeField()
    expires_at = serializers.DateTimeField(allow_null=True, help_text="null: never")
    revoked_at = serializers.DateTimeField(allow_null=True)
    last_used_at = serializers.DateTimeField(allow_null=True)
    last_used_from = serializers.IPAddressField(allow_null=True)

    class Meta:
        ref_name = "AccessToken"

    @extend_schema_field(serializers.ListField(child=serializers.CharField(), allow_null=True))
    def get_departments(self, token: AccessToken) -> list[str] | None:
        """Null: all of the person's."""
        if token.all_departments:
            return None
        return sorted(d.name for d in token.departments.all())

    @extend_schema_field(serializers.ChoiceField(choices=TOKEN_STATES))
    def get_state(self, token: AccessToken) -> str:
        return token.state()


class TokenCreated(TokenOut):
    token = serializers.CharField(help_text="the secret, shown this once")

    class Meta:
        ref_name = "AccessTokenCreated"


TOKEN_REFUSALS = {
    "name": "blank, or the person holds ACCESS_TOKENS_PER_PERSON live tokens",
    "right": "admin for someone not staff, or more than the token that asks has",
    "departments": "a department the person is not in, or outside the asking token's",
    "expires_in_days": "beyond ACCESS_TOKEN_MAX_DAYS, or never where it is not allowed",
}


def _tokens(user):
    return (
        AccessToken.objects.filter(user=user).select_related("user").prefetch_related("departments")
    )


class TokenListView(APIView):
    """Your tokens; making one through a token takes a manage token, and the new one cannot
    exceed it."""

    parser_classes = json_parsers()
    required_right = {"POST": Right.MANAGE}

    @extend_schema(responses=TokenOut(many=True), summary="Your access tokens, newest first")
    def get(self, request):
        return Response(TokenOut(_tokens(request.user).order_by("-id")[:500], many=True).data)

    @extend_schema(
        request=TokenIn,
        responses={201: TokenCreated},
        summary="Make an access token; its secret is in this answer only",
        extensions=refusals(TOKEN_REFUSALS),
    )
    def post(self, request):
        body = TokenIn(data=request.data)
        body.is_valid(raise_exception=True)
        asked = services.Asked(
            name=body.validated_data["name"],
            right=body.validated_data["right"],
            departments=body.validated_data.get("departments"),
            expires_in_days=body.validated_data.get("expires_in_days", -1),
        )
        token, key = services.token_create(
            user=request.user, asked=asked, actor=request.user, source=API
        )
        answer = TokenOut(token).data | {"token": key}
        return Response(answer, status=status.HTTP_201_CREATED)


class TokenDetailView(APIView):
    """One token of yours (staff: anyone's). Revoking takes a manage token, except the
    token revoking itself."""

    required_right = {"DELETE": Right.READ}  # checked below, where the token is known

    def _token(self, request, pk: int) -> AccessToken:
        tokens = AccessToken.objects.select_related("user").prefetch_related("departments")
        if not request.user.is_staff:
            tokens = tokens.filter(user=request.user)
        token = tokens.filter(pk=pk).first()
        if token is None:
            raise Http404("no such token")
        return token

    @extend_schema(responses=TokenOut, summary="One access token")
    def get(self, request, pk: int):
        return Response(TokenOut(self._token(request, pk)).data)

    @extend_schema(responses={204: None}, summary="Revoke an access token")
    def delete(self, request, pk: int):
        token = self._token(request, pk)
        scope = scope_of(request.user)
        itself = scope is not None and scope.token == token.pk
        if scope is not None and not itself and not scope.allows(Right.MANAGE):
            return Response({"detail": scope.lacks(Right.MANAGE)}, status=403)
        services.token_revoke(token=token, actor=request.user, source=API)
        return Response(status=status.HTTP_204_NO_CONTENT)


class TokenRevokeAllView(APIView):
    required_right = Right.MANAGE

    @extend_schema(
        request=None,
        responses={200: {"type": "object", "properties": {"revoked": {"type": "integer"}}}},
        summary="Revoke every token of yours, this one too",
    )
    def post(self, request):
        count = services.tokens_revoke_all(user=request.user, actor=request.user, source=API)
        return Response({"revoked": count})


class ExchangeIn(Body):
    token = serializers.CharField(
        max_length=oidc.MAX_TOKEN_CHARS,
        help_text="the CI job's OIDC ID token (GitHub Actions: ACTIONS_ID_TOKEN_REQUEST_URL; "
        "GitLab CI: id_tokens)",
    )

    class Meta:
        ref_name = "ExchangeIn"


class ExchangeOut(serializers.Serializer):
    token = serializers.CharField(help_text="use as Authorization: Token <token>")
    expires_at = serializers.DateTimeField()
    user = serializers.CharField(help_text="whom it acts as")
    right = serializers.ChoiceField(choices=RIGHTS)
    departments = serializers.ListField(
        child=serializers.CharField(), allow_null=True, help_text="null: all of the user's"
    )
    policy = serializers.CharField(help_text="the trust policy it met")


class ExchangeView(APIView):
    """A CI job's ID token for a short-lived access token: no credential of Caldera's is
    needed, or stored in the CI."""

    authentication_classes: list = []
    permission_classes = [AllowAny]
    parser_classes = json_parsers()

    @extend_schema(
        request=ExchangeIn,
        responses={200: ExchangeOut},
        description="401: refused, the detail naming each policy's failing check (signature, "
        "issuer, audience, expiry, not-before, a claim condition). 503: the issuer did not "
        "answer; Retry-After says when to try again.",
        summary="Exchange a CI job's OIDC ID token for an access token (workload identity)",
        auth=[],
    )
    def post(self, request):
        body = ExchangeIn(data=request.data)
        body.is_valid(raise_exception=True)
        try:
            done = exchange(body.validated_data["token"], address=get_client_ip_address(request))
        except oidc.IssuerUnavailable as unavailable:
            return Response(
                {"detail": unavailable.reason}, status=503, headers={"Retry-After": "30"}
            )
        except oidc.Refused as refused:
            return Response(
                {"detail": refused.reason}, status=401, headers={"WWW-Authenticate": "Token"}
            )
        token = done.token
        departments = (
            None if token.all_departments else sorted(d.name for d in token.departments.all())
        )
        answer = {
            "token": done.key,
            "expires_at": token.expires_at,
            "user": token.user.username,
            "right": token.right,
            "departments": departments,
            "policy": done.policy.name,
        }
        return Response(ExchangeOut(answer).data)


class PolicyBody(Body):
    name = serializers.CharField(max_length=63)
    issuer = serializers.CharField(max_length=500)
    audience = serializers.CharField(max_length=255)
    conditions = serializers.DictField(
        child=serializers.CharField(max_length=500, trim_whitespace=False),
        help_text='claim name -> value, or glob with * ? [: {"repository": "org/repo", '
        '"ref": "refs/heads/main"}',
    )
    acts_as = serializers.CharField(max_length=150, help_text="the username it acts as")
    right = serializers.ChoiceField(choices=RIGHTS, default=Right.SUBMIT)
    departments = DepartmentNames(required=False, help_text="of acts_as's; leave out for all")
    lifetime_seconds = serializers.IntegerField(default=900, help_text="60 to 43200")
    active = serializers.BooleanField(default=True)

    class Meta:
        ref_name = "TrustPolicyIn"

    def validate_acts_as(self, username: str):
        user = get_user_model().objects.filter(username=username).first()
        if user is None:
            raise serializers.ValidationError(
                _("no user is named %(username)r") % {"username": username}
            )
        return user


class PolicyOut(serializers.Serializer):
    name = serializers.CharField()
    issuer = serializers.CharField()
    audience = serializers.CharField()
    conditions = serializers.DictField(child=serializers.CharField())
    acts_as = serializers.CharField(source="acts_as.username")
    right = serializers.ChoiceField(choices=RIGHTS)
    departments = serializers.SerializerMethodField()
    lifetime_seconds = serializers.IntegerField()
    active = serializers.BooleanField()

    class Meta:
        ref_name = "TrustPolicy"

    @extend_schema_field(serializers.ListField(child=serializers.CharField(), allow_null=True))
    def get_departments(self, policy: TrustPolicy) -> list[str] | None:
        names = sorted(d.name for d in policy.departments.all())
        return names or None


POLICY_REFUSALS = {
    "name": "a trust policy of that name exists, or not a slug",
    "issuer": "not https (http only on this machine)",
    "conditions": "none: a policy names at least one claim",
    "acts_as": "no such user",
    "right": "admin for someone not staff, more than submit for a service identity",
    "departments": "not a department of acts_as",
    "lifetime_seconds": "outside 60 to 43200",
    "audience": "blank",
}


def _policy_in(body: PolicyBody) -> PolicyIn:
    data = body.validated_data
    return PolicyIn(
        name=data["name"],
        issuer=data["issuer"],
        audience=data["audience"],
        conditions=data["conditions"],
        acts_as=data["acts_as"],
        right=data["right"],
        departments=data.get("departments"),
        lifetime_seconds=data["lifetime_seconds"],
        active=data["active"],
    )


def _policies():
    return TrustPolicy.objects.select_related("acts_as").prefetch_related("departments")


class TrustPolicyListView(APIView):
    """Trust policies (staff, with an admin token)."""

    permission_classes = STAFF_ONLY
    required_right = Right.ADMIN
    parser_classes = json_parsers()

    @extend_schema(responses=PolicyOut(many=True), summary="Trust policies (staff)")
    def get(self, request):
        return Response(PolicyOut(_policies(), many=True).data)

    @extend_schema(
        request=PolicyBody,
        responses={201: PolicyOut},
        summary="Create a trust policy (staff)",
        extensions=refusals(POLICY_REFUSALS),
    )
    def post(self, request):
        body = PolicyBody(data=request.data)
        body.is_valid(raise_exception=True)
        policy = policy_save(_policy_in(body), actor=request.user, source=API)
        return Response(PolicyOut(policy).data, status=status.HTTP_201_CREATED)


class TrustPolicyDetailView(APIView):
    permission_classes = STAFF_ONLY
    required_right = Right.ADMIN
    parser_classes = json_parsers()

    @extend_schema(responses=PolicyOut, summary="One trust policy (staff)")
    def get(self, request, name: str):
        return Response(PolicyOut(get_object_or_404(_policies(), name=name)).data)

    @extend_schema(
        request=PolicyBody,
        responses=PolicyOut,
        summary="Change a trust policy (staff)",
        extensions=refusals(POLICY_REFUSALS),
    )
    def put(self, request, name: str):
        policy = get_object_or_404(_policies(), name=name)
        body = PolicyBody(data=request.data)
        body.is_valid(raise_exception=True)
        policy = policy_save(_policy_in(body), actor=request.user, source=API, policy=policy)
        return Response(PolicyOut(policy).data)

    @extend_schema(responses={204: None}, summary="Delete a trust policy (staff)")
    def delete(self, request, name: str):
        policy_delete(get_object_or_404(_policies(), name=name), actor=request.user, source=API)
        return Response(status=status.HTTP_204_NO_CONTENT)
