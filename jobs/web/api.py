"""REST API for jobs and queues: thin views over the services and selectors.

Bodies are read by the serializers of ``jobs.document.schema`` and answers written by those
of ``jobs.web.answers``, which the OpenAPI schema is generated from.
"""

from __future__ import annotations

import re

from django.utils.translation import gettext as _
from drf_spectacular.extensions import OpenApiSerializerExtension
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

from jobs import bulk, services
from jobs.cluster import ClusterUnavailable, LogUnavailable
from jobs.cluster.manifests import build_manifests
from jobs.cluster.manifests.objects import in_kubernetes_order
from jobs.document.fields import flat
from jobs.document.idempotency import REPLAYED_HEADER, idempotency_key, idempotency_parameter
from jobs.document.params import EVENTS_PAGE, HELD_QUERY, MANIFEST_QUERY, QUEUE_PAGE
from jobs.document.schema import (
    JobBatchIn,
    JobIn,
    JobPriorityIn,
    priority_field,
    writer,
)
from jobs.document.validation import OFFSET_MAX, PAGE_MAX, PRIORITY_RANGE, JobInvalid
from jobs.engine.objects import job_spec_full
from jobs.reads import estimate, listing, logs, selectors, waiting
from jobs.web.answers.events import EventOut
from jobs.web.answers.jobs import (
    BodyTooLarge,
    DetailOut,
    JobBatchOut,
    JobBulkOut,
    JobDetailOut,
    JobDryRunOut,
    JobOut,
    JobPage,
    JobSubmittedOut,
    WaitingOut,
    batch_out,
    dry_run_out,
    dry_runs_out,
    job_out,
    jobs_out,
    sent_out,
)
from jobs.web.answers.logs import KEPT_TAIL, LOG_HEADER, JobLogOut
from jobs.web.answers.manifests import KubernetesObject
from jobs.web.answers.queues import QueueDetailOut, QueueListOut
from queues.api_base import Body, json_parsers, manifest_parsers, refusals
from queues.selectors import queues_for_user


class JobPagination(LimitOffsetPagination):
    """Pages of the jobs list by offset, at the offset and limit ``listing.parse_query`` read."""

    def __init__(self, query: listing.JobQuery):
        self.query = query

    def get_limit(self, request) -> int:
        return self.query.limit

    def get_offset(self, request) -> int:
        return self.query.offset or 0


def action_responses(ok) -> dict:
    """An action on a job: the job as it is now, or 409 when its state does not allow it."""
    return {
        200: ok,
        409: OpenApiResponse(DetailOut, description="The job's state does not allow this"),
    }


