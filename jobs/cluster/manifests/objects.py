"""A team's own job object: where its parts are, and what Caldera adds to it at creation.

A RayJob, a PyTorchJob and a Volcano Job each keep their pods' templates, their queue and
their priority class in places of their own. ``pod_templates``, ``queue_fields``,
``priority_class_fields`` and ``suspend_path`` say where, for the reader of a submitted
body (``jobs.document.native``) and for ``with_additions``, which makes the objects
Caldera creates: exactly the team's, with only Caldera's additions:

- on every object (the job and its ConfigMaps): the leaf's namespace, Caldera's labels
  (``caldera.io/*``: the job, its queue, owner and department) and annotations (the queue's
  path, the ``kube-queue/*`` enqueue and dequeue times);
- on the job's pod templates, Caldera's labels (the job's pods are found by them);
- the job's ``suspend`` (RayJob, PyTorchJob), as its state wants it;
- the queue's priority class and its Volcano queue, where the kind names them.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from jobs.cluster.spec import JobSpec
from kube.names import POOLS_ANNOTATION

from . import common

LIST = ("v1", "List")
CONFIG_MAP = ("v1", "ConfigMap")
RAY_JOB = ("ray.io/v1", "RayJob")
RAY_CLUSTER = ("ray.io/v1", "RayCluster")
PYTORCH_JOB = ("kubeflow.org/v1", "PyTorchJob")
VOLCANO_JOB = ("batch.volcano.sh/v1alpha1", "Job")
VOLCANO_QUEUE = ("scheduling.volcano.sh/v1beta1", "Queue")

VOLCANO_QUEUE_LABEL = "volcano.sh/queue-name"
KUEUE_QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
RAY_PRIORITY_LABEL = "ray.io/priority-class-name"
# Where an object may name its queue, in the order they are read: Caldera's own label,
# Volcano's, Kueue's; a Volcano Job's ``spec.queue`` and a PyTorchJob's scheduling queue
# come after them.
QUEUE_LABELS = (common.LABEL_QUEUE, VOLCANO_QUEUE_LABEL, KUEUE_QUEUE_LABEL)
# Label and annotation prefixes that are Caldera's: it writes them, a team may not.
CALDERA_KEYS = ("caldera.io/", "kube-queue/")
# The job's annotations Caldera reads, as the document's fields no Kubernetes object has.
TIME_LIMIT_ANNOTATION = "caldera.io/time-limit"  # 2h; else the runtime's own deadline field
RETRIES_ANNOTATION = "caldera.io/retries"
READ_ANNOTATIONS = {
    "caldera.io/priority": "priority",
    "caldera.io/run-seconds": "run_seconds",
    POOLS_ANNOTATION: "pools",
    TIME_LIMIT_ANNOTATION: "time_limit",
    RETRIES_ANNOTATION: "retries",
}

Path = tuple[str | int, ...]


@dataclass(frozen=True)
class JobKind:
    """What a job object is to Caldera: a Ray or PyTorch job, on which runtime, and for a
    Volcano Job the task its plugin leads with (the Ray head, the PyTorch master)."""

    kind: str  # "ray", "pytorch", or "batch" (a Volcano Job of other tasks)
    runtime: str  # "kuberay", "kubeflow" or "volcano"
    head: str = ""  # a Volcano Job's leading task


def _plugin_argument(arguments: Any, name: str, default: str) -> str:
    for argument in arguments if isinstance(arguments, list) else []:
        if isinstance(argument, str) and argument.startswith(f"--{name}="):
            return argument.split("=", 1)[1]
    return default


def job_kind(obj: Mapping[str, Any]) -> JobKind | None:
    """The kind of job ``obj`` is, or None when it is not one Caldera runs. A Volcano Job
    is a Ray job with the ``ray`` plugin (its ``--head`` task, ``head`` by default), a
    PyTorch job with the ``pytorch`` plugin (its ``--master`` task), and a batch job with
    neither, led by its first task."""
    key = (obj.get("apiVersion"), obj.get("kind"))
    if key == RAY_JOB:
        return JobKind("ray", "kuberay")
    if key == PYTORCH_JOB:
        return JobKind("pytorch", "kubeflow")
    if key == VOLCANO_JOB:
        plugins = (obj.get("spec") or {}).get("plugins") or {}
        if not isinstance(plugins, Mapping):
            return None
        if "ray" in plugins:
            return JobKind("ray", "volcano", _plugin_argument(plugins["ray"], "head", "head"))
        if "pytorch" in plugins:
            return JobKind(
                "pytorch", "volcano", _plugin_argument(plugins["pytorch"], "master", "master")
            )
        tasks = (obj.get("spec") or {}).get("tasks")
        first = tasks[0] if isinstance(tasks, list) and tasks else None
        name = first.get("name") if isinstance(first, Mapping) else None
        return JobKind("batch", "volcano", str(name or ""))
    return None


def value_at(obj: Any, where: Path) -> Any:
    """The value at ``where`` in ``obj`` (a key or list index a step), or None."""
    for part in where:
        if isinstance(part, int):
            if not isinstance(obj, list) or part >= len(obj):
                return None
        elif not isinstance(obj, Mapping) or part not in obj:
            return None
        obj = obj[part]
    return obj


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _count(value: Any, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


@dataclass(frozen=True)
class Template:
    """One pod template of a job: the group it makes, how many pods of it the gang starts,
    whether it is the job's leading pod, where its KubeRay autoscaler's resources are (the
    head of a RayJob that autoscales), and the job's launch line when it says one."""

    name: str
    replicas: int
    main: bool = False
    autoscaler: Path | None = None
    launch: str = ""


