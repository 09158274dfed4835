"""HTML pages: thin views over the same selectors and services as ``jobs/web/api.py``.

One view and one template serve a page and its refreshing part: an HTMX request
(``request.htmx``) gets only the template's partial (``template_name + "#partial"``).
Polling is rendered only while something can still change, and a job page that polls a
finished job gets ``HttpResponseStopPolling`` (286) with the final fragment.
"""

from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import urlencode

import yaml
from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, QueryDict
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.http import content_disposition_header
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django_htmx.http import HttpResponseClientRedirect, HttpResponseStopPolling
from django_stubs_ext import StrOrPromise

from jobs import bulk, services
from jobs.cluster import ClusterUnavailable, LogUnavailable
from jobs.cluster.manifests import build_manifests
from jobs.cluster.manifests.objects import in_kubernetes_order
from jobs.document.forms import SubmitForm, form_data
from jobs.document.params import (
    QUEUE_PAGE,
    Flag,
    HtmxHttpRequest,
    Integer,
    page_query,
    params,
)
from jobs.document.schema import (
    job_document,
    job_parse,
)
from jobs.document.validation import OFFSET_MAX, PRIORITY_RANGE, JobInvalid
from jobs.engine import log_tails, namespace_health
from jobs.engine.objects import job_spec_full
from jobs.models import LIVE, Job, State
from jobs.reads import estimate, failure, listing, logs, selectors, waiting
from jobs.reads.forecast import UNSTORED, forecast
from jobs.reads.ray_dashboard import ray_dashboard
from jobs.usage.views import usage_chart
from kube.quantity import human, pool_parts
from kube.yaml_text import YamlRefused, load_file
from queues import selectors as queue_selectors
from queues.phrases import resource_name
from queues.quota import shown_resources
from queues.selectors import queues_for_user

from . import confirm

GPU = "nvidia.com/gpu"
MY_JOBS_LIMIT = 20
QUEUE_PAGE_SIZE = 50
# The pages' own parameters, read as the API's are (jobs.document.params): a bad one answers 400
# naming it. The lists' parameters are declared with the lists (listing, samples, params).
SUBMIT_QUERY = params(Integer(name="copy", minimum=1, maximum=2**63 - 1, description="a job"))
JOB_QUERY = params(
    Integer(name="events", minimum=1, maximum=OFFSET_MAX, description="a page of its events")
)
QUEUE_QUERY = params(QUEUE_PAGE["offset"])
LOG_POLL = params(Flag(name="lines", description="the page shows lines of the log"))


def _resource_rows(node, used: Mapping[str, int]) -> list[dict]:
    """One row per resource the node names or its jobs use (``shown_resources``), with
    readable quantities and the raw numbers."""
    minimum, maximum = node.min, node.max
    names = sorted(shown_resources(node, used), key=lambda n: (n != "cpu", n))
    rows = []
    for name in names:
        limit = maximum.get(name)
        rows.append(
            {
                "name": resource_name(name),
                "min": human(name, minimum[name]) if name in minimum else "",
                "max": human(name, limit) if limit is not None else _("no limit"),
                "used": human(name, used.get(name, 0), like=limit or minimum.get(name)),
                "min_units": minimum.get(name, 0),
                "max_units": limit or 0,
                "used_units": used.get(name, 0),
                "borrowing": used.get(name, 0) > minimum.get(name, 0),
            }
        )
    return rows


def _path_rows(told: waiting.Waiting | None, request: Mapping[str, int]) -> list[dict]:
    """The why-it-waits table in readable quantities, the blocking row marked."""
    if told is None:
        return []
    rows = []
    for row, blocks in told.rows():
        r = row.resource
        like = row.max if row.max is not None else row.min  # the row's unit: its limits'
        rows.append(
            {
                "where": row.where,
                "resource": resource_name(r),
                "asks": human(r, request.get(r, request.get(pool_parts(r)[0], 0)), like),
                "min": "" if row.min is None else human(r, row.min),
                "max": _("no limit") if row.max is None else human(r, row.max),
                "used": human(r, row.used, like),
                "borrowed": human(r, row.borrowed, like) if row.borrowed else "",
                "lent": human(r, row.lent, like) if row.lent else "",
                "free": "" if row.free is None else human(r, row.free, like),
                "blocks": blocks,
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
            "resources": _resource_rows(queue.node, usage.get(queue.node.path, {})),
        }
        for queue in queues
    ]


