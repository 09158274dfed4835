"""HTML pages: thin views over the same selectors and services as ``jobs/api.py``.

One view and one template serve a page and its refreshing part: an HTMX request
(``request.htmx``) gets only the template's partial (``template_name + "#partial"``).
Polling is rendered only while something can still change, and a job page that polls a
finished job gets ``HttpResponseStopPolling`` (286) with the final fragment.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import timedelta
from urllib.parse import urlencode

import yaml
from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import BadRequest
from django.http import HttpRequest, HttpResponse, QueryDict
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django_htmx.http import HttpResponseStopPolling

from kube.quantity import human
from queues import selectors as queue_selectors
from queues.selectors import queues_for_user, tree_nodes

from . import bulk, listing, selectors, services
from .cluster import SCHEDULING_FAILURES
from .forms import SubmitForm, form_data
from .manifests import build_manifests
from .models import LIVE, Job, State
from .schema import JobPriorityIn, job_document, job_parse
from .specs import job_spec_full
from .validation import PRIORITY_RANGE, JobInvalid, page_window

GPU = "nvidia.com/gpu"
MY_JOBS_LIMIT = 20
QUEUE_PAGE_SIZE = 50


def _resource_rows(
    minimum: Mapping[str, int], maximum: Mapping[str, int], used: Mapping[str, int]
) -> list[dict]:
    """One row per resource named anywhere, with readable quantities and the raw numbers."""
    names = sorted(set(minimum) | set(maximum) | set(used), key=lambda n: (n != "cpu", n))
    rows = []
    for name in names:
        limit = maximum.get(name)
        rows.append(
            {
                "name": name,
                "min": human(name, minimum[name]) if name in minimum else "",
                "max": human(name, limit) if limit is not None else "no limit",
                "used": human(name, used.get(name, 0)),
                "min_units": minimum.get(name, 0),
                "max_units": limit or 0,
                "used_units": used.get(name, 0),
                "borrowing": used.get(name, 0) > minimum.get(name, 0),
            }
        )
    return rows


def _request_text(request: Mapping[str, int]) -> str:
    return ", ".join(f"{name} {human(name, units)}" for name, units in sorted(request.items()))


def _queue_rows(user) -> list[dict]:
    queues = list(queues_for_user(user).filter(active=True).order_by("name"))
    counts = selectors.pending_counts([queue.pk for queue in queues])
    usage = selectors.usage_by_path()
    return [
        {
            "queue": queue,
            "pending": counts.get(queue.pk, 0),
            "resources": _resource_rows(
                queue.node.min, queue.node.max, usage.get(queue.node.path, {})
            ),
        }
        for queue in queues
    ]


@login_required
@require_GET
def dashboard(request: HttpRequest) -> HttpResponse:
    jobs = list(
        selectors.jobs_for_user(request.user)
        .filter(owner=request.user)
        .order_by("-id")[:MY_JOBS_LIMIT]
    )
    positions = selectors.job_positions(jobs)
    active = any(job.state in LIVE for job in jobs)
    context = {
        "jobs": [(job, positions.get(job.pk)) for job in jobs],
        "active": active,
    }
    if request.htmx:
        response = render(request, "jobs/dashboard.html#my-jobs", context)
        return response if active else _stop_polling(response)
    context["queues"] = _queue_rows(request.user)
    return render(request, "jobs/dashboard.html", context)


def _submit_form(request: HttpRequest, queues: list, data: Mapping | None = None) -> SubmitForm:
    """The form for this user's ``queues`` and the runtimes this cluster offers, with the
    POST's values, or ``data`` (a copy of a job)."""
    runtimes = [
        (value, label) for value, label in Job.Runtime.choices if value in settings.CLUSTER_RUNTIMES
    ]
    return SubmitForm(
        request.POST if request.method == "POST" else data,
        queues=[(q.node.path, q.name) for q in queues] or [("", "(no queue you can submit to)")],
        runtimes=runtimes,
    )


