"""Jobs, their events, and the rows of the simulated cluster."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.contrib.postgres.indexes import BrinIndex, GinIndex
from django.db import connection, models
from django.db.models import Q
from django.utils.translation import gettext, pgettext_lazy

from access.models import AccessToken
from queues.limits import format_duration
from queues.models import Queue
from queues.phrases import Phrase, said


class State(models.TextChoices):
    """The job state machine. Transitions (every one recorded as a JobEvent):

    queued    -> admitted (dequeued), backoff (tried, did not fit), cancelled,
                 failed (the cluster refused the object it waits in, CLUSTER_GATE=suspend)
    backoff   -> admitted, backoff (tried again), cancelled, failed
    admitted  -> running (the gang is placed), succeeded, failed, stopping (cancelled),
                 preempted, backoff (its pods did not all start in time: it left the cluster)
    running   -> succeeded, failed, stopping, preempted
    preempted -> queued (its objects left the cluster; it keeps its enqueue time), stopping
    stopping  -> cancelled (its objects left the cluster), failed (it was stopped at its
                 time limit), backoff (its attempt failed and it has retries left: its
                 next attempt waits in its queue)

    A preempted or stopping job is leaving: it holds its quota until the cluster sync sees
    its objects gone, so capacity is never counted twice (``HOLDING``).
    """

    QUEUED = "queued", pgettext_lazy("job state", "Queued")
    BACKOFF = "backoff", pgettext_lazy("job state", "Backoff")
    ADMITTED = "admitted", pgettext_lazy("job state", "Admitted")
    RUNNING = "running", pgettext_lazy("job state", "Running")
    SUCCEEDED = "succeeded", pgettext_lazy("job state", "Succeeded")
    FAILED = "failed", pgettext_lazy("job state", "Failed")
    CANCELLED = "cancelled", pgettext_lazy("job state", "Cancelled")
    PREEMPTED = "preempted", pgettext_lazy("job state", "Preempted")
    STOPPING = "stopping", pgettext_lazy("job state", "Stopping")


PENDING = (State.QUEUED, State.BACKOFF)
IN_CLUSTER = (State.ADMITTED, State.RUNNING)
LEAVING = (State.PREEMPTED, State.STOPPING)
HOLDING = IN_CLUSTER + LEAVING  # what the quota counts

# The order within a queue: the highest priority first, then by ticket (numbered per queue
# as submissions commit; a requeued job keeps its own). The ORM orders by QUEUE_ORDER and
# raw SQL by ``queue_order_sql``, both from this one declaration. Across queues tickets
# cannot be compared, so the admission rule ranks candidates of equal claim by
# (-priority, enqueued_at, id) instead (``queues.admission.Candidate.rank``): within one
# queue both orders agree, since tickets follow the enqueue order.
QUEUE_ORDER = ("-priority", "ticket")


def queue_order_sql(alias: str) -> str:
    """QUEUE_ORDER as an ORDER BY list over the job table's ``alias``."""
    return ", ".join(
        f"{alias}.{name.lstrip('-')}{' DESC' if name.startswith('-') else ''}"
        for name in QUEUE_ORDER
    )


# How a stopping job ends once its objects are gone (``Job.ends_as``): cancelled (""),
# failed at its time limit, or queued again for its next attempt.
ENDS_FAILED = "failed"
ENDS_RETRY = "retry"

LIVE = PENDING + HOLDING
TERMINAL = (State.SUCCEEDED, State.FAILED, State.CANCELLED)
TRANSITIONS: dict[str, tuple[str, ...]] = {
    State.QUEUED: (State.ADMITTED, State.BACKOFF, State.CANCELLED, State.FAILED),
    State.BACKOFF: (State.ADMITTED, State.BACKOFF, State.CANCELLED, State.FAILED),
    State.ADMITTED: (
        State.RUNNING,
        State.SUCCEEDED,
        State.FAILED,
        State.STOPPING,
        State.PREEMPTED,
        State.BACKOFF,
    ),
    State.RUNNING: (State.SUCCEEDED, State.FAILED, State.STOPPING, State.PREEMPTED),
    State.PREEMPTED: (State.QUEUED, State.STOPPING),
    State.STOPPING: (State.CANCELLED, State.FAILED, State.BACKOFF),
    State.SUCCEEDED: (),
    State.FAILED: (),
    State.CANCELLED: (),
}


