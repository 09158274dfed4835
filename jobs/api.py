"""REST API for jobs and queues: thin views over the services and selectors."""

from __future__ import annotations

from django.conf import settings
from django.db.models import Q
from drf_spectacular.plumbing import build_array_type, build_basic_type
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.pagination import LimitOffsetPagination
from rest_framework.response import Response
from rest_framework.views import APIView

from kube.quantity import format_resources
from queues.selectors import queues_for_user

from . import selectors, services
from .manifests import build_manifests
from .models import Job, State
from .specs import job_spec_full
from .validation import MAX_REPLICAS, PAGE_MAX, job_parse, page_window


def _time(value):
    return value.isoformat() if value else None


def job_data(job: Job, position: int | None) -> dict:
    head_key = "master" if job.kind == Job.Kind.PYTORCH else "head"
    data = {
        "id": job.pk,
        "name": job.name,
        "kind": job.kind,
        "runtime": job.runtime,
        "state": job.state,
        "queue": job.queue.name,
        "queue_path": job.queue.node.path,
        "namespace": job.namespace,
        "owner": job.owner.username,
        "priority": job.priority,
        "position": position,
        "enqueued_at": _time(job.enqueued_at),
        "dequeued_at": _time(job.dequeued_at),
        "started_at": _time(job.started_at),
        "finished_at": _time(job.finished_at),
        "wait_seconds": job.wait_seconds,
        "backoff_reason": job.backoff_reason or None,
        "next_attempt_at": _time(job.next_attempt_at) if job.state == State.BACKOFF else None,
        "request": format_resources(job.request),
        "image": job.image,
        head_key: job.head,
        "workers": job.workers,
        "run_seconds": job.run_seconds,
        "pip": job.pip,
        "env": job.env,
        "preemptions": job.preemption_count,
        # Start timeouts so far, and how many fail the job (START_TIMEOUT_ATTEMPTS).
        "start_timeouts": job.start_timeouts,
        "start_timeout_attempts": settings.START_TIMEOUT_ATTEMPTS,
    }
    if job.kind == Job.Kind.PYTORCH:
        data["command"] = job.command
    else:
        data["entrypoint"] = job.entrypoint
    return data


def _pending_entry(job: Job, position: int) -> dict:
    return {
        "job": job.pk,
        "name": job.name,
        "owner": job.owner.username,
        "position": position,
        "priority": job.priority,
        "enqueued_at": _time(job.enqueued_at),
    }


def event_data(event) -> dict:
    return {
        "at": _time(event.created_at),
        "type": event.type,
        "reason": event.reason,
        "message": event.message,
        "actor": event.actor.username if event.actor else None,
        "involved": event.involved or None,
        "cycle": event.cycle,
    }


class WorkerGroupSchema(serializers.Serializer):
    """Documents one entry of ``workers``, in a submitted job and in a job read back."""

    name = serializers.CharField(
        required=False, help_text="a DNS-1123 label; default group-<i> (Ray), worker (PyTorch)"
    )
    replicas = serializers.IntegerField(
        required=False, default=1, min_value=0, max_value=MAX_REPLICAS
    )
    max_replicas = serializers.IntegerField(
        required=False,
        min_value=0,
        max_value=MAX_REPLICAS,
        help_text="Ray on kuberay only: the group autoscales (KubeRay's autoscaler) between "
        "replicas and max_replicas pods. Quota counts its replicas, the pods it starts "
        "with, and the autoscaler beside the head (500m CPU, 512Mi); the cluster places the "
        "pods it adds as it has room. Absent: a fixed number of pods. "
        "Returned only when given.",
    )
    resources = serializers.DictField(
        child=serializers.CharField(), help_text='per pod: {"cpu": "4", "memory": "4Gi"}'
    )


class JobSubmitSchema(serializers.Serializer):
    """Documents the body of POST /api/v1/jobs/ (checked by jobs.validation.job_parse)."""

    queue = serializers.CharField(help_text="leaf path (root/algorithm/video) or queue name")
    kind = serializers.ChoiceField(choices=Job.Kind.choices)
    runtime = serializers.ChoiceField(choices=Job.Runtime.choices, required=False)
    name = serializers.CharField(max_length=40)
    image = serializers.CharField()
    entrypoint = serializers.CharField(required=False, help_text="Ray: the command to run")
    command = serializers.ListField(child=serializers.CharField(), required=False)
    script = serializers.CharField(required=False, help_text="mounted as a ConfigMap")
    script_filename = serializers.CharField(required=False, default="main.py")
    head = serializers.JSONField(required=False, help_text='Ray: {"resources": {"cpu": "4"}}')
    master = serializers.JSONField(required=False, help_text="PyTorch: like head")
    workers = WorkerGroupSchema(many=True, required=False)
    priority = serializers.IntegerField(required=False, default=0)
    run_seconds = serializers.FloatField(required=False, default=60)
    pip = serializers.ListField(
        child=serializers.CharField(),
        required=False,
        help_text='Ray on kuberay: requirements for the runtime environment, ["torch==2.4.0"]',
    )
    env = serializers.DictField(
        child=serializers.CharField(), required=False, help_text='{"NAME": "value"}'
    )


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


