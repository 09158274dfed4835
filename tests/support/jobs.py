"""Job documents and the submit helper the service-level tests share: a job submitted
through ``job_submit`` at a given time, read again, and documents shaped for a rule."""

from __future__ import annotations

import copy

from jobs.document.schema import job_parse
from jobs.services import job_submit

from ..conftest import RAY_JOB

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