class Job(models.Model):
    class Kind(models.TextChoices):
        RAY = "ray", "Ray"
        PYTORCH = "pytorch", "PyTorch"
        # A Volcano Job with neither the ray nor the pytorch plugin (tasks of any image), as
        # the team sends it: no document or form writes one.
        BATCH = "batch", "Batch"

    class Runtime(models.TextChoices):
        KUBERAY = "kuberay", "KubeRay RayJob"
        KUBEFLOW = "kubeflow", "Kubeflow PyTorchJob"
        VOLCANO = "volcano", "Volcano Job"

    name = models.CharField(max_length=63)
    kind = models.CharField(max_length=10, choices=Kind.choices)
    runtime = models.CharField(max_length=20, choices=Runtime.choices)
    # Neither foreign key has an index of its own: job_queue_state and job_owner lead
    # with them, and each index more is written by every submission.
    queue = models.ForeignKey(Queue, on_delete=models.PROTECT, related_name="jobs", db_index=False)
    namespace = models.CharField(max_length=63)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="jobs", db_index=False
    )
    # The access token it was submitted with (None: from the pages). No index: tokens are
    # revoked, never deleted, while they have jobs.
    token = models.ForeignKey(
        AccessToken, null=True, blank=True, on_delete=models.PROTECT, related_name="jobs",
        db_index=False,
    )  # fmt: skip
    image = models.CharField(max_length=500)
    # The job as the team sent it, when it sent a Kubernetes object (jobs.document.native):
    # {"objects": [the job, its ConfigMaps...], "replaced": {path: {"from", "to"}},
    # "unknown": {path: [why]}}, placed in its queue. Caldera creates exactly these with its
    # own additions (jobs.cluster.manifests.objects). None for a job written as Caldera's
    # document, whose objects are made from its columns.
    manifest = models.JSONField(null=True, blank=True)
    # The name its object keeps in the cluster, when the team named it (metadata.name);
    # "" when Caldera names it from the job (<name>-<id>). Unique among the live jobs of a
    # namespace (job_object_name_live), since the cluster holds one object of a name.
    object_name = models.CharField(max_length=63, blank=True, default="", db_default="")
    entrypoint = models.TextField(blank=True)
    command = models.JSONField(default=list, blank=True)
    script = models.TextField(blank=True)
    script_filename = models.CharField(max_length=100, default="main.py")
    # The job's software environment: pip requirements (a Ray runtime environment, KubeRay
    # only) and environment variables (every runtime).
    pip = models.JSONField(default=list, blank=True)
    env = models.JSONField(default=dict, blank=True)
    # What its pods mount and read besides (every pod): claims of its namespace
    # [{"claim", "path", "read_only"}], a memory-backed /dev/shm of a size ("" none), and
    # variables from its namespace's Secrets {"NAME": "secret/key"}. Database defaults let
    # writers that predate the columns go on inserting.
    claims = models.JSONField(default=list, blank=True, db_default=[])
    shm = models.CharField(max_length=20, blank=True, default="", db_default="")
    secret_env = models.JSONField(default=dict, blank=True, db_default={})
    # Pod groups as given: {"resources": {"cpu": "4"}} and [{"name", "replicas", "resources"}],
    # a worker group with "max_replicas" too when it autoscales (Ray on KubeRay).
    head = models.JSONField()
    workers = models.JSONField(default=list, blank=True)
    # The gang's total request in integer base units (cpu in millicores, memory in bytes),
    # an autoscaling worker group counted at its replicas (its minimum).
    request = models.JSONField()
    priority = models.IntegerField(default=0)
    # The node pools of the tree it accepts, in order (queues.pools); [] for the tree's
    # order. The pool the admission cycle placed it in, "" for none (a tree without pools):
    # its request counts there too while it holds quota, and its pods carry the pool's node
    # labels and tolerations.
    pools = models.JSONField(default=list, blank=True, db_default=[])
    pool = models.CharField(max_length=32, blank=True, default="", db_default="")
    # The expected run time the job declares, if any: estimates of when jobs start use it
    # (jobs/reads/estimate.py), and the simulated cluster runs the job this long (see
    # DEFAULT_RUN_SECONDS when it declares none). Fractions are allowed (benchmarks replay
    # 0.2 s jobs).
    run_seconds = models.FloatField(null=True, blank=True)

    state = models.CharField(max_length=10, choices=State.choices, default=State.QUEUED)
    created_at = models.DateTimeField(auto_now_add=True)
    enqueued_at = models.DateTimeField()
    dequeued_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    backoff_reason = models.TextField(blank=True)
    # The reason as a phrase (queues.phrases): its code and arguments, rendered in the
    # reader's language; blank for reasons written before codes, which show their text.
    # Database defaults let writers that predate the columns go on inserting.
    backoff_code = models.CharField(max_length=64, blank=True, default="", db_default="")
    backoff_args = models.JSONField(blank=True, default=dict, db_default={})
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    backoff_count = models.PositiveIntegerField(default=0)
    last_tried_at = models.DateTimeField(null=True, blank=True)
    preemption_count = models.PositiveIntegerField(default=0)
    # How many times its pods were not all running START_TIMEOUT_SECONDS after a dequeue;
    # its requeue delay grows with it, and at START_TIMEOUT_ATTEMPTS the job fails. The
    # database default lets writers that predate the column go on inserting during a deploy.
    start_timeouts = models.PositiveIntegerField(default=0, db_default=0)
    # When its start timeout began to count: the reconcile that released its objects in the
    # cluster; moved later by the time the cluster then did not answer. Null from its
    # dequeue until then, so a job whose objects were never created never times out.
    start_clock_at = models.DateTimeField(null=True, blank=True)
    # When it began to leave the cluster (preempted, or stopping after a cancel): how long
    # the cluster has been taking to remove its objects (LEAVING_WARN_SECONDS). Null when
    # it is not leaving.
    leaving_since = models.DateTimeField(null=True, blank=True)
    # Held: a pending job its owner or a manager stopped from being admitted, since
    # ``held_at``, by ``held_by``. It keeps its state, ticket and enqueue time, so it keeps
    # its place; the admission cycle skips it until it is released.
    # Its time limit in seconds once its pods run (its own, else its leaf's defaultTime;
    # None: none), and the retries it asked for on failure: its attempts, numbered from 1,
    # each failed one's end kept in ``attempts`` ({"attempt", "started_at", "ended_at",
    # "reason"}).
    time_limit = models.PositiveIntegerField(null=True, blank=True)
    retries = models.PositiveSmallIntegerField(default=0, db_default=0)
    attempt = models.PositiveSmallIntegerField(default=1, db_default=1)
    attempts = models.JSONField(default=list, blank=True, db_default=[])
    # How a stopping job ends once its objects are gone: cancelled (""), failed (its time
    # limit), or back in its queue for its next attempt (a retry).
    ends_as = models.CharField(max_length=10, blank=True, default="", db_default="")
    held_at = models.DateTimeField(null=True, blank=True)
    held_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
        related_name="+", db_index=False,
    )  # fmt: skip
    # The end of its main pod's log (the Ray head's, the PyTorch master's), kept by the
    # cluster sync as the job succeeded or failed, before it removed the job's objects and
    # their pods with them (``jobs.engine.log_tails``): at most JOB_LOG_TAIL_LINES lines and
    # LOG_TAIL_BYTES bytes, read from ``log_tail_pod`` at ``log_tail_at``; ``truncated``
    # when the log went on before them. ``log_tail_missing`` says why none was kept (the pod
    # was gone, the cluster did not answer); ``log_tail_at`` is set either way, so a tail is
    # read once. ``exit_code``: its main container's, as the pod said then (None: unknown).
    log_tail = models.TextField(blank=True, default="", db_default="")
    log_tail_pod = models.CharField(max_length=253, blank=True, default="", db_default="")
    log_tail_at = models.DateTimeField(null=True, blank=True)
    log_tail_truncated = models.BooleanField(default=False, db_default=False)
    log_tail_missing = models.TextField(blank=True, default="", db_default="")
    exit_code = models.IntegerField(null=True, blank=True)
    # The RayCluster KubeRay made for a RayJob (its ``status.rayClusterName``), whose head
    # Service ``<ray_cluster>-head-svc`` serves the Ray dashboard; "" until the cluster says.
    ray_cluster = models.CharField(max_length=253, blank=True, default="", db_default="")
    # The job's place in its queue's arrival order: 1, 2, 3, ... per queue, given by the
    # database as the row is inserted (trigger job_ticket, migration 0004), so it follows
    # the order in which submissions committed. A requeued job keeps its ticket.
    ticket = models.BigIntegerField(null=True, editable=False)

    class Meta:
        ordering = ["-id"]
        indexes = [
            # The queue order, for heads and positions: priority, then arrival.
            models.Index(
                "queue",
                models.F("priority").desc(),
                "ticket",
                name="job_pending_order",
                condition=Q(state__in=list(PENDING)),
            ),
            models.Index(
                fields=["queue"],
                name="job_holding",
                condition=Q(state__in=list(HOLDING)),
            ),
            # The few held jobs, which a waiting job's explanation counts ahead of it.
            models.Index(
                fields=["queue"],
                name="job_held",
                condition=Q(state__in=list(PENDING), held_at__isnull=False),
            ),
            # The running jobs with a time limit, which every sync reads (jobs.engine.lifecycle).
            models.Index(
                fields=["started_at"],
                name="job_time_limited",
                condition=Q(state=State.RUNNING, time_limit__isnull=False),
            ),
            models.Index(fields=["owner", "-id"], name="job_owner"),
            models.Index(fields=["queue", "state", "-id"], name="job_queue_state"),
            # The jobs list's keyset pages when sorted by priority or by name
            # (jobs/reads/listing.py); by submission it follows the primary key.
            models.Index(fields=["priority", "id"], name="job_list_priority"),
            models.Index(fields=["name", "id"], name="job_list_name"),
            # Text in the name (``?q=``, ILIKE '%text%'): trigrams find the few jobs that
            # match instead of reading every row (pg_trgm, migration 0015).
            GinIndex(fields=["name"], opclasses=["gin_trgm_ops"], name="job_name_trigrams"),
            # The jobs that finished on a day, which the accounting counts by final state.
            models.Index(
                fields=["finished_at"], name="job_finished", condition=Q(finished_at__isnull=False)
            ),
        ]
        constraints = [
            models.UniqueConstraint(
                fields=["namespace", "object_name"],
                condition=Q(state__in=list(LIVE)) & ~Q(object_name=""),
                name="job_object_name_live",
            )
        ]

    def __str__(self) -> str:
        return f"{self.name} #{self.pk}"

    @property
    def backoff_said(self) -> str:
        """The backoff reason in the active language (its stored text when it has no code);
        nothing when the text was cleared, whatever code a writer left."""
        if not self.backoff_reason:
            return ""
        return said(self.backoff_code, self.backoff_args, self.backoff_reason)

    def set_backoff_reason(self, reason: Phrase | str) -> None:
        """The reason, its code and arguments, together; words without a code (the
        cluster's own) or "" (none) clear the code."""
        if isinstance(reason, Phrase):
            self.backoff_reason = reason.english()
            self.backoff_code, self.backoff_args = reason.code, dict(reason.args)
        else:
            self.backoff_reason, self.backoff_code, self.backoff_args = reason, "", {}

    @property
    def time_limit_text(self) -> str:
        """Its time limit as people write it (``2h``, ``1h30m``); "" for none."""
        return format_duration(self.time_limit) if self.time_limit else ""

    @property
    def failed_attempts(self) -> list[dict[str, Any]]:
        """Its failed attempts before this one, their times read back as datetimes."""
        return [
            {**kept, **{key: datetime.fromisoformat(kept[key]) if kept.get(key) else None
                        for key in ("started_at", "ended_at")}}
            for kept in self.attempts
        ]  # fmt: skip

    @property
    def attempts_in_all(self) -> int:
        """How many attempts it may take: the first, and one per retry."""
        return self.retries + 1

    @property
    def log_tail_missing_said(self) -> str:
        """Why no end of its log was kept, in the active language when Caldera said it
        (``jobs.engine.log_tails``); the cluster's own words as they are."""
        return gettext(self.log_tail_missing) if self.log_tail_missing else ""

    @property
    def is_held(self) -> bool:
        return self.held_at is not None and self.state in PENDING

    @property
    def is_pending(self) -> bool:
        return self.state in PENDING

    @property
    def is_terminal(self) -> bool:
        return self.state in TERMINAL

    @property
    def is_leaving(self) -> bool:
        """Preempted or stopping: it holds its quota until its objects are gone."""
        return self.state in LEAVING

    @property
    def wait_seconds(self) -> float | None:
        if self.dequeued_at is None:
            return None
        return (self.dequeued_at - self.enqueued_at).total_seconds()


