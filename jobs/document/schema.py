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

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cache, cached_property
from typing import TypeVar, cast

from django.conf import settings
from django.core.validators import RegexValidator
from rest_framework import serializers
from rest_framework.fields import empty

from jobs.cluster.spec import AUTOSCALER_RESOURCES
from jobs.document.fields import (
    INVALID,
    RESOURCES_EXAMPLE,
    Choice,
    Command,
    Env,
    ImageReference,
    Integer,
    Number,
    Pip,
    PodResources,
    Reader,
    Text,
    path,
    plain_writer,
    read_field,
    refuse,
    unknown_fields,
)
from jobs.document.validation import (
    MAX_REPLICAS,
    MAX_RUN_SECONDS,
    MAX_SCRIPT_BYTES,
    MIN_RUN_SECONDS,
    NAME_MAX,
    PRIORITY_RANGE,
    RUNTIMES,
    autoscales,
    pod_count,
    pods_request,
    runtimes_offered,
)
from jobs.models import KINDS, Job, kind_shape
from kube.quantity import (
    MAX_UNITS,
    ResourceList,
    add,
    parse_resources,
)

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_FILENAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
GROUP_NAME_MAX = 30


# The job document


def priority_field(**kwargs) -> Integer:
    """A job's priority as every input reads it (the submitted document, a change of
    priority on a page or in the API, a bulk action): an integer within PRIORITY_RANGE."""
    return Integer(min_value=PRIORITY_RANGE[0], max_value=PRIORITY_RANGE[1], **kwargs)


class PodIn(Reader):
    """The head of a Ray job or the master of a PyTorch job: one pod."""

    class Meta:
        ref_name = "Pod"

    resources = PodResources()

    def read(self, data, errors, key=""):
        if not isinstance(data, Mapping):
            refuse(errors, key or "body", f'is required: {{"resources": {RESOURCES_EXAMPLE}}}')
            return INVALID
        unknown_fields(data, self.fields, key, errors, first_only=True)
        return read_field(self.fields["resources"], data.get("resources"), errors, key, "resources")


class WorkerGroupIn(Reader):
    """One entry of ``workers``: a set of identical pods."""

    class Meta:
        ref_name = "WorkerGroup"

    name = serializers.CharField(
        required=False,
        max_length=GROUP_NAME_MAX,
        help_text="a DNS-1123 label; default group-<i> (Ray), worker (PyTorch)",
    )
    replicas = Integer(default=1, min_value=0, max_value=MAX_REPLICAS, strings=False, nulls=False)
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
    resources = PodResources()

    def read(self, data, errors, key="", *, index: int = 0, kind: str = "", runtime: str = ""):
        """The group as a job holds it (``{"name", "replicas", "resources"}`` and
        ``max_replicas`` when given) and its pods' Resources; INVALID when it is not an
        object. A default name follows the kind, and autoscaling the runtime."""
        if not isinstance(data, Mapping):
            refuse(errors, key or "body", "must be an object with name, replicas and resources")
            return INVALID
        unknown_fields(data, self.fields, key, errors, first_only=True)
        name = data.get("name") or ("worker" if kind == Job.Kind.PYTORCH else f"group-{index}")
        if not isinstance(name, str) or not _DNS_LABEL.match(name) or len(name) > GROUP_NAME_MAX:
            refuse(
                errors,
                path(key, "name"),
                f"{name!r} must be a DNS-1123 label of at most {GROUP_NAME_MAX} characters",
            )
        replicas = read_field(
            self.fields["replicas"], data.get("replicas", empty), errors, key, "replicas"
        )
        max_replicas = self._max_replicas(
            data.get("max_replicas"),
            None if replicas is INVALID else replicas,
            path(key, "max_replicas"),
            errors,
            kind,
            runtime,
        )
        resources = read_field(
            self.fields["resources"], data.get("resources"), errors, key, "resources"
        )
        group = {
            "name": name,
            "replicas": 0 if replicas is INVALID else replicas,
            "resources": {} if resources is INVALID else resources.given,
        }
        if max_replicas is not None:
            group["max_replicas"] = max_replicas
        return group, ({} if resources is INVALID else resources.units)

    @staticmethod
    def _max_replicas(value, replicas, key, errors, kind, runtime) -> int | None:
        """A group's autoscaling maximum, or None (absent, or refused with its reason).
        ``replicas`` is the group's minimum, None when it was refused itself."""
        if value is None:
            return None
        if kind != Job.Kind.RAY or runtime != Job.Runtime.KUBERAY:
            reason = "autoscaling needs Ray on KubeRay"
            if runtime == Job.Runtime.VOLCANO:
                reason += "; a Volcano Job has a fixed number of pods"
            elif kind == Job.Kind.PYTORCH:
                reason += "; a PyTorchJob has a fixed number of pods"
            refuse(errors, key, reason)
            return None
        if isinstance(value, bool) or not isinstance(value, int):
            refuse(errors, key, f"must be an integer, got {value!r}")
            return None
        low = 0 if replicas is None else replicas
        if not low <= value <= MAX_REPLICAS:
            least = "0" if replicas is None else f"replicas ({replicas})"
            refuse(errors, key, f"must be between {least} and {MAX_REPLICAS}, got {value}")
            return None
        return value


