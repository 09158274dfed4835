"""Job documents and the submit helper the service-level tests share: the seed's RayJob
and PyTorchJob, documents shaped for a rule, a job submitted through ``job_submit`` at a
given time and read again, and one already running on the cluster."""

from __future__ import annotations

import copy
from datetime import timedelta

from django.utils import timezone

from jobs.document.schema import job_parse
from jobs.engine.admission.cycle import admission_cycle
from jobs.engine.reconcile import jobs_reconcile
from jobs.engine.sync import cluster_sync
from jobs.models import Job, State
from jobs.services import job_submit

RAY_JOB = {
    "queue": "root/algorithm/video",
    "kind": "ray",
    "runtime": "kuberay",
    "name": "rayjob-video",
    "image": "rayproject/ray:2.36.1",
    "entrypoint": "python /home/ray/samples/sample_code.py",
    "head": {"resources": {"cpu": "4", "memory": "4G"}},
    "workers": [{"name": "small-group", "replicas": 2, "resources": {"cpu": "4", "memory": "4G"}}],
    "priority": 0,
    "run_seconds": 600,
}

PYTORCH_JOB = {
    "queue": "root/algorithm/text",
    "kind": "pytorch",
    "runtime": "kubeflow",
    "name": "resnet-ddp",
    "image": "pytorch/pytorch:2.4.0-cuda12.1-cudnn9-runtime",
    "command": ["torchrun", "train.py"],
    "master": {"resources": {"cpu": "2", "memory": "8Gi", "nvidia.com/gpu": "1"}},
    "workers": [
        {
            "name": "worker",
            "replicas": 2,
            "resources": {"cpu": "2", "memory": "8Gi", "nvidia.com/gpu": "1"},
        }
    ],
    "run_seconds": 120,
}


# A gang that two 8-cpu nodes cannot hold, though each of its pods fits one (5 + 4.5 + 4.5
# cpu, within the video leaf's max of 14): a pod larger than every node is refused at submit.
UNPACKABLE = {
    "head": {"resources": {"cpu": "5", "memory": "1Gi"}},
    "workers": [
        {"name": "small-group", "replicas": 2, "resources": {"cpu": "4500m", "memory": "1Gi"}}
    ],
}

INTERN_JOB = {
    **RAY_JOB,
    "queue": "root/interns/intern-video",
    "name": "intern-sweep",
    "workers": [{"name": "small-group", "replicas": 3, "resources": {"cpu": "4", "memory": "4G"}}],
}  # 16 cpu: four of them fill the simulated cluster's 64


def submit_document(user, document: dict, *, now=None, **changes):
    """``document`` with ``changes`` submitted by ``user`` through ``job_submit`` (at
    ``now``, else the present)."""
    draft = job_parse({**copy.deepcopy(document), **changes})
    return job_submit(user=user, draft=draft, now=now)


def submit(user, now=None, **changes):
    """The seed's RayJob with ``changes``, submitted by ``user`` (at ``now``)."""
    return submit_document(user, RAY_JOB, now=now, **changes)


def refresh(job):
    job.refresh_from_db()
    return job


# Two progress lines written (at 5 s and 10 s), the next one 4.8 s away: two requests in a
# row read the same log.
AGO = 10.2


def running(user, *, ago: float = AGO, kube=None) -> Job:
    """A job of ``user``'s, admitted and running in the cluster since ``ago`` seconds (on
    the emulated Kubernetes cluster ``kube``, whose operator the test plays, if given)."""
    started = timezone.now() - timedelta(seconds=ago)
    job = job_submit(user=user, draft=job_parse(RAY_JOB), now=started)
    admission_cycle(now=started)
    jobs_reconcile([job.pk], now=started)
    if kube is not None:
        running = {"jobDeploymentStatus": "Running", "jobStatus": "RUNNING"}
        kube.set_status("kuberay", "video", f"rayjob-video-{job.pk}", running)
    cluster_sync(now=started)
    job.refresh_from_db()
    assert job.state == State.RUNNING
    return job
