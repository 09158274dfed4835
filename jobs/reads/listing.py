"""Finding jobs: one filter, one sort and one kind of page for the jobs page (/jobs/) and
GET /api/v1/jobs/, read from the query string so that a view can be bookmarked and shared.

Pages are keyset pages: a page ends with a cursor (the last row's sort value and id), and
the next page is the rows after it in the sort order, so page 5,000 costs what page 1
costs (no OFFSET walks the rows before it).
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any
from urllib.parse import urlencode

from django.db.models import CharField, Count, F, Field, Func, IntegerField, Q, QuerySet, Value
from django.db.models.lookups import GreaterThan, LessThan
from django.utils.translation import gettext as _

from jobs.document.params import (
    Choice,
    Choices,
    Flag,
    Integer,
    Moment,
    Param,
    Params,
    Text,
    Words,
    params,
)
from jobs.document.validation import OFFSET_MAX, PAGE_MAX, JobInvalid
from jobs.models import Job, State
from jobs.reads.selectors import jobs_for_user

# Sortable columns: the name in the URL -> the column, and the type of its cursor value.
# "submitted" sorts by id, which follows submission order and needs no index of its own.
SORTS: dict[str, tuple[str, type[Field]]] = {
    "submitted": ("id", IntegerField),
    "name": ("name", CharField),
    "state": ("state", CharField),
    "queue": ("queue__name", CharField),
    "owner": ("owner__username", CharField),
    "priority": ("priority", IntegerField),
    "kind": ("kind", CharField),
    "runtime": ("runtime", CharField),
}
DEFAULT_SORT = "-submitted"
# Groups: the name in the URL -> the column counted, and the filter field that narrows to
# one group (a group's link on the page).
GROUPS = {"queue": ("queue__name", "queues"), "state": ("state", "states")}
DEFAULT_LIMIT = 50
# Counting stops here: a count costs what it counts, and past this "more than 10,000" says
# enough, so a page over 100,000 jobs costs what one over 10,000 does.
COUNT_MAX = 10_000
TEXT_MAX = 100
# A priority filter takes any integer of up to 9 digits: one past every priority matches no
# job, which is an answer, not a mistake.
PRIORITY_FILTER_MAX = 999_999_999


@dataclass(frozen=True)
class JobFilter:
    """Which jobs: every field narrows; empty fields do not."""

    states: tuple[str, ...] = ()
    queues: tuple[str, ...] = ()  # queue names or leaf paths
    owners: tuple[str, ...] = ()  # usernames
    kinds: tuple[str, ...] = ()
    runtimes: tuple[str, ...] = ()
    priority_min: int | None = None
    priority_max: int | None = None
    submitted_after: datetime | None = None
    submitted_before: datetime | None = None
    text: str = ""  # in the job's name
    mine: bool = False

    def apply(self, jobs: QuerySet[Job], user) -> QuerySet[Job]:
        if self.states:
            jobs = jobs.filter(state__in=self.states)
        if self.queues:
            jobs = jobs.filter(
                Q(queue__name__in=self.queues) | Q(queue__node__path__in=self.queues)
            )
        if self.owners:
            jobs = jobs.filter(owner__username__in=self.owners)
        if self.mine:
            jobs = jobs.filter(owner=user)
        if self.kinds:
            jobs = jobs.filter(kind__in=self.kinds)
        if self.runtimes:
            jobs = jobs.filter(runtime__in=self.runtimes)
        if self.priority_min is not None:
            jobs = jobs.filter(priority__gte=self.priority_min)
        if self.priority_max is not None:
            jobs = jobs.filter(priority__lte=self.priority_max)
        if self.submitted_after is not None:
            jobs = jobs.filter(created_at__gte=self.submitted_after)
        if self.submitted_before is not None:
            jobs = jobs.filter(created_at__lt=self.submitted_before)
        if self.text:
            jobs = jobs.filter(name__icontains=self.text)
        return jobs


@dataclass(frozen=True)
class JobQuery:
    """A filter, a sort, and where the page starts: everything a jobs URL says."""

    filter: JobFilter = field(default_factory=JobFilter)
    sort: str = DEFAULT_SORT
    after: tuple[object, int] | None = None  # the last row of the page before
    limit: int = DEFAULT_LIMIT
    group: str = ""
    offset: int | None = None  # the API's pages by offset, as before cursors

    @property
    def column(self) -> str:
        return SORTS[self.sort.lstrip("-")][0]

    @property
    def descending(self) -> bool:
        return self.sort.startswith("-")

    def params(self, **changes) -> dict[str, str]:
        """The query string's parameters of this query (with ``changes``), defaults left out."""
        query = replace(self, **changes)
        wanted = query.filter
        out = {
            "state": ",".join(wanted.states),
            "queue": ",".join(wanted.queues),
            "owner": ",".join(wanted.owners),
            "kind": ",".join(wanted.kinds),
            "runtime": ",".join(wanted.runtimes),
            "priority_min": "" if wanted.priority_min is None else str(wanted.priority_min),
            "priority_max": "" if wanted.priority_max is None else str(wanted.priority_max),
            "submitted_after": _moment_text(wanted.submitted_after),
            "submitted_before": _moment_text(wanted.submitted_before),
            "q": wanted.text,
            "mine": "1" if wanted.mine else "",
            "sort": "" if query.sort == DEFAULT_SORT else query.sort,
            "group": query.group,
            "limit": "" if query.limit == DEFAULT_LIMIT else str(query.limit),
            "after": cursor_text(query.after) if query.after else "",
        }
        return {name: value for name, value in out.items() if value}

    def narrowed(self, value: str) -> JobQuery:
        """This query's first page with its filter narrowed to one of its groups."""
        _, field_name = GROUPS[self.group]
        only: dict[str, Any] = {field_name: (value,)}
        narrower = replace(self.filter, **only)
        # Grouping sorted the rows by the group; one group alone goes back to the default.
        sort = DEFAULT_SORT if self.sort.lstrip("-") == self.group else self.sort
        return replace(self, filter=narrower, group="", after=None, sort=sort)

    def url(self, path: str, **changes) -> str:
        params = self.params(**changes)
        return f"{path}?{urlencode(params)}" if params else path