# What a submission is refused for that its schema cannot say: by what is stored (the queues
# the user may submit to, their role there, the quota tree, the cluster's nodes and
# runtimes) or by its fields together (jobs.document.schema.JobIn).
SUBMIT_REFUSALS = {
    "queue": "no active queue of that name or path that you may submit to",
    "priority": "above 0 from a member of the queue (managers and staff may raise it)",
    "runtime": "one this cluster does not offer, or that does not run the job's kind",
    "entrypoint": "required of a Ray job without a script; a PyTorch job takes a command",
    "command": "required of a PyTorch job without a script; a Ray job takes an entrypoint",
    "head": "required of a Ray job, refused on a PyTorch job; or a pod no node can ever hold",
    "master": "required of a PyTorch job, refused on a Ray job; or a pod no node can hold",
    "workers": "more pods in all than JOB_MAX_PODS, or more than one group where PyTorch or "
    "Volcano takes one",
    "workers[]": "a pod that no node of the cluster can ever hold",
    "workers[].name": "the name of another group of the job",
    "workers[].max_replicas": "below replicas, or on a runtime other than kuberay",
    "pip": "packages on a runtime other than kuberay",
    "request": "more than the quota tree's max on the queue's path can ever give, or more "
    "than a sum of quantities can hold",
    # Names of keys, which no OpenAPI 3.0 schema can state.
    "env": "a name holding a control character",
    "env.*": "a name that is not an environment variable's: a letter or _, then letters, "
    "digits and _",
    "secret_env": "a name holding a control character",
    "secret_env.*": "a name that is not an environment variable's, or a value that is not "
    "secret/key",
    "claims[]": "a claim that is not a DNS-1123 subdomain, a path that is not absolute, is "
    "another claim's or the pod's own (/dev, /proc, /sys)",
    "claims[].claim": "not a DNS-1123 subdomain",
    "claims[].path": "not an absolute path, or another claim's, or the pod's own",
    "shm": "not a quantity of memory",
    "head.limits": "a limit without its request, below it, or of an extended resource not "
    "equal to it",
    "master.limits": "a limit without its request, below it, or of an extended resource not "
    "equal to it",
    "workers[].limits": "a limit without its request, below it, or of an extended resource "
    "not equal to it",
    "head.resources": "a name that is not a Kubernetes resource name (cpu, nvidia.com/gpu)",
    "master.resources": "a name that is not a Kubernetes resource name (cpu, nvidia.com/gpu)",
    "workers[].resources": "a name that is not a Kubernetes resource name",
    "head.resources.*": "not a Kubernetes quantity (500m, 2, 4Gi)",
    "master.resources.*": "not a Kubernetes quantity (500m, 2, 4Gi)",
    "workers[].resources.*": "not a Kubernetes quantity (500m, 2, 4Gi)",
    "head.limits.*": "not a Kubernetes quantity (500m, 2, 4Gi)",
    "master.limits.*": "not a Kubernetes quantity (500m, 2, 4Gi)",
    "workers[].limits.*": "not a Kubernetes quantity (500m, 2, 4Gi)",
    # Rules of single fields that jobs.document.schema does not yet write into the schema.
    "image": "not an OCI image reference: [registry[:port]/]path[:tag][@digest]",
    "pip[]": "not one requirement: a space in it, or more than 200 characters",
    "pools": "a node pool the quota tree does not declare, or pools where it declares none",
    "pools[]": "not a node pool's name (lowercase letters, digits and -), or one named twice",
    "time_limit": "not a duration from 1s to 365d (2h, 1h30m, or seconds), or longer than the "
    "queue's leaf allows (limits.maxTime)",
    "retries": "more than the queue's leaf allows (limits.maxRetries)",
}


# A batch's: each job's, and the query's, which applies to every job.
BATCH_REFUSALS = {f"jobs[].{field}": reason for field, reason in SUBMIT_REFUSALS.items()} | {
    "queue": SUBMIT_REFUSALS["queue"],
    "priority": SUBMIT_REFUSALS["priority"],
    "pools": SUBMIT_REFUSALS["pools"],
}


# The answer to a submission sent again with its Idempotency-Key: the first one's, now.
REPLAYED = OpenApiParameter(
    REPLAYED_HEADER,
    {"type": "string", "enum": ["true"]},
    OpenApiParameter.HEADER,
    required=True,
    description="The request's Idempotency-Key was sent before with the same request; "
    "nothing was queued now",
    response=[200],
)


KEY_USED = OpenApiResponse(
    DetailOut,
    description="The Idempotency-Key was sent with another request (or to the other submit "
    "endpoint) within IDEMPOTENCY_KEY_HOURS; nothing was queued",
)


# A list of node pools' names, comma-separated.
POOLS_QUERY = "^[a-z0-9]([-a-z0-9]*[a-z0-9])?(,[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"


# A submission's query: the queue and the priority, over the document's (a Kubernetes
# object's labels, or Caldera's fields).
SUBMIT_QUERY = [
    OpenApiParameter(
        "queue",
        str,
        description="the queue (leaf path or name), over the body's: what a Kubernetes "
        "object that names none is sent to",
    ),
    OpenApiParameter(
        "priority",
        {"type": "integer", "minimum": PRIORITY_RANGE[0], "maximum": PRIORITY_RANGE[1]},
        description="the priority, over the body's",
    ),
    OpenApiParameter(
        "pools",
        {"type": "string", "pattern": POOLS_QUERY, "maxLength": 32 * 33},
        description="the node pools of the quota tree the job accepts, in order, "
        "comma-separated (h100,a100), over the body's pools (a Kubernetes object's "
        "caldera.io/pools annotation or nodeSelector)",
    ),
    *HELD_QUERY.parameters(),
]

