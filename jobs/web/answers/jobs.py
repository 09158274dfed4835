"""A job as the API answers it: one job, a page of them, a batch's and a bulk action's
results, why a job waits, and the refusals that name no field."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from django.conf import settings
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from jobs.cluster.manifests import build_manifests
from jobs.document.fields import Nullable, Quantities, Time
from jobs.document.pods import PodIn
from jobs.document.schema import JobIn, writer
from jobs.engine.objects import job_spec
from jobs.models import KINDS, Job, State
from jobs.reads import waiting
from jobs.reads.forecast import UNSTORED, forecast_batch
from kube.quantity import format_quantity
from queues.selectors import queue_departments


class AttemptOut(serializers.Serializer):
    """One failed attempt of a job that retried: its number, when it ran, and why it
    failed."""

    class Meta:
        ref_name = "Attempt"

    attempt = serializers.IntegerField()
    started_at = serializers.CharField(allow_null=True, help_text="ISO 8601")
    ended_at = serializers.CharField(help_text="ISO 8601")
    reason = serializers.CharField()
    exit_code = serializers.IntegerField(
        required=False, allow_null=True, help_text="its main container's, where the pod said it"
    )
    log_tail = serializers.CharField(
        required=False, help_text="the last lines of its main pod's log, kept as it ended"
    )


class JobOut(JobIn):
    """A job as the API answers it: the document as submitted (``head`` for Ray, ``master``
    for PyTorch; ``workers`` as POST takes them, ``max_replicas`` only on a group that was
    given one; the script is not repeated), and what Caldera knows of it since.

    ``position`` is read from the job, where ``jobs_out`` puts it.
    """

    class Meta:
        ref_name = "Job"

    id = serializers.IntegerField(read_only=True)
    state = serializers.ChoiceField(State.choices, read_only=True)
    # What JobIn reads, JobOut answers as it is stored (but UNANSWERED).
    queue = serializers.CharField(source="queue.name", read_only=True)
    queue_path = serializers.CharField(source="queue.node.path", read_only=True)
    namespace = serializers.CharField(read_only=True)
    owner = serializers.CharField(source="owner.username", read_only=True)
    position = serializers.IntegerField(
        read_only=True,
        allow_null=True,
        default=None,
        help_text="1 for the next job tried in its queue; null once it left the queue",
    )
    enqueued_at = Time()
    dequeued_at = Time()
    started_at = Time()
    finished_at = Time()
    wait_seconds = serializers.FloatField(
        read_only=True, allow_null=True, help_text="from enqueue to dequeue, or to now"
    )
    backoff_reason = Nullable()
    next_attempt_at = serializers.SerializerMethodField(help_text="in backoff only")
    request = Quantities(
        help_text="the quota the job holds: every pod, autoscaling groups at replicas"
    )
    pool = serializers.CharField(
        read_only=True,
        help_text="the node pool the admission cycle placed it in (its pods carry the pool's "
        'node labels and tolerations); "" for none',
    )
    held = serializers.BooleanField(
        source="is_held", read_only=True,
        help_text="held: it keeps its place and is not admitted until released",
    )  # fmt: skip
    held_by = serializers.SerializerMethodField(help_text="who holds it; null when not held")
    held_at = serializers.SerializerMethodField(help_text="since when it is held")
    attempt = serializers.IntegerField(
        read_only=True,
        help_text="its attempt, from 1: a failed attempt with retries left runs again as the next",
    )
    attempts = AttemptOut(
        many=True, read_only=True, help_text="its failed attempts before this one, oldest first"
    )
    preemptions = serializers.IntegerField(source="preemption_count", read_only=True)
    start_timeouts = serializers.IntegerField(
        read_only=True, help_text="times its pods were not all running in time after a dequeue"
    )
    start_timeout_attempts = serializers.SerializerMethodField(
        help_text="the start timeout that fails the job (START_TIMEOUT_ATTEMPTS)"
    )
    head = PodIn(required=False, help_text="Ray jobs")
    master = PodIn(source="head", required=False, help_text="PyTorch jobs")
    entrypoint = serializers.CharField(required=False, help_text="Ray jobs")
    command = serializers.ListField(
        child=serializers.CharField(), required=False, help_text="PyTorch jobs"
    )
    UNANSWERED = ("script", "script_filename")
    # Each kind answers its own of these.
    _OTHER_KIND: dict[str, tuple[str, ...]] = {
        kind: tuple(f for other in shape.others() for f in (other.head, other.launch))
        for kind, shape in KINDS.items()
    }

    def get_fields(self) -> dict[str, serializers.Field]:
        """The document's fields (JobIn's) in their order, then Caldera's; a field declared
        here answers in the place of the document's of the same name."""
        submitted = super().get_fields()
        own = serializers.Serializer.get_fields(self)  # the fields declared on the class
        return {n: f for n, f in submitted.items() if n not in self.UNANSWERED} | own

    @extend_schema_field(Time())
    def get_next_attempt_at(self, job: Job) -> str | None:
        return (
            job.next_attempt_at.isoformat()
            if job.state == State.BACKOFF and job.next_attempt_at
            else None
        )

    def get_held_by(self, job: Job) -> str | None:
        return waiting.held_by_name(job) if job.is_held else None

    @extend_schema_field(Time())
    def get_held_at(self, job: Job) -> str | None:
        return job.held_at.isoformat() if job.is_held and job.held_at else None

    def get_start_timeout_attempts(self, job: Job) -> int:
        return settings.START_TIMEOUT_ATTEMPTS

    def to_representation(self, job: Job) -> dict:
        return self.for_kind(super().to_representation(job), job.kind)

    @classmethod
    def for_kind(cls, answer: dict, kind: str) -> dict:
        """The answer without the other kind's fields."""
        for name in cls._OTHER_KIND.get(kind, ()):
            answer.pop(name, None)
        return answer


