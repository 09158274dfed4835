"""The Kubernetes objects a team already has, kept as they are: the submitted object is the job.

``POST /api/v1/jobs/`` takes, besides Caldera's own document, a KubeRay ``RayJob``, a
Kubeflow ``PyTorchJob`` or a Volcano ``Job`` (with the ``ray`` or ``pytorch`` plugin, or
none), alone or with its ConfigMaps: in a ``v1`` ``List``, or as several YAML documents, as
``kubectl apply -f`` takes a file. ``read_body`` reads such a body:

- every object by its kind's schema (``kube.schema``: the CRD, the client's models), every
  problem by its path; a field the schema does not declare is kept and said (the API server
  drops it), not refused;
- its pods counted as Kubernetes counts them (``kube.pods``): the head or master and each
  group of workers, a Ray group that autoscales at its ``minReplicas``, KubeRay's
  autoscaler beside the head;
- what no tenant may get through Caldera refused by path: Caldera's own keys, a ``suspend``
  that would start it before its queue does, another priority class than the queue's.

``native_placed`` then puts the job in its queue: the namespace and the places that name a
Volcano or Kueue queue become the leaf's and the queue's. When the caller named the queue
(``?queue=``), whatever else the file said there is replaced and each replacement listed;
otherwise they must agree with it. It checks every pod template against the Pod Security
Standards and the leaf's ServiceAccounts. Nothing else of the team's object is dropped or
changed: at admission Caldera creates exactly it, with only its own additions
(``jobs.cluster.manifests.objects``).
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, TypeGuard

from django.conf import settings
from django.utils.translation import gettext

from jobs.cluster.manifests.common import OBJECT_NAME_MAX
from jobs.cluster.manifests.objects import (
    CALDERA_KEYS,
    CONFIG_MAP,
    LIST,
    QUEUE_LABELS,
    RAY_CLUSTER,
    READ_ANNOTATIONS,
    VOLCANO_QUEUE,
    JobKind,
    job_kind,
    pod_templates,
    priority_class_fields,
    queue_fields,
    suspend_path,
    value_at,
)
from jobs.cluster.spec import AUTOSCALER_RESOURCES
from jobs.document.validation import DNS_LABEL, NAME_MAX, JobInvalid
from kube import pod_security, schema
from kube.pods import PodUnreadable, pod_request
from kube.quantity import MAX_UNITS, PODS, ResourceList, add, format_resources, parse_resources
from kube.scheduling import Placement
from queues.phrases import in_language

Path = tuple[str | int, ...]

# What a server writes into an object, not a person: left out of what is kept (an object
# read back from a cluster may be sent again), and said.
SERVER_WRITTEN = (
    "uid", "resourceVersion", "generation", "creationTimestamp", "managedFields", "selfLink",
    "deletionTimestamp", "deletionGracePeriodSeconds", "ownerReferences",
)  # fmt: skip
MAX_OBJECTS = 50  # a job and its ConfigMaps (and the Volcano Queue of a sample)
# How long an operator must keep a finished job's object, so that Caldera reads how it
# ended before it goes (a sync reads it at once, through the watch; this leaves room for a
# cluster that was away): one deleted sooner would look lost, and be created again.
FINISHED_KEPT_SECONDS = 300


def is_manifest(body: object) -> TypeGuard[Mapping]:
    """Whether a body is a Kubernetes object rather than Caldera's job document."""
    return isinstance(body, Mapping) and "apiVersion" in body and "kind" in body


render = schema.render


@dataclass
class Group:
    """One kind of pod of the job: its name, how many of it the gang starts, what each asks."""

    name: str
    replicas: int
    request: ResourceList
    at: str  # the path of its pod template in the body
    placement: Placement = Placement()  # where its pods may run


