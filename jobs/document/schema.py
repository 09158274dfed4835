"""The job document, declared once: what a job is made of, how it is checked, how it reads.

``JobIn`` is the body of ``POST /api/v1/jobs/``, each entry of a batch and, through
``jobs.document.forms``, the submit page; the API answers with it and what Caldera adds
(``jobs.web.answers``). The OpenAPI schema is generated from these classes, so what is
documented is what is checked and what is sent. The fields and the way a ``Reader``
reads are in ``jobs.document.fields``.

The rules that join fields live here too (a PyTorch job has a master, autoscaling needs
Ray on KubeRay); rules that need the database (the queue, the user's role, the quota
tree, the nodes) are the services'.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache, cached_property, partial
from typing import Any, TypeVar, cast

from django.conf import settings
from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop
from rest_framework import serializers
from rest_framework.exceptions import ValidationError
from rest_framework.fields import empty

from jobs.cluster.spec import AUTOSCALER_RESOURCES
from jobs.document.fields import (
    INVALID,
    Reader,
    path,
    plain_writer,
    priority_field,
    read_field,
    refuse,
    unknown_fields,
)
from jobs.document.pods import WorkerGroupIn
from jobs.document.shape import FIELDS, PLAIN
from jobs.document.validation import (
    DNS_LABEL,
    FILE_NAME,
    NAME_MAX,
    RUNTIMES,
    autoscales,
    pod_count,
    pods_request,
    runtimes_offered,
)
from jobs.models import KINDS, Job, KindShape, kind_shape
from kube.quantity import (
    MAX_UNITS,
    ResourceList,
    add,
    parse_resources,
)

# The sentences a field of the other kind is refused with, made of jobs.models.KINDS'
# words and declared here whole for the catalogue (a translator reads sentences, not
# articles); one that is not declared is answered in English.
_OTHER_KIND = (
    gettext_noop("Ray jobs take an entrypoint, not a command"),
    gettext_noop("PyTorch jobs take a command, not an entrypoint"),
    gettext_noop("Ray jobs have a head, not a master"),
    gettext_noop("PyTorch jobs have a master, not a head"),
)


def other_kind(shape: KindShape, other: KindShape) -> tuple[str, str]:
    """Why ``other``'s launch field and its leading pod are refused in a ``shape`` job, in
    English: one of _OTHER_KIND's sentences each, translated where they are said."""
    return (
        f"{shape.name} jobs take {shape.launch_words}, not {other.launch_words}",
        f"{shape.name} jobs have {shape.head_words}, not {other.head_words}",
    )


@dataclass
class JobDraft:
    """A checked job document, before it has a queue and an owner (``services.job_submit``):
    the queue it names, and the job's columns as the document gives them
    (``jobs.document.shape``), with its ``request``: ``Job(**draft.columns, ...)`` is the
    job. The field a job of the other kind runs (a Ray job's ``command``) is left to the
    model's default, empty."""

    queue: str
    columns: dict[str, Any]
    # The namespace a Kubernetes object named (``jobs.document.native``), which must be
    # its queue's; "" when it named none, as Caldera's document never does.
    namespace: str = ""
    # The Kubernetes object read (``jobs.document.native.NativeJob``), placed in its queue
    # once the queue is looked up; None for Caldera's document. ``queue_named``: the
    # caller named the queue (?queue=), so the object's own places for it are replaced.
    native: Any = None
    queue_named: bool = False
    # Submitted held (?held=true, the form's box): queued, but not admitted until released.
    held: bool = False

    # What the services' rules read of it.

    @property
    def kind(self) -> str:
        return self.columns["kind"]

    @property
    def runtime(self) -> str:
        return self.columns["runtime"]

    @property
    def priority(self) -> int:
        return self.columns["priority"]

    @property
    def head(self) -> dict:
        return self.columns["head"]

    @property
    def workers(self) -> list[dict]:
        return self.columns["workers"]

    @property
    def request(self) -> ResourceList:
        return self.columns["request"]