# An answer that is a JSON array of objects, as the schema documents it.
OBJECT_LIST = {200: build_array_type(build_basic_type(OpenApiTypes.OBJECT))}


# An action on a job: the job as it is now, or 409 when its state does not allow it.
ACTION_RESPONSES = {
    200: OpenApiTypes.OBJECT,
    409: OpenApiResponse(
        OpenApiTypes.OBJECT, description="The job's state does not allow this (detail says)"
    ),
}


class JobPatchSchema(serializers.Serializer):
    priority = serializers.IntegerField()


class JobListView(APIView):
    @extend_schema(
        parameters=[
            OpenApiParameter("state", str, description="comma-separated states"),
            OpenApiParameter("queue", str, description="queue name or leaf path"),
            OpenApiParameter("mine", bool, description="only my jobs"),
            *PAGE_PARAMETERS,
        ],
        responses=OpenApiTypes.OBJECT,
        summary="Jobs the user may see, newest first",
    )
    def get(self, request):
        jobs = selectors.jobs_for_user(request.user)
        states = [s for s in request.query_params.get("state", "").split(",") if s]
        unknown = sorted(set(states) - set(State.values))
        if unknown:
            return Response({"state": [f"unknown state {unknown[0]!r}"]}, status=400)
        if states:
            jobs = jobs.filter(state__in=states)
        if queue := request.query_params.get("queue"):
            jobs = jobs.filter(Q(queue__name=queue) | Q(queue__node__path=queue))
        if request.query_params.get("mine", "").lower() in ("1", "true", "yes"):
            jobs = jobs.filter(owner=request.user)
        paginator = JobPagination()
        page = paginator.paginate_queryset(jobs.order_by("-id"), request, view=self)
        positions = selectors.job_positions(page)
        return paginator.get_paginated_response(
            [job_data(job, positions.get(job.pk)) for job in page]
        )

    @extend_schema(request=JobSubmitSchema, responses={201: OpenApiTypes.OBJECT}, summary="Submit")
    def post(self, request):
        draft = job_parse(request.data)
        job = services.job_submit(user=request.user, draft=draft)
        return Response(job_data(job, selectors.job_position(job)), status=status.HTTP_201_CREATED)


class JobBatchSchema(serializers.Serializer):
    jobs = JobSubmitSchema(many=True, help_text=f"1 to {services.BATCH_MAX} jobs")


def _batch_entry(job: Job) -> dict:
    return {
        "id": job.pk,
        "name": job.name,
        "queue": job.queue.name,
        "state": job.state,
        "priority": job.priority,
        "enqueued_at": _time(job.enqueued_at),
    }