@dataclass
class NativeJob:
    """A body read: the objects kept (the job's first, then its ConfigMaps, each as sent
    but what a server writes), where each was in the body, and what the job is made of."""

    objects: list[dict[str, Any]]
    at: list[str]  # "" for a lone object, "items[2]" for one of a List
    kind: JobKind
    name: str  # metadata.name, or generateName without its dash
    generated: bool  # named by generateName: Caldera adds the job's id
    namespace: str  # metadata.namespace of the job, or ""
    queue: str = ""  # the queue the object names, if it does
    groups: list[Group] = field(default_factory=list)  # the head or master first
    annotations: dict[str, Any] = field(default_factory=dict)  # READ_ANNOTATIONS given
    image: str = ""
    launch: str = ""  # the entrypoint or command, as the job's pages show it
    dropped: dict[str, dict[str, Any]] = field(default_factory=dict)  # path -> from/to
    # What the cluster would not do as sent, by path: a field its schema does not declare
    # (the API server drops it), a mount of a volume the pod does not declare (the API
    # server refuses the pod). Said, not refused: the object is the team's.
    warnings: dict[str, list[str]] = field(default_factory=dict)
    # What its pods and the fence refuse, by path: answered with the queue's refusals
    # (``jobs.services``), every problem of the body at once.
    problems: dict[str, list[str]] = field(default_factory=dict)
    where: dict[str, str] = field(default_factory=dict)  # document key -> body path

    def place(self, key: str) -> str:
        """The body's path for a refusal's ``key`` (``queue``, ``namespace``, ``head``,
        ``workers[1]``); the key itself when the body has no part for it."""
        probe = key
        while probe:
            if probe in self.where:
                return self.where[probe] + key[len(probe) :]
            cut = max(probe.rfind("."), probe.rfind("["))
            probe = probe[:cut] if cut > 0 else ""
        return key

    @contextmanager
    def paths(self) -> Iterator[None]:
        """A refusal raised inside names the body's paths instead of the document's."""
        try:
            yield
        except JobInvalid as invalid:
            errors: dict[str, list[str]] = {}
            for key, reasons in invalid.errors.items():
                errors.setdefault(self.place(key), []).extend(reasons)
            raise JobInvalid(errors) from None

    @property
    def job(self) -> dict[str, Any]:
        return self.objects[0]

    def path(self, index: int, where: Path) -> str:
        """``where`` in the kept object ``index`` as the body names it."""
        inner = render(where)
        prefix = self.at[index]
        if not prefix:
            return inner or "body"
        return f"{prefix}.{inner}" if inner and not inner.startswith("[") else prefix + inner


def _say(errors: dict[str, list[str]], where: str, reason: str) -> None:
    errors.setdefault(where, []).append(in_language(reason))


def read_body(body: Mapping) -> NativeJob:
    """The job a body describes, kept as sent, or JobInvalid naming every problem of it by
    its path: the body's shape, every object's schema, the fence's rules."""
    errors: dict[str, list[str]] = {}
    if (body.get("apiVersion"), body.get("kind")) == LIST:
        items = body.get("items")
        if not isinstance(items, list):
            raise JobInvalid({"items": gettext("must be a list of objects")})
        for key in sorted(set(body) - {"apiVersion", "kind", "items", "metadata"}):
            _say(errors, key, gettext("not supported in a List"))
        entries = [(f"items[{index}]", item) for index, item in enumerate(items)]
    else:
        entries = [("", body)]
    if len(entries) > MAX_OBJECTS:
        raise JobInvalid(
            {"items": gettext("holds %(count)s objects; a job comes with at most %(most)s")
             % {"count": len(entries), "most": MAX_OBJECTS}}
        )  # fmt: skip
    jobs, config_maps, queues = [], [], []
    for at, item in entries:
        prefix = f"{at}." if at else ""
        if not is_manifest(item):
            _say(
                errors,
                at or "body",
                gettext("must be a Kubernetes object with apiVersion and kind"),
            )
            continue
        key = (item.get("apiVersion"), item.get("kind"))
        if job_kind(item) is not None:
            jobs.append((at, item))
        elif key == RAY_CLUSTER:
            _say(
                errors,
                f"{prefix}kind",
                gettext(
                    "a RayCluster runs until it is deleted, and Caldera queues jobs that end: "
                    "send a RayJob, whose rayClusterSpec is this RayCluster's spec"
                ),
            )
        elif key == CONFIG_MAP:
            config_maps.append((at, item))
        elif key == VOLCANO_QUEUE:
            queues.append((at, item))
        else:
            _say(
                errors,
                f"{prefix}kind",
                gettext(
                    "Caldera runs a RayJob (ray.io/v1), a PyTorchJob (kubeflow.org/v1) or a "
                    "Volcano Job (batch.volcano.sh/v1alpha1), with the ConfigMaps it mounts; "
                    "not %(version)s %(kind)s"
                )
                % {"version": key[0], "kind": key[1]},
            )
    if not jobs:
        if not errors:
            _say(
                errors,
                "items" if len(entries) > 1 or entries[0][0] else "kind",
                gettext("holds no job: a RayJob, a PyTorchJob or a Volcano Job"),
            )
        raise JobInvalid(errors)
    for at, _item in jobs[1:]:
        _say(
            errors,
            at,
            gettext("a second job: send one job a request (POST /jobs/batch/ takes many)"),
        )
    kept = [jobs[0], *config_maps]
    objects = [_kept(item) for _, item in kept]
    native = NativeJob(
        objects=objects,
        at=[at for at, _ in kept],
        kind=job_kind(jobs[0][1]),  # type: ignore[arg-type]
        name="",
        generated=False,
        namespace="",
    )
    native.dropped = {
        at: {
            "from": f"{item.get('apiVersion')} Queue {(item.get('metadata') or {}).get('name')}",
            "to": None,
        }
        for at, item in queues
    }
    for index, ((_, item), obj) in enumerate(zip(kept, objects, strict=True)):
        for name in SERVER_WRITTEN:
            if name in (item.get("metadata") or {}):
                native.dropped[native.path(index, ("metadata", name))] = {"from": "...", "to": None}
        if "status" in item:
            native.dropped[native.path(index, ("status",))] = {"from": "...", "to": None}
        checked = schema.object_check(obj)
        for where, reasons in checked.problems.items():
            for reason in reasons:
                _say(errors, _under(native.at[index], where), reason)
        for where, reasons in checked.unknown.items():
            native.warnings[_under(native.at[index], where)] = [in_language(r) for r in reasons]
    if errors:
        raise JobInvalid(errors)
    _metadata(native, native.problems)
    _fence(native, native.problems)
    _pods(native, native.problems)
    return native


