"""The Kubernetes objects a team already has, read as job documents.

``POST /api/v1/jobs/`` takes, besides Caldera's own document, a KubeRay ``RayJob``, a
Kubeflow ``PyTorchJob`` or a Volcano ``Job`` with the ``ray`` or ``pytorch`` plugin (and a
``v1`` ``List`` of one of them with the ``ConfigMap`` holding its script). ``read_manifest``
turns such an object into the document ``JobIn`` reads, keeping where in the object each
field came from, so that every refusal, its own or the services', names the object's path
(``spec.rayClusterSpec.workerGroupSpecs[0].replicas``).

Every part of the object is accounted for: taken into a field of the job, checked to be
what Caldera writes itself (the head's ports, the plugins, the restart policy), decided by
Caldera whatever it says (``DECIDED``), or written by a server rather than a person
(``metadata.uid``, ``status``). Anything else is refused with its path, never dropped:
a job that ran without its volume or its node selector would not be the job that was sent.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, TypeGuard

import yaml
from django.utils.translation import gettext, gettext_noop

from jobs.cluster.manifests import kubeflow, kuberay, volcano
from jobs.cluster.spec import AUTOSCALER_RESOURCES
from jobs.document.validation import JobInvalid
from jobs.models import Job
from kube.quantity import QuantityError, parse_resources

# Where an object may name its queue, in the order they are read: Caldera's own label,
# Volcano's, Kueue's. A Volcano Job's ``spec.queue`` and a PyTorchJob's scheduling queue
# come after them.
QUEUE_LABELS = ("caldera.io/queue", "volcano.sh/queue-name", "kueue.x-k8s.io/queue-name")
# Labels and annotations Caldera writes on the objects it makes: an object read back from
# GET /api/v1/jobs/{id}/manifest/ carries them, and the new job gets its own.
CALDERA_LABELS = ("caldera.io/",)
CALDERA_ANNOTATIONS = ("caldera.io/", "kube-queue/")
# What a server writes into an object, not a person: left out of the reading.
SERVER_WRITTEN = frozenset(
    {"uid", "resourceVersion", "generation", "creationTimestamp", "managedFields", "selfLink"}
)
# The fields of a job no Kubernetes object has, in Caldera's annotations (values are
# strings there, as every annotation's): the expected run time and the priority.
ANNOTATED = {"caldera.io/run-seconds": "run_seconds", "caldera.io/priority": "priority"}
# Parts Caldera decides itself, whatever the object says, and why.
DECIDED = {
    "suspend": "Caldera's admission decides when the job starts",
    "ttlSecondsAfterFinished": "Caldera removes a finished job's objects itself",
}

LIST = ("v1", "List")
RAY_JOB = ("ray.io/v1", "RayJob")
PYTORCH_JOB = ("kubeflow.org/v1", "PyTorchJob")
VOLCANO_JOB = ("batch.volcano.sh/v1alpha1", "Job")

Path = tuple[str | int, ...]


def is_manifest(body: object) -> TypeGuard[Mapping]:
    """Whether a body is a Kubernetes object rather than Caldera's job document."""
    return isinstance(body, Mapping) and "apiVersion" in body and "kind" in body


def render(where: Path) -> str:
    """``("spec", "tasks", 0, "name")`` -> ``spec.tasks[0].name``; a key that is not a
    plain name is quoted as kubectl's JSONPath quotes it: ``metadata.labels['a.b/c']``."""
    text = ""
    for part in where:
        if isinstance(part, int):
            text += f"[{part}]"
        elif part.replace("-", "").replace("_", "").isalnum():
            text += f".{part}" if text else part
        else:
            text += f"['{part}']"
    return text or "body"


@dataclass
class NativeJob:
    """A Kubernetes object read as a job document."""

    document: dict[str, Any]  # what JobIn reads; "queue" only when the object names one
    namespace: str  # metadata.namespace, or ""
    where: dict[str, str] = field(default_factory=dict)  # document path -> object path

    def place(self, key: str) -> str:
        """The object's path for the document's ``key``: its own, or its nearest parent's
        (``head.resources.cpu`` within ``head.resources``); the key itself when the
        document has no part of the object for it (``request`` is the whole job's)."""
        probe = key
        while probe:
            if probe in self.where:
                return self.where[probe] + key[len(probe) :]
            cut = max(probe.rfind("."), probe.rfind("["))
            probe = probe[:cut] if cut > 0 else ""
        return key

    @contextmanager
    def paths(self) -> Iterator[None]:
        """A refusal of the document raised inside names the object's paths instead."""
        try:
            yield
        except JobInvalid as invalid:
            errors: dict[str, list[str]] = {}
            for key, reasons in invalid.errors.items():
                errors.setdefault(self.place(key), []).extend(reasons)
            raise JobInvalid(errors) from None