class JobBatchView(APIView):
    @extend_schema(
        request=JobBatchSchema,
        responses={
            201: OpenApiTypes.OBJECT,
            413: OpenApiResponse(OpenApiTypes.OBJECT, description="The body is too large"),
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
            {"count": len(submitted), "jobs": [_batch_entry(job) for job in submitted]},
            status=status.HTTP_201_CREATED,
        )


class JobDetailView(APIView):
    @extend_schema(
        responses=OpenApiTypes.OBJECT,
        summary="A job, with its queue position",
        description="The job as submitted (``workers`` as POST /api/v1/jobs/ takes them, "
        "``max_replicas`` only on a group that was given one), its state, position and "
        "timestamps, and ``request``: the quota it holds, autoscaling groups at their replicas.",
    )
    def get(self, request, pk: int):
        job = selectors.job_get_for_user(request.user, pk)
        return Response(job_data(job, selectors.job_position(job)))

    @extend_schema(
        request=JobPatchSchema,
        responses=ACTION_RESPONSES,
        summary="Change a pending job's priority (raising: managers and staff)",
    )
    def patch(self, request, pk: int):
        job = selectors.job_get_for_user(request.user, pk)
        unknown = sorted(set(request.data) - {"priority"})
        if unknown:
            return Response({unknown[0]: ["cannot be changed; only priority can"]}, status=400)
        serializer = JobPatchSchema(data=request.data)
        serializer.is_valid(raise_exception=True)
        priority = serializer.validated_data["priority"]
        job = services.job_set_priority(user=request.user, job=job, priority=priority)
        job = selectors.job_get_for_user(request.user, pk)
        return Response(job_data(job, selectors.job_position(job)))


class JobCancelView(APIView):
    @extend_schema(request=None, responses=ACTION_RESPONSES, summary="Cancel a job")
    def post(self, request, pk: int):
        job = selectors.job_get_for_user(request.user, pk)
        services.job_cancel(user=request.user, job=job)
        job = selectors.job_get_for_user(request.user, pk)
        return Response(job_data(job, None))


class JobMoveToHeadView(APIView):
    @extend_schema(
        request=None,
        responses=ACTION_RESPONSES,
        summary="Put a pending job first in its queue (managers and staff)",
        description="Raises the job's priority to one above the highest of the others "
        "pending in its queue, and records who moved it, from what priority to what.",
    )
    def post(self, request, pk: int):
        job = selectors.job_get_for_user(request.user, pk)
        services.job_move_to_head(user=request.user, job=job)
        job = selectors.job_get_for_user(request.user, pk)
        return Response(job_data(job, selectors.job_position(job)))


class JobEventsView(APIView):
    @extend_schema(responses=OBJECT_LIST, summary="The job's history, oldest first")
    def get(self, request, pk: int):
        job = selectors.job_get_for_user(request.user, pk)
        return Response([event_data(event) for event in selectors.job_events(job)])


class JobManifestView(APIView):
    @extend_schema(
        responses=OBJECT_LIST,
        summary="The Kubernetes objects Caldera creates for the job",
    )
    def get(self, request, pk: int):
        job = selectors.job_get_for_user(request.user, pk)
        return Response(build_manifests(job_spec_full(job)))


def _default(value, default):
    return default if value is None else value


def queue_data(queue, usage: dict | None = None) -> dict:
    return {
        "name": queue.name,
        "path": queue.node.path,
        "policy": queue.policy,
        "preemption": queue.preemption,
        "backoff_base_seconds": _default(queue.backoff_base_seconds, settings.BACKOFF_BASE_SECONDS),
        "backoff_max_seconds": _default(queue.backoff_max_seconds, settings.BACKOFF_MAX_SECONDS),
        "priority_class": queue.priority_class or None,
        "active": queue.active,
        "namespaces": queue.node.namespaces,
        "min": format_resources(queue.node.min),
        "max": format_resources(queue.node.max),
        "used": format_resources(usage if usage is not None else {}),
    }


class QueueListView(APIView):
    @extend_schema(responses=OBJECT_LIST, summary="Queues the user may see")
    def get(self, request):
        usage = selectors.usage_by_path()
        queues = queues_for_user(request.user).filter(active=True).order_by("name")
        counts = selectors.pending_counts([q.pk for q in queues])
        return Response(
            [
                queue_data(q, usage.get(q.node.path, {})) | {"pending": counts.get(q.pk, 0)}
                for q in queues
            ]
        )


class QueueDetailView(APIView):
    @extend_schema(
        parameters=PAGE_PARAMETERS,
        responses=OpenApiTypes.OBJECT,
        summary="A queue: pending jobs with positions (active and backoff), admitted jobs, quota",
    )
    def get(self, request, name: str):
        queue = selectors.queue_get_for_user(request.user, name)
        offset, limit = page_window(
            offset=request.query_params.get("offset"),
            limit=request.query_params.get("limit"),
            default_limit=50,
        )
        page = selectors.queue_pending_page(queue, offset=offset, limit=limit)
        counts = selectors.queue_counts(queue)
        data = queue_data(queue, selectors.queue_usage(queue))
        data["active"] = [
            _pending_entry(job, position) for position, job in page if job.state == State.QUEUED
        ]
        data["backoff"] = [
            _pending_entry(job, position)
            | {"reason": job.backoff_reason, "next_attempt_at": _time(job.next_attempt_at)}
            for position, job in page
            if job.state == State.BACKOFF
        ]
        data["admitted"] = [
            {
                "job": job.pk,
                "name": job.name,
                "owner": job.owner.username,
                "state": job.state,
                "dequeued_at": _time(job.dequeued_at),
            }
            for job in selectors.queue_in_cluster(queue)
        ]
        data["counts"] = counts
        data["offset"], data["limit"] = offset, limit
        return Response(data)