@dataclass(frozen=True)
class KindShape:
    """What one kind of job calls its parts, declared once for the document, the form, the
    answers and the cluster: its leading pod's field (a Ray job's ``head``, a PyTorch
    job's ``master``), the field it runs (a shell line, ``entrypoint``, or an argument
    list, ``command``), and the runtimes that can run it (a cluster offers some of them,
    settings.CLUSTER_RUNTIMES)."""

    name: str  # as a sentence names its jobs: "Ray jobs take ..."
    head: str
    head_words: str  # "a head"
    launch: str
    launch_words: str  # "an entrypoint"
    runtimes: tuple[str, ...]

    def others(self) -> list[KindShape]:
        return [shape for shape in KINDS.values() if shape is not self]


KINDS: dict[str, KindShape] = {
    Job.Kind.RAY: KindShape(
        "Ray", "head", "a head", "entrypoint", "an entrypoint",
        (Job.Runtime.KUBERAY, Job.Runtime.VOLCANO),
    ),
    Job.Kind.PYTORCH: KindShape(
        "PyTorch", "master", "a master", "command", "a command",
        (Job.Runtime.KUBEFLOW, Job.Runtime.VOLCANO),
    ),
}  # fmt: skip


# The kinds Caldera's document and the form write (a batch job comes as a Volcano Job).
DOCUMENT_KINDS = [(kind, label) for kind, label in Job.Kind.choices if kind in KINDS]


