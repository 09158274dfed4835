"""Reaction time: from a finish or a cancel to the next job's dequeue.

A probe queue of its own (1 cpu, in a department of its own) holds one running job and
one waiting job at a time. Each round measures both reactions:

- finish: job A runs 0.3 s; from the moment its pod finishes in the cluster (the pod's
  start plus its run time, as a real cluster stamps a container's finish) to the dequeue
  of job B, which was waiting behind it;
- cancel: job C waits behind B; from just before B is cancelled through the submit
  service to C's dequeue.

Rounds run with the workers otherwise idle, and alongside the baseline replay (the probe
queue is outside the scenario's cohorts, so it takes nothing from them and they take
nothing from it: what it measures is how fast the busy workers notice and act).
"""

from __future__ import annotations

import statistics
import threading
import time
from datetime import timedelta

PROBE = "root/probe/probe"
FINISH_RUN_SECONDS = 0.3
WAIT_TIMEOUT = 60


def with_probe(document: dict) -> dict:
    """The tree plus a department with the 1-cpu probe queue."""
    root = document["spec"]["root"]
    root["min"] = {"cpu": root["min"]["cpu"] + 1}
    root["max"] = {"cpu": root["max"]["cpu"] + 1}
    root["children"].append(
        {
            "name": "probe",
            "min": {"cpu": 1},
            "max": {"cpu": 1},
            "children": [
                {"name": "probe", "min": {"cpu": 1}, "max": {"cpu": 1}, "namespaces": ["probe"]}
            ],
        }
    )
    return document


def probe(user, *, rounds: int | None = None, until: threading.Event | None = None) -> dict:
    """Run rounds until ``rounds`` are done or ``until`` is set; p50/p99 of each reaction."""
    from django.db import connection

    finishes: list[float] = []
    cancels: list[float] = []
    try:
        done = 0
        while (rounds is None or done < rounds) and not (until and until.is_set()):
            finish, cancel = _round(user, done)
            finishes.append(finish)
            cancels.append(cancel)
            done += 1
    finally:
        connection.close()
    return {"rounds": len(finishes), "finish": _summary(finishes), "cancel": _summary(cancels)}


def _round(user, index: int) -> tuple[float, float]:
    from django.utils import timezone

    from jobs.models import Job, SimulatedPod
    from jobs.services import job_cancel

    a = _submit(user, f"probe-a-{index}", FINISH_RUN_SECONDS)
    b = _submit(user, f"probe-b-{index}", 3600)
    started = _wait(
        lambda: (
            SimulatedPod.objects.filter(job_id=a.pk, started_at__isnull=False)
            .values_list("started_at", flat=True)
            .first()
        )
    )
    finished_at = started + timedelta(seconds=FINISH_RUN_SECONDS)
    b_dequeued = _wait(lambda: _dequeued_at(b.pk))
    c = _submit(user, f"probe-c-{index}", 3600)
    time.sleep(0.05)  # C is tried and waits behind B
    cancelled_at = timezone.now()
    job_cancel(user=user, job=Job.objects.get(pk=b.pk))
    c_dequeued = _wait(lambda: _dequeued_at(c.pk))
    job_cancel(user=user, job=Job.objects.get(pk=c.pk))
    return (b_dequeued - finished_at).total_seconds(), (c_dequeued - cancelled_at).total_seconds()


def _submit(user, name: str, run_seconds: float):
    from jobs.document.schema import job_parse
    from jobs.services import job_submit

    body = {
        "queue": PROBE,
        "kind": "ray",
        "name": name,
        "image": "rayproject/ray:2.36.1",
        "entrypoint": "python probe.py",
        "head": {"resources": {"cpu": "1"}},
        "run_seconds": run_seconds,
    }
    return job_submit(user=user, draft=job_parse(body))


def _dequeued_at(pk: int):
    from jobs.models import Job

    return Job.objects.filter(pk=pk).values_list("dequeued_at", flat=True).first()


def _wait(read):
    deadline = time.monotonic() + WAIT_TIMEOUT
    while time.monotonic() < deadline:
        value = read()
        if value is not None:
            return value
        time.sleep(0.005)
    raise RuntimeError(f"the probe waited {WAIT_TIMEOUT}s for a dequeue that did not come")


def _summary(values: list[float]) -> dict:
    if not values:
        return {"p50_ms": None, "p99_ms": None, "max_ms": None}
    ordered = sorted(values)
    return {
        "p50_ms": round(statistics.median(ordered) * 1000, 1),
        "p99_ms": round(ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))] * 1000, 1),
        "max_ms": round(ordered[-1] * 1000, 1),
    }