class _Reading:
    """One object being read: the paths taken (accounted for, with all they hold), the
    paths looked into (``touched``: their parts are accounted for one by one), and the
    refusals."""

    def __init__(self, obj: Mapping):
        self.obj = obj
        self.taken: set[Path] = set()
        self.touched: set[Path] = set()
        self.errors: dict[str, list[str]] = {}
        self.where: dict[str, str] = {}
        self.pods: dict[str, dict[str, Any]] = {}  # a pod's resources, by document key
        self.script_volume: tuple[Mapping, Path] | None = None  # the head's script volume
        self.queue_at: Path = ()  # where the spec names the queue, if it does

    def peek(self, where: Path, default: Any = None) -> Any:
        """The value at ``where`` (``default`` when absent), not taken."""
        value: Any = self.obj
        for part in where:
            if isinstance(part, int):
                if not isinstance(value, list) or part >= len(value):
                    return default
            elif not isinstance(value, Mapping) or part not in value:
                return default
            value = value[part]
        return value

    def get(self, where: Path, default: Any = None) -> Any:
        """The value at ``where`` (``default`` when absent), taken with all it holds."""
        self.taken.add(where)
        return self.peek(where, default)

    def mapping(self, where: Path) -> Mapping:
        """The object at ``where``, or an empty one, looked into: each of its parts is
        taken or refused on its own. Refused when it is not an object."""
        self.touched.add(where)
        value = self.peek(where)
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            self.taken.add(where)
            self.refuse(where, gettext("must be an object"))
            return {}
        return value

    def items(self, where: Path) -> list:
        """The list at ``where``, or an empty one, looked into as ``mapping`` is."""
        self.touched.add(where)
        value = self.peek(where)
        if value is None:
            return []
        if not isinstance(value, list):
            self.taken.add(where)
            self.refuse(where, gettext("must be a list"))
            return []
        return value

    def refuse(self, where: Path, reason: str) -> None:
        self.errors.setdefault(render(where), []).append(reason)

    def expect(self, where: Path, *allowed: Any, reason: str = "") -> None:
        """Taken when absent or one of ``allowed``: what Caldera writes there itself."""
        value = self.get(where)
        if value is not None and value not in allowed:
            wanted = repr(allowed[0])
            for other in allowed[1:]:
                wanted = gettext("%(one)s or %(other)s") % {"one": wanted, "other": repr(other)}
            self.refuse(
                where,
                reason
                or gettext("Caldera writes %(wanted)s here; leave it out") % {"wanted": wanted},
            )

    def maps(self, key: str, where: Path) -> None:
        """The document's ``key`` comes from ``where``."""
        self.where[key] = render(where)

    def leftovers(self) -> None:
        """Refuse every part of the object neither taken nor looked into, at its highest
        path (``...template.spec.volumes``, not each of the volume's fields)."""
        reached = {where[:n] for where in self.taken | self.touched for n in range(len(where) + 1)}

        def walk(value: Any, where: Path) -> None:
            if where in self.taken:
                return
            if where not in reached:
                self.refuse(where, _not_supported(where))
                return
            if isinstance(value, Mapping):
                for key, item in value.items():
                    walk(item, (*where, str(key)))
            elif isinstance(value, list):
                for index, item in enumerate(value):
                    walk(item, (*where, index))

        walk(self.obj, ())


# Why the most common parts Caldera cannot represent are refused, by their last key
# (translated where the refusal is worded).
_WHY_NOT = {
    "volumes": gettext_noop(
        "Caldera mounts the job's script itself (a ConfigMap sent with the job)"
    ),
    "volumeMounts": gettext_noop(
        "Caldera mounts the job's script itself (a ConfigMap sent with the job)"
    ),
    "labels": gettext_noop("Caldera labels the job's objects itself (caldera.io/*)"),
    "annotations": gettext_noop("Caldera annotates the job's objects itself"),
    "nodeSelector": gettext_noop("the quota tree and the scheduler place the pods"),
    "affinity": gettext_noop("the quota tree and the scheduler place the pods"),
    "tolerations": gettext_noop("the quota tree and the scheduler place the pods"),
    "priorityClassName": gettext_noop("the queue sets the priority class"),
    "imagePullPolicy": gettext_noop("the cluster's default pull policy applies"),
}


def _not_supported(where: Path) -> str:
    """ "not supported", with the reason of the nearest part that has one (a label's is
    its ``labels``')."""
    why = next((_WHY_NOT[part] for part in reversed(where) if part in _WHY_NOT), None)
    return (
        gettext("not supported: %(why)s") % {"why": gettext(why)}
        if why
        else gettext("not supported")
    )