def kind_shape(kind: str) -> KindShape:
    """The shape of ``kind``; a kind that is not one (the document's refusal names it) is
    read as a Ray job is, so that its other fields are still checked."""
    return KINDS.get(kind, KINDS[Job.Kind.RAY])


class JobEventManager(models.Manager):
    def record(
        self,
        entries: Iterable[tuple[int, str, Phrase | str]],
        *,
        at: datetime,
        warning: bool = False,
        actor=None,
    ) -> int:
        """One event per (job id, reason, message), all at ``at`` and by ``actor`` (a
        user, or None for Caldera itself), in one INSERT over one JSON document: what a
        statement that moved or queued many jobs writes about each of them (a batch's
        submissions, the admission cycle's dequeues and backoffs, the sync's transitions),
        without a model instance per event. A message given as a phrase is stored with its
        code and arguments beside its English text. The number of events written."""
        rows = []
        for job_id, reason, message in entries:
            row = {"job_id": job_id, "reason": reason, "message": message, "code": "", "args": {}}
            if isinstance(message, Phrase):
                row.update(message=message.english(), code=message.code, args=dict(message.args))
            rows.append(row)
        if not rows:
            return 0
        kind = JobEvent.Type.WARNING if warning else JobEvent.Type.NORMAL
        with connection.cursor() as cursor:
            # One JSON document for all the rows: arrays of text would be escaped value by
            # value in Python, and messages and arguments are full of what arrays escape.
            cursor.execute(
                f"""
                INSERT INTO {JobEvent._meta.db_table}
                    (job_id, created_at, type, reason, message, code, args, actor_id,
                     involved, count)
                SELECT e.job_id, %s, %s, e.reason, e.message, e.code, e.args, %s, '', 1
                FROM jsonb_to_recordset(%s::jsonb)
                    AS e(job_id bigint, reason text, message text, code text, args jsonb)
                """,
                [at, kind, actor.pk if actor is not None else None, json.dumps(rows)],
            )
        return len(rows)

    def say(self, *, job, reason: str, phrase: Phrase, **fields) -> None:
        """One event whose message is a phrase: its English text, code and arguments."""
        self.create(
            job=job, reason=reason, message=phrase.english(), code=phrase.code,
            args=dict(phrase.args), **fields,
        )  # fmt: skip


