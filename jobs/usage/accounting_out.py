"""The accounting's question and answer, as the API and the page share them: the query
parameters (declared once, read and stated in the schema from one place), the answer's
serializer (JSON) and the same rows as CSV."""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date

from django.utils import timezone
from django.utils.translation import gettext
from rest_framework import serializers

from jobs.document.fields import Time
from jobs.document.params import Choice, Day, Text, params
from jobs.document.validation import JobInvalid
from jobs.usage.accounting import (
    EVERY,
    GROUPS,
    Report,
    Row,
    accounting_report,
    hours,
    utc_day,
    visibility_for,
)
from jobs.usage.samples import NODE_MAX, node_known

# The longest period a question may cover, by bucket: a year of days, ten years of months.
MAX_DAYS = {"day": 366, "month": 3660}
MAX_ROWS = 20_000  # rows an answer may have; a finer question must narrow its period
FORMATS = ("json", "csv")

ACCOUNTING_QUERY = params(
    Day(name="from", description="the first UTC day (default: the first of this month)"),
    Day(name="to", description="the last UTC day, included (default: today)"),
    Choice(
        name="group",
        choices=list(GROUPS),
        default="department",
        description="one row per department, leaf, person, runtime or resource in each bucket",
    ),
    Choice(name="every", choices=list(EVERY), default="month", description="the buckets"),
    Text(
        name="node",
        max_length=NODE_MAX,
        description="only the leaves under this node of the quota tree, its path "
        "(root/algorithm); default: every leaf",
    ),
    Choice(
        name="format",
        choices=list(FORMATS),
        default="json",
        description="json, or csv (also chosen by `Accept: text/csv`)",
    ),
)


@dataclass(frozen=True)
class AccountingQuery:
    since: date
    until: date
    group: str
    every: str
    format: str
    node: str | None


def accounting_query(source: Mapping, *, form: tuple[str, ...] = ()) -> AccountingQuery:
    """The question read from a request's parameters; ``JobInvalid`` names each parameter
    that is wrong, and ``to`` when the period is reversed or too long for its buckets."""
    values = ACCOUNTING_QUERY.read(source, form=form)
    today = utc_day(timezone.now())
    since = values["from"] or today.replace(day=1)
    until = values["to"] or max(today, since)
    every = values["every"]
    if until < since:
        raise JobInvalid({"to": gettext("must be on or after from (%(from)s)") % {"from": since}})
    if (until - since).days + 1 > MAX_DAYS[every]:
        raise JobInvalid(
            {
                "to": gettext(
                    "the period is at most %(days)s days with every=%(every)s; got %(got)s"
                )
                % {"days": MAX_DAYS[every], "every": every, "got": (until - since).days + 1}
            }
        )
    node = values["node"] or None
    if node is not None:
        node_known(node)
    return AccountingQuery(
        since=since,
        until=until,
        group=values["group"],
        every=every,
        format=values["format"],
        node=node,
    )


def accounting_answer(
    source: Mapping, user, *, form: tuple[str, ...] = ()
) -> tuple[AccountingQuery, Report]:
    """The question a request asks and its answer as ``user`` may see it; ``JobInvalid``
    names a parameter that is wrong, or ``group`` when the answer would be too long."""
    query = accounting_query(source, form=form)
    report = accounting_report(
        since=query.since,
        until=query.until,
        group=query.group,
        every=query.every,
        visibility=visibility_for(user),
        within=query.node,
    )
    if len(report.rows) > MAX_ROWS:
        raise JobInvalid(
            {
                "group": gettext(
                    "the answer would have %(count)s rows, more than %(limit)s: shorten the "
                    "period, or take monthly buckets or a coarser group"
                )
                % {"count": len(report.rows), "limit": MAX_ROWS}
            }
        )
    return query, report


class Hours(serializers.DictField):
    def __init__(self, **kwargs):
        super().__init__(child=serializers.FloatField(allow_null=True), **kwargs)


class JobsOut(serializers.Serializer):
    succeeded = serializers.IntegerField()
    failed = serializers.IntegerField()
    cancelled = serializers.IntegerField()


