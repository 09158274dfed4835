"""REST API for jobs and queues: thin views over the services and selectors.

Bodies are read and answers written by the serializers of ``jobs.schema``, which the
OpenAPI schema is generated from.
"""

from __future__ import annotations

from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
    extend_schema_field,
)
from rest_framework import serializers, status
from rest_framework.pagination import LimitOffsetPagination
from rest_framework.response import Response
from rest_framework.views import APIView

from kube.quantity import format_quantity
from queues.selectors import queues_for_user

from . import bulk, estimate, listing, logs, selectors, services, waiting
from .cluster import ClusterUnavailable, LogUnavailable
from .fields import flat
from .history import RANGES, history_query, usage_series
from .manifests import build_manifests
from .schema import (
    EventOut,
    JobBatchIn,
    JobBatchOut,
    JobIn,
    JobOut,
    JobPage,
    JobPriorityIn,
    KubernetesObject,
    QueueDetailOut,
    QueueListOut,
    UsageHistoryOut,
    batch_out,
    job_out,
    job_parse,
    jobs_out,
    writer,
)
from .specs import job_spec_full
from .validation import PAGE_MAX, PRIORITY_RANGE, JobInvalid, page_window


class DetailOut(serializers.Serializer):
    """Why a request was refused, when no one field is to blame."""

    detail = serializers.CharField()


class JobPagination(LimitOffsetPagination):
    """Pages of the jobs list: at most PAGE_MAX jobs, offsets bounded (``page_window``)."""

    max_limit = PAGE_MAX

    def _window(self, request) -> tuple[int, int]:
        return page_window(
            offset=request.query_params.get(self.offset_query_param),
            limit=request.query_params.get(self.limit_query_param),
            default_limit=self.default_limit,
        )

    def get_limit(self, request) -> int:
        return self._window(request)[1]

    def get_offset(self, request) -> int:
        return self._window(request)[0]


PAGE_PARAMETERS = [
    OpenApiParameter("limit", int, description=f"page size, 1 to {PAGE_MAX} (default 50)"),
    OpenApiParameter("offset", int, description="entries to skip (default 0)"),
]


def action_responses(ok) -> dict:
    """An action on a job: the job as it is now, or 409 when its state does not allow it."""
    return {
        200: ok,
        409: OpenApiResponse(DetailOut, description="The job's state does not allow this"),
    }


LIST_FILTERS = [
    OpenApiParameter("state", str, description="comma-separated states"),
    OpenApiParameter("queue", str, description="comma-separated queue names or leaf paths"),
    OpenApiParameter("owner", str, description="comma-separated usernames"),
    OpenApiParameter("mine", bool, description="only my jobs"),
    OpenApiParameter("kind", str, description="comma-separated kinds (ray, pytorch)"),
    OpenApiParameter("runtime", str, description="comma-separated runtimes"),
    OpenApiParameter("priority_min", int, description="priority at least"),
    OpenApiParameter("priority_max", int, description="priority at most"),
    OpenApiParameter("submitted_after", str, description="ISO date or date-time, inclusive"),
    OpenApiParameter("submitted_before", str, description="ISO date (the whole day) or date-time"),
    OpenApiParameter("q", str, description="text in the job's name"),
]


class JobListView(APIView):
    @extend_schema(
        operation_id="jobs_list",
        parameters=[
            *LIST_FILTERS,
            OpenApiParameter(
                "sort",
                str,
                description=f"one of {', '.join(listing.SORTS)}, '-' first for descending "
                f"(default {listing.DEFAULT_SORT})",
            ),
            OpenApiParameter("after", str, description="the cursor of the page before (in next)"),
            OpenApiParameter("limit", int, description=f"page size, 1 to {PAGE_MAX} (default 50)"),
            OpenApiParameter(
                "offset", int, description="entries to skip instead of a cursor (default 0)"
            ),
        ],
        responses=JobPage,
        summary="Jobs the user may see, filtered and sorted as the jobs page does",
    )
    def get(self, request):
        query = listing.parse_query(request.query_params)
        if "offset" in request.query_params:  # pages by offset, as before cursors
            jobs = query.filter.apply(selectors.jobs_for_user(request.user), request.user)
            paginator = JobPagination()
            page = paginator.paginate_queryset(jobs.order_by("-id"), request, view=self)
            positions = selectors.job_positions(page)
            return paginator.get_paginated_response(jobs_out(page, positions))
        page = listing.job_list(request.user, query)
        path = request.build_absolute_uri(request.path)
        return Response(
            {
                "count": page.count,
                "count_more": page.more,
                "next": page.next.url(path) if page.next else None,
                "previous": query.url(path, after=None) if query.after else None,
                "results": jobs_out(page.jobs, selectors.job_positions(page.jobs)),
            }
        )

    @extend_schema(
        operation_id="jobs_create", request=JobIn, responses={201: JobOut}, summary="Submit"
    )
    def post(self, request):
        draft = job_parse(request.data)
        job = services.job_submit(user=request.user, draft=draft)
        return Response(job_out(job, selectors.job_position(job)), status=status.HTTP_201_CREATED)