@login_required
@require_http_methods(["GET", "POST"])
def job_submit(request: HttpRequest) -> HttpResponse:
    """The submit form. A POST with ``action`` adds or removes a worker group and shows
    the form again; any other POST submits the job."""
    queues = services.queue_for_submit_choices(request.user)
    copied, left_out = None, []
    if request.method == "GET" and "copy" in request.GET:  # "Submit a copy" of a job
        copied = selectors.job_get_for_user(request.user, request.GET["copy"])
        data, left_out = form_data(job_document(copied))
        form = _submit_form(request, queues, data)
    else:
        form = _submit_form(request, queues)
    status = 200
    if request.method == "POST" and not request.POST.get("action"):
        try:
            draft = job_parse(form.document())
            job = services.job_submit(user=request.user, draft=draft)
        except JobInvalid as invalid:
            form.place(invalid.errors)
            status = 400
        else:
            messages.success(request, f"Job {job.name} #{job.pk} submitted to {job.queue.name}.")
            return redirect("job-detail", pk=job.pk)
    context = {
        "form": form,
        "queues": queues,
        "values": form.values,
        "errors": form.errors,
        "top_errors": form.top_errors,
        "copied": copied,
        "left_out": left_out,
    }
    return render(request, "jobs/submit.html", context, status=status)


PREVIEW_JOB_NUMBER = 0  # a job's number is given when it is submitted


@login_required
@require_POST
def job_submit_preview(request: HttpRequest) -> HttpResponse:
    """The submit form checked as it is filled in (htmx): every problem, as the API names
    it, or the Kubernetes objects the job would become. Nothing is saved."""
    problems: list[str] = []
    manifest = ""
    request_text = ""
    try:
        draft = job_parse(_submit_form(request, []).document())
        job = services.job_preview(user=request.user, draft=draft)
    except JobInvalid as invalid:
        problems = [
            f"{key}: {reason}" for key, reasons in invalid.errors.items() for reason in reasons
        ]
    else:
        job.pk = PREVIEW_JOB_NUMBER
        manifest = yaml.safe_dump_all(build_manifests(job_spec_full(job)), sort_keys=False)
        request_text = _request_text(draft.request)
    context = {
        "problems": problems,
        "manifest": manifest,
        "request_text": request_text,
        "job_number": PREVIEW_JOB_NUMBER,
    }
    return render(request, "jobs/_submit_preview.html", context)


def _stop_polling(response: HttpResponse) -> HttpResponse:
    """The same fragment with status 286, which tells htmx to stop polling."""
    return HttpResponseStopPolling(response.content, content_type=response["Content-Type"])


@login_required
@require_GET
def job_detail(request: HttpRequest, pk: int) -> HttpResponse:
    job = selectors.job_get_for_user(request.user, pk)
    events = list(selectors.job_events(job))
    grouped = selectors.events_by_cycle(events)
    context = {
        "job": job,
        "position": selectors.job_position(job),
        "request_text": _request_text(job.request),
        "events": grouped.get(None, []),
        "cycles": sorted((cycle, rows) for cycle, rows in grouped.items() if cycle is not None),
        "polling": not job.is_terminal,
        "start_timeout_attempts": settings.START_TIMEOUT_ATTEMPTS,
    }
    if job.state == State.ADMITTED and job.start_clock_at is not None:
        # Released in the cluster, its pods not all running yet: the cluster's last word on
        # why, and when the start timeout takes it out of the cluster (later if the cluster
        # stops answering meanwhile).
        failures = [e for e in events if e.reason in SCHEDULING_FAILURES]
        context["last_failure"] = max(failures, key=lambda e: (e.created_at, e.pk), default=None)
        context["start_deadline"] = job.start_clock_at + timedelta(
            seconds=settings.START_TIMEOUT_SECONDS
        )
    if request.htmx:
        response = render(request, "jobs/job_detail.html#job-status", context)
        return _stop_polling(response) if job.is_terminal else response
    context["manifest"] = yaml.safe_dump_all(build_manifests(job_spec_full(job)), sort_keys=False)
    context["priority_range"] = PRIORITY_RANGE
    # The services' own rule (members act on their own jobs only). Hiding the buttons is a
    # courtesy; the services still check on POST.
    role = services.job_may_act(request.user, job)
    context["may_act"] = role is not None
    context["may_jump"] = role in (queue_selectors.MANAGER, queue_selectors.STAFF)
    return render(request, "jobs/job_detail.html", context)


