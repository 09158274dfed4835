"""Ray on KubeRay: a ``ray.io/v1`` RayJob, shaped like the seed's (003) RayJob."""

from __future__ import annotations

from typing import Any

import yaml

from jobs.cluster.spec import AUTOSCALER_RESOURCES, JobSpec

from . import common

RAY_VERSION = "2.36.1"
SCRIPT_DIR = "/home/ray/samples"
TTL_SECONDS_AFTER_FINISHED = 60
HEAD_PORTS = [
    {"containerPort": 6379, "name": "gcs-server"},
    {"containerPort": 8265, "name": "dashboard"},
    {"containerPort": 10001, "name": "client"},
]


def entrypoint(spec: JobSpec) -> str:
    if spec.entrypoint:
        return spec.entrypoint
    return f"python {SCRIPT_DIR}/{spec.script_filename}"


def head_group(spec: JobSpec) -> dict[str, Any]:
    container: dict[str, Any] = {
        "name": "ray-head",
        "image": spec.image,
        "ports": HEAD_PORTS,
        "resources": common.resources(spec.head.resources, spec.head.limits),
    }
    if spec.secret_env:  # the rest of its variables are the runtime environment's
        container["env"] = common.secret_env(spec)
    pod: dict[str, Any] = {"containers": [container]}
    common.storage(spec, pod, container, SCRIPT_DIR)
    common.in_pool(spec, pod)
    return {
        "rayStartParams": {"dashboard-host": "0.0.0.0"},
        "template": {"metadata": {"labels": common.labels(spec)}, "spec": pod},
    }


def worker_group(spec: JobSpec, index: int) -> dict[str, Any]:
    """A worker group of ``replicas`` pods; one that autoscales starts there (its minimum)
    and KubeRay's autoscaler may grow it to ``max_replicas``."""
    group = spec.workers[index]
    container: dict[str, Any] = {
        "name": "ray-worker",
        "image": spec.image,
        "lifecycle": {"preStop": {"exec": {"command": ["/bin/sh", "-c", "ray stop"]}}},
        "resources": common.resources(group.resources, group.limits),
    }
    if spec.secret_env:
        container["env"] = common.secret_env(spec)
    pod: dict[str, Any] = {"containers": [container]}
    common.storage(spec, pod, container, "")
    common.in_pool(spec, pod)
    return {
        "groupName": group.name,
        "replicas": group.replicas,
        "minReplicas": group.replicas,
        "maxReplicas": group.max_replicas if group.autoscales else group.replicas,
        "rayStartParams": {},
        "template": {"metadata": {"labels": common.labels(spec)}, "spec": pod},
    }


def rayjob(spec: JobSpec) -> dict[str, Any]:
    metadata = common.metadata(spec)
    if spec.priority_class:
        metadata["labels"]["ray.io/priority-class-name"] = spec.priority_class
    if spec.batch_scheduler == "volcano":
        metadata["labels"]["volcano.sh/queue-name"] = common.label_value(spec.queue_name)
    cluster: dict[str, Any] = {"rayVersion": RAY_VERSION}
    if spec.autoscales:
        # KubeRay then runs its autoscaler beside the head, with the resources the job's
        # quota request counts for it.
        cluster["enableInTreeAutoscaling"] = True
        cluster["autoscalerOptions"] = {
            "resources": {"requests": AUTOSCALER_RESOURCES, "limits": AUTOSCALER_RESOURCES}
        }
    cluster["headGroupSpec"] = head_group(spec)
    cluster["workerGroupSpecs"] = [worker_group(spec, i) for i in range(len(spec.workers))]
    job_spec = {
        "entrypoint": entrypoint(spec),
        "shutdownAfterJobFinishes": True,
        "ttlSecondsAfterFinished": TTL_SECONDS_AFTER_FINISHED,
        "suspend": spec.suspend,
        "rayClusterSpec": cluster,
    }
    if spec.pip or spec.env:
        job_spec["runtimeEnvYAML"] = runtime_env_yaml(spec)
    return {"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": metadata, "spec": job_spec}


def runtime_env_yaml(spec: JobSpec) -> str:
    """Ray's runtime environment, as seed 003 writes it: ``pip`` and ``env_vars``."""
    runtime_env: dict[str, Any] = {}
    if spec.pip:
        runtime_env["pip"] = list(spec.pip)
    if spec.env:
        runtime_env["env_vars"] = dict(sorted(spec.env.items()))
    return yaml.safe_dump(runtime_env, sort_keys=False)