class JobEvent(models.Model):
    """One line of a job's history: a portal transition or a cluster event."""

    class Type(models.TextChoices):
        NORMAL = "Normal"
        WARNING = "Warning"

    class Reason:
        """The reasons of the events Caldera writes itself (cluster events keep the
        cluster's): the page, the API and the metrics read them by these names."""

        ENQUEUED = "Enqueued"
        DEQUEUED = "Dequeued"  # every admission
        BACKOFF = "Backoff"
        PREEMPTED = "Preempted"
        START_TIMEOUT = "StartTimeout"
        CANCELLED = "Cancelled"
        STOPPED = "Stopped"
        PRIORITY_CHANGED = "PriorityChanged"
        RESUBMITTED = "Resubmitted"  # on a finished job, naming the copy queued from it
        HELD = "Held"
        RELEASED = "Released"
        SUCCEEDED = "Succeeded"
        FAILED = "Failed"

    # Looked up through event_job_time, which leads with it.
    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="events", db_index=False)
    created_at = models.DateTimeField()
    type = models.CharField(max_length=10, choices=Type.choices, default=Type.NORMAL)
    reason = models.CharField(max_length=64)
    message = models.TextField(blank=True)
    # The message as a phrase (queues.phrases), for the events Caldera writes itself; blank
    # for cluster events and for events written before codes, which show their text.
    code = models.CharField(max_length=64, blank=True, default="", db_default="")
    args = models.JSONField(blank=True, default=dict, db_default={})
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    # Cluster events: the object they are about, the scheduling cycle, and the cluster's
    # own key of the event (its uid), unique so that an event is one row whichever sync
    # saw it first. A repeat of it (the same key, a higher count) updates that row: its
    # count, its last time (``created_at``, where the timeline places it) and, once it has
    # repeated, its first time. The database default lets writers that predate ``count``
    # go on inserting during a deploy. The events Caldera writes have no key: null, so
    # that the unique constraint on keys (below) leaves them out.
    involved = models.CharField(max_length=253, blank=True)
    cycle = models.PositiveIntegerField(null=True, blank=True)
    dedup_key = models.CharField(max_length=300, null=True, blank=True)  # noqa: DJ001
    count = models.PositiveIntegerField(default=1, db_default=1)
    first_at = models.DateTimeField(null=True, blank=True)

    objects = JobEventManager()

    class Meta:
        ordering = ["created_at", "id"]
        indexes = [models.Index(fields=["job", "created_at", "id"], name="event_job_time")]
        constraints = [
            # Only cluster events have a key: the events Caldera writes (a batch writes a
            # thousand) add nothing to this index.
            models.UniqueConstraint(
                fields=["dedup_key"],
                condition=Q(dedup_key__isnull=False),
                name="event_dedup_key",
            )
        ]

    def __str__(self) -> str:
        return f"{self.reason}: {self.message}"

    @property
    def said(self) -> str:
        """The message in the active language (its stored text when it has no code)."""
        return said(self.code, self.args, self.message)


class AdmissionWake(models.Model):
    """A single row: when capacity last changed (a finish, a cancel, a quota change).

    Jobs that went into backoff before this instant are tried again at the next cycle,
    without writing to every backed-off row.
    """

    woken_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"capacity changed at {self.woken_at:%Y-%m-%d %H:%M:%S}"


class RetiredEvents(models.Model):
    """The counted events (admissions, evictions) of jobs retention deleted, as tallies by
    queue, reason and bucket of wait: the counters of /metrics/deployment add them to the
    events still stored, so that they only grow (``jobs.tables.events``)."""

    queue = models.CharField(max_length=200)
    reason = models.CharField(max_length=40)
    bucket = models.SmallIntegerField()
    count = models.BigIntegerField()
    seconds = models.FloatField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["queue", "reason", "bucket"], name="retired_events_key")
        ]

    def __str__(self) -> str:
        return f"{self.count} {self.reason} of {self.queue} (bucket {self.bucket})"


