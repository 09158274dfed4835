"""What the operators' objects and events mean to Caldera: pure functions over plain dicts.

The Kubernetes backend lists RayJobs, PyTorchJobs and Volcano Jobs and the Warning events
of their pods and pod groups; these functions turn them into ``ObjectStatus`` and
``ClusterEvent`` values. They hold no client and are tested on the operators' own shapes.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import quote

from jobs.cluster.manifests.common import LABEL_JOB_ID

from .base import ClusterEvent, ObjectStatus, Phase


@dataclass(frozen=True)
class Resource:
    """One custom resource: where it lives in the API and how suspension is spelled."""

    group: str
    version: str
    plural: str
    kind: str
    # The merge patch that sets the object's suspend flag, None when the kind has none.
    suspend_path: tuple[str, ...] | None

    def collection(self, namespace: str) -> str:
        """The API path of the namespace's objects of this kind."""
        where = quote(namespace, safe="")
        return f"/apis/{self.group}/{self.version}/namespaces/{where}/{self.plural}"

    def suspend_patch(self, suspend: bool) -> dict[str, Any] | None:
        if self.suspend_path is None:
            return None
        patch: dict[str, Any] = {self.suspend_path[-1]: suspend}
        for key in reversed(self.suspend_path[:-1]):
            patch = {key: patch}
        return patch


RESOURCES = {
    "kuberay": Resource("ray.io", "v1", "rayjobs", "RayJob", ("spec", "suspend")),
    "kubeflow": Resource(
        "kubeflow.org", "v1", "pytorchjobs", "PyTorchJob", ("spec", "runPolicy", "suspend")
    ),
    "volcano": Resource("batch.volcano.sh", "v1alpha1", "jobs", "Job", None),
}

# The quota tree as the cluster's schedulers read it (CLUSTER_PUBLISH_QUOTA): ACK's
# ElasticQuotaTree (namespaced, one per cluster) and Volcano's Queue (cluster-scoped).
QUOTA_TREE = Resource(
    "scheduling.sigs.k8s.io", "v1beta1", "elasticquotatrees", "ElasticQuotaTree", None
)
VOLCANO_QUEUE = Resource("scheduling.volcano.sh", "v1beta1", "queues", "Queue", None)

_CYCLE = re.compile(r"\bin cycle (\d+)\b")

# The labels the operators put on the pods they create, which tell a job's main pod (the
# Ray head, the PyTorch master) from its workers.
RAY_NODE_TYPE = "ray.io/node-type"
KUBEFLOW_JOB_NAME = "training.kubeflow.org/job-name"
KUBEFLOW_REPLICA_TYPE = "training.kubeflow.org/replica-type"
VOLCANO_JOB_NAME = "volcano.sh/job-name"
VOLCANO_TASK = "volcano.sh/task-spec"


def phase_of(runtime: str, obj: Mapping[str, Any]) -> tuple[Phase, str]:
    """(phase, message) of one object: Suspended, Pending, Running, Succeeded or Failed."""
    status = obj.get("status") or {}
    if runtime == "kuberay":
        return _rayjob_phase(obj, status)
    if runtime == "kubeflow":
        return _pytorchjob_phase(obj, status)
    if runtime == "volcano":
        return _volcano_phase(status)
    raise ValueError(f"no status mapping for runtime {runtime!r}")


def _rayjob_phase(obj: Mapping[str, Any], status: Mapping[str, Any]) -> tuple[Phase, str]:
    """KubeRay: ``jobDeploymentStatus`` says where the RayJob is, ``jobStatus`` how the
    Ray job itself ended."""
    deployment = status.get("jobDeploymentStatus", "")
    job_status = status.get("jobStatus", "")
    message = status.get("message", "")
    if deployment == "Complete":
        if job_status == "SUCCEEDED":
            return Phase.SUCCEEDED, message
        return Phase.FAILED, message or f"The Ray job ended {job_status or 'without a status'}"
    if deployment in ("Failed", "ValidationFailed") or job_status == "FAILED":
        return Phase.FAILED, message or f"The RayJob's deployment status is {deployment}"
    if deployment in ("Suspending", "Suspended") or (
        not deployment and (obj.get("spec") or {}).get("suspend") is True
    ):
        return Phase.SUSPENDED, message
    if deployment == "Running" or job_status == "RUNNING":
        return Phase.RUNNING, message
    return Phase.PENDING, message