class BodyTooLarge(serializers.Serializer):
    body = serializers.ListField(child=serializers.CharField())


class JobBatchView(APIView):
    @extend_schema(
        operation_id="jobs_batch_create",
        request=JobBatchIn,
        responses={
            201: JobBatchOut,
            413: OpenApiResponse(BodyTooLarge, description="The body is too large"),
        },
        summary=f"Submit up to {services.BATCH_MAX} jobs at once, all or none",
        description="Each job is checked as POST /api/v1/jobs/ checks it. If any is refused, "
        "none is stored and the 400 names each problem as jobs[i].field. The answer lists the "
        "jobs in the order sent; GET /api/v1/jobs/{id}/ gives a job's position.",
    )
    def post(self, request):
        length = request.META.get("CONTENT_LENGTH", "")
        if length.isdigit() and int(length) > services.BATCH_MAX_BYTES:
            limit = services.BATCH_MAX_BYTES // 2**20
            return Response(
                {"body": [f"is larger than {limit} MiB; send the jobs in smaller batches"]},
                status=status.HTTP_413_REQUEST_ENTITY_TOO_LARGE,
            )
        jobs = request.data.get("jobs") if isinstance(request.data, dict) else None
        if not isinstance(jobs, list):
            return Response({"jobs": ["must be a list of job objects"]}, status=400)
        submitted = services.job_submit_batch(user=request.user, documents=jobs)
        return Response(
            batch_out(submitted),
            status=status.HTTP_201_CREATED,
        )


class JobBulkIn(serializers.Serializer):
    """POST /api/v1/jobs/bulk/: the jobs (by id, or by the jobs list's filter) and what to
    do to each."""

    ids = serializers.ListField(
        child=serializers.IntegerField(min_value=1, max_value=2**63 - 1),
        required=False,
        max_length=bulk.BULK_MAX,
        help_text="the jobs to act on",
    )
    filter = serializers.DictField(
        child=serializers.CharField(max_length=200, allow_blank=True),
        required=False,
        help_text="instead of ids: every job this filter of GET /api/v1/jobs/ matches "
        '(its parameters, {"state": "queued", "owner": "alice"})',
    )
    action = serializers.ChoiceField(bulk.ACTIONS)
    priority = serializers.IntegerField(
        required=False,
        min_value=PRIORITY_RANGE[0],
        max_value=PRIORITY_RANGE[1],
        help_text="the new priority, for action priority",
    )

    def validate(self, data):
        if ("ids" in data) == ("filter" in data):
            raise serializers.ValidationError({"ids": ["give either ids or filter"]})
        return data


class RefusedOut(serializers.Serializer):
    reason = serializers.CharField()
    ids = serializers.ListField(child=serializers.IntegerField())


class CopyOut(serializers.Serializer):
    of = serializers.IntegerField(help_text="the finished job")
    id = serializers.IntegerField(help_text="its copy, queued")


class JobBulkOut(serializers.Serializer):
    action = serializers.CharField()
    done = serializers.ListField(child=serializers.IntegerField(), help_text="the jobs acted on")
    copies = CopyOut(many=True, help_text="resubmit: the job queued for each finished one")
    refused = RefusedOut(many=True, help_text="the jobs each reason kept their action from")
    summary = serializers.CharField(help_text='"12 cancelled; 3 refused: ..."')


