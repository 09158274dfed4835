"""Queues as the jobs API shows them: a queue, its policies and quota, and its jobs."""

from __future__ import annotations

from django.conf import settings
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field, inline_serializer
from rest_framework import serializers

from jobs.document.fields import Nullable, Quantities, Time
from jobs.document.schema import writer
from jobs.models import LIVE, State
from kube.quantity import format_resources


class QueuedJobOut(serializers.Serializer):
    """A job as a queue lists it."""

    job = serializers.IntegerField(source="pk")
    name = serializers.CharField()
    owner = serializers.CharField(source="owner.username")


class PendingOut(QueuedJobOut):
    """A waiting job in its queue, its ``position`` set by QueueDetailOut."""

    class Meta:
        ref_name = "PendingJob"

    position = serializers.IntegerField(read_only=True, allow_null=True, default=None)
    priority = serializers.IntegerField()
    enqueued_at = Time()
    held = serializers.BooleanField(
        source="is_held", help_text="held by a person: skipped until released"
    )


class BackoffOut(PendingOut):
    class Meta:
        ref_name = "BackoffJob"

    reason = serializers.CharField(source="backoff_reason")
    next_attempt_at = Time()


class AdmittedOut(QueuedJobOut):
    class Meta:
        ref_name = "AdmittedJob"

    state = serializers.ChoiceField(State.choices)
    dequeued_at = Time()


class QueueOut(serializers.Serializer):
    """A leaf queue, its policies and its node's quota. ``context["usage"]`` is what its
    node uses (base units); ``context["pending"]``, when given, its waiting jobs by id."""

    class Meta:
        ref_name = "QueueBase"

    name = serializers.CharField()
    path = serializers.CharField(source="node.path")
    policy = serializers.CharField()
    preemption = serializers.BooleanField(help_text="preemption within the queue")
    backoff_base_seconds = serializers.SerializerMethodField()
    backoff_max_seconds = serializers.SerializerMethodField()
    priority_class = Nullable()
    retired = serializers.SerializerMethodField(
        help_text="its node left the quota tree: it takes no jobs"
    )
    namespaces = serializers.ListField(child=serializers.CharField(), source="node.namespaces")
    min = Quantities(source="node.min")
    max = Quantities(source="node.max")
    used = serializers.SerializerMethodField()

    @extend_schema_field(OpenApiTypes.FLOAT)
    def get_backoff_base_seconds(self, queue) -> float:
        return _default(queue.backoff_base_seconds, settings.BACKOFF_BASE_SECONDS)

    @extend_schema_field(OpenApiTypes.FLOAT)
    def get_backoff_max_seconds(self, queue) -> float:
        return _default(queue.backoff_max_seconds, settings.BACKOFF_MAX_SECONDS)

    def get_retired(self, queue) -> bool:
        return not queue.active

    @extend_schema_field(Quantities())
    def get_used(self, queue) -> dict[str, str]:
        return format_resources(self.context["usage"].get(queue.node.path, {}))


def _default(value, default):
    return default if value is None else value


class QueueListOut(QueueOut):
    class Meta:
        ref_name = "Queue"

    pending = serializers.SerializerMethodField(help_text="jobs waiting: active and backoff")

    def get_pending(self, queue) -> int:
        return self.context["pending"].get(queue.pk, 0)


# A queue's jobs by live state.
QueueCountsOut = inline_serializer(
    "QueueCounts", {str(state): serializers.IntegerField() for state in LIVE}
)


class QueueDetailOut(QueueOut):
    """A queue with one page of its waiting jobs in order: ``active`` (queued, tried in
    turn) and ``backoff`` (tried again at ``next_attempt_at``), and the jobs it has in
    the cluster. ``context["page"]`` is the page as (position, job)."""

    class Meta:
        ref_name = "QueueDetail"

    active = serializers.SerializerMethodField()
    backoff = serializers.SerializerMethodField()
    admitted = serializers.SerializerMethodField(help_text="in the cluster, first dequeued first")
    counts = serializers.SerializerMethodField()
    offset = serializers.SerializerMethodField()
    limit = serializers.SerializerMethodField()

    def _page(self, state: str, out: type[PendingOut]) -> list[dict]:
        write, answers = writer(out), []
        for position, job in self.context["page"]:
            if job.state == state:
                job.position = position
                answers.append(write(job))
        return answers

    @extend_schema_field(PendingOut(many=True))
    def get_active(self, queue) -> list[dict]:
        return self._page(State.QUEUED, PendingOut)

    @extend_schema_field(BackoffOut(many=True))
    def get_backoff(self, queue) -> list[dict]:
        return self._page(State.BACKOFF, BackoffOut)

    @extend_schema_field(AdmittedOut(many=True))
    def get_admitted(self, queue) -> list[dict]:
        write = writer(AdmittedOut)
        return [write(job) for job in self.context["admitted"]]

    @extend_schema_field(QueueCountsOut)
    def get_counts(self, queue) -> dict[str, int]:
        return self.context["counts"]

    def get_offset(self, queue) -> int:
        return self.context["offset"]

    def get_limit(self, queue) -> int:
        return self.context["limit"]