# The body the schema declares: Caldera's document, as JSON. A Kubernetes object (as JSON
# or YAML) is taken too, as NATIVE says; the schema leaves YAML out, so that the clients
# generated from it (openapi-python-client among them) need no content type of their own.
JSON_BODY = {"application/json": JobIn}

NATIVE = (
    " The body may also be a Kubernetes object a team already has, as JSON or YAML "
    "(Content-Type: application/yaml): a KubeRay RayJob (ray.io/v1), a Kubeflow PyTorchJob "
    "(kubeflow.org/v1) or a Volcano Job (batch.volcano.sh/v1alpha1) with the ray or pytorch "
    "plugin, alone or in a v1 List with the ConfigMap holding its script. Its queue is "
    "?queue=, else its caldera.io/queue, volcano.sh/queue-name or kueue.x-k8s.io/queue-name "
    "label (or a Volcano Job's spec.queue), else the queue whose leaf binds its namespace. "
    "What Caldera cannot represent is refused with its path in the object "
    "(spec.rayClusterSpec.workerGroupSpecs[0].template.spec.volumes: not supported); "
    'docs/api.md, "Native manifests", lists what is taken.'
)


def submit_query(request) -> dict:
    """The query's overrides, as ``services.submission_read`` takes them."""
    params = request.query_params
    return {
        "queue": params.get("queue", ""),
        "priority": params.get("priority"),
        "pools": params.get("pools"),
        "held": HELD_QUERY.read(params)["held"],
    }


def _keyed(body: object, query: dict) -> object:
    """What an Idempotency-Key's request is compared by: the body, and the query's
    overrides when it has any (the same object sent to another queue is another request)."""
    overrides = {name: value for name, value in query.items() if value}
    return {"body": body, "query": overrides} if overrides else body


def replayed(answer: dict) -> Response:
    return Response(answer, status=status.HTTP_200_OK, headers={REPLAYED_HEADER: "true"})


class JobListView(APIView):
    parser_classes = manifest_parsers()

    @extend_schema(
        operation_id="jobs_list",
        parameters=listing.API_QUERY.parameters(),
        responses=JobPage,
        summary="Jobs the user may see, filtered and sorted as the jobs page does",
        extensions=refusals({"after": "a cursor this list did not give"}),
    )
    def get(self, request):
        query = listing.parse_query(request.query_params, declared=listing.API_QUERY)
        if query.offset is not None:  # pages by offset, as before cursors
            # Not the end of each job's log a list does not show.
            jobs = query.filter.apply(
                selectors.jobs_for_user(request.user).defer("log_tail"), request.user
            )
            paginator = JobPagination(query)
            rows = paginator.paginate_queryset(jobs.order_by("-id"), request, view=self)
            assert rows is not None  # get_limit always gives a limit
            positions = selectors.job_positions(rows)
            return paginator.get_paginated_response(jobs_out(rows, positions))
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
        operation_id="jobs_create",
        request=JSON_BODY,
        parameters=[*SUBMIT_QUERY, idempotency_parameter("the job"), REPLAYED],
        responses={
            201: JobSubmittedOut,
            200: OpenApiResponse(
                JobSubmittedOut, description="The job the key's first request queued"
            ),
            409: KEY_USED,
        },
        summary="Submit",
        description="A job in Caldera's document (below)." + NATIVE,
        extensions=refusals(SUBMIT_REFUSALS),
    )
    def post(self, request):
        query = submit_query(request)
        key = idempotency_key(request.headers, endpoint="jobs", body=_keyed(request.data, query))
        submission = services.submission_read(request.data, **query)
        try:
            with submission.paths():
                job = services.job_submit(user=request.user, draft=submission.draft, key=key)
        except services.AlreadySubmitted as done:
            (first,) = done.jobs
            return replayed(job_out(first, selectors.job_position(first)) | sent_out(first))
        return Response(
            job_out(job, selectors.job_position(job)) | sent_out(job),
            status=status.HTTP_201_CREATED,
        )


