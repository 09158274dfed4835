"""Writes to jobs: submit, cancel, hold and release, change priority, and the events that
record them."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.translation import gettext as _
from rest_framework.exceptions import ValidationError

from audit.models import AuditEntry
from audit.services import audit_record
from jobs.cluster import get_backend
from jobs.cluster.manifests.objects import (
    RETRIES_ANNOTATION,
    TIME_LIMIT_ANNOTATION,
    config_map_names,
)
from jobs.document.fields import Count, Duration, PoolNames, flat
from jobs.document.idempotency import IDEMPOTENCY_HEADER, IdempotencyKey
from jobs.document.native import (
    QUEUE_LABELS,
    NativeJob,
    is_manifest,
    native_columns,
    native_placed,
    number_text,
    read_body,
    secret_refused,
)
from jobs.document.schema import JobDraft, job_document, job_parse, priority_read
from jobs.document.validation import (
    MAX_RUN_SECONDS,
    MIN_RUN_SECONDS,
    PRIORITY_RANGE,
    JobInvalid,
    job_placements,
    job_pods,
)
from jobs.engine.locks import admission_held
from jobs.engine.transitions import sources_of, step
from jobs.engine.triggers import request_admission, request_reconcile
from jobs.models import (
    LEAVING,
    LIVE,
    PENDING,
    QUEUE_ORDER,
    TERMINAL,
    Job,
    JobEvent,
    State,
    SubmissionKey,
)
from jobs.reads.quota_preview import Consequence, QuotaPreview, quota_preview
from jobs.tables.jobs import MapHolder, job_insert_with_event, jobs_copy, live_config_maps
from jobs.tables.submission_keys import submission_key_claim
from jobs.tables.tickets import tickets_reserve
from kube.names import POOLS_ANNOTATION
from kube.pod_security import RESTRICTED
from kube.scheduling import ClusterNode, Placement
from queues import phrases
from queues import selectors as queue_selectors
from queues.limits import RETRIES_MAX, format_duration, limits_of
from queues.models import Queue
from queues.phrases import Phrase
from queues.placement import unplaceable
from queues.pod_policy import PodPolicy, leaf_policy
from queues.pools import Pool, accepted
from queues.quota import Node, exceeds_max, path_to_root
from queues.scope import Right, scope_of
from queues.services import TREE_NAME, NodeChange, tree_import


class JobPermissionDenied(Exception):
    """The user may see the job but not do this to it; the message says who may."""


class JobConflict(Exception):
    """The job is not in a state that allows this (e.g. raising the priority of a running job)."""


class SubmissionKeyConflict(Exception):
    """The request's Idempotency-Key was sent with another request; the message says when."""


class AlreadySubmitted(Exception):
    """The request's Idempotency-Key was sent with the same request before: ``jobs`` are
    what that one queued, as they are now, in the order sent. Nothing was stored."""

    def __init__(self, jobs: list[Job]):
        super().__init__(f"already submitted as {[job.pk for job in jobs]}")
        self.jobs = jobs


def event_record(
    *,
    job: Job,
    reason: str,
    message: Phrase,
    at: datetime,
    actor=None,
    type: str = JobEvent.Type.NORMAL,
) -> None:
    JobEvent.objects.say(
        job=job, reason=reason, phrase=message, created_at=at, actor=actor, type=type
    )


@dataclass(frozen=True)
class Submission:
    """A submitted body read: its draft and, for a Kubernetes object, the object read
    (``jobs.document.native``), whose paths a refusal names."""

    draft: JobDraft
    native: NativeJob | None = None

    def paths(self) -> AbstractContextManager:
        """Refusals raised inside name the object's paths; a Caldera document's need
        nothing."""
        return self.native.paths() if self.native else nullcontext()


def submission_read(
    body: object,
    *,
    queue: str = "",
    priority: object = None,
    pools: str | None = None,
    held: bool = False,
) -> Submission:
    """A job document, Caldera's or a Kubernetes object (a RayJob, a PyTorchJob, a Volcano
    Job, alone or with its ConfigMaps), read and checked as a draft.

    The queue is, in order: ``queue`` (the caller's ?queue= or ``--queue``: the object's own
    places for it are then replaced by it), the object's own (``QUEUE_LABELS``, then a
    Volcano Job's ``spec.queue`` or a PyTorchJob's scheduling queue), else the queue whose
    leaf binds the object's namespace. ``priority`` (?priority=) overrides the document's,
    and ``pools`` (?pools=h100,a100) its node pools; ``held`` (?held=true) queues it held.
    """
    if not is_manifest(body):
        if not queue and priority is None and pools is None:
            draft = job_parse(body)  # the hot path: a batch reads a thousand
        else:
            draft = job_parse(_overridden(body, queue, priority, pools))
        draft.held = held
        return Submission(draft)
    native = read_body(body)
    if queue:
        native.queue = queue
        native.where.pop("queue", None)  # a refusal names the parameter itself
    elif not native.queue:
        native.queue = _namespace_queue(native)
    draft = _native_draft(native, priority, queue_named=bool(queue), pools=pools)
    draft.held = held
    return Submission(draft, native)


def _overridden(document: object, queue: str, priority: object, pools: str | None) -> object:
    """The document with the query's queue, priority and pools over its own."""
    if not isinstance(document, Mapping):
        return document  # JobIn refuses it whole
    document = dict(document)
    if queue:
        document["queue"] = queue
    if priority is not None:
        document["priority"] = number_text(priority)
    if pools is not None:
        document["pools"] = _pool_words(pools)
    return document


def _pool_words(named: object) -> object:
    """Pools said as words ("h100,a100", "h100 a100"), as a list; a list as it is."""
    return named.replace(",", " ").split() if isinstance(named, str) else named


