"""The quota tree page: every node's bars, refreshed while it is open, and the usage charts
of one node; its history as CSV. The queue page shows its leaf's charts with
``usage_chart``."""

from __future__ import annotations

import csv
from collections.abc import Mapping
from functools import partial
from urllib.parse import urlencode

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.core.exceptions import BadRequest
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils.http import content_disposition_header
from django.utils.translation import gettext as _
from django.utils.translation import ngettext
from django.views.decorators.http import require_GET

from jobs.document.params import HtmxHttpRequest, page_query
from jobs.document.schema import bound, writer
from jobs.document.validation import JobInvalid
from jobs.usage import charts, samples
from jobs.usage.schema import UsagePointOut
from kube.quantity import human
from queues.fairness import format_half_life
from queues.limits import limits_lines
from queues.phrases import resource_name
from queues.quota import Balance
from queues.selectors import queues_for_user

QUOTA_POLL_SECONDS = 5


def _balance_rows(balances: Mapping[str, Balance]) -> list[dict]:
    """The tree page's row of each resource: readable figures, and its bar."""
    rows = []
    for name, b in balances.items():
        h = partial(human, name)
        rows.append(
            {
                "name": resource_name(name),
                "used": h(b.used),
                "min": h(b.min or 0),
                "max": _("no limit") if b.max is None else h(b.max),
                "borrowed": h(b.borrowed),
                "lent": h(b.lent),
                "free": _("no limit") if b.free is None else h(b.free),
                "pending": h(b.pending),
                "borrowing": b.borrowed > 0,
                "bar": charts.bar(b),
            }
        )
    return rows


def _query_without(request: HttpRequest, *names: str, **values: str) -> str:
    """The request's query string without ``names`` and with ``values`` set."""
    query = request.GET.copy()
    for name in names:
        query.pop(name, None)
    for name, value in values.items():
        query[name] = value
    return f"?{query.urlencode()}" if query else ""


@login_required
@require_GET
def quota_tree(request: HtmxHttpRequest) -> HttpResponse:
    """Every node's bars per resource (used, borrowed, lent, min, max, pending demand),
    refreshed every QUOTA_POLL_SECONDS, and the usage charts of one node (``?node=``, the
    root by default, over ``?range=``). Anyone signed in sees the whole tree.

    The bars' fragment is polled at one address, so an unchanged tree answers 304 to its
    ETag (portal/fragments.py), and a changed one is morphed in: focus and selection in
    it survive the refresh.
    """
    figures = samples.tree_figures()
    nodes = sorted(figures.tree.values(), key=lambda node: node.path.split("/"))
    root = next((node.path for node in nodes if node.parent is None), None)
    query = None  # no tree yet: nothing to chart
    if root is not None:
        try:
            query = samples.history_query(request.GET, default_node=root)
        except JobInvalid as invalid:
            raise BadRequest(str(invalid)) from None  # handler400 shows it
    # Leaves link to their queue page where the user may see it.
    queue_names = dict(
        queues_for_user(request.user).filter(active=True).values_list("node__path", "name")
    )
    half_life, fair = samples.fair_share_figures(figures.tree)
    rows = [
        {
            "node": node,
            "depth": node.path.count("/"),
            "queue_name": queue_names.get(node.path),
            "chosen": query is not None and node.path == query.node,
            "history_url": _query_without(request, node=node.path) + "#usage-history",
            "resources": _balance_rows(figures.balances[node.path]),
            "fair": _fair_row(fair[node.path]) if node.parent is not None and fair else None,
            "limits": "; ".join(limits_lines(node.limits)),
        }
        for node in nodes
    ]
    context = {
        "rows": rows,
        "half_life": format_half_life(half_life) if half_life is not None else "",
        "poll_url": request.path + _query_without(request),
        "poll_seconds": QUOTA_POLL_SECONDS,
    }
    if request.htmx:
        return render(request, "jobs/quota_tree.html#quota-bars", context)
    if query is not None:
        context["usage_chart"] = usage_chart(
            request, query.node, level=2, choices=[node.path for node in nodes]
        )
    return render(request, "jobs/quota_tree.html", context)


def _fair_row(figures: samples.FairShareFigures) -> dict:
    return {
        "used": f"{figures.used:.0%}",
        "above": figures.used > 1,
        "share": f"{figures.share:.1%}",
        "usage": f"{figures.usage:.1%}",
        "weight": f"{figures.weight:g}",
    }


def usage_chart(
    request: HtmxHttpRequest, path: str, *, level: int = 3, choices: list[str] | None = None
) -> dict:
    """What ``jobs/_usage_chart.html`` draws: the usage of the node at ``path`` over the
    range the request names (``?range=``), one chart per resource, with links to the other
    ranges, the CSV and the API; ``level`` is its heading's, and ``choices`` the nodes it
    offers to show instead (a form that works without JavaScript).

    A polled fragment (htmx) gets a placeholder, read from nothing: htmx puts back the
    charts already on the page in its place (``hx-preserve``), as they change once a
    sample, not at every poll.
    """
    if request.htmx:
        return {"preserved": True}
    chosen = page_query(samples.RANGE_QUERY, request)["range"]
    window = samples.RANGES[chosen] if "range" in request.GET else samples.range_for_history(path)
    series = samples.usage_series(node=path, window=window)
    data = urlencode({"node": path, "range": window.name})
    return {
        "node": path,
        "level": level,
        "range": window,
        "ranges": [
            {
                "name": name,
                "title": samples.RANGES[name].title,
                "url": _query_without(request, range=name) + "#usage-history",
                "current": name == window.name,
            }
            for name in samples.RANGES
        ],
        "charts": [
            charts.chart(
                node=path,
                resource=resource,
                points=points,
                window=window,
                since=series.since,
                until=series.until,
                step=series.step,
            )
            for resource, points in series.by_resource().items()
        ],
        "csv_url": f"{reverse('quota-history-csv')}?{data}",
        "api_url": f"{reverse('api-quota-history')}?{data}",
        "every": settings.USAGE_HISTORY_SECONDS,
        "bucket": _duration(series.step_seconds),
        "choices": choices or [],
    }


def _duration(seconds: int) -> str:
    """``5 minutes``, ``1 hour``, ``90 seconds``."""
    if seconds % 3600 == 0:
        count = seconds // 3600
        return ngettext("%(count)s hour", "%(count)s hours", count) % {"count": count}
    if seconds % 60 == 0:
        count = seconds // 60
        return ngettext("%(count)s minute", "%(count)s minutes", count) % {"count": count}
    return ngettext("%(count)s second", "%(count)s seconds", seconds) % {"count": seconds}


@login_required
@require_GET
def quota_history_csv(request: HttpRequest) -> HttpResponse:
    """A node's usage history (``?node=``, ``?range=``) as CSV: the API's points, one row
    each, its fields as the columns. A bad parameter answers 400 naming it."""
    try:
        query = samples.history_query(request.GET)
    except JobInvalid as invalid:
        return HttpResponse(f"{invalid}\n", content_type="text/plain; charset=utf-8", status=400)
    series = samples.usage_series(node=query.node, window=query.range)
    response = HttpResponse(content_type="text/csv; charset=utf-8")
    name = f"usage-{query.node.replace('/', '-')}-{query.range.name}.csv"
    response["Content-Disposition"] = content_disposition_header(True, name)
    columns, write = list(bound(UsagePointOut).fields), writer(UsagePointOut)
    out = csv.writer(response)
    out.writerow(columns)
    for point in series.points:
        row = write(point)
        out.writerow(["" if row[column] is None else row[column] for column in columns])
    return response