class JobDryRunView(APIView):
    """Would a job run if it were submitted now, and when: checked as a submission is,
    stored nowhere, triggering nothing."""

    parser_classes = manifest_parsers()

    @extend_schema(
        operation_id="jobs_dry_run",
        request=JSON_BODY,
        parameters=SUBMIT_QUERY,
        responses=JobDryRunOut,
        summary="Dry run: would this job be admitted now, where would it wait, and when "
        "would it start",
        description="Takes what POST /api/v1/jobs/ takes and checks it the same way (a 400 "
        "names the same fields), then answers as if it had been queued now: fits_now, its "
        "position, waiting (the sentence and path table a queued job gets), its estimated "
        "start with its basis, and the objects it would become. Nothing is stored." + NATIVE,
        extensions=refusals(SUBMIT_REFUSALS),
    )
    def post(self, request):
        submission = services.submission_read(request.data, **submit_query(request))
        with submission.paths():
            job = services.job_preview(user=request.user, draft=submission.draft)
        return Response(dry_run_out(job))


class JobBatchBody(Body, JobBatchIn):
    """The batch's body with its bounds, as ``services.batch_size_check`` keeps them."""

    class Meta:
        ref_name = "JobBatch"

    # many=True hands the bounds to the ListSerializer; the stub's __init__ does not list them.
    jobs = JobIn(many=True, min_length=1, max_length=services.BATCH_MAX)  # type: ignore[call-arg]


def too_large(request) -> bool:
    """Whether the batch's body is too large to read: it is refused with 413 unread."""
    length = request.META.get("CONTENT_LENGTH", "")
    return length.isdigit() and int(length) > services.BATCH_MAX_BYTES


def batch_refusal(request) -> Response | None:
    """The refusal of a batch's body as a whole, before its jobs are read: 413 when it is
    too large (unread), 400 for a field besides ``jobs`` or ``jobs`` not a list; else None."""
    if too_large(request):
        limit = services.BATCH_MAX_BYTES // 2**20
        return Response(
            {
                "body": [
                    _("is larger than %(limit)s MiB; send the jobs in smaller batches")
                    % {"limit": limit}
                ]
            },
            status=status.HTTP_413_REQUEST_ENTITY_TOO_LARGE,
        )
    unknown = sorted(name for name in request.data if name != "jobs")
    if unknown:  # the parser takes objects only
        raise JobInvalid({name: _("unknown field") for name in unknown})
    if not isinstance(request.data.get("jobs"), list):
        return Response({"jobs": [_("must be a list of job objects")]}, status=400)
    return None


class BatchView(APIView):
    """A view whose body is a batch of jobs: submitting it, or its dry run."""

    parser_classes = json_parsers()

    def throttle_cost(self, request) -> int:
        """What the batch counts against the API's limits of submissions (portal's
        throttling, which asks a view for this): its jobs, as that many single submissions
        would, up to BATCH_MAX; one when the view refuses the body whole (too large, not a
        list of jobs). A dry run counts as its batch would: it tells every job's place."""
        if too_large(request):
            return 1
        jobs = request.data.get("jobs") if isinstance(request.data, dict) else None
        return min(len(jobs), services.BATCH_MAX) if isinstance(jobs, list) else 1


