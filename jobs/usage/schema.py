"""The usage history's answers: GET /api/v1/quota-tree/history/ and the page's CSV."""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from jobs.document.fields import Time
from jobs.usage.samples import RANGES
from kube.quantity import scale


@extend_schema_field(OpenApiTypes.NUMBER)
class Amount(serializers.Field):
    """One figure of a history point in its resource's own unit, as /metrics gives them:
    cpu in cores, any other resource in its base unit (memory in bytes, GPUs in devices)."""

    def __init__(self, figure: str, **kwargs):
        self.figure = figure
        super().__init__(source="*", read_only=True, **kwargs)

    def to_representation(self, point) -> int | float | None:
        units = getattr(point, self.figure)
        if units is None:
            return None
        per = scale(point.resource)
        return units // per if units % per == 0 else units / per


class UsagePointOut(serializers.Serializer):
    """One bucket of one resource of a node's usage history: the highest of each figure
    among the samples in it. The CSV's columns are these fields, in this order."""

    class Meta:
        ref_name = "UsagePoint"

    at = Time(help_text="the start of the bucket")
    node = serializers.CharField()
    resource = serializers.CharField()
    used = Amount("used", help_text="what the jobs holding quota under the node use")
    min = Amount("min")
    max = Amount("max", allow_null=True, help_text="null: no limit")
    pending = Amount("pending", help_text="what the pending jobs under the node ask for")
    admitted = serializers.IntegerField(
        help_text="jobs under the node holding some of the resource"
    )


class UsageHistoryOut(serializers.Serializer):
    """A node's usage history over the last hour, day or week."""

    class Meta:
        ref_name = "UsageHistory"

    node = serializers.CharField()
    range = serializers.ChoiceField(list(RANGES), source="range.name")
    step_seconds = serializers.IntegerField(help_text="the width of a bucket")
    since = Time()
    until = Time()
    points = UsagePointOut(many=True, help_text="by resource (cpu first), then time")
