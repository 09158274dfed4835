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
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import date, datetime, time
from urllib.parse import urlencode

from django.db.models import CharField, Count, F, Field, Func, IntegerField, Q, QuerySet, Value
from django.db.models.lookups import GreaterThan, LessThan
from django.utils import timezone
from django.utils.dateparse import parse_date, parse_datetime

from .models import Job, State
from .selectors import jobs_for_user
from .validation import PAGE_MAX, JobInvalid

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
LIST_PARAMETERS = (
    "state", "queue", "owner", "kind", "runtime", "priority_min", "priority_max",
    "submitted_after", "submitted_before", "q", "mine",
)  # fmt: skip


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
        narrower = replace(self.filter, **{field_name: (value,)})
        return replace(self, filter=narrower, group="", after=None)

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


def _cursor(text: str, kind: type[Field]) -> tuple[object, int]:
    try:
        value, pk = json.loads(base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))
    except (binascii.Error, ValueError, TypeError, UnicodeDecodeError):
        raise ValueError("not a cursor this list gave") from None
    expected = int if kind is IntegerField else str
    if type(value) is not expected or type(pk) is not int:
        raise ValueError("not a cursor of this sort")
    return value, pk


def _moment(text: str, *, end: bool) -> datetime:
    """An ISO date or date-time; a date alone is its midnight (``end``: the next one), in
    the portal's time zone."""
    try:
        if re.fullmatch(r"\d{4}-\d{2}-\d{2}", text):
            day = parse_date(text)
            moment = datetime.combine(date.fromordinal(day.toordinal() + end), time.min)
        else:
            moment = parse_datetime(text)
    except ValueError:  # well formed, but no such day or time (2026-02-30)
        moment = None
    if moment is None:
        raise ValueError(f"{text[:40]!r} is not a date (2026-11-24) or date-time")
    if timezone.is_naive(moment):
        moment = timezone.make_aware(moment)
    return moment


def parse_query(params: Mapping[str, str]) -> JobQuery:
    """The query a URL's parameters say; JobInvalid names every parameter that is wrong."""
    errors: dict[str, str] = {}

    def listed(name: str, allowed: list[str] | None = None) -> tuple[str, ...]:
        # state=queued,backoff (a shared URL) or state=queued&state=backoff (a form)
        raw = ",".join(params.getlist(name)) if hasattr(params, "getlist") else params.get(name, "")
        values = tuple(dict.fromkeys(v.strip() for v in raw.split(",") if v.strip()))
        unknown = [v for v in values if allowed is not None and v not in allowed]
        if unknown:
            errors[name] = f"unknown {name} {unknown[0][:40]!r}; one of {', '.join(allowed)}"
        return values

    def integer(name: str, *, clamp: bool = False) -> int | None:
        text = params.get(name, "").strip()
        if not text:
            return None
        if clamp and re.fullmatch(r"\+?\d{10,}", text):
            return PAGE_MAX  # ?limit=99999999999999999999 is one full page
        if not re.fullmatch(r"[+-]?\d{1,9}", text):
            errors[name] = f"must be an integer of at most 9 digits, got {text[:40]!r}"
            return None
        return int(text)

    def moment(name: str, *, end: bool) -> datetime | None:
        text = params.get(name, "").strip()
        if not text:
            return None
        try:
            return _moment(text, end=end)
        except ValueError as error:
            errors[name] = str(error)
            return None

    text = params.get("q", "").strip()
    if len(text) > TEXT_MAX:
        errors["q"] = f"at most {TEXT_MAX} characters"
    wanted = JobFilter(
        states=listed("state", list(State.values)),
        queues=listed("queue"),
        owners=listed("owner"),
        kinds=listed("kind", list(Job.Kind.values)),
        runtimes=listed("runtime", list(Job.Runtime.values)),
        priority_min=integer("priority_min"),
        priority_max=integer("priority_max"),
        submitted_after=moment("submitted_after", end=False),
        submitted_before=moment("submitted_before", end=True),
        text=text[:TEXT_MAX],
        mine=params.get("mine", "").strip().lower() in ("1", "true", "yes", "on"),
    )
    sort = params.get("sort", "").strip() or DEFAULT_SORT
    if sort.lstrip("-") not in SORTS:
        errors["sort"] = f"unknown column {sort[:40]!r}; one of {', '.join(SORTS)}"
        sort = DEFAULT_SORT
    group = params.get("group", "").strip()
    if group and group not in GROUPS:
        errors["group"] = f"unknown group {group[:40]!r}; one of {', '.join(GROUPS)}"
    limit = integer("limit", clamp=True)
    after = None
    if cursor := params.get("after", "").strip():
        try:
            after = _cursor(cursor, SORTS[sort.lstrip("-")][1])
        except ValueError as error:
            errors["after"] = str(error)
    if errors:
        raise JobInvalid(errors)
    return JobQuery(
        filter=wanted,
        sort=sort,
        after=after,
        limit=DEFAULT_LIMIT if limit is None else min(max(limit, 1), PAGE_MAX),
        group=group,
    )


def _row(*expressions) -> Func:
    return Func(*expressions, function="ROW", output_field=Field())


def job_list(user, query: JobQuery) -> JobListPage:
    """One page of the jobs ``user`` may see that ``query`` matches, in its order."""
    matching = query.filter.apply(jobs_for_user(user), user)
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
        by, _ = GROUPS[query.group]
        counted = matching.order_by().values_list(by).annotate(n=Count("id"))
        groups = sorted(counted, key=lambda row: (-row[1], row[0]))
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