class JobBatchView(BatchView):
    @extend_schema(
        operation_id="jobs_batch_create",
        request=JobBatchBody,
        parameters=[*SUBMIT_QUERY, idempotency_parameter("the jobs"), REPLAYED],
        responses={
            201: JobBatchOut,
            200: OpenApiResponse(
                JobBatchOut, description="The jobs the key's first request queued"
            ),
            409: KEY_USED,
            413: OpenApiResponse(BodyTooLarge, description="The body is too large"),
        },
        summary=f"Submit up to {services.BATCH_MAX} jobs at once, all or none",
        description="Each job is checked as POST /api/v1/jobs/ checks it. If any is refused, "
        "none is stored and the 400 names each problem as jobs[i].field. The answer lists the "
        "jobs in the order sent; GET /api/v1/jobs/{id}/ gives a job's position. A job may "
        "be a Kubernetes object, as POST /api/v1/jobs/ takes one (as JSON here); ?queue= and "
        "?priority= apply to every job.",
        extensions=refusals(BATCH_REFUSALS),
    )
    def post(self, request):
        refusal = batch_refusal(request)
        if refusal is not None:
            return refusal
        query = submit_query(request)
        key = idempotency_key(
            request.headers, endpoint="jobs/batch", body=_keyed(request.data, query)
        )
        jobs = request.data["jobs"]
        try:
            submitted = services.job_submit_batch(
                user=request.user, documents=jobs, key=key, **query
            )
        except services.AlreadySubmitted as done:
            return replayed(batch_out(done.jobs))
        return Response(
            batch_out(submitted),
            status=status.HTTP_201_CREATED,
        )


class JobBatchDryRunView(BatchView):
    """Would a batch's jobs run if the batch were submitted now, and when: checked as a
    batch is, stored nowhere, triggering nothing."""

    @extend_schema(
        operation_id="jobs_batch_dry_run",
        request=JobBatchBody,
        parameters=SUBMIT_QUERY,
        responses={
            200: JobDryRunOut(many=True),
            413: OpenApiResponse(BodyTooLarge, description="The body is too large"),
        },
        summary="Dry run of a batch: would these jobs be admitted now, where would they "
        "wait, and when would they start",
        description="Takes what POST /api/v1/jobs/batch/ takes and checks it the same way (a "
        "400 names every problem as jobs[i].field, and answers nothing for the others), then "
        "answers, in the order sent, what POST /api/v1/jobs/dry-run/ answers for each job, "
        "as if the whole batch were queued now. A job's position counts the pending jobs of "
        "its queue of its priority or higher, then the batch's jobs of its queue before it: "
        "of a higher priority, or of the same one and sent before it. fits_now and waiting "
        "are the admission rule's, with the batch's jobs taken in that order (by priority, "
        "then as sent): one that fits is taken as dequeued, holding its quota for the jobs "
        "after it (waiting.ahead then leaves it out), one that does not stays in its queue "
        "ahead of the batch's next there (waiting.head.id is null: it is not stored). The "
        "jobs already pending are taken as they stand: not dequeued, whether or not they "
        "fit. The estimates replay the rule once, with every job of the batch in its place. "
        "Nothing is stored; it counts against the limits of submissions as the batch would. "
        "A job may be a Kubernetes object, and ?queue= and ?priority= apply to each, as in "
        "POST /api/v1/jobs/batch/.",
        extensions=refusals(BATCH_REFUSALS),
    )
    def post(self, request):
        refusal = batch_refusal(request)
        if refusal is not None:
            return refusal
        jobs = services.job_preview_batch(
            user=request.user, documents=request.data["jobs"], **submit_query(request)
        )
        return Response(dry_runs_out(jobs))


class JsonInteger(serializers.IntegerField):
    """An integer as JSON writes it: DRF's own takes "5" and 5.0 too, which the schema's
    ``integer`` does not."""

    def to_internal_value(self, data) -> int:
        if type(data) is not int:
            self.fail("invalid")
        return super().to_internal_value(data)


@extend_schema_field(listing.FILTER.object_schema())
class JobFilterIn(serializers.Field):
    """A bulk action's filter: the jobs list's filter parameters as they are written in its
    URL, each a string (``{"state": "queued,backoff", "priority_min": "5"}``), and no other
    key, since a misspelt one would widen the action to every job."""

    def to_internal_value(self, data) -> listing.JobFilter:
        if not isinstance(data, dict):
            raise serializers.ValidationError(_("must be an object of the jobs list's parameters"))
        wrong = {
            name: [_("must be a string")] for name, value in data.items() if type(value) is not str
        }
        if wrong:
            raise serializers.ValidationError(wrong)
        try:
            return listing.parse_filter(data)
        except JobInvalid as invalid:
            raise serializers.ValidationError(invalid.errors) from None