def pod_templates(
    obj: Mapping[str, Any], kind: JobKind, *, every: bool = False
) -> Iterator[tuple[Path, Template]]:
    """Each pod template of the job, the leading one first: a RayJob's head and worker
    groups (a group's pods are ``minReplicas`` when the cluster autoscales, else its
    ``replicas``, times ``numOfHosts``; none while the group is suspended), a PyTorchJob's
    replica types (Master first), a Volcano Job's tasks (the plugin's leading task first).
    With ``every``, a RayJob's submitter pod too, which quota does not count (kube-queue
    counts a RayJob's cluster)."""
    spec = _mapping(obj.get("spec"))
    if kind.runtime == "kuberay":
        cluster = ("spec", "rayClusterSpec")
        autoscales = value_at(obj, (*cluster, "enableInTreeAutoscaling")) is True
        yield (
            (*cluster, "headGroupSpec", "template"),
            Template(
                "head", 1, main=True,
                autoscaler=(*cluster, "autoscalerOptions", "resources") if autoscales else None,
                launch=str(spec.get("entrypoint") or ""),
            ),
        )  # fmt: skip
        groups = value_at(obj, (*cluster, "workerGroupSpecs"))
        for index, group in enumerate(groups if isinstance(groups, list) else []):
            if not isinstance(group, Mapping):
                continue
            pods = _count(group.get("minReplicas" if autoscales else "replicas"), 0)
            if group.get("suspend") is True:
                pods = 0
            yield (
                (*cluster, "workerGroupSpecs", index, "template"),
                Template(
                    str(group.get("groupName") or f"group-{index}"),
                    pods * _count(group.get("numOfHosts"), 1),
                ),
            )
        if every and isinstance(spec.get("submitterPodTemplate"), Mapping):
            yield ("spec", "submitterPodTemplate"), Template("submitter", 0)
    elif kind.runtime == "kubeflow":
        replicas = _mapping(spec.get("pytorchReplicaSpecs"))
        types = sorted(replicas, key=lambda t: t != "Master")
        for name in types:
            replica = replicas[name]
            if isinstance(replica, Mapping):
                yield (
                    ("spec", "pytorchReplicaSpecs", name, "template"),
                    Template(
                        name.lower(), _count(replica.get("replicas"), 1), main=name == "Master"
                    ),
                )
    elif kind.runtime == "volcano":
        tasks = spec.get("tasks")
        tasks = list(enumerate(tasks if isinstance(tasks, list) else []))
        tasks.sort(
            key=lambda entry: (
                not (isinstance(entry[1], Mapping) and entry[1].get("name") == kind.head)
            )
        )
        for position, (index, task) in enumerate(tasks):
            if isinstance(task, Mapping):
                yield (
                    ("spec", "tasks", index, "template"),
                    Template(
                        str(task.get("name") or f"task-{index}"),
                        _count(task.get("replicas"), 0),
                        main=position == 0,
                    ),
                )


def queue_fields(obj: Mapping[str, Any]) -> list[tuple[Path, Any]]:
    """The places of the job that name a queue and what each says, in the order they are
    read (``QUEUE_LABELS``, then the kind's own), the absent ones left out."""
    found: list[tuple[Path, Any]] = []
    labels = value_at(obj, ("metadata", "labels"))
    for label in QUEUE_LABELS:
        if isinstance(labels, Mapping) and label in labels:
            found.append((("metadata", "labels", label), labels[label]))
    key = (obj.get("apiVersion"), obj.get("kind"))
    own: Path | None = None
    if key == VOLCANO_JOB:
        own = ("spec", "queue")
    elif key == PYTORCH_JOB:
        own = ("spec", "runPolicy", "schedulingPolicy", "queue")
    if own is not None and value_at(obj, own) is not None:
        found.append((own, value_at(obj, own)))
    return found