class Lease(models.Model):
    """One row per exclusive piece of work that runs between transactions (the cluster
    sync, the start estimates, a webhook pass, beat's schedule): who holds it, until when,
    and when it last ended well (``jobs.engine.locks``). A row, not a session lock, so that
    it holds behind a pooler in transaction mode."""

    name = models.CharField(max_length=40, primary_key=True)
    holder = models.CharField(max_length=200)
    taken_at = models.DateTimeField()
    expires_at = models.DateTimeField()
    done_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.name}: {self.holder} until {self.expires_at:%Y-%m-%d %H:%M:%S}"


class ClusterHealth(models.Model):
    """A single row: whether the cluster answered the last sync or reconcile, and if not,
    since when and with what error, so that pages can say why admitted jobs do not start."""

    answered_at = models.DateTimeField(null=True, blank=True)
    failing_since = models.DateTimeField(null=True, blank=True)
    error = models.TextField(blank=True)

    def __str__(self) -> str:
        if self.error:
            return f"unavailable since {self.failing_since:%Y-%m-%d %H:%M:%S}: {self.error}"
        return "answering"


class UnavailableNamespace(models.Model):
    """A namespace the cluster takes none of Caldera's objects in while it answers
    elsewhere: not found, being deleted, or without Caldera's Role. One row per such
    namespace, from the sync or reconcile that found it (``since``, kept while it lasts)
    until a sync finds it back; its jobs wait, and those not yet in the cluster fail once it
    has lasted NAMESPACE_GRACE_SECONDS (``jobs.engine.namespace_health``)."""

    namespace = models.CharField(max_length=63, primary_key=True)
    reason = models.TextField()  # the server's words and what Caldera found
    gone = models.BooleanField(default=False)  # not found: nothing of its jobs is left in it
    since = models.DateTimeField()
    seen_at = models.DateTimeField()  # the last sync or reconcile that found it so

    def __str__(self) -> str:
        return f"{self.namespace} unavailable since {self.since:%Y-%m-%d %H:%M:%S}: {self.reason}"


TICKET_BLOCK = 1024  # tickets per PendingBlock row; migration 0004's trigger divides by it
# (tests/engine/test_positions.py checks the installed function against this and PENDING)


class PendingBlock(models.Model):
    """A change in how many pending jobs a queue holds at one priority in a block of tickets.

    Database triggers append a row for each statement that moves pending jobs (migration
    0004), in the statement's transaction; rows are only ever appended, never updated, so
    writers never wait on each other here. The admission cycle folds each key's rows into
    one (``compact_pending_blocks``). A block's count is the sum of its rows; a job's
    position is the sum over the blocks ahead of it plus a count inside its own block, at
    most TICKET_BLOCK index entries however deep the queue.
    """

    queue = models.ForeignKey(Queue, on_delete=models.DO_NOTHING, db_constraint=False)
    priority = models.IntegerField()
    block = models.BigIntegerField()
    jobs = models.IntegerField()

    class Meta:
        indexes = [models.Index(fields=["queue", "priority", "block"], name="pending_block_key")]

    def __str__(self) -> str:
        return f"{self.queue_id}/{self.priority}/{self.block}: {self.jobs:+d}"


class QueueTicket(models.Model):
    """The last ticket given in each queue (written by the job_ticket trigger, and by a
    batch reserving its tickets: ``jobs.tables.tickets``)."""

    queue = models.OneToOneField(Queue, on_delete=models.CASCADE, primary_key=True)
    last = models.BigIntegerField()

    def __str__(self) -> str:
        return f"{self.queue_id}: {self.last}"


class SimulatedPod(models.Model):
    """A pod of the embedded simulated cluster (see jobs/cluster/simulated.py)."""

    class Phase(models.TextChoices):
        SUSPENDED = "Suspended"
        PENDING = "Pending"
        RUNNING = "Running"
        SUCCEEDED = "Succeeded"
        FAILED = "Failed"

    object_name = models.CharField(max_length=253, db_index=True)
    job_id = models.BigIntegerField(db_index=True)
    name = models.CharField(max_length=253, unique=True)
    node = models.CharField(max_length=63, blank=True)
    requests = models.JSONField()
    phase = models.CharField(max_length=10, choices=Phase.choices, default=Phase.PENDING)
    created_at = models.DateTimeField()
    started_at = models.DateTimeField(null=True, blank=True)
    run_seconds = models.FloatField()
    cycle = models.PositiveIntegerField(default=0)
    last_cycle_at = models.DateTimeField(null=True, blank=True)
    index = models.PositiveIntegerField(default=0)
    # What its container exits with at the end of run_seconds: a job asks for a failure
    # with SIMULATED_EXIT_CODE in its env (jobs/cluster/simulated.py).
    exit_code = models.SmallIntegerField(default=0)
    # Where it may run: its template's nodeSelector, required node affinity and
    # tolerations (kube.scheduling.Placement.as_json); {} for anywhere.
    placement = models.JSONField(default=dict)

    class Meta:
        ordering = ["created_at", "object_name", "index"]

    def __str__(self) -> str:
        return f"{self.name} ({self.phase})"