def _native_draft(
    native: NativeJob, priority: object, *, queue_named: bool, pools: str | None = None
) -> JobDraft:
    """The object's draft: the columns it gives (``native_columns``), its priority (the
    query's, else its ``caldera.io/priority`` annotation) and expected run time (its
    ``caldera.io/run-seconds``), and the namespace it names, which ``_job_for`` checks
    against the queue's once the queue is looked up."""
    annotations = native.annotations
    given = priority if priority is not None else annotations.get("caldera.io/priority", 0)
    errors: dict[str, list[str]] = {}
    columns = native_columns(native)
    try:
        columns["priority"] = priority_read(number_text(given))
    except JobInvalid as invalid:
        key = "priority" if priority is not None else native.place("priority")
        errors[key] = invalid.errors["priority"]
    seconds = number_text(annotations.get("caldera.io/run-seconds"))
    if seconds is not None and (
        isinstance(seconds, bool)
        or not isinstance(seconds, int | float)
        or not MIN_RUN_SECONDS <= seconds <= MAX_RUN_SECONDS
    ):
        errors[native.place("run_seconds")] = [
            _("must be a number of seconds from %(least)s to %(most)s")
            % {"least": MIN_RUN_SECONDS, "most": MAX_RUN_SECONDS}
        ]
    columns["run_seconds"] = seconds
    limit, where = _time_limit_of(native)
    try:
        columns["time_limit"] = Duration().run_validation(limit)
    except ValidationError as invalid:
        errors[where] = [str(reason) for reason in invalid.detail]
    try:
        columns["retries"] = Count(default=0, min_value=0, max_value=RETRIES_MAX).run_validation(
            number_text(annotations.get(RETRIES_ANNOTATION))
        )
    except ValidationError as invalid:
        errors[native.place("retries")] = [str(reason) for reason in invalid.detail]
    named = pools if pools is not None else annotations.get(POOLS_ANNOTATION)
    if named is not None:
        try:
            columns["pools"] = PoolNames().run_validation(_pool_words(named))
        except ValidationError as invalid:
            errors["pools" if pools is not None else native.place("pools")] = [
                f"{where}: {reason}" if where else reason
                for where, reasons in flat(invalid.detail).items()
                for reason in reasons
            ]
    if errors:
        raise JobInvalid(errors)
    return JobDraft(
        queue=native.queue,
        columns=columns,
        namespace=native.namespace,
        native=native,
        queue_named=queue_named,
    )


# Where a runtime's own object gives the job's deadline: KubeRay's RayJob and Kubeflow's
# PyTorchJob have one (a Volcano Job has none: its caldera.io/time-limit annotation).
DEADLINE_FIELDS = {
    "kuberay": ("spec", "activeDeadlineSeconds"),
    "kubeflow": ("spec", "runPolicy", "activeDeadlineSeconds"),
}


def _time_limit_of(native: NativeJob) -> tuple[object, str]:
    """The object's time limit as it gives it, and its path for a refusal: its
    caldera.io/time-limit annotation, else its runtime's deadline field (None: neither)."""
    if TIME_LIMIT_ANNOTATION in native.annotations:
        return native.annotations[TIME_LIMIT_ANNOTATION], native.place("time_limit")
    path = DEADLINE_FIELDS.get(native.kind.runtime)
    if path is None:
        return None, ""
    value: object = native.job
    for key in path:
        value = value.get(key) if isinstance(value, Mapping) else None
    return value, native.path(0, path)


def _namespace_queue(native: NativeJob) -> str:
    """The path of the queue whose leaf binds the object's namespace: its queue when it
    names none."""
    if native.namespace:
        found = queue_selectors.queue_for_namespace(native.namespace)
        if found is not None:
            native.where["queue"] = native.where["namespace"]
            return found.node.path
    labels = ", ".join(QUEUE_LABELS)
    if native.namespace:
        reason = _(
            "the object names no queue: give it a label (%(labels)s), send "
            "?queue= (caldera submit --queue), or a namespace a queue's leaf binds "
            "(no queue binds %(namespace)s)"
        ) % {"labels": labels, "namespace": native.namespace}
    else:
        reason = _(
            "the object names no queue: give it a label (%(labels)s), send "
            "?queue= (caldera submit --queue), or a namespace a queue's leaf binds"
        ) % {"labels": labels}
    raise JobInvalid({"queue": reason})


def job_namespace(queue: Queue) -> str:
    """The namespace a queue's jobs run in: its leaf's first."""
    return (queue.node.namespaces or [queue.name])[0]


def job_submit(
    *, user, draft: JobDraft, now: datetime | None = None, key: IdempotencyKey | None = None
) -> Job:
    """Queue a job in a leaf queue the user may submit to.

    Members submit at priority 0 or below; a higher priority is a priority jump, which only
    the department's managers and staff may make. Three round trips for staff, four for
    others: the queue and the quota nodes of its path (two), (the user's roles,) the job
    and its event together. With ``key`` (``submission_once``), AlreadySubmitted or
    SubmissionKeyConflict when the user sent it before.
    """
    now = now or timezone.now()
    submission_key_check(user=user, key=key, now=now)
    job = _checked_job(user, draft, now)
    with submission_once(user=user, key=key, now=now) as record, _name_kept(job):
        job_insert_with_event(job, _enqueued(job, user))
        record([job])
    transaction.on_commit(request_admission)
    return job


@contextmanager
def _name_kept(*jobs: Job) -> Iterator[None]:
    """A transaction in which another submission that took the object name of one of
    ``jobs`` since it was checked (``job_object_name_live``) is a refusal naming it."""
    try:
        with transaction.atomic():
            yield
    except IntegrityError as error:
        if "job_object_name_live" not in str(error):
            raise
        named = [job for job in jobs if job.object_name]
        raise JobInvalid(
            {
                "metadata.name": [
                    _name_taken(job.object_name, job.namespace, None) for job in named[:1]
                ]
            }
        ) from None


def _window_start(now: datetime) -> datetime:
    """The oldest a submission key may be and still answer (IDEMPOTENCY_KEY_HOURS)."""
    return now - timedelta(hours=settings.IDEMPOTENCY_KEY_HOURS)