def _under(prefix: str, where: str) -> str:
    if not prefix:
        return where
    return prefix if where == "body" else f"{prefix}.{where}"


def _kept(item: Mapping) -> dict[str, Any]:
    """The object as sent, but what a server writes (its status, uid, resourceVersion...)."""
    obj = copy.deepcopy(dict(item))
    obj.pop("status", None)
    metadata = obj.get("metadata")
    if isinstance(metadata, dict):
        for name in SERVER_WRITTEN:
            metadata.pop(name, None)
    return obj


def _metadata(native: NativeJob, errors: dict[str, list[str]]) -> None:
    """The job's name (its ``generateName`` without the dash names it too: Caldera adds the
    job's id), namespace, the queue its fields name, and the annotations Caldera reads."""
    metadata = native.job.get("metadata") or {}
    name, generated = metadata.get("name"), metadata.get("generateName")
    at = ("metadata", "name")
    if not name and isinstance(generated, str):
        native.name, native.generated, at = (
            generated.rstrip("-"),
            True,
            ("metadata", "generateName"),
        )
    elif isinstance(name, str):
        native.name = name
    else:
        _say(errors, native.path(0, at), gettext("is required: the job's name"))
    native.where["name"] = native.path(0, at)
    limit = NAME_MAX if native.generated else OBJECT_NAME_MAX
    if native.name and (not DNS_LABEL.match(native.name) or len(native.name) > limit):
        _say(
            errors,
            native.path(0, at),
            gettext(
                "%(name)s must be a DNS-1123 label of at most %(limit)s characters "
                "(lowercase letters, digits and '-', starting and ending with a letter or digit)"
            )
            % {"name": repr(native.name), "limit": limit},
        )
    native.namespace = metadata.get("namespace") or ""
    native.where["namespace"] = native.path(0, ("metadata", "namespace"))
    annotations = metadata.get("annotations") or {}
    for key in READ_ANNOTATIONS:
        if key in annotations:
            native.annotations[key] = annotations[key]
            native.where[READ_ANNOTATIONS[key]] = native.path(0, ("metadata", "annotations", key))
    named = [(where, value) for where, value in queue_fields(native.job) if value]
    if named:
        (first, queue), *others = named
        for where, other in others:
            if other != queue:
                _say(
                    errors,
                    native.path(0, where),
                    gettext("names another queue than %(first)s (%(queue)s)")
                    % {"first": native.path(0, first), "queue": queue},
                )
        native.queue = str(queue)
        native.where["queue"] = native.path(0, first)