def read_body(body: Mapping) -> NativeJob:
    """A job's object, or a ``v1`` ``List`` of it and the ConfigMap holding its script (what
    GET /api/v1/jobs/{id}/manifest/ gives for a job with a script, and what ``caldera
    submit`` sends for a YAML file of both)."""
    if (body.get("apiVersion"), body.get("kind")) != LIST:
        return read_manifest(body)
    items = body.get("items")
    if not isinstance(items, list):
        raise JobInvalid(
            {"items": gettext("must be a list: the job's object and its script's ConfigMap")}
        )
    jobs = [i for i, item in enumerate(items) if is_manifest(item) and item["kind"] != "ConfigMap"]
    scripts = [
        i for i, item in enumerate(items) if is_manifest(item) and item["kind"] == "ConfigMap"
    ]
    errors = {
        f"items[{i}]": [
            gettext("not supported: a List holds one job and the ConfigMap of its script")
        ]
        for i in range(len(items))
        if i not in jobs[:1] + scripts[:1]
    }
    for key in sorted(set(body) - {"apiVersion", "kind", "items", "metadata"}):
        errors[key] = [gettext("not supported")]
    if not jobs:
        errors["items"] = [gettext("holds no job: a RayJob, a PyTorchJob or a Volcano Job")]
    if errors:
        raise JobInvalid(errors)
    at = f"items[{jobs[0]}]."
    script = items[scripts[0]] if scripts else None
    try:
        native = read_manifest(items[jobs[0]], script=script)
    except JobInvalid as invalid:
        raise JobInvalid({at + key: reasons for key, reasons in invalid.errors.items()}) from None
    native.where = {key: at + place for key, place in native.where.items()}
    if script is not None:
        _script_whole(script, native, f"items[{scripts[0]}]")
    return native


def _script_whole(config_map: Mapping, native: NativeJob, at: str) -> None:
    """The ConfigMap sent with a job is its script, whole: mounted by the job, holding
    nothing else."""
    if "script" not in native.document:
        raise JobInvalid(
            {
                at: gettext(
                    "the job does not mount it: a job mounts its script's ConfigMap in its head "
                    "or master pod at the script directory"
                )
            }  # fmt: skip
        )
    errors = {
        f"{at}.data.{key}": [gettext("not supported: the ConfigMap holds the job's script alone")]
        for key in config_map.get("data") or {}
        if key != native.document["script_filename"]
    }
    known = {"apiVersion", "kind", "metadata", "data"}
    errors |= {f"{at}.{key}": [gettext("not supported")] for key in set(config_map) - known}
    metadata = config_map.get("metadata") or {}
    errors |= {
        f"{at}.metadata.{key}": [gettext("not supported")]
        for key in set(metadata) - {"name", "namespace", "labels", "annotations"} - SERVER_WRITTEN
    }
    for part, ours in (("labels", CALDERA_LABELS), ("annotations", CALDERA_ANNOTATIONS)):
        errors |= {
            f"{at}.metadata.{part}['{key}']": [_not_supported((part,))]
            for key in metadata.get(part) or {}
            if not str(key).startswith(ours)
        }
    if errors:
        raise JobInvalid(errors)
    native.where["script"] = f"{at}.data"


def read_manifest(obj: Mapping, *, script: Mapping | None = None) -> NativeJob:
    """The job document ``obj`` describes, or JobInvalid naming each part of it that Caldera
    cannot represent, by its path. ``script``: the ConfigMap sent with it, whose one key a
    pod mounts at the kind's script directory."""
    reading = _Reading(obj)
    version, kind = reading.get(("apiVersion",)), reading.get(("kind",))
    document: dict[str, Any] = {}
    if (version, kind) == RAY_JOB:
        _rayjob(reading, document)
    elif (version, kind) == PYTORCH_JOB:
        _pytorchjob(reading, document)
    elif (version, kind) == VOLCANO_JOB:
        _volcano_job(reading, document)
    else:
        raise JobInvalid(
            {
                "kind": gettext(
                    "Caldera takes a RayJob (ray.io/v1), a PyTorchJob (kubeflow.org/v1) or a "
                    "Volcano Job (batch.volcano.sh/v1alpha1) with the ray or pytorch plugin, "
                    "not %(version)s %(kind)s"
                )
                % {"version": version, "kind": kind}
            }
        )
    _metadata(reading, document)
    _script(reading, document, script)
    reading.leftovers()
    if reading.errors:
        raise JobInvalid(reading.errors)
    namespace = obj.get("metadata", {}).get("namespace") or ""
    return NativeJob(document, namespace, reading.where)