class JobBulkIn(Body):
    """POST /api/v1/jobs/bulk/: the jobs (by id, or by the jobs list's filter) and what to
    do to each."""

    ids = serializers.ListField(
        child=JsonInteger(min_value=1, max_value=2**63 - 1),
        required=False,
        min_length=1,
        max_length=bulk.BULK_MAX,
        help_text=f"the jobs to act on, 1 to {bulk.BULK_MAX}",
    )
    filter = JobFilterIn(
        required=False,
        help_text=f"instead of ids: every job this filter of GET /api/v1/jobs/ matches, 1 to "
        f"{bulk.BULK_MAX} of them",
    )
    action = serializers.ChoiceField(bulk.ACTIONS)
    priority = priority_field(
        strings=False, required=False, help_text="the new priority: required by action priority"
    )

    def validate(self, data):
        if ("ids" in data) == ("filter" in data):
            raise serializers.ValidationError({"ids": [_("give either ids or filter")]})
        return data


class JobBulkInSchema(OpenApiSerializerExtension):
    """The bulk body in the schema: its fields, and ``ids`` or ``filter``, not both."""

    target_class = JobBulkIn

    def map_serializer(self, auto_schema, direction):
        schema = auto_schema._map_basic_serializer(self.target, direction)
        # A pattern, not an enum, which drf-spectacular would replace by the action's enum.
        others = "|".join(re.escape(action) for action in bulk.ACTIONS if action != "priority")
        return schema | {
            "allOf": [
                {"oneOf": [{"required": ["ids"]}, {"required": ["filter"]}]},
                {
                    "anyOf": [
                        {"properties": {"action": {"pattern": f"^({others})$"}}},
                        {"required": ["priority"]},
                    ]
                },
            ]
        }


class JobBulkView(APIView):
    parser_classes = json_parsers()

    @extend_schema(
        operation_id="jobs_bulk",
        request=JobBulkIn,
        responses=JobBulkOut,
        summary="Cancel, re-prioritise, move to the head or resubmit many jobs at once",
        description="Each job is checked with the rights of its own action; the answer names "
        "the jobs each reason refused. A request wrong as a whole changes nothing.",
        extensions=refusals(
            {"filter": f"matches no job you may see, or more than {bulk.BULK_MAX}"}
        ),
    )
    def post(self, request):
        body = JobBulkIn(data=request.data)
        if not body.is_valid():
            raise JobInvalid(flat(body.errors))  # ids[3], not {"ids": {3: ...}}
        wanted = body.validated_data
        if "ids" in wanted:
            jobs, unseen = bulk.jobs_chosen(request.user, wanted["ids"])
        else:
            jobs, unseen = bulk.jobs_matching(request.user, wanted["filter"]), []
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
        answer = job_out(job, position) | sent_out(job)
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
    @extend_schema(
        operation_id="jobs_cancel",
        request=None,
        responses=action_responses(JobOut),
        summary="Cancel a job",
    )
    def post(self, request, pk: int):
        job = selectors.job_get_for_user(request.user, pk)
        services.job_cancel(user=request.user, job=job)
        job = selectors.job_get_for_user(request.user, pk)
        return Response(job_out(job, None))


class JobHoldView(APIView):
    @extend_schema(
        operation_id="jobs_hold",
        request=None,
        responses=action_responses(JobOut),
        summary="Hold a pending job: it keeps its place and is not admitted until released",
    )
    def post(self, request, pk: int):
        job = selectors.job_get_for_user(request.user, pk)
        services.job_hold(user=request.user, job=job)
        job = selectors.job_get_for_user(request.user, pk)
        return Response(job_out(job, selectors.job_position(job)))