def _fence(native: NativeJob, errors: dict[str, list[str]]) -> None:
    """What the team may not decide: Caldera's own keys, an early start, the priority class."""
    for index, obj in enumerate(native.objects):
        for where, key in _metadata_keys(obj, index == 0):
            if key.startswith(CALDERA_KEYS):
                _say(
                    errors,
                    native.path(index, where),
                    gettext(
                        "Caldera's own key: it writes it on the objects it creates; leave it out"
                    ),
                )
    if native.kind.runtime not in settings.CLUSTER_RUNTIMES:
        _say(
            errors,
            native.path(0, ("kind",)),
            gettext("this cluster runs no %(kind)s objects (CLUSTER_RUNTIMES is %(runtimes)s)")
            % {"kind": native.job.get("kind"), "runtimes": ",".join(settings.CLUSTER_RUNTIMES)},
        )
    suspend = suspend_path(native.kind)
    if (
        settings.CLUSTER_GATE == "suspend"
        and native.kind.runtime == "kuberay"
        and value_at(native.job, ("spec", "shutdownAfterJobFinishes")) is not True
    ):
        _say(
            errors,
            native.path(0, ("spec", "shutdownAfterJobFinishes")),
            gettext(
                "must be true here: this cluster's jobs wait in it suspended (CLUSTER_GATE="
                "suspend), and KubeRay suspends only a RayJob that shuts its cluster down"
            ),
        )
    for where, _template in pod_templates(native.job, native.kind, every=True):
        template = value_at(native.job, where)
        if isinstance(template, Mapping):
            for path, reasons in pod_security.violations(template, where).items():
                for reason in reasons:
                    _say(errors, _under(native.at[0], path), reason)
    for where, seconds in _self_deletions(native):
        if isinstance(seconds, int) and seconds < FINISHED_KEPT_SECONDS:
            _say(
                errors,
                native.path(0, where),
                gettext(
                    "must be at least %(seconds)s: the operator would delete the finished job "
                    "before Caldera reads how it ended (Caldera removes a finished job's "
                    "objects itself)"
                )
                % {"seconds": FINISHED_KEPT_SECONDS},
            )
    if suspend is not None and value_at(native.job, suspend) is False:
        _say(
            errors,
            native.path(0, suspend),
            gettext("Caldera releases the job when its queue admits it; leave suspend out or true"),
        )


def _self_deletions(native: NativeJob) -> Iterator[tuple[Path, Any]]:
    """The places where the team asks the operator to delete the job object itself once it
    has finished, and after how many seconds: a PyTorchJob's or Volcano Job's
    ``ttlSecondsAfterFinished``, a RayJob's ``deletionStrategy`` that deletes itself."""
    job = native.job
    if native.kind.runtime == "kubeflow":
        where: Path = ("spec", "runPolicy", "ttlSecondsAfterFinished")
        if value_at(job, where) is not None:
            yield where, value_at(job, where)
    elif native.kind.runtime == "volcano":
        if value_at(job, ("spec", "ttlSecondsAfterFinished")) is not None:
            yield (
                ("spec", "ttlSecondsAfterFinished"),
                value_at(job, ("spec", "ttlSecondsAfterFinished")),
            )
    else:
        strategy = ("spec", "deletionStrategy")
        ttl = value_at(job, ("spec", "ttlSecondsAfterFinished")) or 0
        for end in ("onSuccess", "onFailure"):
            if value_at(job, (*strategy, end, "policy")) == "DeleteSelf":
                yield (*strategy, end, "policy"), ttl
        rules = value_at(job, (*strategy, "deletionRules"))
        for index, rule in enumerate(rules if isinstance(rules, list) else []):
            if isinstance(rule, Mapping) and rule.get("policy") == "DeleteSelf":
                rule_at = (*strategy, "deletionRules", index)
                yield (
                    (*rule_at, "condition", "ttlSeconds"),
                    value_at(job, (*rule_at, "condition", "ttlSeconds")) or 0,
                )


def _metadata_keys(obj: Mapping, is_job: bool) -> Iterator[tuple[Path, str]]:
    """Every label and annotation key of the object and of its pod templates, with its path;
    the keys a job's metadata may give Caldera (its queue, priority, run time) left out."""
    kind = job_kind(obj)
    places: list[Path] = [("metadata",)]
    if kind is not None:
        places += [(*where, "metadata") for where, _ in pod_templates(obj, kind)]
    for place in places:
        metadata = value_at(obj, place)
        if not isinstance(metadata, Mapping):
            continue
        for part in ("labels", "annotations"):
            keys = metadata.get(part)
            for key in keys if isinstance(keys, Mapping) else []:
                readable = (part == "labels" and key in QUEUE_LABELS) or (
                    part == "annotations" and key in READ_ANNOTATIONS
                )
                if not (is_job and place == ("metadata",) and readable):
                    yield (*place, part, str(key)), str(key)


