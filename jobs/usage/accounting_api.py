"""GET /api/v1/accounting/: the accounting of any period, by department, leaf, person,
runtime or resource, daily or monthly, as JSON or CSV (``format=csv`` or
``Accept: text/csv``)."""

from __future__ import annotations

from django.utils.http import content_disposition_header
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.response import Response
from rest_framework.views import APIView

from jobs.usage.accounting_out import (
    ACCOUNTING_QUERY,
    FORMATS,
    AccountingOut,
    accounting_answer,
    csv_name,
    report_csv,
    report_out,
)
from queues.api_base import refusals


class CSVRenderer(BaseRenderer):
    """The answer's CSV, which the view writes itself (``report_csv``)."""

    media_type = "text/csv"
    format = "csv"
    charset = "utf-8"

    def render(self, data, accepted_media_type=None, renderer_context=None):
        return data.encode() if isinstance(data, str) else data


class FormatParameter(DefaultContentNegotiation):
    """``format`` is a declared parameter, which the view reads and refuses with a 400
    naming it: negotiation by ``format`` would answer an unknown one 404."""

    def select_renderer(self, request, renderers, format_suffix=None):
        wanted = request.query_params.get("format")
        if wanted in FORMATS:
            return next((r, r.media_type) for r in renderers if r.format == wanted)
        if wanted is not None:
            return renderers[0], renderers[0].media_type  # the view refuses it, in JSON
        return super().select_renderer(request, renderers, format_suffix)


class AccountingView(APIView):
    renderer_classes = [JSONRenderer, CSVRenderer]
    content_negotiation_class = FormatParameter

    @extend_schema(
        operation_id="accounting",
        parameters=ACCOUNTING_QUERY.parameters(),
        responses={
            (200, "application/json"): AccountingOut,
            (200, "text/csv"): OpenApiResponse(
                OpenApiTypes.STR, description="the same rows as CSV, one per group and bucket"
            ),
        },
        summary="Usage accounting: resource-hours held, jobs by final state, waits and "
        "preemptions by department, leaf, person, runtime or resource, daily or monthly",
        description="Days are UTC days; a month is the calendar month of them. Held: each "
        "span of quota held (admission to finish; a preempted and readmitted job has "
        "several) times its request, an open span counted to now. Jobs by final state on "
        "the day they finished; a wait (first admission less enqueue time) on the day of "
        "the first admission, its p90 read from a histogram over fixed bounds; "
        "preemptions suffered are the Preempted events of the day. Department and leaf "
        "rows carry their node's min and max integrated over the same time, from the "
        "audit of the tree's changes. Past days come from the daily summary beat keeps; "
        "today is computed live. Staff see everything; a manager every job under the "
        "departments they manage; anyone else their own jobs in their departments. "
        "A period is at most 366 days of daily buckets or 3,660 of monthly ones, and an "
        "answer at most 20,000 rows.",
        extensions=refusals(
            {
                "from": "before 2000-01-01 or after 2099-12-31",
                "to": "after 2099-12-31, before from, or a period longer than its buckets allow",
                "group": "an answer of more than 20,000 rows",
            }
        ),
    )
    def get(self, request):
        query, report = accounting_answer(request.query_params, request.user)
        if request.accepted_renderer.format == "csv":
            response = Response(report_csv(report), content_type="text/csv; charset=utf-8")
            response["Content-Disposition"] = content_disposition_header(True, csv_name(query))
            return response
        return Response(report_out(report))

    def finalize_response(self, request, response, *args, **kwargs):
        # A refusal is JSON whatever was asked for: {"field": ["reason"]}.
        if response.status_code >= 400:
            request.accepted_renderer, request.accepted_media_type = (
                JSONRenderer(),
                JSONRenderer.media_type,
            )
        return super().finalize_response(request, response, *args, **kwargs)