def submission_key_check(*, user, key: IdempotencyKey | None, now: datetime) -> None:
    """Nothing when the user has not sent ``key`` within the window; AlreadySubmitted
    with the first request's jobs when they sent it with the same request (endpoint and
    body), SubmissionKeyConflict when with another."""
    if key is None:
        return
    found = SubmissionKey.objects.filter(
        owner=user, key=key.key, created_at__gte=_window_start(now)
    ).first()
    if found is None:
        return
    if found.digest != key.digest:
        at = found.created_at.astimezone(UTC).isoformat(timespec="seconds")
        raise SubmissionKeyConflict(
            _("%(header)s %(key)s was used for another request at %(at)s; use a new key")
            % {"header": IDEMPOTENCY_HEADER, "key": repr(key.key), "at": at.replace("+00:00", "Z")}
        )
    jobs = Job.objects.select_related("queue__node", "owner").in_bulk(found.job_ids)
    raise AlreadySubmitted([jobs[pk] for pk in found.job_ids if pk in jobs])


@contextmanager
def submission_once(
    *, user, key: IdempotencyKey | None, now: datetime
) -> Iterator[Callable[[list[Job]], None]]:
    """A transaction that stores a submission's jobs with its key, or neither; it yields
    the function that records the jobs under the key. Without a key, no transaction of its
    own and nothing recorded.

    The key's row is claimed first (``submission_key_claim``: INSERT ... ON CONFLICT, which
    replaces a row older than the window), so a twin request sent at the same time waits
    on the unique index until this one commits, then answers its jobs
    (``submission_key_check``) without storing its own: one job, whatever the timing. A
    unique index, rather than a lock taken beforehand (an advisory lock or a row lock),
    because it is the key's own row that proves the first request committed, and no row
    exists to lock before it. A refused request (its transaction rolled back) leaves no
    key, so its corrected retry may use the same one.
    """
    if key is None:
        yield lambda jobs: None
        return
    with transaction.atomic():
        claimed = submission_key_claim(
            owner_id=user.pk, key=key.key, digest=key.digest, now=now, since=_window_start(now)
        )
        if claimed is None:  # a twin committed it after our check
            submission_key_check(user=user, key=key, now=now)
            raise JobConflict(
                _("%(header)s %(key)s is in use; try again")
                % {"header": IDEMPOTENCY_HEADER, "key": repr(key.key)}
            )

        def record(jobs: list[Job]) -> None:
            SubmissionKey.objects.filter(pk=claimed).update(job_ids=[job.pk for job in jobs])

        yield record


def _checked_job(user, draft: JobDraft, now: datetime) -> Job:
    """The job, unsaved, once the user may submit it to its queue."""
    found = queue_selectors.queue_for_submit(draft.queue)
    with _and_its_problems(draft):
        target = _submit_target(user, draft.queue, found)
    return _job_for(user, draft, target, now, nodes=get_backend().nodes())


@contextmanager
def _and_its_problems(draft: JobDraft) -> Iterator[None]:
    """A refusal of the draft's queue names the problems its object's pods and fence have
    too: every problem of a body in one answer."""
    try:
        yield
    except JobInvalid as invalid:
        if draft.native is None or not draft.native.problems:
            raise
        raise JobInvalid({**draft.native.problems, **invalid.errors}) from None


def job_preview(*, user, draft: JobDraft, now: datetime | None = None) -> Job:
    """The job ``job_submit`` would queue, checked the same way, but not saved (no id)."""
    return _checked_job(user, draft, now or timezone.now())


BATCH_MAX = 1000
BATCH_MAX_BYTES = 32 * 1024 * 1024


def job_submit_batch(
    *,
    user,
    documents: list,
    now: datetime | None = None,
    key: IdempotencyKey | None = None,
    queue: str = "",
    priority: object = None,
    pools: str | None = None,
    held: bool = False,
) -> list[Job]:
    """Queue up to BATCH_MAX job documents at once, all or none (a CI pipeline's sweep).

    Every document is read and checked as ``job_submit`` checks one (``job_preview_batch``),
    and the jobs are written with COPY and their events with one INSERT, in one transaction.
    Raises JobInvalid naming ``jobs[i].field`` for every problem of every job; then
    nothing is stored. With ``key`` as ``job_submit``; a document may be a Kubernetes
    object, and ``queue``, ``priority``, ``pools`` and ``held`` apply to each, as
    ``submission_read`` reads them.
    """
    now = now or timezone.now()
    batch_size_check(len(documents))
    submission_key_check(user=user, key=key, now=now)
    jobs = job_preview_batch(
        user=user, documents=documents, now=now, queue=queue, priority=priority, pools=pools,
        held=held,
    )  # fmt: skip
    _reserve_tickets(jobs)
    with submission_once(user=user, key=key, now=now) as record, _name_kept(*jobs):
        jobs_copy(jobs)
        JobEvent.objects.record(
            ((job.pk, JobEvent.Reason.ENQUEUED, _enqueued_message(job, user)) for job in jobs),
            at=now,
            actor=user,
        )
        record(jobs)
        transaction.on_commit(request_admission)
    return jobs