class AccountingRowOut(serializers.Serializer):
    class Meta:
        ref_name = "AccountingRow"

    start = serializers.DateField(help_text="the bucket's first UTC day")
    group = serializers.CharField(
        help_text="the department, leaf path, username, runtime or resource; empty for "
        "leaves no department owns"
    )
    held_hours = Hours(
        help_text="resource-hours held from admission to finish, per resource: cpu in "
        "core-hours, memory in byte-hours, GPUs in device-hours"
    )
    min_hours = Hours(
        allow_null=True,
        help_text="the node's min over the same time, in resource-hours (department and "
        "leaf groups; null otherwise)",
    )
    max_hours = Hours(
        allow_null=True,
        help_text="the node's max over the same time; a resource is null where no max was "
        "set part of the time (department and leaf groups; null otherwise)",
    )
    jobs = JobsOut(allow_null=True, help_text="jobs that finished, by final state")
    admitted = serializers.IntegerField(
        allow_null=True, help_text="jobs first admitted: the waits counted"
    )
    wait_mean_seconds = serializers.FloatField(allow_null=True)
    wait_p90_seconds = serializers.IntegerField(
        allow_null=True,
        help_text="read from the waits' histogram: the upper bound of the bucket in which "
        "the 90th percentile falls",
    )
    preemptions = serializers.IntegerField(allow_null=True, help_text="Preempted events")


class AccountingOut(serializers.Serializer):
    class Meta:
        ref_name = "Accounting"

    # "from" is a keyword: declared below.
    to = serializers.DateField(source="until", help_text="the last UTC day, included")
    group = serializers.ChoiceField(choices=list(GROUPS))
    every = serializers.ChoiceField(choices=list(EVERY))
    computed_to = Time(help_text="now, or the end of the period if it is over")
    resources = serializers.ListField(child=serializers.CharField())
    rows = AccountingRowOut(many=True)

    def get_fields(self):
        fields = super().get_fields()
        return {
            "from": serializers.DateField(source="since", help_text="the first UTC day"),
            **fields,
        }


def row_out(row: Row) -> dict:
    """One row's answer (``AccountingRowOut``): figures in resource-hours and seconds."""
    figures = row.figures
    held = {name: hours(name, seconds) for name, seconds in sorted(figures.held.items())}
    jobs = row.with_jobs
    return {
        "start": row.start.isoformat(),
        "group": row.group,
        "held_hours": held,
        "min_hours": None
        if row.min is None
        else {name: hours(name, value) for name, value in sorted(row.min.items())},
        "max_hours": None
        if row.max is None
        else {name: hours(name, value) for name, value in sorted(row.max.items())},
        "jobs": {
            "succeeded": figures.succeeded,
            "failed": figures.failed,
            "cancelled": figures.cancelled,
        }
        if jobs
        else None,
        "admitted": figures.admissions if jobs else None,
        "wait_mean_seconds": round(figures.wait_mean, 3)
        if jobs and figures.wait_mean is not None
        else None,
        "wait_p90_seconds": figures.wait_p90 if jobs else None,
        "preemptions": figures.preemptions if jobs else None,
    }


def report_out(report: Report) -> dict:
    """The answer as ``AccountingOut`` states it, written directly: a year of rows by person
    is tens of thousands, which the serializer would walk field by field."""
    return {
        "from": report.since.isoformat(),
        "to": report.until.isoformat(),
        "group": report.group,
        "every": report.every,
        "computed_to": report.computed_to.isoformat(),
        "resources": report.resources,
        "rows": [row_out(row) for row in report.rows],
    }


CSV_FIGURES = (
    "jobs_succeeded",
    "jobs_failed",
    "jobs_cancelled",
    "admitted",
    "wait_mean_seconds",
    "wait_p90_seconds",
    "preemptions",
)


def report_csv(report: Report) -> str:
    """The answer as CSV: one line per row, the figures then, per resource, its held,
    min and max hours (``held_hours[cpu]``, ...); an empty cell is a null."""
    out = io.StringIO()
    write = csv.writer(out)
    resources = report.resources
    write.writerow(
        ["start", "group", *CSV_FIGURES]
        + [f"{kind}_hours[{name}]" for name in resources for kind in ("held", "min", "max")]
    )
    for row in report.rows:
        data = row_out(row)
        jobs = data["jobs"] or {}
        cells = [
            jobs.get("succeeded"),
            jobs.get("failed"),
            jobs.get("cancelled"),
            data["admitted"],
            data["wait_mean_seconds"],
            data["wait_p90_seconds"],
            data["preemptions"],
        ]
        for name in resources:
            for kind in ("held", "min", "max"):
                values = data[f"{kind}_hours"]
                cells.append(None if values is None else values.get(name))
        write.writerow(
            [row.start.isoformat(), row.group] + ["" if cell is None else cell for cell in cells]
        )
    return out.getvalue()


def csv_name(query: AccountingQuery) -> str:
    under = f"-{query.node.replace('/', '.')}" if query.node else ""
    return f"accounting-{query.since}-{query.until}{under}-{query.group}-{query.every}.csv"