# ---- metadata ----------------------------------------------------------------------------


def _metadata(reading: _Reading, document: dict) -> None:
    """The job's name (``generateName`` without its dash names it too: Caldera adds the
    job's id), the queue its labels name, its run time and priority."""
    meta = ("metadata",)
    reading.mapping(meta)
    name = reading.get((*meta, "name"))
    generated = reading.get((*meta, "generateName"))
    if name is None and isinstance(generated, str):
        document["name"] = generated.rstrip("-")
        reading.maps("name", (*meta, "generateName"))
    else:
        document["name"] = name
        reading.maps("name", (*meta, "name"))
    reading.get((*meta, "namespace"))  # the services check it against the queue's
    reading.maps("namespace", (*meta, "namespace"))
    for key in SERVER_WRITTEN:
        reading.get((*meta, key))
    reading.get(("status",))
    _queue(reading, document)
    annotations = reading.mapping((*meta, "annotations"))
    for annotation, field_name in ANNOTATED.items():
        if annotation in annotations:
            document[field_name] = number_text(annotations[annotation])
            reading.maps(field_name, (*meta, "annotations", annotation))
    _caldera_labels(reading, meta)


_LABELS: Path = ("metadata", "labels")


def _queue(reading: _Reading, document: dict) -> None:
    """The queue the object names: its labels' (``QUEUE_LABELS``, in order), else its
    spec's (read with the kind). Places that name different queues are refused: which one
    was meant cannot be known."""
    named = [
        ((*_LABELS, label), reading.get((*_LABELS, label)))
        for label in QUEUE_LABELS
        if label in reading.mapping(_LABELS)
    ]
    if "queue" in document:
        named.append((reading.queue_at, document["queue"]))
    if not named:
        return
    (first, queue), *others = named
    for where, other in others:
        if other != queue:
            reading.refuse(
                where,
                gettext("names another queue than %(first)s (%(queue)s)")
                % {"first": render(first), "queue": queue},
            )
    document["queue"] = queue
    reading.maps("queue", first)


def _caldera_labels(reading: _Reading, meta: Path) -> None:
    """The labels and annotations Caldera writes itself, taken: the new job gets its own."""
    for part, ours in (("labels", CALDERA_LABELS), ("annotations", CALDERA_ANNOTATIONS)):
        for key in reading.mapping((*meta, part)):
            if str(key).startswith(ours):
                reading.get((*meta, part, str(key)))


# ---- pods ----------------------------------------------------------------------------


@dataclass
class _Pod:
    """Where one pod template is in the object, and what the document takes of it."""

    template: Path
    field: str  # "head", "master" or "workers[i]": the document's pod
    container_name: str  # the name Caldera gives its container


def _container(reading: _Reading, pod: _Pod) -> tuple[Path, Mapping]:
    """The pod's one container, with the parts every kind reads the same way taken."""
    spec = (*pod.template, "spec")
    reading.get((*pod.template, "metadata", "name"))  # a template's name names nothing
    reading.mapping((*pod.template, "metadata"))
    _caldera_labels(reading, (*pod.template, "metadata"))
    containers = reading.items((*spec, "containers"))
    if not containers:
        reading.refuse((*spec, "containers"), gettext("is required: one container"))
        return (*spec, "containers", 0), {}
    for index in range(1, len(containers)):
        reading.refuse(
            (*spec, "containers", index), gettext("not supported: Caldera runs one container a pod")
        )
    at = (*spec, "containers", 0)
    container = reading.mapping(at)
    reading.expect((*at, "name"), pod.container_name)
    _resources(reading, (*at, "resources"), pod.field)
    return at, container


def _resources(reading: _Reading, at: Path, key: str) -> None:
    """A container's resources as a pod's: its requests, or its limits where it requests
    nothing (as Kubernetes defaults them). Caldera gives each pod limits equal to its
    requests, so a limit above the request is refused rather than lowered."""
    resources = reading.mapping(at)
    requests = reading.mapping((*at, "requests"))
    limits = reading.mapping((*at, "limits"))
    for part, quantities in (("requests", requests), ("limits", limits)):
        for name in quantities:
            reading.get((*at, part, str(name)))
    given: dict[str, Any] = {}
    for name, quantity in {**limits, **requests}.items():
        given[name] = str(quantity) if isinstance(quantity, int | float) else quantity
    for name, limit in limits.items():
        if name in requests and _units(name, limit) != _units(name, requests[name]):
            reading.refuse(
                (*at, "limits", name),
                gettext(
                    "differs from requests (%(requests)s): Caldera gives each pod its requests "
                    "as limits too; give one quantity"
                )
                % {"requests": requests[name]},
            )
    document_key = f"{key}.resources"
    reading.maps(document_key, (*at, "requests" if requests else "limits"))
    for name in given:
        reading.maps(
            f"{document_key}.{name}", (*at, "requests" if name in requests else "limits", name)
        )
    if not resources:
        reading.maps(document_key, at)
    reading.pods[key] = given