def job_preview_batch(
    *,
    user,
    documents: list,
    now: datetime | None = None,
    queue: str = "",
    priority: object = None,
    pools: str | None = None,
    held: bool = False,
) -> list[Job]:
    """The jobs ``job_submit_batch`` would queue, in the order sent, checked the same way
    but not saved: each queue is looked up once, the user's roles and the cluster's node
    shapes read once. Raises JobInvalid naming ``jobs[i].field`` for every problem of every
    job (the batch's dry run answers that 400 too)."""
    now = now or timezone.now()
    batch_size_check(len(documents))
    drafts: list[JobDraft | JobInvalid] = []
    read: list[Submission | None] = []
    for document in documents:
        try:
            submission = submission_read(
                document, queue=queue, priority=priority, pools=pools, held=held
            )
        except JobInvalid as invalid:
            drafts.append(invalid)
            read.append(None)
        else:
            drafts.append(submission.draft)
            read.append(submission)
    names = {draft.queue for draft in drafts if isinstance(draft, JobDraft)}
    found = queue_selectors.queues_for_submit(sorted(names))  # every queue at once
    roles = queue_selectors.user_roles(user)  # and the user's roles, once
    targets: dict[str, tuple | JobInvalid] = {}
    nodes = get_backend().nodes()  # and the cluster's node shapes, once
    jobs = []
    errors: dict[str, list[str]] = {}
    named: dict[tuple[str, str], int] = {}  # (namespace, object name) -> the job that has it
    # The live jobs holding the names the batch's objects keep, read once for them all.
    taken = live_names(
        [d.columns["object_name"] for d in drafts if isinstance(d, JobDraft) and d.native]
    )
    # And those holding the names of their ConfigMaps; a ConfigMap two jobs of the batch
    # would share in one namespace is the later one's refusal.
    maps_taken = live_config_maps(
        [name for d in drafts if isinstance(d, JobDraft) for _, name, _ in _maps_of(d)]
    )
    for index, draft in enumerate(drafts):
        try:
            if isinstance(draft, JobInvalid):
                raise draft
            if draft.queue not in targets:
                try:
                    targets[draft.queue] = _submit_target(
                        user, draft.queue, found.get(draft.queue), roles
                    )
                except JobInvalid as invalid:
                    targets[draft.queue] = invalid
            read_as = read[index]
            assert read_as is not None  # read, since it has a draft
            with read_as.paths(), _and_its_problems(draft):
                target = targets[draft.queue]
                if isinstance(target, JobInvalid):
                    raise target
                job = _job_for(
                    user, draft, target, now, nodes=nodes, taken=taken, maps_taken=maps_taken
                )
                _maps_taken_by(job, maps_taken)
                if (
                    job.object_name
                    and named.setdefault((job.namespace, job.object_name), index) != index
                ):
                    raise JobInvalid(
                        {
                            "name": _(
                                "jobs[%(other)s] of this batch has the object name %(name)s "
                                "in %(namespace)s"
                            )
                            % {
                                "other": named[(job.namespace, job.object_name)],
                                "name": job.object_name,
                                "namespace": job.namespace,
                            }
                        }
                    )
                jobs.append(job)
        except JobInvalid as invalid:
            errors |= {
                f"jobs[{index}].{field}": reasons for field, reasons in invalid.errors.items()
            }
    if errors:
        raise JobInvalid(errors)
    return jobs


def submission_keys_prune(*, now: datetime | None = None) -> int:
    """Delete the submission keys older than the window (beat runs it); how many."""
    old = SubmissionKey.objects.filter(created_at__lt=_window_start(now or timezone.now()))
    deleted, _by_model = old.delete()
    return deleted


def batch_size_check(count: int) -> None:
    if not 1 <= count <= BATCH_MAX:
        raise JobInvalid(
            {
                "jobs": _("must hold 1 to %(most)s jobs, got %(count)s")
                % {"most": BATCH_MAX, "count": count}
            }
        )


def _submit_target(user, name: str, found: tuple | None, roles: dict | None = None) -> tuple:
    """(queue, the quota nodes of its path, the user's role) or JobInvalid on the queue.

    ``found`` is what ``queues_for_submit`` returned for the name; ``roles`` the user's
    roles, when the caller already read them.
    """
    queue, path_nodes = found if found else (None, {})
    role = queue_selectors.queue_role(user, queue, roles) if queue else None
    if queue is not None and role in (None, queue_selectors.READER):
        scope_refusal = queue_selectors.scope_refusal(user, queue, Right.SUBMIT)
        if scope_refusal is not None:
            raise JobPermissionDenied(scope_refusal)
    if queue is None or role in (None, queue_selectors.READER) or not queue.active:
        raise JobInvalid(
            {"queue": _("%(name)s is not a queue you can submit to") % {"name": repr(name)}}
        )
    return queue, path_nodes, role


def _refused(user, queue: Queue, needed: str, otherwise: str) -> JobPermissionDenied:
    """The refusal of an action that needs ``needed``: what the request's token lacks, when
    its scope and not the person is the reason, ``otherwise`` when not."""
    return JobPermissionDenied(queue_selectors.scope_refusal(user, queue, needed) or otherwise)


def _job_for(
    user,
    draft: JobDraft,
    target: tuple,
    now: datetime,
    *,
    nodes: list[ClusterNode] | None,
    taken: dict[tuple[str, str], int] | None = None,
    maps_taken: dict[tuple[str, str], list[MapHolder]] | None = None,
) -> Job:
    """The job a draft becomes in its queue, unsaved, or JobInvalid naming every problem the
    queue's rules find (and, for a Kubernetes object, every problem of its pods and of the
    fence found when it was read): the priority, the quota, the nodes, the namespace.
    ``nodes`` are the cluster's node shapes (``ClusterBackend.nodes``)."""
    queue, path_nodes, role = target
    errors: dict[str, list[str]] = dict(draft.native.problems) if draft.native else {}
    if draft.priority > 0 and role == queue_selectors.MEMBER:
        refusal = queue_selectors.scope_refusal(user, queue, Right.MANAGE)
        if refusal:
            reason = _(
                "members submit at priority 0 or below; ask a manager to raise it (%(refusal)s)"
            ) % {"refusal": refusal}
        else:
            reason = _("members submit at priority 0 or below; ask a manager to raise it")
        errors.setdefault("priority", []).append(reason)
    too_big = exceeds_max(leaf=queue.node.path, request=draft.request, tree=path_nodes)
    if too_big is not None:
        errors.setdefault("request", []).append(
            _("can never be admitted: %(reason)s") % {"reason": too_big.phrase().text()}
        )
    pods = job_pods(kind=draft.kind, runtime=draft.runtime, head=draft.head, workers=draft.workers)
    placements = job_placements(kind=draft.kind, head=draft.head, workers=draft.workers)
    root = path_nodes.get(path_to_root(queue.node.path)[-1])
    declared = root.pools if root is not None else ()  # the tree's pools, kept on its root
    accepted, asked = _pools_accepted(draft, declared, placements, errors)
    nowhere = None
    if accepted or not declared:  # else refused already: it accepts no pool of the tree
        nowhere = unplaceable(
            pods=pods,
            nodes=nodes,
            path_nodes=path_nodes.values(),
            request=draft.request,
            placements=placements,
            pools=accepted,
        )
    if nowhere is not None:
        errors.setdefault(nowhere.field, []).append(
            _("can never run: %(reason)s") % {"reason": nowhere.phrase.text()}
        )
    columns = draft.columns if asked is None else {**draft.columns, "pools": list(asked)}
    columns = {**columns, **_limited(draft, queue, path_nodes, errors)}
    policy = leaf_policy(
        path_nodes[path].pods for path in path_to_root(queue.node.path) if path in path_nodes
    )
    if draft.native is not None:
        try:
            columns = {**columns, "manifest": _placed(draft, queue, policy, taken, maps_taken)}
        except JobInvalid as invalid:
            for key, reasons in invalid.errors.items():
                errors.setdefault(key, []).extend(reasons)
    else:
        _document_fenced(draft, policy, errors)
        if draft.namespace and draft.namespace != job_namespace(queue):
            errors.setdefault("namespace", []).append(
                _(
                    "the queue %(queue)s runs its jobs in the namespace %(namespace)s; "
                    "leave it out or name that one"
                )
                % {"queue": queue.node.path, "namespace": job_namespace(queue)}
            )
    if errors:
        raise JobInvalid(errors)
    return Job(
        **columns,
        queue=queue,
        namespace=job_namespace(queue),
        owner=user,
        token_id=_token_of(user),
        state=State.QUEUED,
        enqueued_at=now,
        held_at=now if draft.held else None,
        held_by=user if draft.held else None,
    )