@login_required
@require_GET
def dashboard(request: HtmxHttpRequest) -> HttpResponse:
    jobs = list(
        selectors.jobs_for_user(request.user)
        .filter(owner=request.user.pk)
        .defer("log_tail")
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
        queues=[(q.node.path, q.name) for q in queues] or [("", _("(no queue you can submit to)"))],
        runtimes=runtimes,
    )


@login_required
@require_http_methods(["GET", "POST"])
def job_submit(request: HttpRequest) -> HttpResponse:
    """The submit form. A POST with ``action`` adds or removes a worker group and shows
    the form again; any other POST submits the job."""
    queues = services.queue_for_submit_choices(request.user)
    left_out: list[str]
    copied, left_out = None, []
    copy = page_query(SUBMIT_QUERY, request)["copy"] if request.method == "GET" else None
    if copy is not None:  # "Submit a copy" of a job
        copied = selectors.job_get_for_user(request.user, copy)
        if copied.manifest:  # sent as objects: copied as they are, to edit as YAML
            return redirect(f"{reverse('job-submit-objects')}?copy={copied.pk}")
        data, left_out = form_data(job_document(copied))
        form = _submit_form(request, queues, data)
    else:
        form = _submit_form(request, queues)
    status = 200
    if request.method == "POST" and not request.POST.get("action"):
        try:
            draft = job_parse(form.document())
            draft.held = request.POST.get("held") == "on"
            job = services.job_submit(user=request.user, draft=draft)
        except JobInvalid as invalid:
            form.place(invalid.errors)
            status = 400
        else:
            return _submitted(request, job)
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


@login_required
@require_http_methods(["GET", "POST"])
def job_submit_objects(request: HttpRequest) -> HttpResponse:
    """The team's own Kubernetes objects, as YAML, to submit as they are (the API's native
    manifests); "Submit a copy" of a job sent as objects opens here with them."""
    queues = services.queue_for_submit_choices(request.user)
    copied, problems = None, []
    queue, text = (queues[0].node.path if queues else ""), ""
    if request.method == "GET":
        copy = page_query(SUBMIT_QUERY, request)["copy"]
        if copy is not None:
            copied = selectors.job_get_for_user(request.user, copy)
            queue = copied.queue.node.path
            if copied.manifest:
                sent = [in_kubernetes_order(obj) for obj in copied.manifest["objects"]]
                text = yaml.safe_dump_all(sent, sort_keys=False)
    else:
        queue, text = request.POST.get("queue", ""), request.POST.get("objects", "")
        try:
            if len(text.encode()) > settings.YAML_BODY_MAX_BYTES:
                raise YamlRefused(
                    _("is larger than YAML_BODY_MAX_BYTES (%(limit)d bytes)")
                    % {"limit": settings.YAML_BODY_MAX_BYTES}
                )
            body = load_file(text)
            submission = services.submission_read(
                body if body is not None else {}, queue=queue, held=request.POST.get("held") == "on"
            )
            with submission.paths():
                job = services.job_submit(user=request.user, draft=submission.draft)
        except YamlRefused as refused:
            problems = [(refused.field, str(refused))]
        except JobInvalid as invalid:
            problems = [
                (key, reason) for key, reasons in invalid.errors.items() for reason in reasons
            ]
        except services.JobPermissionDenied as denied:
            problems = [("queue", str(denied))]
        else:
            return _submitted(request, job)
    context = {
        "queues": [(q.node.path, q.name) for q in queues],
        "queue": queue,
        "objects": text,
        "copied": copied,
        "problems": problems,
    }
    return render(request, "jobs/submit_objects.html", context, status=400 if problems else 200)