class StartEstimate(models.Model):
    """About when a pending job starts, as the last replay of the rule found it
    (``jobs/reads/estimate.py``): beat replaces every row each ESTIMATE_SECONDS, so pages and the
    API read it in one indexed query instead of replaying the rule themselves. Only the
    first ESTIMATE_DEPTH jobs of each queue have a row."""

    job = models.OneToOneField(
        Job, on_delete=models.CASCADE, primary_key=True, related_name="start_estimate"
    )
    at = models.DateTimeField(null=True)  # None: no running job is expected to make room
    ahead = models.IntegerField()  # jobs ahead of it in its queue then
    ends = models.IntegerField()  # jobs holding quota then, expected to end before it starts
    last_end = models.DateTimeField(null=True)  # the last of them
    computed_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"#{self.job_id} at {self.at}"


class UsageSample(models.Model):
    """One node's use of one resource over one interval of the usage history: what beat
    records every USAGE_HISTORY_SECONDS (``jobs/usage/samples.py``) and the charts, the CSV and
    the API read.

    A recording writes every node and resource in one INSERT; a second one in the same
    interval (two beats, two workers) meets the unique key and adds nothing. The same task
    deletes rows older than USAGE_HISTORY_DAYS, which the BRIN index on ``at`` finds
    without reading the rest (rows arrive in time order). The node is named by its path,
    not by key, so its history outlives a retirement and reads without a join.
    """

    at = models.DateTimeField()  # the start of the interval (USAGE_HISTORY_SECONDS)
    node = models.CharField(max_length=500)
    resource = models.CharField(max_length=253)
    # Base units (cpu in millicores, memory in bytes), as the tree and the jobs hold them.
    used = models.BigIntegerField()
    min = models.BigIntegerField()
    max = models.BigIntegerField(null=True)  # None: no limit
    pending = models.BigIntegerField()  # what the pending jobs under the node ask for
    admitted = models.IntegerField()  # jobs under the node holding some of the resource

    class Meta:
        constraints = [
            # One sample per interval; also the index a chart reads its node's range by.
            models.UniqueConstraint(fields=["node", "at", "resource"], name="usage_sample_once")
        ]
        indexes = [BrinIndex(fields=["at"], name="usage_sample_at")]

    def __str__(self) -> str:
        return f"{self.node} {self.resource} at {self.at:%Y-%m-%d %H:%M}: {self.used}"


class Hold(models.Model):
    """One span of a job holding quota: from the statement that admitted it to the one that
    released it (it finished, or left the cluster after a preemption or a cancel), under
    the leaf it held it in. The ledger the accounting and the fair share read, so that what
    a department used survives restarts, gaps in the usage samples, and jobs that held
    quota more than once.

    Written by the database itself (trigger job_holds, migration 0025) as any statement
    moves a job into or out of ``HOLDING``, whichever writer it is: the admission cycle's
    raw SQL, ``transitions.move``, a saved instance. ``ended_at`` is None while it holds.
    """

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="holds")
    path = models.CharField(max_length=500)  # the leaf's path when the hold began
    request = models.JSONField()  # base units, as the job asks
    started_at = models.DateTimeField()
    ended_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [
            models.Index(fields=["job"], name="hold_open", condition=Q(ended_at__isnull=True)),
            # Spans that end after a moment, and the open ones: what a period reads.
            models.Index(fields=["ended_at"], name="hold_ended"),
        ]

    def __str__(self) -> str:
        return f"#{self.job_id} in {self.path} from {self.started_at}"


# The upper bounds, in seconds, of the wait histogram's buckets (log-spaced): bucket i holds
# the waits below WAIT_BOUNDS[i] and at least the bound before it; the last bucket holds
# those of a week or more. Fixed, so that histograms of any days add up bucket by bucket
# and a percentile survives the summing (``jobs/usage/accounting.py``).
WAIT_BOUNDS = (
    1, 2, 5, 10, 20, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200, 14400, 28800, 43200,
    86400, 172800, 604800,
)  # fmt: skip
WAIT_BUCKETS = len(WAIT_BOUNDS) + 1