@dataclass
class JobListPage:
    jobs: list[Job]
    count: int  # the jobs the filter matches, up to COUNT_MAX
    more: bool  # more than COUNT_MAX match
    next: JobQuery | None  # the query of the next page; None on the last
    groups: list[tuple[str, int]]  # (queue or state, jobs) when the query groups


def _moment_text(moment: datetime | None) -> str:
    return "" if moment is None else moment.isoformat()


def cursor_text(after: tuple[object, int]) -> str:
    raw = json.dumps(list(after), separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


@dataclass(frozen=True, kw_only=True)
class Cursor(Param):
    """Where a page starts: the last row of the page before (its sort value and id), as
    ``next`` gives it. Whether it fits the sort is judged with the sort (``parse_query``)."""

    def parse(self, text: str) -> tuple[object, int]:
        try:
            value, pk = json.loads(base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))
        except (binascii.Error, ValueError, TypeError, UnicodeDecodeError):
            raise ValueError(_("not a cursor this list gave")) from None
        if type(pk) is not int or type(value) not in (int, str):
            raise ValueError(_("not a cursor this list gave"))
        return value, pk

    def schema(self) -> dict:
        return {"type": "string", "pattern": "^[A-Za-z0-9_-]+$"}


SORT_CHOICES = [*SORTS, *(f"-{name}" for name in SORTS)]
# The jobs a list or a bulk action takes: GET /api/v1/jobs/, the jobs page, a bulk filter.
FILTER = params(
    Choices(name="state", choices=State.values, description="states"),
    Words(name="queue", description="queue names or leaf paths"),
    Words(name="owner", description="usernames"),
    Choices(name="kind", choices=Job.Kind.values, description="kinds"),
    Choices(name="runtime", choices=Job.Runtime.values, description="runtimes"),
    Integer(
        name="priority_min",
        minimum=-PRIORITY_FILTER_MAX,
        maximum=PRIORITY_FILTER_MAX,
        description="priority at least",
    ),
    Integer(
        name="priority_max",
        minimum=-PRIORITY_FILTER_MAX,
        maximum=PRIORITY_FILTER_MAX,
        description="priority at most",
    ),
    Moment(name="submitted_after", description="submitted at or after: a date or date-time"),
    Moment(
        name="submitted_before",
        end=True,
        description="submitted before: a date-time, or a date (the whole day)",
    ),
    Text(name="q", max_length=TEXT_MAX, description="text in the job's name"),
    Flag(name="mine", description="only my jobs"),
)
# Their order and where a page starts.
ORDER = params(
    Choice(
        name="sort",
        choices=SORT_CHOICES,
        default=DEFAULT_SORT,
        description=f"by {', '.join(SORTS)}; '-' first for descending",
    ),
    Cursor(
        name="after",
        description="the page after this cursor (next gives it); a cursor the list did not "
        "give, or one of another sort, is refused",
    ),
    Integer(
        name="limit",
        minimum=1,
        maximum=PAGE_MAX,
        default=DEFAULT_LIMIT,
        description="jobs per page",
    ),
)
OFFSET = Integer(
    name="offset",
    minimum=0,
    maximum=OFFSET_MAX,
    description="pages by offset instead of by cursor: jobs to skip, newest first",
)
GROUP = Choice(name="group", choices=list(GROUPS), description="jobs counted by queue or state")
API_QUERY = FILTER + ORDER + params(OFFSET)
PAGE_QUERY = FILTER + ORDER + params(GROUP)
# The jobs page's filter form: it sends these fields empty when they are not filled in.
PAGE_FORM = frozenset([*FILTER.names, GROUP.name])