class JobBulkView(APIView):
    @extend_schema(
        operation_id="jobs_bulk",
        request=JobBulkIn,
        responses=JobBulkOut,
        summary="Cancel, re-prioritise, move to the head or resubmit many jobs at once",
        description="Each job is checked with the rights of its own action; the answer names "
        "the jobs each reason refused. A request wrong as a whole changes nothing.",
    )
    def post(self, request):
        body = JobBulkIn(data=request.data)
        if not body.is_valid():
            raise JobInvalid(flat(body.errors))  # ids[3], not {"ids": {3: ...}}
        wanted = body.validated_data
        if "ids" in wanted:
            jobs, unseen = bulk.jobs_chosen(request.user, wanted["ids"])
        else:
            query = listing.parse_query(wanted["filter"])
            jobs, unseen = bulk.jobs_matching(request.user, query.filter), []
        outcome = bulk.jobs_bulk(
            user=request.user,
            action=wanted["action"],
            jobs=jobs,
            not_visible=unseen,
            priority=wanted.get("priority"),
        )
        refused = [{"reason": r, "ids": ids} for r, ids in outcome.refused.items()]
        return Response(
            {
                "action": outcome.action,
                "done": outcome.done,
                "copies": [{"of": of, "id": copy} for of, copy in outcome.copies.items()],
                "refused": refused,
                "summary": outcome.summary(),
            }
        )


class StandingOut(serializers.Serializer):
    """One node (or the cluster) on a waiting job's path, for one resource it asks for."""

    node = serializers.CharField(source="where", help_text='a node\'s path, or "cluster"')
    resource = serializers.CharField()
    min = serializers.SerializerMethodField(help_text="null for the cluster")
    max = serializers.SerializerMethodField(help_text="null: not limited here")
    used = serializers.SerializerMethodField()
    borrowed = serializers.SerializerMethodField(help_text="used above its min")
    lent = serializers.SerializerMethodField(help_text="min it leaves unused that others use")
    free = serializers.SerializerMethodField(help_text="max less used; null without a max")
    blocks = serializers.SerializerMethodField(help_text="the first row that refuses the job")

    def _quantity(self, row, units: int | None) -> str | None:
        return None if units is None else format_quantity(row.resource, units)

    def get_min(self, row) -> str | None:
        return self._quantity(row, row.min)

    def get_max(self, row) -> str | None:
        return self._quantity(row, row.max)

    def get_used(self, row) -> str:
        return self._quantity(row, row.used)

    def get_borrowed(self, row) -> str:
        return self._quantity(row, row.borrowed)

    def get_lent(self, row) -> str:
        return self._quantity(row, row.lent)

    def get_free(self, row) -> str | None:
        return self._quantity(row, row.free)

    def get_blocks(self, row) -> bool:
        return self.context["waiting"].blocks(row)


class HeadOut(serializers.Serializer):
    id = serializers.IntegerField(source="job_id", allow_null=True)
    reason = serializers.ChoiceField(waiting.REASONS)
    summary = serializers.CharField()


class WaitingOut(HeadOut):
    """Why a job waits (jobs.waiting): the same sentence and table as its page."""

    id = None
    ahead = serializers.IntegerField(help_text="jobs ahead of it in its queue")
    head = HeadOut(allow_null=True, help_text="behind: the first job of its queue, and why")
    leaving = serializers.ListField(
        child=serializers.IntegerField(), help_text="the jobs leaving the cluster it waits for"
    )
    next_attempt_at = serializers.DateTimeField(allow_null=True)
    start_deadline = serializers.DateTimeField(
        allow_null=True, help_text="starting: when the start timeout takes it out of the cluster"
    )
    path = serializers.SerializerMethodField()

    @extend_schema_field(StandingOut(many=True))
    def get_path(self, told) -> list[dict]:
        return StandingOut(told.path, many=True, context={"waiting": told}).data


class JobDetailOut(JobOut):
    class Meta:
        ref_name = "JobDetail"

    waiting = WaitingOut(
        read_only=True, allow_null=True, help_text="why it is not running yet; null otherwise"
    )
    estimated_start_at = serializers.DateTimeField(
        read_only=True,
        allow_null=True,
        help_text="pending: about when it starts; null when there is no estimate",
    )
    estimate_basis = serializers.CharField(
        read_only=True,
        allow_null=True,
        help_text='how the estimate was reached: "about 12 min: 3 jobs ahead, 2 running jobs '
        'expected to end by 14:20"; null unless pending',
    )


