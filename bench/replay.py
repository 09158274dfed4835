"""Replay a Kueue scenario on Caldera in real time and measure what Kueue's runner measures.

Each workload is submitted at its time, through the submit service (``job_submit``, as
the pages do) or through the REST API (as a CI pipeline does). The Celery worker admits
it, the simulated cluster runs it for its ``runtimeMs`` after its dequeue, and the finish
triggers the next admission. The recorder then reads the database: the wall time, each
class's mean time from submit to dequeue, and each queue's usage of its nominal quota.
"""

from __future__ import annotations

import statistics
import threading
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field

from .kueue import Scenario, job_body

SUBMITTERS = 8  # concurrent submitting clients (threads, each with its connection)


@dataclass
class ReplayResult:
    scenario: str
    variant: str
    jobs: int
    wall_seconds: float
    physical_bound_seconds: float
    mean_admission_seconds: dict[str, float]
    p99_admission_seconds: dict[str, float]
    queue_usage_percent: dict[str, float]  # min, mean, max over the queues
    preemptions: int
    submit_lag_p99_seconds: float  # from a workload's time to its submission's end, p99
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        return asdict(self)


def prepare(scenario: Scenario) -> object:
    """Load the scenario's tree and queue policies; return the user who submits."""
    from django.contrib.auth import get_user_model

    from queues.models import Queue
    from queues.services import tree_apply

    tree_apply(document=scenario.tree_document())
    for spec in scenario.queues:
        # Kueue's cluster queues default to BestEffortFIFO, which the generator keeps.
        Queue.objects.filter(node__path=spec.path).update(
            preemption=spec.preempt_lower_priority, policy=Queue.Policy.BEST_EFFORT
        )
    users = get_user_model().objects
    return users.filter(username="bench").first() or users.create_superuser(
        "bench", "bench@example.com", "bench-password"
    )


def replay(scenario: Scenario, *, variant: str, user, base_url: str = "") -> ReplayResult:
    """Submit every workload on time, wait until all have finished, and measure."""
    submit = _service_submitter(user) if variant == "service" else _api_submitter(user, base_url)
    lags: list[float] = []  # from a workload's time to the end of its submission
    start = time.monotonic()

    def submit_on_time(workload) -> None:
        submit(job_body(workload))
        lags.append(time.monotonic() - (start + workload.at))

    with ThreadPoolExecutor(max_workers=SUBMITTERS) as pool:
        for workload in scenario.workloads:
            delay = start + workload.at - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            pool.submit(submit_on_time, workload)
    _wait_until_finished(
        len(scenario.workloads), timeout=max(600, 20 * scenario.physical_bound_seconds)
    )
    return _measure(scenario, variant, lags)


def _service_submitter(user):
    from jobs.services import job_submit
    from jobs.validation import job_parse

    def submit(body: dict) -> None:
        job_submit(user=user, draft=job_parse(body))

    return submit


def _api_submitter(user, base_url: str):
    import requests
    from rest_framework.authtoken.models import Token

    token, _ = Token.objects.get_or_create(user=user)
    local = threading.local()

    def submit(body: dict) -> None:
        session = getattr(local, "session", None)
        if session is None:
            session = local.session = requests.Session()
            session.headers["Authorization"] = f"Token {token.key}"
        response = session.post(f"{base_url}/api/v1/jobs/", json=body, timeout=30)
        response.raise_for_status()

    return submit


def _wait_until_finished(expected: int, *, timeout: float) -> None:
    from jobs.models import TERMINAL, Job

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if Job.objects.filter(state__in=TERMINAL).count() >= expected:
            return
        time.sleep(0.5)
    raise RuntimeError(f"not every job finished within {timeout:.0f}s")


def _measure(scenario: Scenario, variant: str, lags: list[float]) -> ReplayResult:
    from jobs.models import Job

    rows = list(
        Job.objects.values_list(
            "name", "queue__node__path", "enqueued_at", "dequeued_at", "finished_at",
            "request", "preemption_count", "state",
        )
    )  # fmt: skip
    failed = [name for name, *_rest, state in rows if state != "succeeded"]
    start = min(row[2] for row in rows)
    end = max(row[4] for row in rows)
    wall = (end - start).total_seconds()
    waits: dict[str, list[float]] = defaultdict(list)
    held: dict[str, float] = defaultdict(float)
    for name, queue, enqueued, dequeued, finished, request, _preempted, _state in rows:
        waits[name.split("-")[0]].append((dequeued - enqueued).total_seconds())
        held[queue] += request.get("cpu", 0) / 1000 * (finished - dequeued).total_seconds()
    nominal = {q.path: q.nominal_cpu for q in scenario.queues}
    usage = [100 * held[path] / (cpu * wall) for path, cpu in nominal.items()]
    notes = [f"{len(failed)} jobs did not succeed"] if failed else []
    return ReplayResult(
        scenario=scenario.name,
        variant=variant,
        jobs=len(rows),
        wall_seconds=round(wall, 1),
        physical_bound_seconds=round(scenario.physical_bound_seconds, 1),
        mean_admission_seconds={k: round(statistics.fmean(v), 2) for k, v in sorted(waits.items())},
        p99_admission_seconds={k: round(_p99(v), 2) for k, v in sorted(waits.items())},
        queue_usage_percent={
            "min": round(min(usage), 1),
            "mean": round(statistics.fmean(usage), 1),
            "max": round(max(usage), 1),
        },
        preemptions=sum(row[6] for row in rows),
        submit_lag_p99_seconds=round(_p99(lags), 3),
        notes=notes,
    )


def _p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]