def _limited(
    draft: JobDraft, queue: Queue, path_nodes: Mapping[str, Node], errors: dict[str, list[str]]
) -> dict[str, object]:
    """The job's time limit (its own, else its leaf's defaultTime) and its retries, each
    refused above what its leaf's limits allow (``queues.limits``)."""
    limits = limits_of(path_nodes, queue.node.path)
    own = draft.columns.get("time_limit")
    time_limit = own if own is not None else limits.default_time
    native = draft.native
    if limits.max_time is not None and time_limit is not None and time_limit > limits.max_time:
        field = "time_limit" if native is None else native.place("time_limit")
        if native is not None and TIME_LIMIT_ANNOTATION not in native.annotations:
            field = native.path(0, DEADLINE_FIELDS[native.kind.runtime])
        errors.setdefault(field, []).append(
            _("%(limit)s is above the longest %(node)s allows: %(max)s (limits.maxTime)")
            % {"limit": format_duration(time_limit), "node": limits.max_time_at,
               "max": format_duration(limits.max_time)}
        )  # fmt: skip
    retries = draft.columns.get("retries") or 0
    most = RETRIES_MAX if limits.max_retries is None else limits.max_retries
    if retries > most:
        field = "retries" if native is None else native.place("retries")
        errors.setdefault(field, []).append(
            _("%(retries)s retries is more than %(node)s allows: %(most)s (limits.maxRetries)")
            % {"retries": retries, "node": limits.max_retries_at or "Caldera", "most": most}
        )
    return {"time_limit": time_limit, "retries": retries}


def _pools_accepted(
    draft: JobDraft,
    pools: tuple[Pool, ...],
    placements: Mapping[str, Placement],
    errors: dict[str, list[str]],
) -> tuple[tuple[Pool, ...], tuple[str, ...] | None]:
    """The tree's node pools the job may be placed in, in its order, and the names it keeps
    when its object's selector chose them (None: as its document says): those it names
    (``pools``, or a Kubernetes object's caldera.io/pools annotation), each refused by
    position when the tree does not declare it; else, for a Kubernetes object, those its
    pods' ``nodeSelector`` asks for (``queues.pools.accepted``: a selector on no pool's
    labels leaves the tree's order), refused when it contradicts every pool. A job that
    names pools is refused where the tree declares none."""
    named = draft.columns.get("pools") or []
    by_name = {pool.name: pool for pool in pools}
    field = "pools" if draft.native is None else draft.native.place("pools")
    if named:
        if not pools:
            errors.setdefault(field, []).append(
                _("the quota tree declares no node pools; leave it out")
            )
            return (), None
        for index, name in enumerate(named):
            if name not in by_name:
                errors.setdefault(
                    f"{field}[{index}]" if draft.native is None else field, []
                ).append(
                    _("%(name)s is not a node pool of the quota tree (its pools: %(pools)s)")
                    % {"name": repr(name), "pools": ", ".join(by_name)}
                )
        return tuple(by_name[name] for name in named if name in by_name), None
    if not pools or not placements:
        return pools, None
    head = next(iter(placements.values()))
    asked = accepted(head, pools)
    if not asked:
        pod = next(iter(placements))
        errors.setdefault(f"{pod}.spec.nodeSelector", []).append(
            _("its nodeSelector %(selector)s matches no node pool of the quota tree (%(pools)s)")
            % {
                "selector": ", ".join(f"{k}={v}" for k, v in head.node_selector),
                "pools": "; ".join(
                    f"{pool.name}: " + ", ".join(f"{k}={v}" for k, v in pool.labels.items())
                    for pool in pools
                ),
            }
        )
        return (), None
    return tuple(by_name[name] for name in asked), asked if len(asked) < len(pools) else None


def _document_fenced(draft: JobDraft, policy: PodPolicy, errors: dict) -> None:
    """What a leaf's pod policy refuses of a job written as Caldera's document: a variable
    from a Secret the leaf does not list; any job in a leaf held to the restricted profile,
    whose pods the form does not harden (a team sends those as objects)."""
    if policy.security == RESTRICTED:
        errors.setdefault("queue", []).append(
            _(
                "this queue's pods are held to the Pod Security Standards' restricted profile, "
                "which the form's pods do not meet: send the job as a Kubernetes object whose "
                "pods run as non-root, drop every capability and set a seccomp profile"
            )
        )
    if policy.secrets is None:
        return
    for name, source in draft.columns.get("secret_env", {}).items():
        secret = source.partition("/")[0]
        if secret not in policy.secrets:
            errors.setdefault(f"secret_env.{name}", []).append(
                secret_refused(secret, policy.secrets)
            )