def _pods(native: NativeJob, errors: dict[str, list[str]]) -> None:
    """Each kind of pod and how many of it the gang starts, counted as Kubernetes counts
    them; the job's image and launch line, as its pages show them."""
    for where, group in pod_templates(native.job, native.kind):
        template = value_at(native.job, where) or {}
        spec = template.get("spec") or {}
        try:
            request = pod_request(spec, (*where, "spec"))
        except PodUnreadable as unreadable:
            for path, reasons in unreadable.problems.items():
                for reason in reasons:
                    _say(errors, _under(native.at[0], path), reason)
            continue
        if group.autoscaler is not None:
            request = add(request, _autoscaler(native.job, group.autoscaler, errors, native))
        native.groups.append(
            Group(
                group.name,
                group.replicas,
                request,
                native.path(0, where),
                Placement.of_pod_spec(spec) if isinstance(spec, Mapping) else Placement(),
            )
        )
        _mounts(native, spec, (*where, "spec"))
        containers = spec.get("containers") or [{}]
        if group.main and not native.image:
            native.image = str(containers[0].get("image") or "")
            native.launch = group.launch or " ".join(
                str(part)
                for part in [
                    *(containers[0].get("command") or []),
                    *(containers[0].get("args") or []),
                ]
            )
    if not native.groups:
        return
    most = settings.JOB_MAX_PODS
    pods = sum(group.replicas for group in native.groups)
    if pods > most:
        _say(
            errors,
            native.path(0, ("spec",)),
            gettext("a job has at most %(most)s pods; this one has %(count)s")
            % {"most": most, "count": pods},
        )
    if len(native.groups) - 1 > settings.JOB_MAX_WORKER_GROUPS:
        _say(
            errors,
            native.path(0, ("spec",)),
            gettext("a job has at most %(most)s worker groups, got %(count)s")
            % {"most": settings.JOB_MAX_WORKER_GROUPS, "count": len(native.groups) - 1},
        )
    for index, kept in enumerate(native.groups):
        if index == 0:  # the document calls it a Ray job's head, a PyTorch job's master
            native.where["head"] = native.where["master"] = kept.at
        else:
            native.where[f"workers[{index - 1}]"] = kept.at


def _mounts(native: NativeJob, spec: Mapping, at: Path) -> None:
    """A container that mounts a volume its pod does not declare: the API server refuses
    such a pod when the operator creates it, so it is said at once."""
    volumes = spec.get("volumes")
    declared = {
        volume.get("name")
        for volume in (volumes if isinstance(volumes, list) else [])
        if isinstance(volume, Mapping)
    }
    for part in ("initContainers", "containers"):
        containers = spec.get(part)
        for index, container in enumerate(containers if isinstance(containers, list) else []):
            mounts = container.get("volumeMounts") if isinstance(container, Mapping) else None
            for number, mount in enumerate(mounts if isinstance(mounts, list) else []):
                name = mount.get("name") if isinstance(mount, Mapping) else None
                if name not in declared:
                    where = native.path(0, (*at, part, index, "volumeMounts", number, "name"))
                    native.warnings.setdefault(where, []).append(
                        gettext(
                            "mounts the volume %(name)s, which this pod does not declare in its "
                            "volumes: the API server will refuse its pods"
                        )
                        % {"name": repr(name)}
                    )


def _autoscaler(job: Mapping, where: Path, errors: dict, native: NativeJob) -> ResourceList:
    """KubeRay's autoscaler container beside the head: its ``autoscalerOptions.resources``,
    or KubeRay's own default."""
    resources = value_at(job, where)
    if not isinstance(resources, Mapping):
        return parse_resources("autoscaler", AUTOSCALER_RESOURCES)
    try:
        return pod_request({"containers": [{"resources": resources}]}, where)
    except PodUnreadable as unreadable:
        for path, reasons in unreadable.problems.items():
            for reason in reasons:
                _say(
                    errors,
                    _under(native.at[0], path.replace(".containers[0].resources", "")),
                    reason,
                )
        return {}