def _job_filter(values: Mapping[str, Any]) -> JobFilter:
    return JobFilter(
        states=values["state"],
        queues=values["queue"],
        owners=values["owner"],
        kinds=values["kind"],
        runtimes=values["runtime"],
        priority_min=values["priority_min"],
        priority_max=values["priority_max"],
        submitted_after=values["submitted_after"],
        submitted_before=values["submitted_before"],
        text=values["q"],
        mine=values["mine"],
    )


def parse_query(source: Mapping, *, declared: Params, form: Collection[str] = ()) -> JobQuery:
    """The query a URL's parameters say (``declared``: the API's or the page's; ``form``:
    the fields of the page's form, empty when not filled in); JobInvalid names every
    parameter that is wrong."""
    values = declared.read(source, form=form)
    sort, after = values["sort"], values["after"]
    group = values.get("group") or ""
    if group and sort.lstrip("-") != group:
        # Grouped rows sit together: sorted by their group, then in submission order.
        sort = group
    if after is not None:
        expected = int if SORTS[sort.lstrip("-")][1] is IntegerField else str
        if type(after[0]) is not expected:
            raise JobInvalid({"after": _("not a cursor of this sort (%(sort)s)") % {"sort": sort}})
    return JobQuery(
        filter=_job_filter(values),
        sort=sort,
        after=after,
        limit=values["limit"],
        group=group,
        offset=values.get("offset"),
    )


def parse_filter(source: Mapping[str, str]) -> JobFilter:
    """The filter of a bulk action: the list's filter parameters and no others, since a
    misspelt one would widen the action to every job."""
    extra = [name for name in source if name not in FILTER.names]
    if extra:
        names = ", ".join(FILTER.names)
        raise JobInvalid(
            {
                name: _("is not a filter of the jobs list; one of %(names)s") % {"names": names}
                for name in extra
            }
        )
    return _job_filter(FILTER.read(source))


def _row(*expressions) -> Func:
    return Func(*expressions, function="ROW", output_field=Field())


def job_list(user, query: JobQuery) -> JobListPage:
    """One page of the jobs ``user`` may see that ``query`` matches, in its order."""
    matching = query.filter.apply(jobs_for_user(user).defer("manifest", "log_tail"), user)
    column, kind = SORTS[query.sort.lstrip("-")]
    order = [f"-{column}", "-id"] if query.descending else [column, "id"]
    page = matching.order_by(*order)
    if query.after is not None:
        value, pk = query.after
        compare = LessThan if query.descending else GreaterThan
        position = _row(Value(value, output_field=kind()), Value(pk, output_field=IntegerField()))
        page = page.filter(compare(_row(F(column), F("id")), position))
    jobs = list(page[: query.limit + 1])
    more = len(jobs) > query.limit
    jobs = jobs[: query.limit]
    following = None
    if more:
        last = jobs[-1]
        value = last.pk if column == "id" else _value(last, column)
        following = replace(query, after=(value, last.pk))
    groups: list[tuple[str, int]] = []
    if query.group:
        by = GROUPS[query.group][0]
        per_group = matching.order_by().values_list(by).annotate(n=Count("id"))
        groups = sorted(per_group, key=lambda row: (-row[1], row[0]))
    counted = matching.order_by()[: COUNT_MAX + 1].count()
    return JobListPage(
        jobs=jobs,
        count=min(counted, COUNT_MAX),
        more=counted > COUNT_MAX,
        next=following,
        groups=groups,
    )


def _value(job: Job, column: str) -> object:
    target = job
    for part in column.split("__"):
        target = getattr(target, part)
    return target
