"""Names, labels and annotations shared by every generated object."""

import re
from datetime import datetime
from typing import Any

from jobs.cluster.spec import JobSpec
from kube.names import ANNOTATION_QUEUE_PATH

LABEL_JOB_ID = "caldera.io/job-id"
LABEL_QUEUE = "caldera.io/queue"
LABEL_DEPARTMENT = "caldera.io/department"
LABEL_OWNER = "caldera.io/owner"
ANNOTATION_ENQUEUED = "kube-queue/job-enqueue-timestamp"
ANNOTATION_DEQUEUED = "kube-queue/job-dequeue-timestamp"

DNS_1123_MAX = 63
# KubeRay refuses a RayJob whose name is longer than 47 characters (it names the RayCluster
# ``<job>-<5 random>`` and its Services after that, which must stay within 63); the same
# bound leaves room for the ``<job>-<task>-<n>`` pods and Services of the other operators.
OBJECT_NAME_MAX = 47
_NOT_DNS = re.compile(r"[^a-z0-9-]+")
_LABEL_VALUE_MAX = 63
_NOT_LABEL = re.compile(r"[^A-Za-z0-9_.-]+")


def object_name(name: str, job_id: int) -> str:
    """A DNS-1035 label derived stably from the job: ``rayjob-video`` + 7 -> ``rayjob-video-7``.

    The id suffix makes names unique even when two jobs share a display name; the name
    part is lower-cased, stripped of other characters, starts with a letter (Services are
    named after the job, and a Service name must) and is shortened so the whole stays
    within OBJECT_NAME_MAX characters.
    """
    suffix = f"-{job_id}"
    base = re.sub(r"-{2,}", "-", _NOT_DNS.sub("-", name.lower()).strip("-"))
    if not base[:1].isalpha():
        base = f"job-{base}".rstrip("-")
    return f"{base[: OBJECT_NAME_MAX - len(suffix)].rstrip('-')}{suffix}"


def script_configmap_name(object_name: str) -> str:
    """The ConfigMap holding the script of the job object ``object_name``."""
    return f"{object_name}-script"[:DNS_1123_MAX]


def label_value(value: str) -> str:
    """A valid label value: at most 63 of [A-Za-z0-9_.-], starting and ending alphanumeric."""
    cleaned = _NOT_LABEL.sub("-", value)[:_LABEL_VALUE_MAX]
    return cleaned.strip("-_.")


def kube_queue_timestamp(moment: datetime) -> str:
    """The kube-queue annotation format: ``2025-01-10 01:36:24.298639 +0000 UTC``."""
    return moment.strftime("%Y-%m-%d %H:%M:%S.%f +0000 UTC")


def labels(spec: JobSpec) -> dict[str, str]:
    result = {
        LABEL_JOB_ID: str(spec.id),
        LABEL_QUEUE: label_value(spec.queue_name),
        LABEL_OWNER: label_value(spec.owner),
    }
    if spec.department:
        result[LABEL_DEPARTMENT] = label_value(spec.department)
    result.update(spec.extra_labels)
    return result


def annotations(spec: JobSpec) -> dict[str, str]:
    result = {ANNOTATION_QUEUE_PATH: spec.queue_path}
    if spec.enqueued_at:
        result[ANNOTATION_ENQUEUED] = kube_queue_timestamp(spec.enqueued_at)
    if spec.dequeued_at:
        result[ANNOTATION_DEQUEUED] = kube_queue_timestamp(spec.dequeued_at)
    return result


def metadata(spec: JobSpec, *, name: str | None = None) -> dict[str, Any]:
    return {
        "name": name or spec.object_name,
        "namespace": spec.namespace,
        "labels": labels(spec),
        "annotations": annotations(spec),
    }


def env(spec: JobSpec) -> list[dict[str, Any]]:
    """The job's environment variables as a container's ``env``, in name order: its plain
    ones, then those it reads from Secrets (``secret_env``)."""
    plain = [{"name": name, "value": value} for name, value in sorted(spec.env.items())]
    return plain + secret_env(spec)


def secret_env(spec: JobSpec) -> list[dict[str, Any]]:
    """The variables the job reads from Secrets of its namespace, in name order: the
    kubelet reads each value, which never passes through Caldera."""
    found = []
    for name, source in sorted(spec.secret_env.items()):
        secret, _slash, key = source.partition("/")
        found.append({"name": name, "valueFrom": {"secretKeyRef": {"name": secret, "key": key}}})
    return found


def resources(quantities: dict[str, str], limits: dict[str, str] | None = None) -> dict[str, Any]:
    """The pod's requests, and as its limits the same but where ``limits`` says more: the
    gang gets what it asked, as the seed's manifests give it."""
    return {"requests": dict(quantities), "limits": {**quantities, **(limits or {})}}


SHM_VOLUME = "dshm"


def storage(spec: JobSpec, pod: dict[str, Any], container: dict[str, Any], script_dir: str) -> None:
    """What the pod mounts, in its container: the script's ConfigMap at ``script_dir``
    ("" for a pod without the script), each claim at its path, a memory-backed /dev/shm."""
    volumes: list[dict[str, Any]] = []
    mounts: list[dict[str, Any]] = []
    if spec.script and script_dir:
        volumes.append(script_volume(spec))
        mounts.append({"mountPath": script_dir, "name": "script"})
    for index, claim in enumerate(spec.claims):
        name = f"claim-{index}"
        volume: dict[str, Any] = {"claimName": claim["claim"]}
        if claim.get("read_only"):
            volume["readOnly"] = True
        volumes.append({"name": name, "persistentVolumeClaim": volume})
        mount: dict[str, Any] = {"mountPath": claim["path"], "name": name}
        if claim.get("read_only"):
            mount["readOnly"] = True
        mounts.append(mount)
    if spec.shm:
        volumes.append(
            {"name": SHM_VOLUME, "emptyDir": {"medium": "Memory", "sizeLimit": spec.shm}}
        )
        mounts.append({"mountPath": "/dev/shm", "name": SHM_VOLUME})
    if mounts:
        container["volumeMounts"] = mounts
        pod["volumes"] = volumes


def in_pool(spec: JobSpec, pod: dict[str, Any]) -> None:
    """A pod of a job placed in a node pool carries the pool's node labels in its
    ``nodeSelector`` and the pool's tolerations, added to the team's own."""
    pool = spec.pool_placement
    if not pool:
        return
    if pool.node_selector:
        pod["nodeSelector"] = {**(pod.get("nodeSelector") or {}), **dict(pool.node_selector)}
    if pool.tolerations:
        tolerations = list(pod.get("tolerations") or [])
        for toleration in pool.placement_tolerations():
            if toleration not in tolerations:
                tolerations.append(toleration)
        pod["tolerations"] = tolerations


def script_configmap(spec: JobSpec) -> dict[str, Any]:
    """The job's script text as a ConfigMap, mounted by the runtime's pods."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": metadata(spec, name=script_configmap_name(spec.object_name)),
        "data": {spec.script_filename: spec.script},
    }


def script_volume(spec: JobSpec) -> dict[str, Any]:
    return {
        "name": "script",
        "configMap": {
            "name": script_configmap_name(spec.object_name),
            "items": [{"key": spec.script_filename, "path": spec.script_filename}],
        },
    }