def native_request(native: NativeJob) -> ResourceList:
    """The gang's total: every group's pods times what each asks, and the pods themselves."""
    total: ResourceList = {}
    for group in native.groups:
        total = add(total, group.request, times=group.replicas)
    total = add(total, {PODS: sum(group.replicas for group in native.groups)})
    for resource, units in total.items():
        if units > MAX_UNITS:
            raise JobInvalid(
                {"request": gettext("%(resource)s summed over all pods is too large")
                 % {"resource": resource}}
            )  # fmt: skip
    return {resource: units for resource, units in total.items() if units}


def native_columns(native: NativeJob) -> dict[str, Any]:
    """The job's columns an object gives: its kind and runtime, name, image and launch
    line, its pods (the head or master's request, and each worker group's replicas and
    request, as the pages and the node check read them), the gang's request, and the
    objects themselves."""
    head, *workers = native.groups or [Group("head", 1, {}, "")]
    launch = "command" if native.kind.kind == "pytorch" else "entrypoint"
    columns: dict[str, Any] = {
        "kind": native.kind.kind,
        "runtime": native.kind.runtime,
        "name": native.name[:63],
        "image": native.image[:500],
        "head": {"resources": format_resources(head.request)}
        # A Volcano Job's leading task keeps its name: Volcano labels its pods with it.
        | ({"name": head.name} if native.kind.runtime == "volcano" else {})
        | _placement(head),
        "workers": [
            {
                "name": group.name,
                "replicas": group.replicas,
                "resources": format_resources(group.request),
            }
            | _placement(group)
            for group in workers
        ],
        "request": native_request(native),
        "object_name": "" if native.generated else native.name,
    }
    columns[launch] = native.launch if launch == "entrypoint" else native.launch.split()
    return columns


def _placement(group: Group) -> dict[str, Any]:
    """Where the group's pods may run, kept beside its resources for the node check and the
    simulated cluster; nothing when anywhere."""
    return {"placement": group.placement.as_json()} if group.placement else {}


def native_placed(
    native: NativeJob,
    *,
    namespace: str,
    queue_name: str,
    priority_class: str,
    replace: bool,
    service_accounts: tuple[str, ...] = ("default",),
    level: str = pod_security.BASELINE,
    secrets: tuple[str, ...] | None = None,
) -> dict[str, Any]:
    """The objects as Caldera keeps them for the queue ``queue_name`` whose jobs run in
    ``namespace``: ``{"objects": [...], "replaced": {path: {"from", "to"}}, "warnings":
    {path: [why]}}``. The namespace and the places that name a queue become the queue's:
    with ``replace`` (the caller named the queue) each one that said otherwise is replaced
    and listed; without, one that names another namespace is refused. Every pod template
    is checked against the Pod Security Standards' ``level``, may run only as one of
    ``service_accounts`` and read only the Secrets of ``secrets`` (None: every Secret of the
    namespace); it may name no priority class but the queue's. JobInvalid names every
    problem."""
    errors: dict[str, list[str]] = {}
    objects = copy.deepcopy(native.objects)
    replaced = dict(native.dropped)
    if native.dropped and not replace:
        for place in native.dropped:
            if place.endswith("]"):  # a whole document: a Volcano Queue
                _say(
                    errors,
                    place,
                    gettext(
                        "a Volcano Queue is the quota tree's (Caldera publishes one for each "
                        "leaf); send ?queue= (caldera submit --queue) and the job runs in "
                        "that queue's instead"
                    ),
                )
        replaced = {k: v for k, v in replaced.items() if not k.endswith("]")}
    for index, obj in enumerate(objects):
        metadata = obj.setdefault("metadata", {})
        given = metadata.get("namespace")
        if given and given != namespace:
            place = native.path(index, ("metadata", "namespace"))
            if replace:
                metadata["namespace"] = namespace
                replaced[place] = {"from": given, "to": namespace}
            else:
                _say(
                    errors,
                    place,
                    gettext(
                        "the queue runs its jobs in the namespace %(namespace)s; leave it out, "
                        "name that one, or send ?queue= to run it there"
                    )
                    % {"namespace": namespace},
                )
    job = objects[0]
    for where, value in queue_fields(job):
        wanted = None if where[-1] == "kueue.x-k8s.io/queue-name" else queue_name
        if value is not None and value != wanted:
            _set(job, where, wanted)
            replaced[native.path(0, where)] = {"from": value, "to": wanted}
    for where, value in priority_class_fields(job, native.kind):
        if value is not None and value != (priority_class or None):
            _say(
                errors,
                native.path(0, where),
                (
                    gettext("the queue sets the priority class (%(name)s); leave it out")
                    % {"name": priority_class}
                    if priority_class
                    else gettext("the queue sets no priority class; leave it out")
                ),
            )
    for where, _group in pod_templates(job, native.kind, every=True):
        template = value_at(job, where)
        if not isinstance(template, Mapping):
            continue
        checked = pod_security.violations(template, where, level, beyond=pod_security.BASELINE)
        for path, reasons in checked.items():
            for reason in reasons:
                _say(errors, _under(native.at[0], path), reason)
        spec = template["spec"] if isinstance(template.get("spec"), Mapping) else {}
        if secrets is not None:
            for reads, secret in secret_references(spec, (*where, "spec")):
                if secret not in secrets:
                    _say(errors, native.path(0, reads), secret_refused(secret, secrets))
        for name in ("serviceAccountName", "serviceAccount"):
            account = spec.get(name)
            if account is not None and account not in service_accounts:
                _say(
                    errors,
                    native.path(0, (*where, "spec", name)),
                    gettext(
                        "the queue's pods run as %(allowed)s; Caldera creates them and may not "
                        "lend them another ServiceAccount"
                    )
                    % {"allowed": ", ".join(service_accounts)},
                )
    if errors:
        raise JobInvalid(errors)
    return {"objects": objects, "replaced": replaced, "warnings": native.warnings}