def priority_class_fields(obj: Mapping[str, Any], kind: JobKind) -> list[tuple[Path, Any]]:
    """The places of the job that name a priority class, and what each says (absent ones
    left out): the queue sets it."""
    places: list[Path] = []
    if kind.runtime == "kuberay":
        places.append(("metadata", "labels", RAY_PRIORITY_LABEL))
    elif kind.runtime == "kubeflow":
        places.append(("spec", "runPolicy", "schedulingPolicy", "priorityClass"))
    else:
        places.append(("spec", "priorityClassName"))
    places += [
        (*where, "spec", "priorityClassName") for where, _ in pod_templates(obj, kind, every=True)
    ]
    return [(where, value_at(obj, where)) for where in places if value_at(obj, where) is not None]


def suspend_path(kind: JobKind) -> Path | None:
    """Where the job's suspend flag is (None: the kind has none; Caldera creates it at its
    dequeue)."""
    if kind.runtime == "kuberay":
        return ("spec", "suspend")
    if kind.runtime == "kubeflow":
        return ("spec", "runPolicy", "suspend")
    return None


def _put(obj: dict[str, Any], where: Path, value: Any) -> None:
    *parents, last = where
    for part in parents:
        obj = obj.setdefault(part, {})  # type: ignore[arg-type]
    obj[last] = value  # type: ignore[index]


def _mark(metadata: dict[str, Any], spec: JobSpec, *, annotate: bool = True) -> None:
    metadata["labels"] = {**(metadata.get("labels") or {}), **common.labels(spec)}
    if annotate:
        metadata["annotations"] = {
            **(metadata.get("annotations") or {}),
            **common.annotations(spec),
        }


def with_additions(spec: JobSpec) -> list[dict[str, Any]]:
    """The objects Caldera creates for a job kept as sent (``spec.objects``, the job's
    first): its ConfigMaps first, then the job, each with Caldera's additions alone."""
    objects = copy.deepcopy(list(spec.objects))
    for obj in objects:
        metadata = obj.setdefault("metadata", {})
        metadata["namespace"] = spec.namespace
        _mark(metadata, spec)
    job = objects[0]
    kind = job_kind(job)
    assert kind is not None  # read as a job at submit
    metadata = job["metadata"]
    if not metadata.get("name"):  # a generateName: the name Caldera derives from it
        metadata["name"] = spec.object_name
    for where, _template in pod_templates(job, kind):
        template = value_at(job, where)
        if isinstance(template, dict):
            _mark(template.setdefault("metadata", {}), spec, annotate=False)
            common.in_pool(spec, template.setdefault("spec", {}))
    suspend = suspend_path(kind)
    if suspend is not None:
        _put(job, suspend, spec.suspend)
    volcano_queue = common.label_value(spec.queue_name)
    if kind.runtime == "kuberay":
        if spec.priority_class:
            metadata["labels"][RAY_PRIORITY_LABEL] = spec.priority_class
        if spec.batch_scheduler == "volcano":
            metadata["labels"][VOLCANO_QUEUE_LABEL] = volcano_queue
    elif kind.runtime == "kubeflow":
        _put(job, ("spec", "runPolicy", "schedulingPolicy", "queue"), spec.queue_name)
        if spec.priority_class:
            _put(
                job, ("spec", "runPolicy", "schedulingPolicy", "priorityClass"), spec.priority_class
            )
    else:
        job["spec"]["queue"] = spec.queue_name
        metadata["labels"][VOLCANO_QUEUE_LABEL] = volcano_queue
        if spec.priority_class:
            job["spec"]["priorityClassName"] = spec.priority_class
    return [in_kubernetes_order(obj) for obj in (*objects[1:], job)]


FIRST_KEYS = ("apiVersion", "kind", "metadata", "spec", "data")


def in_kubernetes_order(obj: Mapping[str, Any]) -> dict[str, Any]:
    """The object with its top keys as Kubernetes writes them (apiVersion, kind, metadata,
    spec or data, then the rest): PostgreSQL keeps a JSON object's keys in an order of its
    own, and a person reads a manifest in this one."""
    ordered = {key: obj[key] for key in FIRST_KEYS if key in obj}
    return ordered | {key: value for key, value in obj.items() if key not in ordered}


def config_map_names(objects: list[Mapping[str, Any]]) -> tuple[str, ...]:
    """The names of the ConfigMaps kept with a job (every object after the job)."""
    return tuple(str((obj.get("metadata") or {}).get("name") or "") for obj in objects[1:])