def _placed(
    draft: JobDraft,
    queue: Queue,
    policy: PodPolicy,
    taken: dict[tuple[str, str], int] | None,
    maps_taken: dict[tuple[str, str], list[MapHolder]] | None = None,
) -> dict:
    """The objects of a draft sent as Kubernetes objects, placed in ``queue``
    (``native_placed``) under its leaf's pod ``policy``, once no live job of the namespace
    has its object's name (``taken``: the names a batch read at once; None: read here) or
    the name of one of its ConfigMaps (``maps_taken``, likewise): two jobs' ConfigMaps of
    one name would be one object in the cluster, created by the first, deleted with it."""
    namespace = job_namespace(queue)
    placed = native_placed(
        draft.native,
        namespace=namespace,
        queue_name=queue.name,
        priority_class=queue.priority_class,
        replace=draft.queue_named,
        service_accounts=policy.service_accounts,
        level=policy.security,
        secrets=policy.secrets,
    )
    name = draft.columns["object_name"]
    if name:
        holders = live_names([name]) if taken is None else taken
        holder = holders.get((namespace, name))
        if holder is not None:
            raise JobInvalid({"name": [_name_taken(name, namespace, holder)]})
    errors = {
        draft.native.path(index, ("metadata", "name")): [_map_taken(name, namespace, other)]
        for index, name, other in _maps_differing(draft, namespace, maps_taken)
    }
    if errors:
        raise JobInvalid(errors)
    return placed


def _maps_of(draft: JobDraft) -> list[tuple[int, str, dict]]:
    """The ConfigMaps a draft sent as objects keeps (``_kept_maps``)."""
    return _kept_maps(draft.native.objects) if draft.native else []


def _kept_maps(objects: list[Mapping]) -> list[tuple[int, str, dict]]:
    """The ConfigMaps kept with a job (every object after the job): (its place among the
    objects, its name, its data and binaryData), in the body's order."""
    return [
        (index, name, {"data": obj.get("data"), "binaryData": obj.get("binaryData")})
        for index, (name, obj) in enumerate(
            zip(config_map_names(objects), objects[1:], strict=True), start=1
        )
    ]


def _maps_differing(
    draft: JobDraft, namespace: str, maps_taken: dict[tuple[str, str], list[MapHolder]] | None
) -> list[tuple[int, str, int]]:
    """The draft's ConfigMaps whose name a live job of the namespace keeps with other data,
    each with that job (0: an earlier job of the same batch). The same name with the same
    data is one ConfigMap the jobs share, as ``kubectl create`` of the same file shares it;
    it is removed with the last of them (``jobs.engine.objects.refs_removable``)."""
    maps = _maps_of(draft)
    if not maps:
        return []
    holders = live_config_maps([name for _, name, _ in maps]) if maps_taken is None else maps_taken
    differing = []
    for index, name, content in maps:
        other = next((h for h in holders.get((namespace, name), []) if h.content != content), None)
        if other is not None:
            differing.append((index, name, other.job_id))
    return differing


def _maps_taken_by(job: Job, maps_taken: dict[tuple[str, str], list[MapHolder]]) -> None:
    """A batch's job keeps its ConfigMaps from here on: a later job of the batch that keeps
    one of the same name with other data in the same namespace is refused."""
    if job.manifest:
        for _index, name, content in _kept_maps(job.manifest["objects"]):
            maps_taken.setdefault((job.namespace, name), []).append(MapHolder(0, content))


def _map_taken(name: str, namespace: str, job_id: int) -> str:
    """Why a job may not keep a ConfigMap of this name."""
    if job_id:
        holder = _("job #%(job)s, queued or running,") % {"job": job_id}
    else:
        holder = _("an earlier job of this batch")
    return _(
        "%(holder)s has a ConfigMap named %(name)s in the namespace %(namespace)s with other "
        "data, and the cluster keeps one object of a name: send the same data, or give this "
        "one another name (and the volumes that mount it)"
    ) % {"holder": holder, "name": name, "namespace": namespace}


def live_names(names: list[str]) -> dict[tuple[str, str], int]:
    """(namespace, object name) -> the live job that holds it, for these names: one query
    for a submission or a whole batch."""
    kept = sorted({name for name in names if name})  # "": named from the job, unique
    if not kept:
        return {}
    rows = Job.objects.filter(object_name__any=kept, state__in=LIVE).values_list(
        "namespace", "object_name", "pk"
    )
    return {(namespace, name): pk for namespace, name, pk in rows}


def _name_taken(name: str, namespace: str, job_id: int | None) -> str:
    """Why a job may not keep the name its object was sent with."""
    return _(
        "job #%(job)s, queued or running, already has an object named %(name)s in the "
        "namespace %(namespace)s; name this one otherwise, or give a generateName"
    ) % {"job": job_id if job_id is not None else "?", "name": name, "namespace": namespace}


def _token_of(user) -> int | None:
    """The id of the token the request carries, if any: its jobs are traced to it."""
    scope = scope_of(user)
    return scope.token if scope else None


def _enqueued_message(job: Job, user) -> Phrase:
    return Phrase(
        phrases.ENQUEUED_HELD if job.held_at else phrases.ENQUEUED,
        {"queue": job.queue.name, "user": user.username, "priority": job.priority},
    )


def _enqueued(job: Job, user) -> JobEvent:
    """A new job's first event, unsaved."""
    said = _enqueued_message(job, user)
    return JobEvent(
        reason=JobEvent.Reason.ENQUEUED,
        message=said.english(),
        code=said.code,
        args=dict(said.args),
        created_at=job.enqueued_at,
        actor=user,
    )