class JobDetailView(APIView):
    @extend_schema(
        operation_id="jobs_retrieve",
        responses=JobDetailOut,
        summary="A job, with its queue position and why it waits",
        description="The job as submitted (``workers`` as POST /api/v1/jobs/ takes them, "
        "``max_replicas`` only on a group that was given one), its state, position and "
        "timestamps, ``request``: the quota it holds, autoscaling groups at their replicas, "
        "and ``waiting``: why it is not running yet, the same explanation as its page.",
    )
    def get(self, request, pk: int):
        job = selectors.job_get_for_user(request.user, pk)
        position = selectors.job_position(job)
        answer = job_out(job, position)
        told = waiting.job_waiting(job, position)
        answer["waiting"] = None if told is None else WaitingOut(told).data
        start = estimate.job_estimate(job, position)
        answer["estimated_start_at"] = start and start.at and start.at.isoformat()
        answer["estimate_basis"] = start and start.basis
        return Response(answer)

    @extend_schema(
        operation_id="jobs_priority",
        request=JobPriorityIn,
        responses=action_responses(JobOut),
        summary="Change a pending job's priority (raising: managers and staff)",
    )
    def patch(self, request, pk: int):
        job = selectors.job_get_for_user(request.user, pk)
        priority = JobPriorityIn().check(request.data)
        job = services.job_set_priority(user=request.user, job=job, priority=priority)
        job = selectors.job_get_for_user(request.user, pk)
        return Response(job_out(job, selectors.job_position(job)))


class JobCancelView(APIView):
    @extend_schema(request=None, responses=action_responses(JobOut), summary="Cancel a job")
    def post(self, request, pk: int):
        job = selectors.job_get_for_user(request.user, pk)
        services.job_cancel(user=request.user, job=job)
        job = selectors.job_get_for_user(request.user, pk)
        return Response(job_out(job, None))


class JobMoveToHeadView(APIView):
    @extend_schema(
        request=None,
        responses=action_responses(JobOut),
        summary="Put a pending job first in its queue (managers and staff)",
        description="Raises the job's priority to one above the highest of the others "
        "pending in its queue, and records who moved it, from what priority to what.",
    )
    def post(self, request, pk: int):
        job = selectors.job_get_for_user(request.user, pk)
        services.job_move_to_head(user=request.user, job=job)
        job = selectors.job_get_for_user(request.user, pk)
        return Response(job_out(job, selectors.job_position(job)))


class JobEventsView(APIView):
    @extend_schema(
        responses=EventOut(many=True),
        summary="The job's history, oldest first, a page at a time",
        description=f"Up to ``limit`` events (at most {PAGE_MAX}, the default) from "
        "``offset``; when there are more, a ``Link`` header names the next page "
        '(``rel="next"``).',
        parameters=[
            OpenApiParameter("offset", int, description="events to skip"),
            OpenApiParameter("limit", int, description=f"events to answer, 1 to {PAGE_MAX}"),
        ],
    )
    def get(self, request, pk: int):
        job = selectors.job_get_for_user(request.user, pk)
        offset, limit = page_window(
            offset=request.query_params.get("offset"),
            limit=request.query_params.get("limit"),
            default_limit=PAGE_MAX,
        )
        events = list(selectors.job_events(job)[offset : offset + limit + 1])
        write = writer(EventOut)
        response = Response([write(event) for event in events[:limit]])
        if len(events) > limit:
            following = request.build_absolute_uri(
                f"{request.path}?offset={offset + limit}&limit={limit}"
            )
            response["Link"] = f'<{following}>; rel="next"'
        return response


class JobManifestView(APIView):
    @extend_schema(
        responses=KubernetesObject(many=True),
        summary="The Kubernetes objects Caldera creates for the job",
    )
    def get(self, request, pk: int):
        job = selectors.job_get_for_user(request.user, pk)
        return Response(build_manifests(job_spec_full(job)))


class QueueListView(APIView):
    @extend_schema(
        operation_id="queues_list",
        responses=QueueListOut(many=True),
        summary="Queues the user may see",
    )
    def get(self, request):
        queues = queues_for_user(request.user).filter(active=True).order_by("name")
        context = {
            "usage": selectors.usage_by_path(),
            "pending": selectors.pending_counts([q.pk for q in queues]),
        }
        return Response(QueueListOut(queues, many=True, context=context).data)


