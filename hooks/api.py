"""REST API of webhooks: a department's (its managers and staff) and a job's (its owner and
its queue's managers) listed and made, and any hook read, paused or resumed, deleted, its
deliveries listed and a test event sent (``/api/v1/webhooks/{id}/``)."""

from __future__ import annotations

from typing import cast

from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from queues.api_base import Body, json_parsers, refusals
from queues.scope import Right

from . import selectors, services
from .models import Attempt, Delivery, Webhook

URL_LENGTH = cast(int, Webhook._meta.get_field("url").max_length)
DESCRIPTION_LENGTH = cast(int, Webhook._meta.get_field("description").max_length)

URL_REFUSALS = {
    "url": "not https (http only where WEBHOOK_ALLOW_HTTP), a host that does not resolve or "
    "resolves to a private, loopback, link-local or reserved address outside "
    "WEBHOOK_ALLOWED_NETWORKS, or the owner holds its most hooks (WEBHOOKS_PER_DEPARTMENT, "
    "WEBHOOKS_PER_JOB)",
}


class WebhookIn(Body):
    url = serializers.CharField(
        max_length=URL_LENGTH, help_text="where the events are POSTed: https://..."
    )
    description = serializers.CharField(
        max_length=DESCRIPTION_LENGTH, required=False, allow_blank=True, default=""
    )


class WebhookChange(Body):
    paused = serializers.BooleanField(
        help_text="false resumes a paused hook (its pending deliveries go first); true pauses it"
    )


class WebhookOut(serializers.Serializer):
    id = serializers.IntegerField()
    url = serializers.CharField()
    description = serializers.CharField()
    department = serializers.CharField(source="department.name", allow_null=True, default=None)
    job = serializers.IntegerField(source="job_id", allow_null=True)
    created_at = serializers.DateTimeField()
    paused = serializers.SerializerMethodField()
    paused_at = serializers.DateTimeField(allow_null=True)
    pause_reason = serializers.CharField(help_text="why it was paused; empty when it is not")
    failures = serializers.IntegerField(help_text="attempts failed in a row")

    class Meta:
        ref_name = "Webhook"

    def get_paused(self, hook: Webhook) -> bool:
        return hook.paused_at is not None


class WebhookCreated(WebhookOut):
    secret = serializers.CharField(
        help_text="signs every delivery (Caldera-Signature); shown in this answer only"
    )

    class Meta:
        ref_name = "WebhookCreated"


class AttemptOut(serializers.ModelSerializer):
    class Meta:
        model = Attempt
        fields = ["at", "ok", "status_code", "answer", "error", "duration_ms"]
        ref_name = "WebhookAttempt"


class DeliveryOut(serializers.ModelSerializer):
    id = serializers.UUIDField(source="uuid", help_text="the event's id, Caldera-Delivery")
    attempt_list = AttemptOut(many=True, read_only=True)

    class Meta:
        model = Delivery
        fields = [
            "id", "event", "job", "job_state", "status", "attempts", "created_at",
            "next_attempt_at", "finished_at", "attempt_list",
        ]  # fmt: skip
        ref_name = "WebhookDelivery"


def _created(hook: Webhook, secret: str) -> Response:
    answer = WebhookOut(hook).data | {"secret": secret}
    return Response(answer, status=status.HTTP_201_CREATED, headers={"Cache-Control": "no-store"})


def _invalid(invalid: services.WebhookInvalid) -> Response:
    return Response(
        {field: [why] for field, why in invalid.errors.items()},
        status=status.HTTP_400_BAD_REQUEST,
    )


def _create(request, **owner) -> Response:
    """A hook of ``owner`` (its department or its job) from the request's body: 201 with
    its secret, or 400 naming ``url``."""
    body = WebhookIn(data=request.data)
    body.is_valid(raise_exception=True)
    try:
        hook, secret = services.webhook_create(actor=request.user, **owner, **body.validated_data)
    except services.WebhookInvalid as invalid:
        return _invalid(invalid)
    return _created(hook, secret)