def _reserve_tickets(jobs: list[Job]) -> None:
    """Give the jobs their tickets (their order in their queues) before the batch's
    transaction (``tickets_reserve``), in the order of the batch."""
    counts: dict[int, int] = {}
    for job in jobs:
        counts[job.queue_id] = counts.get(job.queue_id, 0) + 1
    last = tickets_reserve(counts)
    next_ticket = {queue: last[queue] - counts[queue] + 1 for queue in last}
    for job in jobs:
        job.ticket = next_ticket[job.queue_id]
        next_ticket[job.queue_id] += 1


def job_may_act(user, job: Job) -> str | None:
    """The user's role over the job's queue, or None when they may not act on the job (a
    member on another's job, or a read-only token)."""
    role = queue_selectors.queue_role(user, job.queue)
    if role == queue_selectors.READER:
        return None
    if role == queue_selectors.MEMBER and job.owner_id != user.pk:
        return None
    return role


def _may_act(user, job: Job, refusal: str) -> str:
    """The user's role over the job, or JobPermissionDenied: what the request's token lacks
    when that is the reason (``submit`` on one's own job, ``manage`` on another's),
    ``refusal`` otherwise."""
    role = job_may_act(user, job)
    if role is None:
        needed = Right.SUBMIT if job.owner_id == user.pk else Right.MANAGE
        raise _refused(user, job.queue, needed, refusal)
    return role


def job_cancel(*, user, job: Job, now: datetime | None = None) -> Job:
    """Cancel a job. Members cancel their own jobs; managers any job.

    A pending job is cancelled at once. A job the cluster holds (admitted, running or
    preempted) is stopping until the cluster sync sees its objects gone, and keeps its
    quota until then, so nothing is admitted into capacity it still uses. The cancel is
    committed before the cluster is asked to remove the job's objects, so a broker that is
    down cannot turn a done cancel into an error (``request_reconcile``).
    """
    now = now or timezone.now()
    _may_act(user, job, _("members cancel only their own jobs; managers cancel any job"))
    with transaction.atomic():
        locked = Job.objects.select_for_update(no_key=True).get(pk=job.pk)
        if locked.state == State.CANCELLED or (
            locked.state == State.STOPPING and not locked.ends_as
        ):
            return locked
        was = locked.state
        if was == State.STOPPING:  # past its time limit, or between attempts: cancelled now
            locked.ends_as = ""
            message = Phrase(phrases.CANCELLED_LEAVING, {"user": user.username, "state": was})
        elif was in sources_of(State.STOPPING):
            step(locked, State.STOPPING)
            if was not in LEAVING:  # a preempted job keeps the time it began to leave
                locked.leaving_since = now
            message = Phrase(phrases.CANCELLED_LEAVING, {"user": user.username, "state": was})
        elif was in sources_of(State.CANCELLED):
            step(locked, State.CANCELLED)
            locked.finished_at = now
            message = Phrase(phrases.CANCELLED, {"user": user.username, "state": was})
        else:
            raise JobConflict(_("the job has already %(state)s") % {"state": locked.state})
        locked.save(update_fields=["state", "finished_at", "leaving_since", "ends_as"])
        event_record(
            job=locked, reason=JobEvent.Reason.CANCELLED, message=message, at=now, actor=user,
        )  # fmt: skip
        if locked.state == State.STOPPING:
            transaction.on_commit(lambda: request_reconcile([locked.pk]))
        else:
            transaction.on_commit(request_admission)
    return locked


def job_hold(*, user, job: Job, now: datetime | None = None) -> Job:
    """Hold a pending job: it keeps its state, ticket and enqueue time, so its place, and
    the admission cycle skips it until it is released. Members hold their own jobs;
    managers and staff any. Holding a held job changes nothing."""
    now = now or timezone.now()
    _may_act(user, job, _("members hold only their own jobs; managers hold any job"))
    with transaction.atomic():
        locked = _lock_pending(job, _("only a pending job can be held; this one is %(state)s"))
        if locked.held_at is not None:
            return locked
        locked.held_at, locked.held_by = now, user
        locked.save(update_fields=["held_at", "held_by"])
        event_record(
            job=locked, reason=JobEvent.Reason.HELD,
            message=Phrase(phrases.HELD, {"user": user.username}), at=now, actor=user,
        )  # fmt: skip
    return locked


def job_release(*, user, job: Job, now: datetime | None = None) -> Job:
    """Release a held job: the next admission cycle tries it again, in the place it kept.
    Members release their own jobs, but not a hold a manager placed; managers and staff
    release any. Releasing a job that is not held changes nothing."""
    now = now or timezone.now()
    role = _may_act(user, job, _("members release only their own jobs; managers release any"))
    with transaction.atomic():
        locked = _lock_pending(job, _("only a held job can be released; this one is %(state)s"))
        if locked.held_at is None:
            return locked
        holder = locked.held_by
        if role == queue_selectors.MEMBER and holder is not None and holder.pk != user.pk:
            refusal = _("held by %(user)s: only the department's managers and staff release it")
            raise _refused(user, job.queue, Right.MANAGE, refusal % {"user": holder.username})
        held = (now - locked.held_at).total_seconds()
        locked.held_at, locked.held_by = None, None
        locked.save(update_fields=["held_at", "held_by"])
        event_record(
            job=locked, reason=JobEvent.Reason.RELEASED,
            message=Phrase(
                phrases.RELEASED, {"user": user.username, "held": phrases.seconds(held)}
            ),
            at=now, actor=user,
        )  # fmt: skip
        transaction.on_commit(request_admission)
    return locked


def job_resubmit(*, user, job: Job, now: datetime | None = None) -> Job:
    """Queue a copy of a finished job, owned by the user, checked as a new submission (the
    queue still open to them, its priority one they may give, the tree still able to hold
    it). Members resubmit their own jobs; managers any. The finished job records the copy.
    """
    now = now or timezone.now()
    refusal = _("members resubmit only their own jobs; managers resubmit any job")
    _may_act(user, job, refusal)
    if job.state not in TERMINAL:
        raise JobConflict(
            _("only finished jobs are resubmitted; this one is %(state)s") % {"state": job.state}
        )
    with transaction.atomic():
        copy = job_submit(user=user, draft=job_parse(job_document(job)), now=now)
        event_record(
            job=job,
            reason=JobEvent.Reason.RESUBMITTED,
            message=Phrase(phrases.RESUBMITTED, {"user": user.username, "copy": copy.pk}),
            at=now,
            actor=user,
        )
    return copy