def number_text(text: object) -> object:
    """An annotation's number as the document's: "2" -> 2, "1.5" -> 1.5; anything else as
    it is, for JobIn to refuse with its reason."""
    if isinstance(text, str):
        for kind in (int, float):
            try:
                return kind(text)
            except ValueError:
                continue
    return text


def _units(name: str, quantity: object) -> object:
    try:
        return parse_resources("", {name: str(quantity)}).get(name)
    except QuantityError:
        return quantity  # the document's reading names the problem


def _env(reading: _Reading, at: Path) -> dict[str, Any] | None:
    """A container's ``env`` as the job's, or None when it has none; only plain values."""
    entries = reading.items((*at, "env"))
    if not entries:
        return None
    env: dict[str, Any] = {}
    for index, entry in enumerate(entries):
        where = (*at, "env", index)
        if not isinstance(entry, Mapping):
            reading.refuse(where, gettext("must be an object with name and value"))
            continue
        reading.get((*where, "name"))
        reading.get((*where, "value"))
        env[str(entry.get("name"))] = entry.get("value", "")
    return env


# ---- RayJob ------------------------------------------------------------------------------


def _rayjob(reading: _Reading, document: dict) -> None:
    document.update(kind=Job.Kind.RAY, runtime=Job.Runtime.KUBERAY)
    spec = ("spec",)
    reading.mapping(spec)
    document["entrypoint"] = reading.get((*spec, "entrypoint"))
    reading.maps("entrypoint", (*spec, "entrypoint"))
    _runtime_env(reading, (*spec, "runtimeEnvYAML"), document)
    reading.expect(
        (*spec, "shutdownAfterJobFinishes"),
        True,
        reason=gettext(
            "Caldera deletes the Ray cluster when the job finishes, and counts its quota until then"
        ),
    )
    for key in DECIDED:
        reading.get((*spec, key))
    cluster = (*spec, "rayClusterSpec")
    reading.mapping(cluster)
    reading.expect(
        (*cluster, "rayVersion"),
        kuberay.RAY_VERSION,
        reason=gettext("Caldera's RayJobs are made for Ray %(version)s")
        % {"version": kuberay.RAY_VERSION},
    )
    autoscaling = reading.get((*cluster, "enableInTreeAutoscaling")) is True
    if autoscaling:
        reading.expect(
            (*cluster, "autoscalerOptions"),
            {"resources": {"requests": AUTOSCALER_RESOURCES, "limits": AUTOSCALER_RESOURCES}},
            reason=gettext(
                "Caldera gives KubeRay's autoscaler %(resources)s, which quota counts; leave it out"
            )
            % {"resources": AUTOSCALER_RESOURCES},
        )
    head = (*cluster, "headGroupSpec")
    reading.mapping(head)
    reading.expect((*head, "rayStartParams"), {}, {"dashboard-host": "0.0.0.0"})
    at, container = _container(reading, _Pod((*head, "template"), "head", "ray-head"))
    document["head"] = {"resources": reading.pods["head"]}
    _image(reading, at, document)
    reading.expect((*at, "ports"), kuberay.HEAD_PORTS)
    _script_mount(reading, (*head, "template"), at, kuberay.SCRIPT_DIR)
    if container.get("env"):
        reading.refuse(
            (*at, "env"), gettext("give a RayJob's variables in runtimeEnvYAML's env_vars")
        )
    workers = []
    for index, _ in enumerate(reading.items((*cluster, "workerGroupSpecs"))):
        group = (*cluster, "workerGroupSpecs", index)
        key = f"workers[{index}]"
        worker: dict[str, Any] = {"name": reading.get((*group, "groupName"))}
        reading.maps(f"{key}.name", (*group, "groupName"))
        replicas = reading.get((*group, "replicas"))
        least = reading.get((*group, "minReplicas"))
        most = reading.get((*group, "maxReplicas"))
        worker["replicas"] = replicas if replicas is not None else (least or 0)
        reading.maps(
            f"{key}.replicas", (*group, "replicas" if replicas is not None else "minReplicas")
        )
        if least is not None and replicas is not None and least != replicas:
            reading.refuse(
                (*group, "minReplicas"),
                gettext(
                    "must equal replicas: a group starts with its replicas and never has fewer"
                ),
            )
        if autoscaling and most is not None and most != worker["replicas"]:
            worker["max_replicas"] = most
            reading.maps(f"{key}.max_replicas", (*group, "maxReplicas"))
        reading.expect((*group, "rayStartParams"), {})
        at, _ = _container(reading, _Pod((*group, "template"), key, "ray-worker"))
        worker["resources"] = reading.pods[key]
        _same_image(reading, at, document)
        reading.expect(
            (*at, "lifecycle"), {"preStop": {"exec": {"command": ["/bin/sh", "-c", "ray stop"]}}}
        )
        workers.append(worker)
    document["workers"] = workers


