"""A job's history as the API answers it."""

from __future__ import annotations

from rest_framework import serializers

from jobs.document.fields import Nullable, Time
from jobs.models import JobEvent


class EventOut(serializers.Serializer):
    class Meta:
        ref_name = "JobEvent"

    at = Time(
        source="created_at",
        help_text="when it happened; for a cluster event that repeats, the last time",
    )
    type = serializers.ChoiceField(JobEvent.Type.choices)
    reason = serializers.CharField()
    message = serializers.CharField()
    actor = serializers.CharField(source="actor.username", allow_null=True)
    involved = Nullable(help_text="the pod or pod group the cluster reported on")
    cycle = serializers.IntegerField(
        allow_null=True, help_text="the scheduling cycle a gang failure was reported in"
    )
    count = serializers.IntegerField(
        min_value=1, help_text="how many times the cluster reported it (1 for the portal's own)"
    )
    first_at = Time(help_text="for a cluster event that repeats, its first time when known")