def secret_refused(secret: str, allowed: tuple[str, ...]) -> str:
    """Why a pod of a leaf whose Secrets are ``allowed`` may not read ``secret``."""
    return gettext(
        "the queue's pods may read only the Secrets %(allowed)s, not %(secret)s (the quota "
        "tree's pods.secrets)"
    ) % {"allowed": ", ".join(allowed) or "(none)", "secret": secret}


def secret_references(spec: Mapping, at: Path) -> Iterator[tuple[Path, str]]:
    """Every Secret a pod reads, with where it names it: a volume's, a projected volume's
    sources', a container's variables (``valueFrom.secretKeyRef``, ``envFrom.secretRef``),
    and the pull secrets of its images."""
    volumes = spec.get("volumes")
    for index, volume in enumerate(volumes if isinstance(volumes, list) else []):
        if not isinstance(volume, Mapping):
            continue
        name = value_at(volume, ("secret", "secretName"))
        if isinstance(name, str):
            yield (*at, "volumes", index, "secret", "secretName"), name
        sources = value_at(volume, ("projected", "sources"))
        for number, source in enumerate(sources if isinstance(sources, list) else []):
            name = value_at(source, ("secret", "name"))
            if isinstance(name, str):
                yield (
                    (*at, "volumes", index, "projected", "sources", number, "secret", "name"),
                    name,
                )
    for part in ("initContainers", "containers", "ephemeralContainers"):
        containers = spec.get(part)
        for index, container in enumerate(containers if isinstance(containers, list) else []):
            env = value_at(container, ("env",))
            for number, entry in enumerate(env if isinstance(env, list) else []):
                name = value_at(entry, ("valueFrom", "secretKeyRef", "name"))
                if isinstance(name, str):
                    yield (
                        (*at, part, index, "env", number, "valueFrom", "secretKeyRef", "name"),
                        name,
                    )
            sources = value_at(container, ("envFrom",))
            for number, source in enumerate(sources if isinstance(sources, list) else []):
                name = value_at(source, ("secretRef", "name"))
                if isinstance(name, str):
                    yield (*at, part, index, "envFrom", number, "secretRef", "name"), name
    pulls = spec.get("imagePullSecrets")
    for index, pull in enumerate(pulls if isinstance(pulls, list) else []):
        name = value_at(pull, ("name",))
        if isinstance(name, str):
            yield (*at, "imagePullSecrets", index, "name"), name


def _set(obj: Any, where: Path, value: Any) -> None:
    """``value`` at ``where`` (None removes the key)."""
    *parents, last = where
    for part in parents:
        obj = obj[part]
    if value is None:
        obj.pop(last, None)
    else:
        obj[last] = value


def number_text(text: object) -> object:
    """An annotation's number as the document's: "2" -> 2, "1.5" -> 1.5; anything else as
    it is, for its reader to refuse with its reason."""
    if isinstance(text, str):
        for kind in (int, float):
            try:
                return kind(text)
            except ValueError:
                continue
    return text