def _runtime_env(reading: _Reading, at: Path, document: dict) -> None:
    """Ray's runtime environment: its ``pip`` list and ``env_vars``, as seed 003 writes it."""
    text = reading.get(at)
    if text is None:
        return
    try:
        env = yaml.safe_load(text) if isinstance(text, str) else None
    except yaml.YAMLError as error:
        reading.refuse(at, gettext("is not YAML: %(error)s") % {"error": error})
        return
    if env is None:
        return
    if not isinstance(env, Mapping):
        reading.refuse(at, gettext("must be a YAML mapping of pip and env_vars"))
        return
    for key in env:
        if key not in ("pip", "env_vars"):
            reading.refuse(
                (*at, str(key)), gettext("not supported: Caldera takes pip and env_vars")
            )
    if "pip" in env:
        document["pip"] = env["pip"]
        reading.maps("pip", (*at, "pip"))
    if "env_vars" in env:
        document["env"] = env["env_vars"]
        reading.maps("env", (*at, "env_vars"))


def _image(reading: _Reading, at: Path, document: dict) -> None:
    document["image"] = reading.get((*at, "image"))
    reading.maps("image", (*at, "image"))


def _same_image(reading: _Reading, at: Path, document: dict) -> None:
    image = reading.get((*at, "image"))
    if image is not None and image != document.get("image"):
        reading.refuse(
            (*at, "image"),
            gettext(
                "must be the head's or master's image (%(image)s): Caldera runs one image a job"
            )
            % {"image": document.get("image")},
        )


# ---- PyTorchJob --------------------------------------------------------------------------


def _pytorchjob(reading: _Reading, document: dict) -> None:
    document.update(kind=Job.Kind.PYTORCH, runtime=Job.Runtime.KUBEFLOW)
    spec = ("spec",)
    reading.mapping(spec)
    run = (*spec, "runPolicy")
    reading.mapping(run)
    reading.get((*run, "suspend"))  # DECIDED
    scheduling = (*run, "schedulingPolicy")
    reading.mapping(scheduling)
    queue = reading.get((*scheduling, "queue"))
    if queue is not None:
        document["queue"] = queue
        reading.queue_at = (*scheduling, "queue")
    replicas = (*spec, "pytorchReplicaSpecs")
    given = reading.mapping(replicas)
    if "Master" not in given:
        reading.refuse(
            (*replicas, "Master"), gettext("is required: Caldera's PyTorch jobs have a master")
        )
    master = (*replicas, "Master")
    reading.expect((*master, "replicas"), 1, reason=gettext("a PyTorchJob has one master"))
    reading.expect((*master, "restartPolicy"), "OnFailure")
    at, container = _container(reading, _Pod((*master, "template"), "master", "pytorch"))
    document["master"] = {"resources": reading.pods["master"]}
    _image(reading, at, document)
    _master_command(reading, at, document)
    env = _env(reading, at)
    if env is not None:
        document["env"] = env
        reading.maps("env", (*at, "env"))
    _script_mount(reading, (*master, "template"), at, kubeflow.SCRIPT_DIR)
    workers = []
    if "Worker" in given:
        worker = (*replicas, "Worker")
        count = reading.get((*worker, "replicas"), 1)
        reading.maps("workers[0].replicas", (*worker, "replicas"))
        reading.expect((*worker, "restartPolicy"), "OnFailure")
        at, _ = _container(reading, _Pod((*worker, "template"), "workers[0]", "pytorch"))
        _same_pod(reading, at, (*worker, "template"), document, kubeflow.SCRIPT_DIR)
        workers.append(
            {"name": "worker", "replicas": count, "resources": reading.pods["workers[0]"]}
        )
    document["workers"] = workers
    _gang(reading, (*scheduling, "minAvailable"), workers)


