"""REST API for jobs and queues: thin views over the services and selectors.

Bodies are read and answers written by the serializers of ``jobs.schema``, which the
OpenAPI schema is generated from.
"""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.pagination import LimitOffsetPagination
from rest_framework.response import Response
from rest_framework.views import APIView

from queues.selectors import queues_for_user

from . import bulk, listing, selectors, services
from .fields import flat
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


class JobDetailView(APIView):
    @extend_schema(
        operation_id="jobs_retrieve",
        responses=JobOut,
        summary="A job, with its queue position",
        description="The job as submitted (``workers`` as POST /api/v1/jobs/ takes them, "
        "``max_replicas`` only on a group that was given one), its state, position and "
        "timestamps, and ``request``: the quota it holds, autoscaling groups at their replicas.",
    )
    def get(self, request, pk: int):
        job = selectors.job_get_for_user(request.user, pk)
        return Response(job_out(job, selectors.job_position(job)))

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
    @extend_schema(responses=EventOut(many=True), summary="The job's history, oldest first")
    def get(self, request, pk: int):
        job = selectors.job_get_for_user(request.user, pk)
        write = writer(EventOut)
        return Response([write(event) for event in selectors.job_events(job)])


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
