"""Ray and PyTorch on Volcano: a ``batch.volcano.sh/v1alpha1`` Job with the job's plugin.

Ray uses the ``ray`` plugin (it starts the head and points the workers at it) and the
``svc`` plugin (the headless service the pods find each other through); PyTorch uses the
``pytorch`` plugin (``--master=master --worker=worker --port=23456``, as the sample in
k8s/samples does) and ``svc``. The task and container names are the plugins' defaults,
so the plugins need no further arguments. Every pod counts towards ``minAvailable``: the
job is a gang. A pod evicted by the scheduler restarts the whole job.
"""

from __future__ import annotations

from typing import Any

from jobs.cluster.spec import JobSpec, PodGroup

from . import common, kubeflow, kuberay

MAX_RETRY = 3
PYTORCH_PLUGIN = ["--master=master", "--worker=worker", "--port=23456"]


def _task(
    spec: JobSpec, name: str, group: PodGroup, replicas: int, container: dict[str, Any]
) -> dict[str, Any]:
    container = {
        "name": name,
        "image": spec.image,
        **container,
        "resources": common.resources(group.resources, group.limits),
    }
    if spec.env or spec.secret_env:
        container["env"] = common.env(spec)
    pod: dict[str, Any] = {"containers": [container], "restartPolicy": "OnFailure"}
    common.storage(spec, pod, container, _script_dir(spec))
    common.in_pool(spec, pod)
    if spec.priority_class:
        pod["priorityClassName"] = spec.priority_class
    return {
        "name": name,
        "replicas": replicas,
        "template": {"metadata": {"labels": common.labels(spec)}, "spec": pod},
    }


def _script_dir(spec: JobSpec) -> str:
    return kuberay.SCRIPT_DIR if spec.kind == "ray" else kubeflow.SCRIPT_DIR


def _job(spec: JobSpec, plugins: dict[str, Any], tasks: list[dict[str, Any]]) -> dict[str, Any]:
    metadata = common.metadata(spec)
    metadata["labels"]["volcano.sh/queue-name"] = common.label_value(spec.queue_name)
    job_spec = {
        "schedulerName": "volcano",
        "queue": spec.queue_name,
        "minAvailable": len(spec.pods),
        "maxRetry": MAX_RETRY,
        "plugins": plugins,
        "policies": [{"event": "PodEvicted", "action": "RestartJob"}],
        "tasks": tasks,
    }
    if spec.priority_class:
        job_spec["priorityClassName"] = spec.priority_class
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": metadata,
        "spec": job_spec,
    }


def ray_job(spec: JobSpec) -> dict[str, Any]:
    """Head and worker tasks; the head runs the entrypoint once the cluster is up."""
    head = _task(
        spec,
        "head",
        spec.head,
        1,
        {"ports": kuberay.HEAD_PORTS, "command": ["/bin/sh", "-c", kuberay.entrypoint(spec)]},
    )
    tasks = [head]
    # Validation allows one worker group here: the ray plugin knows one worker task.
    for group in spec.workers[:1]:
        tasks.append(_task(spec, "worker", group, group.replicas, {}))
    return _job(spec, {"ray": [], "svc": []}, tasks)


def pytorch_job(spec: JobSpec) -> dict[str, Any]:
    """Master and worker tasks; the job completes when the master does."""
    master = _task(spec, "master", spec.head, 1, {"command": kubeflow.command(spec)})
    master["policies"] = [{"event": "TaskCompleted", "action": "CompleteJob"}]
    tasks = [master]
    for group in spec.workers[:1]:
        tasks.append(
            _task(spec, "worker", group, group.replicas, {"command": kubeflow.command(spec)})
        )
    return _job(spec, {"pytorch": PYTORCH_PLUGIN, "svc": []}, tasks)
