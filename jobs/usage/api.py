"""The quota tree's reads that need the jobs: GET /api/v1/quota-tree/history/ (a node's usage
history, as the tree page charts it) and POST /api/v1/quota-tree/preview/ (what a new tree
would do before it is applied)."""

from __future__ import annotations

from dataclasses import asdict

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from jobs.document.schema import writer
from jobs.reads.quota_preview import quota_preview
from jobs.usage.samples import HISTORY_QUERY, history_query, usage_series
from jobs.usage.schema import UsageHistoryOut
from queues.api import TREE_REFUSALS, QuotaTreeDocument
from queues.api_base import STAFF_ONLY, json_parsers, refusals
from queues.scope import Right


class QuotaHistoryView(APIView):
    @extend_schema(
        operation_id="quota_history",
        parameters=HISTORY_QUERY.parameters(),
        responses=UsageHistoryOut,
        summary="A node's usage history: used, min, max, pending demand and admitted jobs",
        description="Recorded every USAGE_HISTORY_SECONDS and kept USAGE_HISTORY_DAYS; one "
        "point per resource and bucket (a minute for an hour, 5 minutes for a day, 30 for a "
        "week), each the highest value among its samples. A bucket with no sample is "
        "missing, not zero. The quota tree page's charts and its CSV show the same. Anyone "
        "signed in may read any node, as on the quota tree page.",
        extensions=refusals({"node": "no node of the quota tree, now or before, has that path"}),
    )
    def get(self, request):
        query = history_query(request.query_params)
        series = usage_series(node=query.node, window=query.range)
        return Response(writer(UsageHistoryOut)(series))


class ChangeOut(serializers.Serializer):
    node = serializers.CharField()
    field = serializers.ChoiceField(choices=["min", "max"])
    resource = serializers.CharField()
    before = serializers.CharField(allow_null=True, help_text="null: not set, or a new node")
    after = serializers.CharField(allow_null=True, help_text="null: not set, or retired")


class ConsequenceOut(serializers.Serializer):
    job = serializers.IntegerField()
    name = serializers.CharField()
    owner = serializers.CharField()
    queue = serializers.CharField()
    why = serializers.CharField(help_text="why it is preempted, or can never run, in the "
                                "rule's words; empty for an admission")  # fmt: skip
    by_the_change = serializers.BooleanField(
        help_text="false when the next cycle would do the same with the tree as it is"
    )


class StartOut(serializers.Serializer):
    at = serializers.DateTimeField(allow_null=True, help_text="null: no estimate")
    basis = serializers.CharField(help_text="how it was reached, in words")


class QueueHeadOut(serializers.Serializer):
    queue = serializers.CharField()
    job = serializers.IntegerField(help_text="its first waiting job")
    name = serializers.CharField()
    before = StartOut(help_text="about when that job starts with the tree as it is")
    after = StartOut(help_text="and with this tree")


class QuotaPreviewOut(serializers.Serializer):
    changes = ChangeOut(many=True)
    preempted = ConsequenceOut(many=True)
    admitted = ConsequenceOut(many=True)
    unrunnable = ConsequenceOut(
        many=True, help_text="waiting jobs it leaves with nowhere to run: applying it fails them"
    )
    unrunnable_count = serializers.IntegerField(
        help_text="how many they are; the first 100 are named"
    )
    queues = QueueHeadOut(
        many=True,
        help_text="each queue under a changed node, or that gains or loses jobs: its first "
        "waiting job and about when it starts, before and after",
    )


class QuotaPreviewView(APIView):
    """What applying a tree would do now; nothing is written."""

    parser_classes = json_parsers()
    permission_classes = STAFF_ONLY
    required_right = {"POST": Right.ADMIN}

    @extend_schema(
        operation_id="quota_tree_preview",
        request=QuotaTreeDocument,
        responses=QuotaPreviewOut,
        summary="What a new quota tree would do (staff): its changes, whom it preempts and admits",
        description="The admission rule run on the usage and the queues as they are now, with "
        "the tree as it is and with this one: `changes` lists every min and max that differs; "
        "`preempted` the running jobs the new tree would preempt at the next cycle, each with "
        "why; `admitted` the waiting jobs the next cycle would admit under it; `unrunnable` "
        "the waiting jobs it leaves with nowhere to run, which applying it fails. "
        "`by_the_change` is false for a job the next cycle would preempt or admit anyway. "
        "Nothing is written; a tree the save would refuse is refused here in the same words. "
        "PUT /api/v1/quota-tree/ applies it.",
        extensions=refusals(TREE_REFUSALS),
    )
    def post(self, request):
        preview = quota_preview(request.data)
        return Response(QuotaPreviewOut(asdict(preview)).data)