@login_required
@require_POST
def job_cancel(request: HttpRequest, pk: int) -> HttpResponse:
    job = selectors.job_get_for_user(request.user, pk)
    try:
        job = services.job_cancel(user=request.user, job=job)
    except (services.JobPermissionDenied, services.JobConflict) as error:
        messages.error(request, f"Cannot cancel: {error}")
    else:
        messages.success(
            request,
            "Job stopping: it is cancelled once the cluster has removed its objects."
            if job.is_leaving
            else "Job cancelled.",
        )
    return redirect("job-detail", pk=job.pk)


@login_required
@require_POST
def job_priority(request: HttpRequest, pk: int) -> HttpResponse:
    job = selectors.job_get_for_user(request.user, pk)
    low, high = PRIORITY_RANGE
    old = job.priority
    try:
        priority = JobPriorityIn().check({"priority": request.POST.get("priority", "")})
        job = services.job_set_priority(user=request.user, job=job, priority=priority)
    except JobInvalid:  # not an integer, or out of PRIORITY_RANGE, as the service decides
        messages.error(request, f"Priority must be an integer between {low} and {high}.")
    except (services.JobPermissionDenied, services.JobConflict) as error:
        messages.error(request, f"Cannot change the priority: {error}")
    else:
        messages.success(request, f"Priority changed from {old} to {job.priority}.")
    return redirect("job-detail", pk=job.pk)


@login_required
@require_POST
def job_move_to_head(request: HttpRequest, pk: int) -> HttpResponse:
    job = selectors.job_get_for_user(request.user, pk)
    old = job.priority
    try:
        job = services.job_move_to_head(user=request.user, job=job)
    except (services.JobPermissionDenied, services.JobConflict) as error:
        messages.error(request, f"Cannot move the job: {error}")
    else:
        messages.success(
            request, f"Moved to the head of its queue (priority {old} to {job.priority})."
        )
    return redirect("job-detail", pk=job.pk)


@login_required
@require_GET
def job_list(request: HttpRequest) -> HttpResponse:
    """Every job the user may see, filtered, sorted, grouped and paged by the URL."""
    context: dict = {
        "states": State.choices,
        "kinds": Job.Kind.choices,
        "runtimes": Job.Runtime.choices,
        "sorts": listing.SORTS,
        "form": request.GET,
        "chosen": {
            name: {v for raw in request.GET.getlist(name) for v in raw.split(",") if v}
            for name in ("state", "kind", "runtime")
        },
    }
    try:
        query = listing.parse_query(request.GET)
    except JobInvalid as invalid:
        context["errors"] = invalid.errors
        return render(request, "jobs/job_list.html", context, status=400)
    page = listing.job_list(request.user, query)
    positions = selectors.job_positions(page.jobs)
    path = request.path
    column, descending = query.sort.lstrip("-"), query.descending
    context |= {
        "query": query,
        "page": page,
        "jobs": [(job, positions.get(job.pk)) for job in page.jobs],
        "next_url": page.next.url(path) if page.next else None,
        "here": request.get_full_path(),
        "filter_text": urlencode(query.params(after=None, group="", sort=listing.DEFAULT_SORT)),
        "actions": bulk.DONE,
        "first_url": query.url(path, after=None) if query.after else None,
        "sort_urls": {
            name: query.url(
                path, sort=f"-{name}" if name == column and not descending else name, after=None
            )
            for name in listing.SORTS
        },
        "group_urls": [
            (value, count, query.narrowed(value).url(path)) for value, count in page.groups
        ],
    }
    return render(request, "jobs/job_list.html", context)