class JobPage(serializers.Serializer):
    """A page of the jobs list: ``results``, the total ``count`` and the pages around it."""

    count = serializers.IntegerField(
        help_text="the jobs that match; by cursor, counted up to 10,000 (then count_more)"
    )
    count_more = serializers.BooleanField(
        required=False, help_text="by cursor: more than count jobs match"
    )
    next = serializers.URLField(allow_null=True)
    previous = serializers.URLField(allow_null=True)
    results = JobOut(many=True)

    class Meta:
        ref_name = "JobPage"


def jobs_out(jobs: Iterable[Job], positions: Mapping[int, int | None]) -> list[dict]:
    """Jobs as the API answers them (JobOut, written fast); ``positions`` maps ids to
    places in their queues."""
    write = writer(JobOut)
    answers = []
    for job in jobs:
        job.position = positions.get(job.pk)  # type: ignore[attr-defined]  # JobOut's position
        answers.append(JobOut.for_kind(write(job), job.kind))
    return answers


def job_out(job: Job, position: int | None) -> dict:
    """One job as the API answers it."""
    return jobs_out([job], {job.pk: position})[0]


class JobBatchEntryOut(serializers.Serializer):
    class Meta:
        ref_name = "JobBatchEntry"

    id = serializers.IntegerField()
    name = serializers.CharField()
    queue = serializers.CharField(source="queue.name")
    state = serializers.ChoiceField(State.choices)
    priority = serializers.IntegerField()
    enqueued_at = Time()


class JobBatchOut(serializers.Serializer):
    class Meta:
        ref_name = "JobBatchResult"

    count = serializers.IntegerField()
    jobs = JobBatchEntryOut(many=True, help_text="in the order sent")


def batch_out(jobs: Sequence[Job]) -> dict:
    """A batch's answer (JobBatchOut): its jobs in the order sent, written fast."""
    write = writer(JobBatchEntryOut)
    return {"count": len(jobs), "jobs": [write(job) for job in jobs]}


class DetailOut(serializers.Serializer):
    """Why a request was refused, when no one field is to blame."""

    detail = serializers.CharField()


class BodyTooLarge(serializers.Serializer):
    body = serializers.ListField(child=serializers.CharField())


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
        return format_quantity(row.resource, row.used)

    def get_borrowed(self, row) -> str:
        return format_quantity(row.resource, row.borrowed)

    def get_lent(self, row) -> str:
        return format_quantity(row.resource, row.lent)

    def get_free(self, row) -> str | None:
        return self._quantity(row, row.free)

    def get_blocks(self, row) -> bool:
        return self.context["waiting"].blocks(row)


class HeadOut(serializers.Serializer):
    id = serializers.IntegerField(source="job_id", allow_null=True)
    reason = serializers.ChoiceField(waiting.REASONS)
    summary = serializers.CharField()