class AccountingFigures(models.Model):
    """A day's figures under one leaf for one runtime: the resource-seconds held, how many
    jobs finished in each final state, their waits (first admissions of the day) as a
    histogram, and the preemptions suffered."""

    path = models.CharField(max_length=500)  # the leaf, as the spans name it
    runtime = models.CharField(max_length=20)
    # resource -> resource-seconds held in base units (cpu millicore-seconds, memory
    # byte-seconds, GPU-seconds), from admission to finish, open spans to the day's end.
    held = models.JSONField(default=dict)
    succeeded = models.IntegerField(default=0)
    failed = models.IntegerField(default=0)
    cancelled = models.IntegerField(default=0)
    preemptions = models.IntegerField(default=0)  # Preempted events of the day
    admissions = models.IntegerField(default=0)  # first admissions of the day: the waits
    wait_seconds = models.FloatField(default=0)  # their waits added up, for the mean
    waits = ArrayField(models.IntegerField(), size=WAIT_BUCKETS)  # by WAIT_BOUNDS

    class Meta:
        abstract = True


class AccountingDay(AccountingFigures):
    """What one person's jobs of one runtime did under one leaf on one UTC day. Beat writes
    a day once it is over (``accounting_summarise``), from the ledger of holds and the job
    rows, with its ``AccountingLeafDay`` rows; reads of a period add these rows up and
    compute the current day live. Read by person, and for a member's own jobs."""

    day = models.DateField()
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+", db_index=False
    )  # accounting_day_owner leads with it

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["day", "path", "owner", "runtime"], name="accounting_day_once"
            )
        ]
        indexes = [models.Index(fields=["owner", "day"], name="accounting_day_owner")]

    def __str__(self) -> str:
        return f"{self.day} {self.path} #{self.owner_id} {self.runtime}"


class AccountingMonth(AccountingFigures):
    """The ``AccountingDay`` rows of a calendar month added up by person, leaf and runtime:
    what a monthly report by person reads for the whole months of its period, thirty times
    fewer rows than the days. Always the sum of the month's day rows: written again from
    them in the transaction that writes a day (``jobs.tables.accounting.month_rollup``)."""

    month = models.DateField()  # its first day
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+", db_index=False
    )  # accounting_month_owner leads with it

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["month", "path", "owner", "runtime"], name="accounting_month_once"
            )
        ]
        indexes = [models.Index(fields=["owner", "month"], name="accounting_month_owner")]

    def __str__(self) -> str:
        return f"{self.month:%Y-%m} {self.path} #{self.owner_id} {self.runtime}"


class AccountingLeafDay(AccountingFigures):
    """The ``AccountingDay`` rows of a day added up over the people: what every grouping but
    by person reads, thirty times fewer rows for a leaf of thirty people."""

    day = models.DateField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["day", "path", "runtime"], name="accounting_leaf_day_once"
            )
        ]

    def __str__(self) -> str:
        return f"{self.day} {self.path} {self.runtime}"


class AccountingDone(models.Model):
    """A UTC day beat has summarised into ``AccountingDay`` rows (a day without any job has
    none): reads take these days from the summary and compute the others live."""

    day = models.DateField(primary_key=True)
    summarised_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"{self.day}"


class SubmissionKey(models.Model):
    """An ``Idempotency-Key`` a person or service identity sent with a submission, and what
    that submission queued: a retried request with the same key and the same body answers
    these jobs again instead of queuing new ones (``jobs.services.submission_once``).

    Written in the transaction of its jobs, so a key never exists without them nor they
    without it. Keyed by owner, not by token: the same key from two tokens of one person is
    one request. Kept ``IDEMPOTENCY_KEY_HOURS``; an older key is replaced by the next
    request that sends it, and beat deletes the rest (``submission_keys_prune``).
    """

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+", db_index=False
    )  # the unique index below leads with it
    key = models.CharField(max_length=255)  # IDEMPOTENCY_KEY_MAX, jobs/document/idempotency.py
    # sha256 (hex) of the endpoint and the canonical JSON of the body (``request_digest``).
    digest = models.CharField(max_length=64)
    # The jobs it queued, in the order sent: one for POST /jobs/, a batch's for /jobs/batch/.
    job_ids = ArrayField(models.BigIntegerField(), default=list)
    created_at = models.DateTimeField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["owner", "key"], name="submission_key_once")]
        indexes = [BrinIndex(fields=["created_at"], name="submission_key_created")]

    def __str__(self) -> str:
        return f"{self.key!r} of user #{self.owner_id}"


# Table names for raw SQL, from the models, so that a rename cannot leave a query behind.
JOBS = Job._meta.db_table
JOB_EVENTS = JobEvent._meta.db_table
LEASES = Lease._meta.db_table
RETIRED_EVENTS = RetiredEvents._meta.db_table
PENDING_BLOCKS = PendingBlock._meta.db_table
USAGE_SAMPLES = UsageSample._meta.db_table
SUBMISSION_KEYS = SubmissionKey._meta.db_table
HOLDS = Hold._meta.db_table
ACCOUNTING_DAYS = AccountingDay._meta.db_table
ACCOUNTING_LEAF_DAYS = AccountingLeafDay._meta.db_table
ACCOUNTING_MONTHS = AccountingMonth._meta.db_table
ACCOUNTING_DONE = AccountingDone._meta.db_table