def job_set_priority(*, user, job: Job, priority: object, now: datetime | None = None) -> Job:
    """Move a pending job in its queue by changing its priority.

    Raising is a priority jump: only the department's managers and staff may do it. A
    member may lower the priority of their own job. Raise or lower is decided against the
    locked row, not the caller's copy: a manager may have raised it since that was read.
    The priority is read by its declared field (``priority_read``), whichever page,
    endpoint or bulk action asks.
    """
    now = now or timezone.now()
    priority = priority_read(priority)
    role = _may_act(user, job, _("members change only their own jobs"))
    with transaction.atomic():
        locked = _lock_pending(job)
        if priority > locked.priority and role not in (
            queue_selectors.MANAGER,
            queue_selectors.STAFF,
        ):
            refusal = _("only the department's managers and staff may raise a priority")
            raise _refused(user, job.queue, Right.MANAGE, refusal)
        return _change_priority(locked, priority, user, now, phrases.PRIORITY_CHANGED)


def job_move_to_head(*, user, job: Job, now: datetime | None = None) -> Job:
    """Put a pending job first in its queue: one above the highest priority of the others.

    A priority jump, so for the department's managers and staff only. A job already first
    keeps its priority.
    """
    now = now or timezone.now()
    if job_may_act(user, job) not in (queue_selectors.MANAGER, queue_selectors.STAFF):
        refusal = _("only the department's managers and staff may move a job")
        raise _refused(user, job.queue, Right.MANAGE, refusal)
    with transaction.atomic():
        locked = _lock_pending(job)
        # Lock the queue's row so two moves to the head cannot both compute the same top;
        # after the job's, as a bulk action has locked its jobs before any queue.
        Queue.objects.select_for_update().get(pk=job.queue_id)
        top = (
            Job.objects.filter(queue_id=locked.queue_id, state__in=PENDING)
            .exclude(pk=locked.pk)
            .order_by(*QUEUE_ORDER)
            .values_list("priority", "ticket")
            .first()
        )
        if top is None:
            return locked  # alone in its queue: already first
        priority, ticket = top
        if (-locked.priority, locked.ticket) < (-priority, ticket):
            return locked  # already first
        if priority + 1 > PRIORITY_RANGE[1]:
            raise JobConflict(
                _("the job ahead already has the highest priority, %(highest)s")
                % {"highest": PRIORITY_RANGE[1]}
            )
        return _change_priority(locked, priority + 1, user, now, phrases.PRIORITY_TO_HEAD)


def _lock_pending(job: Job, refusal: str = "") -> Job:
    """The job's row, locked, or JobConflict with ``refusal`` (``%(state)s``: its state)
    when it is no longer pending."""
    locked = Job.objects.select_for_update(no_key=True).get(pk=job.pk)
    if locked.state not in PENDING:
        refusal = refusal or _("only a pending job can change priority; this one is %(state)s")
        raise JobConflict(refusal % {"state": locked.state})
    return locked


def _change_priority(locked: Job, priority: int, user, now: datetime, code: str) -> Job:
    old = locked.priority
    if old == priority:
        return locked
    locked.priority = priority
    locked.save(update_fields=["priority"])
    event_record(
        job=locked,
        reason=JobEvent.Reason.PRIORITY_CHANGED,
        message=Phrase(code, {"user": user.username, "old": old, "new": priority}),
        at=now,
        actor=user,
    )
    transaction.on_commit(request_admission)
    return locked


def queue_for_submit_choices(user) -> list[Queue]:
    return list(queue_selectors.queues_for_user(user).filter(active=True))


# A tree applied from its preview waits this long at most for a running admission cycle.
TREE_APPLY_WAIT_SECONDS = 5.0


@dataclass(frozen=True)
class PreviewedApply:
    """A previewed tree's apply: what changed (None: not applied, it would now preempt
    ``grown``, jobs the person was not shown), and the preview it was applied under."""

    changes: list[NodeChange] | None
    preview: QuotaPreview
    grown: list[Consequence]


def tree_apply_previewed(
    *,
    document: object,
    previewed: set[int],
    actor,
    source: str,
    wait_seconds: float = TREE_APPLY_WAIT_SECONDS,
) -> PreviewedApply:
    """Apply ``document`` as the person previewed it, under the admission cycle's lock so
    that no cycle moves a job between the preview checked here and the change: if the
    change would now preempt a job of its own doing that is not in ``previewed``, nothing
    is applied and the new preview is answered to be shown again (jobs that started or
    ended meanwhile are no reason). Applied with consequences for jobs, the tree's audit
    gets one more entry: the preview the person confirmed. TreeError as the save would
    refuse."""
    with transaction.atomic():
        admission_held(timeout_seconds=wait_seconds)
        preview = quota_preview(document)
        grown = [job for job in preview.preempted if job.by_the_change and job.job not in previewed]
        if grown:
            return PreviewedApply(None, preview, grown)
        changes = tree_import(document=document, actor=actor, source=source)
        if changes and (preview.preempted or preview.admitted or preview.unrunnable_count):
            audit_record(
                action=AuditEntry.Action.UPDATED,
                object_type=AuditEntry.ObjectType.QUOTA_TREE,
                object_key=TREE_NAME,
                after={
                    "changes": [change.describe() for change in changes],
                    "preempted": [_confirmed(job) for job in preview.preempted],
                    "admitted": [_confirmed(job) for job in preview.admitted],
                },
                actor=actor,
                source=source,
            )
    return PreviewedApply(changes, preview, [])


def _confirmed(job: Consequence) -> dict:
    return {"job": job.job, "owner": job.owner, "queue": job.queue,
            "by_the_change": job.by_the_change}  # fmt: skip