@login_required
@require_POST
def job_bulk(request: HttpRequest) -> HttpResponse:
    """The jobs page's bulk form: an action on the chosen rows, or on every job its filter
    matches; the answer says what happened to each, back on the same list."""
    back = request.POST.get("back", "")
    if not back.startswith("/jobs/"):  # only ever back to the jobs list
        back = reverse("job-list")
    try:
        if request.POST.get("scope") == "filter":
            query = listing.parse_query(QueryDict(request.POST.get("filter", "")))
            jobs, unseen = bulk.jobs_matching(request.user, query.filter), []
        else:
            jobs, unseen = bulk.jobs_chosen(request.user, request.POST.getlist("ids"))
        priority = request.POST.get("priority", "").strip()
        if request.POST.get("action") == "priority" and not re.fullmatch(r"[+-]?\d{1,9}", priority):
            raise JobInvalid({"priority": "a whole number is required to set a priority"})
        outcome = bulk.jobs_bulk(
            user=request.user,
            action=request.POST.get("action", ""),
            jobs=jobs,
            not_visible=unseen,
            priority=int(priority) if priority else None,
        )
    except JobInvalid as invalid:
        messages.error(request, f"Nothing was changed: {invalid}")
        return redirect(back)
    (messages.warning if outcome.refused else messages.success)(request, outcome.summary())
    return redirect(back)


@login_required
@require_GET
def queue_list(request: HttpRequest) -> HttpResponse:
    return render(request, "jobs/queue_list.html", {"queues": _queue_rows(request.user)})


@login_required
@require_GET
def queue_detail(request: HttpRequest, name: str) -> HttpResponse:
    queue = selectors.queue_get_for_user(request.user, name)
    try:
        offset, _ = page_window(
            offset=request.GET.get("offset"), limit=None, default_limit=QUEUE_PAGE_SIZE
        )
    except JobInvalid as invalid:
        raise BadRequest(str(invalid)) from None  # handler400 shows it
    counts = selectors.queue_counts(queue)
    pending = counts["queued"] + counts["backoff"]
    context = {
        "queue": queue,
        "counts": counts,
        "pending_total": pending,
        "pending": selectors.queue_pending_page(queue, offset=offset, limit=QUEUE_PAGE_SIZE),
        "in_cluster": selectors.queue_in_cluster(queue),
        "resources": _resource_rows(queue.node.min, queue.node.max, selectors.queue_usage(queue)),
        "offset": offset,
        "previous_offset": max(offset - QUEUE_PAGE_SIZE, 0) if offset else None,
        "next_offset": offset + QUEUE_PAGE_SIZE if offset + QUEUE_PAGE_SIZE < pending else None,
    }
    template = "jobs/queue_detail.html"
    if request.htmx:
        template += "#queue-lists"
    return render(request, template, context)


@login_required
@require_GET
def quota_tree(request: HttpRequest) -> HttpResponse:
    usage = selectors.usage_by_path()
    nodes = sorted(tree_nodes().values(), key=lambda node: node.path.split("/"))
    # Leaves link to their queue page where the user may see it.
    queue_names = dict(
        queues_for_user(request.user).filter(active=True).values_list("node__path", "name")
    )
    rows = [
        {
            "node": node,
            "depth": node.path.count("/"),
            "queue_name": queue_names.get(node.path),
            "resources": _resource_rows(node.min, node.max, usage.get(node.path, {})),
        }
        for node in nodes
    ]
    return render(request, "jobs/quota_tree.html", {"rows": rows})
