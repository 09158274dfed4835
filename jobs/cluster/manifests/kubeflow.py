"""PyTorch on Kubeflow: a ``kubeflow.org/v1`` PyTorchJob with a Master and Workers."""

from __future__ import annotations

from typing import Any

from jobs.cluster.spec import JobSpec, PodGroup

from . import common

SCRIPT_DIR = "/workspace"


def command(spec: JobSpec) -> list[str]:
    if spec.command:
        return list(spec.command)
    return ["python", f"{SCRIPT_DIR}/{spec.script_filename}"]


def replica_spec(spec: JobSpec, group: PodGroup, replicas: int) -> dict[str, Any]:
    container: dict[str, Any] = {
        "name": "pytorch",
        "image": spec.image,
        "command": command(spec),
        "resources": common.resources(group.resources, group.limits),
    }
    if spec.env or spec.secret_env:
        container["env"] = common.env(spec)
    pod: dict[str, Any] = {"containers": [container]}
    common.storage(spec, pod, container, SCRIPT_DIR)
    common.in_pool(spec, pod)
    return {
        "replicas": replicas,
        "restartPolicy": "OnFailure",
        "template": {"metadata": {"labels": common.labels(spec)}, "spec": pod},
    }


def pytorchjob(spec: JobSpec) -> dict[str, Any]:
    replica_specs = {"Master": replica_spec(spec, spec.head, 1)}
    if spec.workers:
        # Kubeflow has one Worker replica type, so a PyTorch job has one worker group.
        (workers,) = spec.workers
        replica_specs["Worker"] = replica_spec(spec, workers, workers.replicas)
    scheduling = {"queue": spec.queue_name, "minAvailable": len(spec.pods)}
    if spec.priority_class:
        scheduling["priorityClass"] = spec.priority_class
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": common.metadata(spec),
        "spec": {
            "runPolicy": {"suspend": spec.suspend, "schedulingPolicy": scheduling},
            "pytorchReplicaSpecs": replica_specs,
        },
    }