def _submitted(request: HttpRequest, job: Job) -> HttpResponse:
    """The job's page, saying it was submitted."""
    messages.success(
        request,
        _("Job %(name)s #%(number)s submitted to %(queue)s.")
        % {"name": job.name, "number": job.pk, "queue": job.queue.name},
    )
    return redirect("job-detail", pk=job.pk)


PREVIEW_JOB_NUMBER = UNSTORED  # a job's number is given when it is submitted


@login_required
@require_POST
def job_submit_preview(request: HttpRequest) -> HttpResponse:
    """The submit form checked as it is filled in (htmx): every problem, as the API names
    it, or the Kubernetes objects the job would become. Nothing is saved."""
    problems: list[str] = []
    manifest = ""
    request_text = ""
    told = None
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
        told = forecast(job, estimate=False)
    context = {
        "forecast": told,
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
def job_detail(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    job = selectors.job_get_for_user(request.user, pk)
    position = selectors.job_position(job)
    wanted_page = page_query(JOB_QUERY, request)["events"]
    timeline = selectors.event_timeline(selectors.job_events(job))
    rows, events_page, events_pages = selectors.timeline_page(timeline, wanted_page)
    context: dict[str, object] = {
        "job": job,
        "position": position,
        "request_text": _request_text(job.request),
        "timeline": rows,
        "events_page": events_page,
        "events_pages": events_pages,
        # A reader of an earlier page keeps it while the page refreshes.
        "events_query": f"?events={events_page}" if events_page < events_pages else "",
        "polling": not job.is_terminal,
        "start_timeout_attempts": settings.START_TIMEOUT_ATTEMPTS,
    }
    context["waiting"] = told = waiting.job_waiting(job, position)
    context["path_rows"] = _path_rows(told, job.request)
    context["stuck_leaving"] = selectors.job_stuck_leaving(job, now=timezone.now())
    context["namespace_trouble"] = namespace_health.namespace_trouble(job)
    context["estimate"] = estimate.job_estimate(job, position)
    context["failure"] = failure.job_failure(job)
    context["ray_dashboard"] = ray_dashboard(job)
    if request.htmx:
        response = render(request, "jobs/job_detail.html#job-status", context)
        return _stop_polling(response) if job.is_terminal else response
    # Bounded whatever the job's size: a job from before JOB_MAX_WORKER_GROUPS may have
    # thousands of groups, which the API's manifest still gives whole.
    shown = settings.JOB_MAX_WORKER_GROUPS
    context["pods"] = selectors.job_pods_summary(job, shown=shown)
    if len(job.workers) <= shown:
        manifests = build_manifests(job_spec_full(job))
        context["manifest"] = yaml.safe_dump_all(manifests, sort_keys=False)
    if job.manifest:  # sent as Kubernetes objects: as they were kept, and what changed
        sent = [in_kubernetes_order(obj) for obj in job.manifest["objects"]]
        context["sent"] = yaml.safe_dump_all(sent, sort_keys=False)
        context["replaced"] = sorted(job.manifest.get("replaced", {}).items())
        context["warnings"] = sorted(job.manifest.get("warnings", {}).items())
    context["priority_range"] = PRIORITY_RANGE
    # The services' own rule (members act on their own jobs only). Hiding the buttons is a
    # courtesy; the services still check on POST.
    role = services.job_may_act(request.user, job)
    context["may_act"] = role is not None
    context["may_jump"] = role in (queue_selectors.MANAGER, queue_selectors.STAFF)
    return render(request, "jobs/job_detail.html", context)


@login_required
@require_POST
def job_cancel(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    job = selectors.job_get_for_user(request.user, pk)
    plan = bulk.bulk_plan(user=request.user, action="cancel", jobs=[job])
    if asked := confirm.ask_first(request, plan, back=reverse("job-detail", args=[job.pk])):
        return asked
    try:
        job = services.job_cancel(user=request.user, job=job)
    except (services.JobPermissionDenied, services.JobConflict) as error:
        messages.error(request, _("Cannot cancel: %(reason)s") % {"reason": error})
    else:
        messages.success(
            request,
            # Words that stay true once it has stopped: its state, below, follows it.
            _("Cancel requested: the job stops as the cluster removes its objects.")
            if job.is_leaving
            else _("Job cancelled."),
        )
    return redirect("job-detail", pk=job.pk)


@login_required
@require_POST
def job_hold(request: HttpRequest, pk: int) -> HttpResponse:
    job = selectors.job_get_for_user(request.user, pk)
    try:
        services.job_hold(user=request.user, job=job)
    except (services.JobPermissionDenied, services.JobConflict) as error:
        messages.error(request, _("Cannot hold: %(reason)s") % {"reason": error})
    else:
        messages.success(request, _("Held: it keeps its place and is not admitted until released."))
    return redirect("job-detail", pk=job.pk)


@login_required
@require_POST
def job_release(request: HttpRequest, pk: int) -> HttpResponse:
    job = selectors.job_get_for_user(request.user, pk)
    try:
        services.job_release(user=request.user, job=job)
    except (services.JobPermissionDenied, services.JobConflict) as error:
        messages.error(request, _("Cannot release: %(reason)s") % {"reason": error})
    else:
        messages.success(request, _("Released: the next admission cycle tries it."))
    return redirect("job-detail", pk=job.pk)


@login_required
@require_POST
def job_priority(request: HttpRequest, pk: int) -> HttpResponse:
    job = selectors.job_get_for_user(request.user, pk)
    old = job.priority
    try:
        job = services.job_set_priority(
            user=request.user, job=job, priority=request.POST.get("priority", "")
        )
    except JobInvalid as invalid:  # not an integer, or out of range, as the service reads it
        messages.error(request, _("Cannot change the priority: %(reason)s.") % {"reason": invalid})
    except (services.JobPermissionDenied, services.JobConflict) as error:
        messages.error(request, _("Cannot change the priority: %(reason)s") % {"reason": error})
    else:
        messages.success(
            request,
            _("Priority changed from %(old)s to %(new)s.") % {"old": old, "new": job.priority},
        )
    return redirect("job-detail", pk=job.pk)


@login_required
@require_POST
def job_move_to_head(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    job = selectors.job_get_for_user(request.user, pk)
    plan = bulk.bulk_plan(user=request.user, action="move-to-head", jobs=[job])
    if asked := confirm.ask_first(request, plan, back=reverse("job-detail", args=[job.pk])):
        return asked
    old = job.priority
    try:
        job = services.job_move_to_head(user=request.user, job=job)
    except (services.JobPermissionDenied, services.JobConflict) as error:
        messages.error(request, _("Cannot move the job: %(reason)s") % {"reason": error})
    else:
        messages.success(
            request,
            _("Moved to the head of its queue (priority %(old)s to %(new)s).")
            % {"old": old, "new": job.priority},
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
        "filters_active": sum(1 for name in listing.FILTER.names if request.GET.get(name)),
        "chosen": {
            name: {v for raw in request.GET.getlist(name) for v in raw.split(",") if v}
            for name in ("state", "kind", "runtime")
        },
    }
    try:
        query = listing.parse_query(
            request.GET, declared=listing.PAGE_QUERY, form=listing.PAGE_FORM
        )
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
        "jobs": _grouped(query, page, positions),
        "next_url": page.next.url(path) if page.next else None,
        "here": request.get_full_path(),
        "filter_text": urlencode(query.params(after=None, group="", sort=listing.DEFAULT_SORT)),
        "actions": bulk.ACTION,
        "first_url": query.url(path, after=None) if query.after else None,
        "sort_urls": {
            # Grouped rows are sorted by their group: another column's order ungroups them.
            name: query.url(
                path,
                sort=f"-{name}" if name == column and not descending else name,
                group=query.group if name == query.group else "",
                after=None,
            )
            for name in listing.SORTS
        },
        "group_urls": [
            (
                State(value).label if query.group == "state" else value,
                count,
                query.narrowed(value).url(path),
            )
            for value, count in page.groups
        ],
    }
    return render(request, "jobs/job_list.html", context)


def _grouped(query: listing.JobQuery, page: listing.JobListPage, positions: dict) -> list:
    """The page's rows: (job, its queue position, the heading of the group it starts, if
    it starts one: (name, jobs in the group))."""
    counts = dict(page.groups)
    rows, last = [], None
    for job in page.jobs:
        heading = None
        if query.group:
            value = job.state if query.group == "state" else job.queue.name
            if value != last:
                name = job.get_state_display() if query.group == "state" else value
                heading = (name, counts.get(value, 0))
            last = value
        rows.append((job, positions.get(job.pk), heading))
    return rows


# The bulk form sent with no row ticked: what to do, in the page's words rather than the API's.
NOTHING_TICKED = gettext_lazy(
    "Nothing was changed: tick the jobs to act on, or apply to all matching."
)


@login_required
@require_POST
def job_bulk(request: HtmxHttpRequest) -> HttpResponse:
    """The jobs page's bulk form: an action on the chosen rows, or on every job its filter
    matches, asked first (``confirm.ask_first``); the answer says what happened to each, back on
    the same list."""
    back = request.POST.get("back", "")
    if not back.startswith("/jobs/"):  # only ever back to the jobs list
        back = reverse("job-list")
    action, priority = request.POST.get("action", ""), request.POST.get("priority")
    try:
        unseen: list[int]
        if request.POST.get("scope") == "filter":
            filter_text = QueryDict(request.POST.get("filter", ""))
            query = listing.parse_query(filter_text, declared=listing.PAGE_QUERY)
            jobs, unseen = bulk.jobs_matching(request.user, query.filter), []
        elif not request.POST.getlist("ids"):
            return _back_with_error(request, back, NOTHING_TICKED)
        else:
            jobs, unseen = bulk.jobs_chosen(request.user, request.POST.getlist("ids"))
        plan = bulk.bulk_plan(user=request.user, action=action, jobs=jobs, priority=priority)
    except JobInvalid as invalid:
        return _back_with_error(
            request, back, _("Nothing was changed: %(reason)s") % {"reason": invalid}
        )
    # Ids that name no job the user may see are only reported: there is nothing to ask about.
    if jobs and (asked := confirm.ask_first(request, plan, back=back)):
        return asked
    outcome = bulk.jobs_bulk(
        user=request.user, action=action, jobs=jobs, not_visible=unseen, priority=priority
    )
    (messages.warning if outcome.refused else messages.success)(request, outcome.summary())
    return redirect(back)


def _back_with_error(request: HtmxHttpRequest, back: str, text: StrOrPromise) -> HttpResponse:
    """Back to the list, which shows ``text``; asked by htmx (the dialog's question), the
    whole page goes back rather than the list landing inside the dialog."""
    messages.error(request, text)
    return HttpResponseClientRedirect(back) if request.htmx else redirect(back)


@login_required
@require_GET
def queue_list(request: HttpRequest) -> HttpResponse:
    return render(request, "jobs/queue_list.html", {"queues": _queue_rows(request.user)})


@login_required
@require_GET
def queue_detail(request: HtmxHttpRequest, name: str) -> HttpResponse:
    queue = selectors.queue_get_for_user(request.user, name)
    offset = page_query(QUEUE_QUERY, request)["offset"]
    counts = selectors.queue_counts(queue)
    pending = counts["queued"] + counts["backoff"]
    context = {
        "queue": queue,
        "counts": counts,
        "pending_total": pending,
        "pending": _with_waiting(
            queue, selectors.queue_pending_page(queue, offset=offset, limit=QUEUE_PAGE_SIZE)
        ),
        "in_cluster": selectors.queue_in_cluster(queue),
        "resources": _resource_rows(queue.node, selectors.queue_usage(queue)),
        "usage_chart": usage_chart(request, queue.node.path),
        "offset": offset,
        "previous_offset": max(offset - QUEUE_PAGE_SIZE, 0) if offset else None,
        "next_offset": offset + QUEUE_PAGE_SIZE if offset + QUEUE_PAGE_SIZE < pending else None,
    }
    template = "jobs/queue_detail.html"
    if request.htmx:
        template += "#queue-lists"
    return render(request, template, context)


def _with_waiting(queue, page: list[tuple[int, Job]]) -> list[tuple]:
    """(position, job, why it waits, about when it starts) for a page of the queue's
    pending jobs."""
    for _position, job in page:
        job.queue = queue
    jobs, positions = [job for _position, job in page], {job.pk: at for at, job in page}
    told = waiting.jobs_waiting(jobs, positions=positions)
    starts = estimate.estimates(jobs, positions)
    return [(at, job, told.get(job.pk), starts.get(job.pk)) for at, job in page]


def _log_context(job: Job) -> dict:
    """The Log section's fragment: the tail of the job's main pod's log (the one kept as
    the job ended, once its pods are gone), or why there is none, with the status a
    plain-text answer gives that reason (409, 503)."""
    context: dict = {"job": job, "tail_lines": settings.JOB_LOG_TAIL_LINES}
    try:
        context["log"] = log = logs.job_log(
            job=job, tail_lines=settings.JOB_LOG_TAIL_LINES, limit_bytes=log_tails.tail_bytes()
        )
        context["lines"] = log.text.removesuffix("\n").count("\n") + 1 if log.text else 0
    except LogUnavailable as error:
        context |= {"reason": str(error), "status": 409}
    except ClusterUnavailable as error:
        context |= {
            "reason": _("The cluster did not answer: %(reason)s") % {"reason": error},
            "status": 503,
        }
    return context


def _plain(text: str, status: int = 200) -> HttpResponse:
    return HttpResponse(text, content_type="text/plain; charset=utf-8", status=status)


@login_required
@require_GET
def job_log(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """The job page's Log section (``jobs/_log.html``): the last JOB_LOG_TAIL_LINES lines of
    the job's main pod's log, or why there are none.

    The section asks for it (htmx) as the page loads, then every 2 s while the job is live:
    an unchanged answer is 304 to its ETag (portal/fragments.py), and a changed one is
    morphed in, so a selection in the lines survives the refresh. Once the job has ended the
    answer is 286, which stops the polling; if the lines on the page can no longer be read
    then (the cluster removed the pods with the job's objects), they stay, and only the
    note above them, swapped out of band, says why. Without JavaScript, the same lines (or
    the reason, with 409 or 503) as plain text.
    """
    job = selectors.job_get_for_user(request.user, pk)
    poll = page_query(LOG_POLL, request)
    context = _log_context(job)
    if not request.htmx:
        if "reason" in context:
            return _plain(context["reason"] + "\n", status=context["status"])
        return _plain(context["log"].text)
    log = context.get("log")
    if not job.is_terminal:
        return render(request, "jobs/_log.html#log-lines", context)
    if log is None and poll["lines"]:
        response = _stop_polling(
            render(request, "jobs/_log.html#log-note", context | {"oob": True})
        )
        response["HX-Reswap"] = "none"
        return response
    return _stop_polling(render(request, "jobs/_log.html#log-lines", context))


@login_required
@require_GET
def job_log_download(request: HttpRequest, pk: int) -> HttpResponse:
    """The whole log of the job's main pod as a file, up to JOB_LOG_LIMIT_BYTES; a log cut
    there ends with a line that says so. When there is no log to give, the reason as plain
    text: 409, or 503 when the cluster does not answer."""
    job = selectors.job_get_for_user(request.user, pk)
    try:
        log = logs.job_log(job=job, tail_lines=None)
    except LogUnavailable as error:
        return _plain(f"{error}\n", status=409)
    except ClusterUnavailable as error:
        return _plain(f"The cluster did not answer: {error}\n", status=503)
    text = log.text
    if log.kept_at is not None:
        text += "" if text.endswith("\n") or not text else "\n"
        text += (
            f"[Caldera: the pods are gone; these are the last lines of the log, kept when "
            f"the job ended at {log.kept_at.isoformat(timespec='seconds')}.]\n"
        )
    elif log.truncated:
        limit = settings.JOB_LOG_LIMIT_BYTES
        text += "" if text.endswith("\n") else "\n"
        text += (
            f"[Caldera: the log goes on; this file holds its first {limit} bytes "
            "(JOB_LOG_LIMIT_BYTES).]\n"
        )
    response = _plain(text)
    response["Content-Disposition"] = content_disposition_header(True, f"{log.pod}.log")
    return response