# The plain fields a job keeps in a column, by name (the draft keeps the queue's name apart:
# the job's queue is looked up by it).
_PLAIN_COLUMNS = tuple((f.name, f.column) for f in PLAIN if f.column is not None)


class JobIn(Reader):
    """A job as it is submitted: ``POST /api/v1/jobs/``, each entry of a batch, the form.

    Ray jobs have a ``head`` and an ``entrypoint``; PyTorch jobs a ``master`` and a
    ``command``. The fields of the other kind are not read; given, they are refused with
    the reason. Reads as a JobDraft.
    """

    class Meta:
        ref_name = "JobSubmission"

    def get_fields(self) -> dict[str, serializers.Field]:
        """The document's fields: the rows of ``jobs.document.shape.FIELDS``, in order."""
        return {field.name: field.reader() for field in FIELDS}

    @cached_property
    def _plain_fields(self) -> dict[str, serializers.Field]:
        """The fields read as they are (``shape.PLAIN``). The kind's own (``entrypoint``
        or ``command``, ``head`` or ``master``) are read once the kind is known, and the
        other kind's refused by name; ``workers`` is read group by group."""
        return {field.name: self.fields[field.name] for field in PLAIN}

    @cached_property
    def _absent(self) -> dict[str, Callable[[], Any]]:
        """What each plain field reads when a document leaves it out, where that is a plain
        default its reader gives without a refusal (None, "", 0, an empty list or map):
        read once for the process rather than once a job, as a batch of a thousand jobs
        leaves out most of them. Each call gives a value of its own (a new list or map)."""
        found: dict[str, Callable[[], Any]] = {}
        for name, reader in self._plain_fields.items():
            if isinstance(reader, Reader):
                continue
            try:
                value = reader.run_validation(empty)
            except ValidationError:
                continue  # required: its refusal is made per document
            if isinstance(value, list | dict) and not value:
                found[name] = type(value)
            elif value is None or isinstance(value, str | int | float | bool):
                found[name] = partial(_same, value)
        return found

    def read(self, data, errors, key=""):
        if not isinstance(data, Mapping):
            refuse(errors, path(key, "body"), _("must be a JSON object"))
            return INVALID
        unknown_fields(data, self.fields, key, errors)
        fields = self.fields
        absent = self._absent
        values = {
            name: absent[name]()
            if name not in data and name in absent
            else read_field(reader, data.get(name, empty), errors, key, name)
            for name, reader in self._plain_fields.items()
        }
        kind = values["kind"] if values["kind"] is not INVALID else ""
        self._runtime(kind, values, path(key, "runtime"), errors)
        name = values["name"]
        if name and name is not INVALID and (not DNS_LABEL.match(name) or len(name) > NAME_MAX):
            refuse(
                errors,
                path(key, "name"),
                _(
                    "%(name)s must be a DNS-1123 label of at most %(limit)s characters "
                    "(lowercase letters, digits and '-', starting and ending with a letter or "
                    "digit)"
                )
                % {"name": repr(name), "limit": NAME_MAX},
            )
        filename = values["script_filename"]
        if filename is not INVALID and not FILE_NAME.match(filename):
            refuse(
                errors,
                path(key, "script_filename"),
                _("%(name)s is not a plain file name") % {"name": repr(filename)},
            )
        script = values["script"] if values["script"] is not INVALID else ""

        launch = None
        shape = kind_shape(kind)
        if kind in KINDS:
            launch = read_field(
                fields[shape.launch], data.get(shape.launch), errors, key, shape.launch
            )
            if not launch and not script:
                refuse(errors, path(key, shape.launch), _("is required (or give a script to run)"))
            for other in shape.others():
                takes, has = other_kind(shape, other)
                if data.get(other.launch):
                    refuse(errors, path(key, other.launch), _(takes))
                if data.get(other.head) is not None:
                    refuse(errors, path(key, other.head), _(has))

        runtime = values["runtime"]
        head_field = shape.head
        head = read_field(fields[head_field], data.get(head_field), errors, key, head_field)
        workers, request = self._workers(
            data.get("workers"), path(key, "workers"), errors, kind, runtime
        )
        # Every pod of the gang, summed: an autoscaling worker group counts at its replicas
        # (KubeRay's minReplicas), as docs/architecture.md section 4 and kube-queue count it;
        # ``pods`` counts the pods themselves.
        if head is not INVALID:
            request = add(request, head.units)
        request = add(request, pods_request(workers))
        if autoscales(runtime, workers):
            # KubeRay's autoscaler runs beside the head: part of the gang that starts.
            request = add(request, parse_resources("autoscaler", AUTOSCALER_RESOURCES))
        for resource in sorted(name for name, units in request.items() if units > MAX_UNITS):
            # Usage is summed as bigint in PostgreSQL; no cluster has this much anyway.
            refuse(
                errors,
                path(key, "request"),
                _("%(resource)s summed over all pods is too large") % {"resource": resource},
            )
        pip = values["pip"]
        if pip and pip is not INVALID and runtime and runtime != Job.Runtime.KUBERAY:
            refuse(
                errors,
                path(key, "pip"),
                _(
                    "pip packages go into a Ray runtime environment (runtime kuberay); on "
                    "%(runtime)s, install them in the image"
                )
                % {"runtime": runtime},
            )
        if errors:
            return INVALID
        columns = {column: values[name] for name, column in _PLAIN_COLUMNS}
        columns[shape.launch] = launch
        columns["head"] = {"resources": head.given} | (
            {"limits": head.limits} if head.limits else {}
        )
        columns["workers"] = workers
        columns["request"] = {resource: units for resource, units in request.items() if units}
        return JobDraft(queue=values["queue"], columns=columns)

    @staticmethod
    def _runtime(kind: str, values: dict, key: str, errors: dict) -> None:
        """The runtime given, or the cluster's first for the kind; refused when the kind
        does not run on it or this cluster does not offer it."""
        offered = runtimes_offered(kind)
        given = values["runtime"]
        runtime = values["runtime"] = (given if given is not INVALID else "") or (
            offered[0] if offered else ""
        )
        if given is INVALID:  # its own reason stands
            return
        if kind in RUNTIMES and runtime not in RUNTIMES[kind]:
            refuse(
                errors,
                key,
                _("a %(kind)s job runs on %(runtimes)s, not %(runtime)s")
                % {"kind": kind, "runtimes": ", ".join(RUNTIMES[kind]), "runtime": repr(runtime)},
            )
        elif kind in RUNTIMES and runtime not in offered:
            refuse(
                errors,
                key,
                (
                    _("this cluster runs %(kind)s jobs on %(runtimes)s, not %(runtime)s")
                    % {"kind": kind, "runtimes": ", ".join(offered), "runtime": repr(runtime)}
                    if offered
                    else _("this cluster runs %(kind)s jobs on no runtime, not %(runtime)s")
                    % {"kind": kind, "runtime": repr(runtime)}
                ),
            )

    def _workers(self, data, key, errors, kind, runtime) -> tuple[list[dict], ResourceList]:
        """The worker groups and their request.

        A group may autoscale (``max_replicas``, Ray on KubeRay only): it runs between
        ``replicas`` and ``max_replicas`` pods. Its request counts ``replicas`` pods, the
        gang that must start together (docs/architecture.md section 4, as kube-queue counts
        a RayJob); the pods the autoscaler adds later are placed by the cluster as it has
        room.
        """
        if data is None:
            return [], {}
        if not isinstance(data, list):
            refuse(errors, key, _("must be a list of worker groups"))
            return [], {}
        most = settings.JOB_MAX_WORKER_GROUPS
        if len(data) > most:  # refused before any group is read
            refuse(
                errors,
                key,
                _("a job has at most %(most)s worker groups, got %(count)s")
                % {"most": most, "count": len(data)},
            )
            return [], {}
        workers = cast(serializers.ListSerializer, self.fields["workers"])  # many=True
        reader = cast(WorkerGroupIn, workers.child)
        groups: list[dict] = []
        request: ResourceList = {}
        names: set[str] = set()
        for index, raw in enumerate(data):
            where = path(key, index)
            read = reader.read(raw, errors, where, index=index, kind=kind, runtime=runtime)
            if read is INVALID:
                continue
            group, per_pod = read
            name = group["name"]
            if isinstance(name, str) and path(where, "name") not in errors:
                if name in names:
                    refuse(
                        errors,
                        path(where, "name"),
                        _("%(name)s is used by another worker group") % {"name": repr(name)},
                    )
                names.add(name)  # only a checked name: an object or a list is unhashable
            groups.append(group)
            request = add(request, per_pod, times=group["replicas"])
        pods, most = pod_count(groups, most=True), settings.JOB_MAX_PODS
        if pods > most:
            refuse(
                errors,
                key,
                (
                    _(
                        "a job has at most %(most)s pods, its head or master and every worker; "
                        "this one has %(count)s at its groups' max_replicas"
                    )
                    if autoscales(runtime, groups)
                    else _(
                        "a job has at most %(most)s pods, its head or master and every worker; "
                        "this one has %(count)s"
                    )
                )
                % {"most": most, "count": pods},
            )
        if kind == Job.Kind.PYTORCH and len(groups) > 1:
            refuse(errors, key, _("a PyTorchJob has one worker group"))
        if runtime == Job.Runtime.VOLCANO and len(groups) > 1 and key not in errors:
            refuse(errors, key, _("a Volcano Job has one worker task: give one worker group"))
        return groups, request


