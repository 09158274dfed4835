"""The job specs the backend and manifest tests build on: the seed's RayJob, a PyTorchJob,
and the RayJob on Volcano, each with keyword changes, and a RayJob gang sized for the
simulated cluster's tests (plain data, no database)."""

from __future__ import annotations

from datetime import UTC, datetime

from jobs.cluster.spec import JobSpec, PodGroup

ENQUEUED = datetime(2025, 1, 10, 1, 36, 24, 298639, tzinfo=UTC)


def ray_spec(**changes) -> JobSpec:
    values = dict(
        id=7,
        name="rayjob-video",
        object_name="rayjob-video-7",
        namespace="video",
        kind="ray",
        runtime="kuberay",
        image="rayproject/ray:2.36.1",
        head=PodGroup("head", 1, {"cpu": "4", "memory": "4G"}),
        workers=(PodGroup("small-group", 2, {"cpu": "4", "memory": "4G"}),),
        queue_name="root-algorithm-video",
        queue_path="root/algorithm/video",
        department="algorithm",
        owner="alice",
        script="import ray\nray.init()\n",
        script_filename="sample_code.py",
        enqueued_at=ENQUEUED,
    )
    values.update(changes)
    return JobSpec(**values)


def pytorch_spec(**changes) -> JobSpec:
    gpu = {"cpu": "8", "memory": "32Gi", "nvidia.com/gpu": "1"}
    values = dict(
        id=9,
        name="resnet-ddp",
        object_name="resnet-ddp-9",
        namespace="text",
        kind="pytorch",
        runtime="kubeflow",
        image="pytorch/pytorch:2.4.0-cuda12.1-cudnn9-runtime",
        head=PodGroup("master", 1, gpu),
        workers=(PodGroup("worker", 3, gpu),),
        queue_name="root-algorithm-text",
        queue_path="root/algorithm/text",
        department="algorithm",
        owner="alice",
        command=("torchrun", "train.py"),
        enqueued_at=ENQUEUED,
    )
    values.update(changes)
    return JobSpec(**values)


def volcano_spec(**changes):
    return ray_spec(id=11, object_name="rayjob-video-11", runtime="volcano", **changes)


def gang_spec(job_id, head_cpu="4", workers=2, worker_cpu="4", run_seconds=60) -> JobSpec:
    """RayJob ``rayjob-<job_id>`` in video: a head and ``workers`` workers of the given cpu,
    running ``run_seconds`` on the simulated cluster."""
    return JobSpec(
        id=job_id,
        name=f"rayjob-{job_id}",
        object_name=f"rayjob-{job_id}",
        namespace="video",
        kind="ray",
        runtime="kuberay",
        image="rayproject/ray:2.36.1",
        head=PodGroup("head", 1, {"cpu": head_cpu, "memory": "4G"}),
        workers=(PodGroup("small-group", workers, {"cpu": worker_cpu, "memory": "4G"}),),
        queue_name="root-algorithm-video",
        queue_path="root/algorithm/video",
        department="algorithm",
        owner="alice",
        run_seconds=run_seconds,
    )
