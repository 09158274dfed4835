"""GET /api/v1/quota-tree/history/: a node's usage history, as the tree page charts it."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework.response import Response
from rest_framework.views import APIView

from jobs.document.schema import writer
from jobs.usage.samples import HISTORY_QUERY, history_query, usage_series
from jobs.usage.schema import UsageHistoryOut
from queues.api_base import refusals


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