class JobReleaseView(APIView):
    @extend_schema(
        operation_id="jobs_release",
        request=None,
        responses=action_responses(JobOut),
        summary="Release a held job: the next admission cycle tries it in the place it kept",
    )
    def post(self, request, pk: int):
        job = selectors.job_get_for_user(request.user, pk)
        services.job_release(user=request.user, job=job)
        job = selectors.job_get_for_user(request.user, pk)
        return Response(job_out(job, selectors.job_position(job)))


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
        parameters=EVENTS_PAGE.parameters(),
    )
    def get(self, request, pk: int):
        job = selectors.job_get_for_user(request.user, pk)
        wanted = EVENTS_PAGE.read(request.query_params)
        offset, limit = wanted["offset"], wanted["limit"]
        events = list(selectors.job_events(job)[offset : offset + limit + 1])
        write = writer(EventOut)
        response = Response([write(event) for event in events[:limit]])
        # A next page past OFFSET_MAX could not be asked for, so it is not offered.
        if len(events) > limit and offset + limit <= OFFSET_MAX:
            following = request.build_absolute_uri(
                f"{request.path}?offset={offset + limit}&limit={limit}"
            )
            response["Link"] = f'<{following}>; rel="next"'
        return response


class JobManifestView(APIView):
    @extend_schema(
        parameters=MANIFEST_QUERY.parameters(),
        responses={200: KubernetesObject(many=True), 409: DetailOut},
        summary="The Kubernetes objects Caldera creates for the job, or those the team sent",
        description="``as=created`` (the default): the objects Caldera creates in the "
        "cluster, in the order it creates them (the ConfigMaps, then the job). ``as=sent``: "
        "the objects as the team sent them (the job, then its ConfigMaps), placed in the "
        "job's queue (``replaced`` of GET /api/v1/jobs/{id}/ lists what that changed); 409 "
        "for a job written as Caldera's document, which sent no object.",
    )
    def get(self, request, pk: int):
        job = selectors.job_get_for_user(request.user, pk)
        wanted = MANIFEST_QUERY.read(request.query_params)
        if wanted["as"] == "sent":
            if not job.manifest:
                raise services.JobConflict(
                    _(
                        "job #%(job)s was written as Caldera's document, not sent as an object; "
                        "GET /api/v1/jobs/%(job)s/ gives the document"
                    )
                    % {"job": job.pk}
                )
            return Response([in_kubernetes_order(obj) for obj in job.manifest["objects"]])
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
        parameters=QUEUE_PAGE.parameters(),
        responses=QueueDetailOut,
        summary="A queue: pending jobs with positions (active and backoff), admitted jobs, quota",
    )
    def get(self, request, name: str):
        queue = selectors.queue_get_for_user(request.user, name)
        wanted = QUEUE_PAGE.read(request.query_params)
        offset, limit = wanted["offset"], wanted["limit"]
        context = {
            "usage": {queue.node.path: selectors.queue_usage(queue)},
            "page": selectors.queue_pending_page(queue, offset=offset, limit=limit),
            "admitted": selectors.queue_in_cluster(queue),
            "counts": selectors.queue_counts(queue),
            "offset": offset,
            "limit": limit,
        }
        return Response(QueueDetailOut(queue, context=context).data)


class JobLogView(APIView):
    @extend_schema(
        operation_id="jobs_log",
        parameters=[
            *logs.LOG_QUERY.parameters(),
            OpenApiParameter(
                LOG_HEADER,
                {"type": "string", "enum": [KEPT_TAIL, "cluster"]},
                OpenApiParameter.HEADER,
                required=True,
                description="kept-tail: the end of the log Caldera kept as the job ended, "
                "its pods gone since; cluster: read from the cluster now",
                response=[200],
            ),
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
        "bytes of it; for a job that succeeded or failed, the end Caldera kept as it ended "
        "(its last JOB_LOG_TAIL_LINES lines, its pods gone since), with kept_at set and the "
        "header X-Caldera-Log: kept-tail (cluster otherwise). Whoever may see the job may "
        "read its log.",
    )
    def get(self, request, pk: int):
        job = selectors.job_get_for_user(request.user, pk)
        tail_lines = logs.LOG_QUERY.read(request.query_params)["tail_lines"]
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
        answer = Response(
            JobLogOut(
                {
                    "pod": log.pod,
                    "lines": lines,
                    "truncated": log.truncated,
                    "kept_at": log.kept_at,
                    "exit_code": log.exit_code,
                }
            ).data
        )
        answer[LOG_HEADER] = KEPT_TAIL if log.kept_at is not None else "cluster"
        return answer
