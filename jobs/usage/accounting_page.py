"""The accounting page: a period, a grouping and buckets chosen in a form, the answer as
a table (resource-hours held beside the node's min and max, jobs by final state, waits,
preemptions), and the same answer to take away as CSV or JSON from the API."""

from __future__ import annotations

from urllib.parse import urlencode

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils.translation import gettext as _
from django.utils.translation import ngettext
from django.views.decorators.http import require_GET

from jobs.document.validation import JobInvalid
from jobs.usage.accounting import EVERY, GROUPS, Report
from jobs.usage.accounting_out import accounting_answer, row_out
from kube.quantity import POOL_MARK, pool_parts
from queues.models import QuotaNode
from queues.phrases import resource_name
from queues.quota import pool_shares_named
from queues.selectors import tree_nodes

FORM = ("from", "to", "group", "node", "every")
GIB = 2**30


def group_names() -> dict[str, str]:
    return {
        "department": _("department"),
        "leaf": _("leaf"),
        "person": _("person"),
        "runtime": _("runtime"),
        "resource": _("resource"),
    }


def every_names() -> dict[str, str]:
    return {"day": _("day"), "month": _("month")}


def unit(resource: str) -> str:
    """The unit of a resource's hours on the page (the API gives memory in byte-hours)."""
    resource = pool_parts(resource)[0]
    if resource == "cpu":
        return _("core-hours")
    if resource == "memory":
        return _("GiB-hours")
    return _("hours")


def shown(resource: str, value: float | None) -> str:
    if value is None:
        return _("no limit")
    if pool_parts(resource)[0] == "memory":
        value = value / GIB
    if value == 0:
        return "0"
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:,.1f}"


def wait_text(seconds: float | None) -> str:
    if seconds is None:
        return "—"
    if seconds < 60:
        count = round(seconds)
        return ngettext("%(count)s second", "%(count)s seconds", count) % {"count": count}
    if seconds < 3600:
        count = round(seconds / 60)
        return ngettext("%(count)s minute", "%(count)s minutes", count) % {"count": count}
    if seconds < 86400:
        return _("%(count)s h") % {"count": f"{seconds / 3600:.1f}"}
    return _("%(count)s d") % {"count": f"{seconds / 86400:.1f}"}


def table(report: Report) -> dict:
    """The table's columns and rows: per resource, its hours held and under them the
    node's min and max over the same time; a node pool's share of a resource (its hours
    by pool) where the tree names that share (the API and the CSV give every one)."""
    named = pool_shares_named(tree_nodes())
    resources = [
        name
        for name in report.resources
        if name != "pods" and (POOL_MARK not in name or name in named)
    ]
    rows = []
    for row in report.rows:
        data = row_out(row)
        cells = []
        for name in resources:
            held = data["held_hours"].get(name)
            low = None if data["min_hours"] is None else data["min_hours"].get(name)
            high = None if data["max_hours"] is None else data["max_hours"].get(name)
            cells.append(
                {
                    "held": "—" if held is None else shown(name, held),
                    "min": None if data["min_hours"] is None else shown(name, low or 0),
                    "max": None if data["max_hours"] is None else shown(name, high),
                    "over": low is not None and held is not None and held > low,
                }
            )
        rows.append(
            {
                "start": row.start,
                "group": row.group or _("no department"),
                "cells": cells,
                "jobs": data["jobs"],
                "admitted": data["admitted"],
                "wait_mean": wait_text(data["wait_mean_seconds"]),
                "wait_p90": "—"
                if data["wait_p90_seconds"] is None
                else _("≤ %(wait)s") % {"wait": wait_text(data["wait_p90_seconds"])},
                "preemptions": data["preemptions"],
            }
        )
    return {
        "columns": [{"name": resource_name(name), "unit": unit(name)} for name in resources],
        "rows": rows,
    }


@login_required
@require_GET
def accounting(request: HttpRequest) -> HttpResponse:
    """The accounting of the period the form names (this month by default), by the
    grouping and buckets it names, as the API answers it for the same person."""
    context: dict = {
        "form": request.GET,
        "groups": group_names(),
        "everies": every_names(),
        "group_order": GROUPS,
        "every_order": EVERY,
        "nodes": QuotaNode.objects.filter(active=True)
        .order_by("path")
        .values_list("path", flat=True),
    }
    try:
        query, report = accounting_answer(request.GET, request.user, form=FORM)
    except JobInvalid as invalid:
        context["errors"] = invalid.errors
        return render(request, "jobs/accounting.html", context, status=400)
    data = {"from": query.since, "to": query.until, "group": query.group, "every": query.every}
    if query.node:
        data["node"] = query.node
    api = reverse("api-accounting")
    context |= {
        "query": query,
        "report": report,
        "table": table(report),
        "csv_url": f"{api}?{urlencode(data | {'format': 'csv'})}",
        "json_url": f"{api}?{urlencode(data | {'format': 'json'})}",
    }
    return render(request, "jobs/accounting.html", context)