def _gang(reading: _Reading, at: Path, workers: list[dict[str, Any]]) -> None:
    """A ``minAvailable``: every pod of the job, which Caldera starts as one gang."""
    pods = 1 + sum(group["replicas"] for group in workers if isinstance(group["replicas"], int))
    reading.expect(
        at,
        pods,
        reason=gettext("Caldera starts every pod of the job as one gang (%(pods)s); leave it out")
        % {"pods": pods},
    )


def _command(reading: _Reading, at: Path) -> Any:
    """A PyTorch container's command and args, as one command, or None when it has none
    (JobIn then asks for a command or a script). Caldera runs a command of its own, so
    args for the image's entrypoint cannot be kept."""
    command = reading.get((*at, "command"))
    args = reading.get((*at, "args"))
    if command is None:
        if args is not None:
            reading.refuse(
                (*at, "args"),
                gettext(
                    "needs a command: Caldera runs the job's command, not the image's entrypoint"
                ),
            )
        return None
    if isinstance(command, list) and isinstance(args, list):
        return command + args
    if args is not None:
        reading.refuse((*at, "args"), gettext("must be a list of strings"))
    return command


def _master_command(reading: _Reading, at: Path, document: dict) -> None:
    command = _command(reading, at)
    reading.maps("command", (*at, "command"))
    if command is not None:
        document["command"] = command


def _same_pod(reading: _Reading, at: Path, template: Path, document: dict, script_dir: str) -> None:
    """A worker runs what the master runs: Caldera gives every pod of a PyTorch job the same
    image, command and variables."""
    _same_image(reading, at, document)
    command = _command(reading, at)
    if command is not None and command != document.get("command"):
        reading.refuse(
            (*at, "command"), gettext("must be the master's: Caldera runs one command a job")
        )
    env = _env(reading, at)
    if env is not None and env != document.get("env"):
        reading.refuse(
            (*at, "env"),
            gettext("must be the master's: Caldera gives every pod the same variables"),
        )
    _script_mount(reading, template, at, script_dir, worker=True)


# ---- Volcano Job ---------------------------------------------------------------------


def _volcano_job(reading: _Reading, document: dict) -> None:
    spec = ("spec",)
    reading.mapping(spec)
    plugins = reading.mapping((*spec, "plugins"))
    if "ray" in plugins:
        kind, head, expected = Job.Kind.RAY, "head", []
    elif "pytorch" in plugins:
        kind, head, expected = Job.Kind.PYTORCH, "master", volcano.PYTORCH_PLUGIN
    else:
        raise JobInvalid(
            {
                "spec.plugins": "needs the ray or the pytorch plugin: Caldera runs Ray and "
                "PyTorch jobs"
            }
        )
    document.update(kind=kind, runtime=Job.Runtime.VOLCANO)
    reading.expect((*spec, "plugins", kind), expected)
    reading.expect((*spec, "plugins", "svc"), [])
    reading.expect((*spec, "schedulerName"), "volcano")
    reading.expect((*spec, "maxRetry"), volcano.MAX_RETRY)
    reading.expect((*spec, "policies"), [{"event": "PodEvicted", "action": "RestartJob"}])
    queue = reading.get((*spec, "queue"))
    if queue is not None:
        document["queue"] = queue
        reading.queue_at = (*spec, "queue")
    tasks = reading.items((*spec, "tasks"))
    names = [task.get("name") if isinstance(task, Mapping) else None for task in tasks]
    if head not in names:
        reading.refuse(
            (*spec, "tasks"),
            gettext("needs a task named %(name)s: the plugin's %(head)s")
            % {"name": repr(head), "head": head},
        )
        return
    script_dir = kuberay.SCRIPT_DIR if kind == Job.Kind.RAY else kubeflow.SCRIPT_DIR
    workers: list[dict[str, Any]] = []
    for index, name in enumerate(names):
        task = (*spec, "tasks", index)
        reading.get((*task, "name"))
        template = (*task, "template")
        reading.expect((*template, "spec", "restartPolicy"), "OnFailure")
        if name == head:
            reading.expect(
                (*task, "replicas"), 1, reason=gettext("a job has one %(head)s") % {"head": head}
            )
            if head == "master":
                reading.expect(
                    (*task, "policies"), [{"event": "TaskCompleted", "action": "CompleteJob"}]
                )
            at, container = _container(reading, _Pod(template, head, head))
            document[head] = {"resources": reading.pods[head]}
            _image(reading, at, document)
            if kind == Job.Kind.RAY:
                _ray_head_command(reading, at, document)
                reading.expect((*at, "ports"), kuberay.HEAD_PORTS)
            else:
                _master_command(reading, at, document)
            env = _env(reading, at)
            if env is not None:
                document["env"] = env
                reading.maps("env", (*at, "env"))
            _script_mount(reading, template, at, script_dir)
        elif name == "worker" and not workers:
            key = "workers[0]"
            workers.append({"name": "worker", "replicas": reading.get((*task, "replicas"), 1)})
            reading.maps(f"{key}.replicas", (*task, "replicas"))
            at, _ = _container(reading, _Pod(template, key, "worker"))
            workers[0]["resources"] = reading.pods[key]
            if kind == Job.Kind.PYTORCH:
                _same_pod(reading, at, template, document, script_dir)
            else:
                _same_image(reading, at, document)
                env = _env(reading, at)
                if env is not None and env != document.get("env"):
                    reading.refuse(
                        (*at, "env"),
                        gettext("must be the head's: Caldera gives every pod the same variables"),
                    )
                _script_mount(reading, template, at, script_dir, worker=True)
        else:
            reading.refuse(
                task,
                gettext(
                    "not supported: a %(kind)s job on Volcano has the tasks %(head)s and worker"
                )
                % {"kind": kind, "head": head},
            )
    document["workers"] = workers
    _gang(reading, (*spec, "minAvailable"), workers)