class WaitingOut(HeadOut):
    """Why a job waits (jobs.reads.waiting): the same sentence and table as its page."""

    id = None  # type: ignore[assignment]  # DRF drops an inherited field set to None
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
        # many=True makes a ListSerializer, whose data is a list (the stub cannot tell).
        return StandingOut(told.path, many=True, context={"waiting": told}).data  # type: ignore[return-value]


class SentOut(serializers.Serializer):
    """What a job was sent as: a Kubernetes object kept as sent, or Caldera's document."""

    sent_as = serializers.ChoiceField(
        ["object", "document"],
        read_only=True,
        help_text='"object": the team\'s Kubernetes object, kept as sent (GET '
        "/api/v1/jobs/{id}/manifest/?as=sent) and created with Caldera's additions alone; "
        '"document": Caldera\'s document, which Caldera makes the objects of',
    )
    replaced = serializers.DictField(
        read_only=True,
        help_text="what of the object Caldera replaced to run it in its queue, by path: "
        '{"metadata.namespace": {"from": "default", "to": "video"}}; "to" null: left out '
        "(a Volcano Queue document, a Kueue queue label, what a server writes). Only where "
        "to run is replaced, and only when the caller names the queue (?queue=)",
    )
    warnings = serializers.DictField(
        read_only=True,
        child=serializers.ListField(child=serializers.CharField()),
        help_text="what the cluster will not do as the object says, by path: a field its "
        "schema does not declare, which the API server drops (kubectl apply --validate=warn "
        "warns of the same), a mount of a volume its pod does not declare. The object is "
        "kept as sent",
    )


def sent_out(job: Job) -> dict:
    """``SentOut`` of one job (it reads the job's manifest: not for pages of jobs)."""
    sent = job.manifest or {}
    return {
        "sent_as": "object" if job.manifest else "document",
        "replaced": sent.get("replaced") or {},
        "warnings": sent.get("warnings") or {},
    }


class JobSubmittedOut(JobOut, SentOut):
    """POST /api/v1/jobs/'s answer: the job, and what it was sent as."""

    class Meta:
        ref_name = "JobSubmitted"


class JobDetailOut(JobOut, SentOut):
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


class JobDryRunOut(serializers.Serializer):
    """What a submission would do now (``jobs.reads.forecast``), nothing stored."""

    class Meta:
        ref_name = "JobDryRun"

    fits_now = serializers.BooleanField(
        help_text="it would be dequeued at the next admission cycle"
    )
    queue = serializers.CharField()
    position = serializers.IntegerField(help_text="its place in its queue, were it queued now")
    request = Quantities(help_text="the quota it would hold: every pod")
    waiting = WaitingOut(allow_null=True, help_text="why it would wait: the queued job's answer")
    estimated_start_at = serializers.DateTimeField(
        allow_null=True, help_text="about when it would start; null when there is no estimate"
    )
    estimate_basis = serializers.CharField(help_text="how the estimate was reached")
    objects = serializers.ListField(
        child=serializers.DictField(),
        help_text="the Kubernetes objects it would become (its number is 0 until it is queued)",
    )


def dry_run_out(job: Job) -> dict:
    """The answer of a dry run for ``job``, checked by ``job_preview`` and not stored."""
    return dry_runs_out([job])[0]


def dry_runs_out(jobs: Sequence[Job]) -> list[dict]:
    """The answers of a batch's dry run (``forecast_batch``), in the order sent, for jobs
    checked by ``job_preview_batch`` and not stored."""
    answers = []
    # Each queue's department once, not once a job (``job_spec_full``'s query).
    departments = queue_departments({job.queue_id: job.queue for job in jobs}.values())
    for job, told in zip(jobs, forecast_batch(jobs), strict=True):
        assert told.estimate is not None  # asked for
        job.pk = UNSTORED
        department = departments.get(job.queue_id)
        spec = job_spec(job, department=department.name if department else "")
        answers.append(
            {
                "fits_now": told.fits_now,
                "queue": job.queue.name,
                "position": told.position,
                "request": job.request,
                "waiting": told.waiting,
                "estimated_start_at": told.estimate.at,
                "estimate_basis": told.estimate.basis,
                "objects": build_manifests(spec),
            }
        )
    # many=True makes a ListSerializer, whose data is a list (the stub cannot tell).
    return JobDryRunOut(answers, many=True).data  # type: ignore[return-value]