@dataclass
class JobDraft:
    """A checked job document, before it has a queue and an owner (``services.job_submit``)."""

    queue: str
    kind: str
    runtime: str
    name: str
    image: str
    head: dict
    workers: list[dict]
    # Every pod of the gang, summed: an autoscaling worker group counts at its replicas
    # (KubeRay's minReplicas), as docs/architecture.md section 4 and kube-queue count it;
    # ``pods`` counts the pods themselves.
    request: ResourceList
    entrypoint: str = ""
    command: list[str] = field(default_factory=list)
    script: str = ""
    script_filename: str = "main.py"
    priority: int = 0
    run_seconds: float | None = None  # not given: the job declares no expected run time
    pip: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)


class JobIn(Reader):
    """A job as it is submitted: ``POST /api/v1/jobs/``, each entry of a batch, the form.

    Ray jobs have a ``head`` and an ``entrypoint``; PyTorch jobs a ``master`` and a
    ``command``. The fields of the other kind are not read; given, they are refused with
    the reason. Reads as a JobDraft.
    """

    class Meta:
        ref_name = "JobSubmission"

    queue = Text(required=True, help_text="leaf path (root/algorithm/video) or queue name")
    kind = Choice(Job.Kind.choices, required=True)
    runtime = Choice(
        Job.Runtime.choices,
        check=False,
        help_text="default: the first runtime this cluster offers for the kind",
    )
    name = Text(
        required=True,
        max_length=NAME_MAX,
        validators=[RegexValidator(_DNS_LABEL.pattern)],  # declared; read() checks it
        help_text=f"lowercase letters, digits and '-', at most {NAME_MAX} characters",
    )
    image = ImageReference(
        required=True, help_text="[registry[:port]/]path[:tag][@digest]: rayproject/ray:2.36.1"
    )
    entrypoint = Text(limit=10_000, help_text="Ray: the command to run")
    command = Command(help_text="PyTorch: a list of arguments or one shell-style string")
    script = Text(limit=MAX_SCRIPT_BYTES, strip=False, help_text="mounted as a ConfigMap")
    script_filename = Text(
        limit=100,
        max_length=100,
        default="main.py",
        validators=[RegexValidator(_FILENAME.pattern)],  # declared; read() checks it
    )
    head = PodIn(required=False, help_text="Ray: the head pod")
    master = PodIn(required=False, help_text="PyTorch: the master pod")
    # many=True hands max_length to the ListSerializer; the stub's __init__ does not list it.
    workers = WorkerGroupIn(  # type: ignore[call-arg]
        many=True,
        required=False,
        max_length=settings.JOB_MAX_WORKER_GROUPS,
        help_text=f"at most {settings.JOB_MAX_WORKER_GROUPS} groups (JOB_MAX_WORKER_GROUPS), "
        f"and at most {settings.JOB_MAX_PODS} pods in all (JOB_MAX_PODS): the head or master "
        "and every worker, an autoscaling group at its max_replicas",
    )
    priority = priority_field(
        default=0, help_text="higher runs first; members submit at 0 or below"
    )
    run_seconds = Number(
        default=None,
        allow_null=True,
        min_value=MIN_RUN_SECONDS,
        max_value=MAX_RUN_SECONDS,
        help_text="the expected run time in seconds, if known: estimates of when jobs start "
        "use it (else the median of the queue's recent jobs), and the simulated cluster runs "
        "the job this long (60 s when not given)",
    )
    pip = Pip(
        help_text='Ray on kuberay: requirements for the runtime environment, ["torch==2.4.0"]'
    )
    env = Env(help_text='{"NAME": "value"}')

    @cached_property
    def _plain_fields(self) -> dict[str, serializers.Field]:
        """The fields read as they are. The kind's own (``entrypoint`` or ``command``,
        ``head`` or ``master``) are read once the kind is known, and the other kind's
        refused by name; ``workers`` is read group by group."""
        kind_fields = {f for shape in KINDS.values() for f in (shape.head, shape.launch)}
        kind_fields.add("workers")
        return {name: f for name, f in self.fields.items() if name not in kind_fields}

    def read(self, data, errors, key=""):
        if not isinstance(data, Mapping):
            refuse(errors, path(key, "body"), "must be a JSON object")
            return INVALID
        unknown_fields(data, self.fields, key, errors)
        fields = self.fields
        values = {
            name: read_field(reader, data.get(name, empty), errors, key, name)
            for name, reader in self._plain_fields.items()
        }
        kind = values["kind"] if values["kind"] is not INVALID else ""
        self._runtime(kind, values, path(key, "runtime"), errors)
        name = values["name"]
        if name and name is not INVALID and (not _DNS_LABEL.match(name) or len(name) > NAME_MAX):
            refuse(
                errors,
                path(key, "name"),
                f"{name!r} must be a DNS-1123 label of at most {NAME_MAX} characters "
                "(lowercase letters, digits and '-', starting and ending with a letter or digit)",
            )
        filename = values["script_filename"]
        if filename is not INVALID and not _FILENAME.match(filename):
            refuse(errors, path(key, "script_filename"), f"{filename!r} is not a plain file name")
        script = values["script"] if values["script"] is not INVALID else ""

        entrypoint, command = "", []
        shape = kind_shape(kind)
        if kind in KINDS:
            launch = read_field(
                fields[shape.launch], data.get(shape.launch), errors, key, shape.launch
            )
            if not launch and not script:
                refuse(errors, path(key, shape.launch), "is required (or give a script to run)")
            entrypoint, command = (launch, []) if shape.launch == "entrypoint" else ("", launch)
            for other in shape.others():
                if data.get(other.launch):
                    refuse(
                        errors,
                        path(key, other.launch),
                        f"{shape.name} jobs take {shape.launch_words}, not {other.launch_words}",
                    )
                if data.get(other.head) is not None:
                    refuse(
                        errors,
                        path(key, other.head),
                        f"{shape.name} jobs have {shape.head_words}, not {other.head_words}",
                    )

        runtime = values["runtime"]
        head_field = shape.head
        head = read_field(fields[head_field], data.get(head_field), errors, key, head_field)
        workers, request = self._workers(
            data.get("workers"), path(key, "workers"), errors, kind, runtime
        )
        if head is not INVALID:
            request = add(request, head.units)
        request = add(request, pods_request(workers))
        if autoscales(runtime, workers):
            # KubeRay's autoscaler runs beside the head: part of the gang that starts.
            request = add(request, parse_resources("autoscaler", AUTOSCALER_RESOURCES))
        for resource in sorted(name for name, units in request.items() if units > MAX_UNITS):
            # Usage is summed as bigint in PostgreSQL; no cluster has this much anyway.
            refuse(errors, path(key, "request"), f"{resource} summed over all pods is too large")
        pip = values["pip"]
        if pip and pip is not INVALID and runtime and runtime != Job.Runtime.KUBERAY:
            refuse(
                errors,
                path(key, "pip"),
                f"pip packages go into a Ray runtime environment (runtime kuberay); on {runtime},"
                " install them in the image",
            )
        if errors:
            return INVALID
        return JobDraft(
            queue=values["queue"],
            kind=kind,
            runtime=runtime,
            name=name,
            image=values["image"],
            head={"resources": head.given},
            workers=workers,
            request={name: units for name, units in request.items() if units},
            entrypoint=entrypoint,
            command=command,
            script=script,
            script_filename=filename,
            priority=values["priority"],
            run_seconds=values["run_seconds"],
            pip=pip,
            env=values["env"],
        )

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
                errors, key, f"a {kind} job runs on {', '.join(RUNTIMES[kind])}, not {runtime!r}"
            )
        elif kind in RUNTIMES and runtime not in offered:
            refuse(
                errors,
                key,
                f"this cluster runs {kind} jobs on {', '.join(offered) or 'no runtime'}"
                f", not {runtime!r}",
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
            refuse(errors, key, "must be a list of worker groups")
            return [], {}
        most = settings.JOB_MAX_WORKER_GROUPS
        if len(data) > most:  # refused before any group is read
            refuse(errors, key, f"a job has at most {most} worker groups, got {len(data)}")
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
                    refuse(errors, path(where, "name"), f"{name!r} is used by another worker group")
                names.add(name)  # only a checked name: an object or a list is unhashable
            groups.append(group)
            request = add(request, per_pod, times=group["replicas"])
        pods, most = pod_count(groups, most=True), settings.JOB_MAX_PODS
        if pods > most:
            refuse(
                errors,
                key,
                f"a job has at most {most} pods, its head or master and every worker; this "
                f"one has {pods}"
                + (" at its groups' max_replicas" if autoscales(runtime, groups) else ""),
            )
        if kind == Job.Kind.PYTORCH and len(groups) > 1:
            refuse(errors, key, "a PyTorchJob has one worker group")
        if runtime == Job.Runtime.VOLCANO and len(groups) > 1 and key not in errors:
            refuse(errors, key, "a Volcano Job has one worker task: give one worker group")
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


def job_parse(document: object) -> JobDraft:
    """Check a job document; raise JobInvalid with every problem found."""
    return bound(JobIn).check(document)


def job_document(job: Job) -> dict:
    """The submission a stored job was made from, as JobIn reads it: what "Submit a copy"
    fills the form with. ``job_parse(job_document(job))`` is the job again."""
    shape = kind_shape(job.kind)
    document: dict = {
        "queue": job.queue.node.path,
        "kind": job.kind,
        "runtime": job.runtime,
        "name": job.name,
        "image": job.image,
        shape.head: job.head,
        "workers": job.workers,
        "priority": job.priority,
    }
    document[shape.launch] = getattr(job, shape.launch)
    optional = {
        "script": job.script,
        "script_filename": job.script_filename if job.script else "",
        "pip": job.pip,
        "env": job.env,
        "run_seconds": job.run_seconds,
    }
    return document | {name: value for name, value in optional.items() if value}


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
            refuse(errors, path(key, "body"), "must be a JSON object")
            return INVALID
        for name in sorted(set(data) - set(self.fields))[:1]:
            refuse(errors, path(key, name), "cannot be changed; only priority can")
        return read_field(
            self.fields["priority"], data.get("priority", empty), errors, key, "priority"
        )


def priority_read(value: object) -> int:
    """``value`` read as a job's priority by its declared field, or JobInvalid naming
    ``priority``: the check every service that sets a priority makes, worded as the API's."""
    return bound(JobPriorityIn).check({"priority": value})