def _pytorchjob_phase(obj: Mapping[str, Any], status: Mapping[str, Any]) -> tuple[Phase, str]:
    """Kubeflow: the last condition whose status is True decides."""
    current = [c for c in status.get("conditions") or [] if c.get("status") == "True"]
    last = current[-1] if current else {}
    kind, message = last.get("type", ""), last.get("message", "")
    if kind == "Succeeded":
        return Phase.SUCCEEDED, message
    if kind == "Failed":
        return Phase.FAILED, message or "The PyTorchJob failed"
    if kind == "Suspended" or (
        not kind and ((obj.get("spec") or {}).get("runPolicy") or {}).get("suspend") is True
    ):
        return Phase.SUSPENDED, message
    if kind == "Running":
        return Phase.RUNNING, message
    return Phase.PENDING, message


_VOLCANO_PHASES = {
    "Completed": Phase.SUCCEEDED,
    "Failed": Phase.FAILED,
    "Aborted": Phase.FAILED,
    "Terminated": Phase.FAILED,
    "Running": Phase.RUNNING,
    "Completing": Phase.RUNNING,
}


def _volcano_phase(status: Mapping[str, Any]) -> tuple[Phase, str]:
    """Volcano: ``status.state.phase``; Pending, Restarting, Aborting and the rest wait."""
    state = status.get("state") or {}
    phase = state.get("phase", "")
    message = state.get("message", "") or state.get("reason", "")
    mapped = _VOLCANO_PHASES.get(phase, Phase.PENDING)
    if mapped == Phase.FAILED and not message:
        message = f"The Volcano job is {phase}"
    return mapped, message


# What a sync reads of a job object's metadata (object_status).
_OBSERVED_METADATA = ("name", "namespace", "labels", "resourceVersion", "deletionTimestamp")


def observed(runtime: str, obj: Mapping[str, Any]) -> dict[str, Any]:
    """The part of a job object a sync reads (``object_status``, ``phase_of``): its name,
    namespace, labels, version and deletion mark, its status, and its spec's suspend flag.
    An informer keeps this much of each object, not its pod templates: a tenth of the
    memory at a platform's scale."""
    metadata = obj.get("metadata") or {}
    kept: dict[str, Any] = {
        "metadata": {key: metadata[key] for key in _OBSERVED_METADATA if key in metadata}
    }
    if "status" in obj:
        kept["status"] = obj["status"]
    path = RESOURCES[runtime].suspend_path
    if path:
        found: Any = obj
        for key in path:
            found = found.get(key) if isinstance(found, Mapping) else None
        if found is not None:
            into = kept
            for key in path[:-1]:
                into = into.setdefault(key, {})
            into[path[-1]] = found
    return kept


def object_status(runtime: str, obj: Mapping[str, Any]) -> ObjectStatus | None:
    """The status of one listed object; None for an object Caldera did not create."""
    metadata = obj.get("metadata") or {}
    try:
        job_id = int((metadata.get("labels") or {})[LABEL_JOB_ID])
    except (KeyError, TypeError, ValueError):
        return None
    phase, message = phase_of(runtime, obj)
    ray_cluster = (obj.get("status") or {}).get("rayClusterName") if runtime == "kuberay" else ""
    return ObjectStatus(
        job_id=job_id,
        object_name=metadata.get("name", ""),
        phase=phase,
        message=message,
        namespace=metadata.get("namespace", ""),
        runtime=runtime,
        deleting=bool(metadata.get("deletionTimestamp")),
        ray_cluster=ray_cluster if isinstance(ray_cluster, str) else "",
    )


def cycle_of(message: str) -> int | None:
    """The scheduling cycle a message names (``... in cycle 12: ...`` -> 12)."""
    match = _CYCLE.search(message)
    return int(match[1]) if match else None


class ObjectIndex:
    """Finds the job an event is about from the name of the pod or pod group it names.

    The operators name what they create after the job object: ``<job>-master-0``,
    ``<job>-worker-1`` (Kubeflow, Volcano), ``<job>-<random>-head-<random>`` (the KubeRay
    cluster of a RayJob), pod groups ``<job>``, ``<job>-<uid>`` or ``ray-<cluster>-pg``. The
    longest object name that is the involved name, or a prefix of it followed by ``-``,
    wins, so ``train-7`` and ``train-7-2`` are told apart.
    """

    def __init__(self, objects: Iterable[tuple[str, str, int]]):
        self._by_namespace: dict[str, dict[str, int]] = {}
        for namespace, name, job_id in objects:
            self._by_namespace.setdefault(namespace, {})[name] = job_id

    def job_of(self, namespace: str, involved_name: str) -> int | None:
        names = self._by_namespace.get(namespace)
        if not names:
            return None
        for candidate in (involved_name, involved_name.removeprefix("ray-")):
            parts = candidate.split("-")
            for end in range(len(parts), 0, -1):
                job_id = names.get("-".join(parts[:end]))
                if job_id is not None:
                    return job_id
        return None