def _ray_head_command(reading: _Reading, at: Path, document: dict) -> None:
    """The ray plugin's head runs the entrypoint as Caldera writes it:
    ``["/bin/sh", "-c", "<entrypoint>"]``."""
    command = reading.get((*at, "command"))
    reading.maps("entrypoint", (*at, "command"))
    if command is None:
        return  # JobIn asks for an entrypoint (or a script)
    if isinstance(command, list) and len(command) == 3 and command[:2] == ["/bin/sh", "-c"]:
        document["entrypoint"] = command[2]
        reading.maps("entrypoint", (*at, "command", 2))
    else:
        reading.refuse(
            (*at, "command"),
            gettext(
                'must be ["/bin/sh", "-c", "<entrypoint>"]: the head starts Ray, then runs the '
                "entrypoint"
            ),
        )


# ---- the script ------------------------------------------------------------------------


def _script_mount(
    reading: _Reading, template: Path, at: Path, directory: str, *, worker: bool = False
) -> None:
    """A pod that mounts the job's script: a ConfigMap volume named ``script`` (or any name)
    mounted at the kind's script directory, as Caldera's own objects do. Taken here when
    it has that shape; the script itself is read from the ConfigMap (``_script``)."""
    volumes = reading.peek((*template, "spec", "volumes")) or []
    mounts = reading.peek((*at, "volumeMounts")) or []
    if not volumes and not mounts:
        return
    if not isinstance(volumes, list) or not isinstance(mounts, list):
        return  # left over: refused with their paths
    if len(volumes) != 1 or len(mounts) != 1:
        return
    volume, mount = volumes[0], mounts[0]
    if not (isinstance(volume, Mapping) and isinstance(mount, Mapping)):
        return
    config = volume.get("configMap")
    if not isinstance(config, Mapping) or mount.get("name") != volume.get("name"):
        return
    if mount.get("mountPath") != directory:
        reading.refuse(
            (*at, "volumeMounts", 0, "mountPath"),
            gettext("must be %(directory)s: Caldera mounts the script there")
            % {"directory": directory},
        )
    reading.taken.add((*template, "spec", "volumes"))
    reading.taken.add((*at, "volumeMounts"))
    if not worker:
        reading.script_volume = (config, (*template, "spec", "volumes", 0, "configMap"))


def _script(reading: _Reading, document: dict, script: Mapping | None) -> None:
    """The script the head or master mounts, from the ConfigMap sent with the job."""
    mounted = reading.script_volume
    if mounted is None:
        return
    config, at = mounted
    name = config.get("name")
    if script is None or script.get("metadata", {}).get("name") != name:
        reading.refuse(
            (*at, "name"),
            gettext(
                "the ConfigMap %(name)s must be sent with the job (a List of the job and it, or "
                "both in one YAML file with caldera submit)"
            )
            % {"name": repr(name)},
        )
        return
    data = script.get("data")
    keys = [item.get("key") for item in config.get("items") or [] if isinstance(item, Mapping)]
    chosen = keys or list(data or {})
    if not isinstance(data, Mapping) or len(chosen) != 1 or chosen[0] not in data:
        reading.refuse((*at, "items"), gettext("must mount one key of the ConfigMap: the script"))
        return
    for index, item in enumerate(config.get("items") or []):
        if isinstance(item, Mapping) and item.get("path") != item.get("key"):
            reading.refuse(
                (*at, "items", index, "path"), gettext("must be the key: the script's file name")
            )
    document["script"] = data[chosen[0]]
    document["script_filename"] = chosen[0]