_Serializer = TypeVar("_Serializer", bound=serializers.Serializer)


@cache
def bound(serializer: type[_Serializer]) -> _Serializer:
    """An instance of ``serializer`` with its fields bound, kept for the process.

    DRF binds a serializer's fields anew for every instance, a deep copy that costs
    several times what reading or writing one job costs (``python -m bench.schema_costs``
    measures both). Reading (``check``) and writing (``to_representation``) change nothing in the
    instance, so one serves every request; a serializer that reads ``self.context`` is
    made per request instead.
    """
    return serializer()


def _same(value: Any) -> Any:
    return value


def job_parse(document: object) -> JobDraft:
    """Check a job document; raise JobInvalid with every problem found."""
    return bound(JobIn).check(document)


def job_document(job: Job) -> dict:
    """The submission a stored job was made from, as JobIn reads it: what "Submit a copy"
    fills the form with. ``job_parse(job_document(job))`` is the job again."""
    shape = kind_shape(job.kind)
    document: dict = {}
    for field in FIELDS:
        if field.of_kind and getattr(shape, field.of_kind) != field.name:
            continue  # the other kind's
        value = field.stored(job)
        if value or not field.omit_empty:
            document[field.name] = value
    return document


@cache
def writer(serializer: type[serializers.Serializer]) -> Callable[[object], dict]:
    """The serializer's answer for one object, written by ``plain_writer``."""
    return plain_writer(bound(serializer))


class JobBatchIn(serializers.Serializer):
    """The body of POST /api/v1/jobs/batch/: each job read as JobIn reads it."""

    class Meta:
        ref_name = "JobBatch"

    jobs = JobIn(many=True)


class JobPriorityIn(Reader):
    """The body of PATCH /api/v1/jobs/{id}/: a job's priority is all that changes."""

    class Meta:
        ref_name = "JobPriority"

    priority = priority_field()

    def read(self, data, errors, key=""):
        if not isinstance(data, Mapping):
            refuse(errors, path(key, "body"), _("must be a JSON object"))
            return INVALID
        for name in sorted(set(data) - set(self.fields))[:1]:
            refuse(errors, path(key, name), _("cannot be changed; only priority can"))
        return read_field(
            self.fields["priority"], data.get("priority", empty), errors, key, "priority"
        )


def priority_read(value: object) -> int:
    """``value`` read as a job's priority by its declared field, or JobInvalid naming
    ``priority``: the check every service that sets a priority makes, worded as the API's."""
    return bound(JobPriorityIn).check({"priority": value})