class QueueDetailView(APIView):
    @extend_schema(
        operation_id="queues_retrieve",
        parameters=PAGE_PARAMETERS,
        responses=QueueDetailOut,
        summary="A queue: pending jobs with positions (active and backoff), admitted jobs, quota",
    )
    def get(self, request, name: str):
        queue = selectors.queue_get_for_user(request.user, name)
        offset, limit = page_window(
            offset=request.query_params.get("offset"),
            limit=request.query_params.get("limit"),
            default_limit=50,
        )
        context = {
            "usage": {queue.node.path: selectors.queue_usage(queue)},
            "page": selectors.queue_pending_page(queue, offset=offset, limit=limit),
            "admitted": selectors.queue_in_cluster(queue),
            "counts": selectors.queue_counts(queue),
            "offset": offset,
            "limit": limit,
        }
        return Response(QueueDetailOut(queue, context=context).data)


class JobLogOut(serializers.Serializer):
    """The end of a job's log: its main pod's (a Ray job's head, a PyTorch job's master)."""

    pod = serializers.CharField(help_text="the pod whose log this is")
    lines = serializers.ListField(
        child=serializers.CharField(allow_blank=True, trim_whitespace=False),
        help_text="its lines, oldest first, without their line ends",
    )
    truncated = serializers.BooleanField(
        help_text="not the whole log: earlier lines were left out (tail_lines), or the log "
        "was cut at the server's byte limit (its last line may then be cut short)"
    )


class JobLogView(APIView):
    @extend_schema(
        operation_id="jobs_log",
        parameters=[
            OpenApiParameter(
                "tail_lines",
                int,
                description=f"only the last lines, 1 to {logs.TAIL_LINES_MAX}; without it, "
                "the log from its start",
            )
        ],
        responses={
            200: JobLogOut,
            409: OpenApiResponse(
                DetailOut,
                description="No log to read: the job has not started, its pod is gone, or "
                "its container has not started; the detail says which",
            ),
            503: OpenApiResponse(
                DetailOut,
                description="The cluster did not answer (the detail names the call), or "
                "the database or the broker is down",
            ),
        },
        summary="The end of the job's log: its head (Ray) or master (PyTorch) pod's",
        description="Read from the cluster at each request, at most JOB_LOG_LIMIT_BYTES "
        "bytes of it. Whoever may see the job may read its log.",
    )
    def get(self, request, pk: int):
        job = selectors.job_get_for_user(request.user, pk)
        tail_lines = logs.tail_lines_parse(request.query_params.get("tail_lines"))
        try:
            log = logs.job_log(job=job, tail_lines=tail_lines)
        except LogUnavailable as error:
            return Response({"detail": str(error)}, status=status.HTTP_409_CONFLICT)
        except ClusterUnavailable as error:
            return Response(
                {"detail": f"The cluster did not answer: {error}"},
                status=status.HTTP_503_SERVICE_UNAVAILABLE,
            )
        lines = log.text.removesuffix("\n").split("\n") if log.text else []
        return Response(
            JobLogOut({"pod": log.pod, "lines": lines, "truncated": log.truncated}).data
        )


class QuotaHistoryView(APIView):
    @extend_schema(
        operation_id="quota_history",
        parameters=[
            OpenApiParameter(
                "node", str, description="a node's path, root/algorithm (default: the root)"
            ),
            OpenApiParameter(
                "range", str, enum=list(RANGES), description="the last hour, day or week (day)"
            ),
        ],
        responses=UsageHistoryOut,
        summary="A node's usage history: used, min, max, pending demand and admitted jobs",
        description="Recorded every USAGE_HISTORY_SECONDS and kept USAGE_HISTORY_DAYS; one "
        "point per resource and bucket (a minute for an hour, 5 minutes for a day, 30 for a "
        "week), each the highest value among its samples. A bucket with no sample is "
        "missing, not zero. The quota tree page's charts and its CSV show the same. Anyone "
        "signed in may read any node, as on the quota tree page.",
    )
    def get(self, request):
        query = history_query(request.query_params)
        series = usage_series(node=query.node, window=query.range)
        return Response(writer(UsageHistoryOut)(series))