def cluster_event(event: Mapping[str, Any], job_id: int, *, now: datetime) -> ClusterEvent:
    """One Kubernetes Event as Caldera stores it: keyed by the event's uid, which a repeat
    keeps, so a repeated event is one row whose count and last time move on.

    Two ways of counting repeats reach the core/v1 listing: ``count``, ``firstTimestamp``
    and ``lastTimestamp`` (the kubelet, older components), or ``series.count`` and
    ``series.lastObservedTime`` with ``eventTime`` the first time (components that write
    ``events.k8s.io/v1``, such as the scheduler). A series, when there is one, counts."""
    metadata = event.get("metadata") or {}
    involved = event.get("involvedObject") or {}
    message = event.get("message") or ""
    uid = metadata.get("uid") or f"{metadata.get('namespace', '')}/{metadata.get('name', '')}"
    count = (event.get("series") or {}).get("count") or event.get("count") or 1
    first = _time_of(
        event.get("eventTime"), event.get("firstTimestamp"), metadata.get("creationTimestamp")
    )
    last = _time_of(
        (event.get("series") or {}).get("lastObservedTime"),
        event.get("lastTimestamp"),
        event.get("eventTime"),
        metadata.get("creationTimestamp"),
    )
    return ClusterEvent(
        job_id=job_id,
        type=event.get("type") or "Warning",
        reason=event.get("reason") or "",
        message=message,
        involved=f"{(involved.get('kind') or '').lower()}/{involved.get('name', '')}",
        at=last or now,
        uid=f"k8s/{uid}",
        cycle=cycle_of(message),
        count=count,
        first_at=first if count > 1 else None,
    )


def _time_of(*values: object) -> datetime | None:
    """The first of these timestamps that is one."""
    for value in values:
        if isinstance(value, datetime):
            return value
        if isinstance(value, str) and value:
            try:
                return datetime.fromisoformat(value.replace("Z", "+00:00"))
            except ValueError:
                continue
    return None


def main_pod_selector(runtime: str, *, object_name: str, job_id: int, head: str) -> str:
    """The label selector of a job's main pod (the Ray head, the PyTorch master).

    Every runtime copies the labels of the pod templates Caldera writes onto its pods, so
    ``caldera.io/job-id`` keeps the search to the job's own pods; the operator's label then
    picks the main one. KubeRay marks the head ``ray.io/node-type=head`` within a RayCluster
    it names itself (``<job>-<random>``, in the RayJob's ``status.rayClusterName``): the job
    label finds it without reading the RayJob first. Kubeflow marks the master
    ``training.kubeflow.org/replica-type=master`` (lower case), Volcano each pod with its
    task, which Caldera names ``head`` or ``master`` (``jobs.cluster.manifests.volcano``).
    """
    own = f"{LABEL_JOB_ID}={job_id}"
    if runtime == "kuberay":
        return f"{own},{RAY_NODE_TYPE}=head"
    if runtime == "kubeflow":
        return f"{own},{KUBEFLOW_JOB_NAME}={object_name},{KUBEFLOW_REPLICA_TYPE}=master"
    if runtime == "volcano":
        return f"{own},{VOLCANO_JOB_NAME}={object_name},{VOLCANO_TASK}={head}"
    raise ValueError(f"no main pod known for runtime {runtime!r}")


def exit_code(pod: Mapping[str, Any]) -> int | None:
    """The exit code of the pod's first container (the head's or master's own) once it has
    ended: ``state.terminated``, or ``lastState.terminated`` of a container restarted since;
    None while it runs or when the pod does not say."""
    containers = (pod.get("spec") or {}).get("containers") or [{}]
    first = containers[0].get("name")
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        if status.get("name") != first:
            continue
        for state in (status.get("state"), status.get("lastState")):
            code = ((state or {}).get("terminated") or {}).get("exitCode")
            if isinstance(code, int):
                return code
    return None


def main_pod(pods: Iterable[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The pod to read among those the selector found: one not being deleted before one
    that is (an operator replacing a pod makes the new one while the old one goes), then
    the newest."""
    return max(
        pods,
        key=lambda pod: (
            not (pod.get("metadata") or {}).get("deletionTimestamp"),
            (pod.get("metadata") or {}).get("creationTimestamp") or "",
        ),
        default=None,
    )