class DepartmentWebhooksView(APIView):
    """A department's hooks: every job in the queues below its node (its managers, staff)."""

    parser_classes = json_parsers()
    required_right = {"GET": Right.READ, "POST": Right.MANAGE}

    @extend_schema(responses=WebhookOut(many=True), summary="A department's webhooks")
    def get(self, request, name: str):
        department = selectors.department_managed(request.user, name)
        hooks = selectors.department_webhooks(department).select_related("department")
        return Response(WebhookOut(hooks, many=True).data)

    @extend_schema(
        request=WebhookIn,
        responses={201: WebhookCreated},
        summary="Add a department webhook; its secret is in this answer only",
        extensions=refusals(URL_REFUSALS),
    )
    def post(self, request, name: str):
        return _create(request, department=selectors.department_managed(request.user, name))


class JobWebhooksView(APIView):
    """A job's own hooks: that job's state changes only (its owner, its queue's managers)."""

    parser_classes = json_parsers()
    required_right = {"GET": Right.READ, "POST": Right.SUBMIT}

    @extend_schema(responses=WebhookOut(many=True), summary="A job's webhooks")
    def get(self, request, pk: int):
        job = selectors.job_hooks_allowed(request.user, pk)
        return Response(WebhookOut(selectors.job_webhooks(job), many=True).data)

    @extend_schema(
        request=WebhookIn,
        responses={201: WebhookCreated},
        summary="Add a webhook to a job; its secret is in this answer only",
        extensions=refusals(URL_REFUSALS),
    )
    def post(self, request, pk: int):
        return _create(request, job=selectors.job_hooks_allowed(request.user, pk))


class WebhookView(APIView):
    """One hook. Changing it takes ``manage`` for a department's, ``submit`` for a job's."""

    parser_classes = json_parsers()
    required_right = Right.READ  # the change's own right is checked once the hook is known

    @extend_schema(responses=WebhookOut, summary="One webhook")
    def get(self, request, pk: int):
        return Response(WebhookOut(selectors.webhook_get(request.user, pk)).data)

    @extend_schema(request=WebhookChange, responses=WebhookOut, summary="Pause or resume a webhook")
    def patch(self, request, pk: int):
        hook = selectors.webhook_get(request.user, pk)
        selectors.check_may_change(request.user, hook)
        body = WebhookChange(data=request.data)
        body.is_valid(raise_exception=True)
        if body.validated_data["paused"]:
            hook = services.webhook_pause(hook=hook, reason=f"paused by {request.user}")
        else:
            hook = services.webhook_resume(hook=hook)
        return Response(WebhookOut(hook).data)

    @extend_schema(responses={204: None}, summary="Delete a webhook and its deliveries")
    def delete(self, request, pk: int):
        hook = selectors.webhook_get(request.user, pk)
        selectors.check_may_change(request.user, hook)
        services.webhook_delete(hook=hook)
        return Response(status=status.HTTP_204_NO_CONTENT)


class WebhookDeliveriesView(APIView):
    required_right = Right.READ

    @extend_schema(
        responses=DeliveryOut(many=True),
        summary="A webhook's latest deliveries, newest first, each with its attempts",
    )
    def get(self, request, pk: int):
        hook = selectors.webhook_get(request.user, pk)
        return Response(DeliveryOut(selectors.webhook_deliveries(hook), many=True).data)


class WebhookTestView(APIView):
    required_right = Right.READ  # the change's own right is checked once the hook is known

    @extend_schema(
        request=None,
        responses={202: DeliveryOut},
        summary="Send a test event to a webhook (even a paused one), once",
    )
    def post(self, request, pk: int):
        hook = selectors.webhook_get(request.user, pk)
        selectors.check_may_change(request.user, hook)
        delivery = services.webhook_test(hook=hook)
        delivery.attempt_list = []  # type: ignore[attr-defined]
        return Response(DeliveryOut(delivery).data, status=status.HTTP_202_ACCEPTED)
