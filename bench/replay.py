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
BATCH_SIZE = 1000  # jobs.services.BATCH_MAX


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


def prepare(scenario: Scenario, document: dict | None = None) -> object:
    """Load the scenario's tree (or ``document``, a tree holding it) and queue policies;
    return the user who submits."""
    from django.contrib.auth import get_user_model

    from queues.models import Queue
    from queues.services import tree_apply

    tree_apply(document=document or scenario.tree_document())
    for spec in scenario.queues:
        # Kueue's cluster queues default to BestEffortFIFO, which the generator keeps.
        Queue.objects.filter(node__path=spec.path).update(
            preemption=spec.preempt_lower_priority, policy=Queue.Policy.BEST_EFFORT
        )
    users = get_user_model().objects
    return users.filter(username="bench").first() or users.create_superuser(
        "bench", "bench@example.com", "bench-password"
    )


VARIANTS = ("service", "api", "service-batch", "api-batch")
BATCH_WINDOW_SECONDS = 0.05  # the batch variants group what falls due in this window


def replay(scenario: Scenario, *, variant: str, user, base_url: str = "") -> ReplayResult:
    """Submit every workload on time, wait until all have finished, and measure.

    ``service`` and ``api`` submit each workload alone, at its time, through ``job_submit``
    or ``POST /api/v1/jobs/``; ``service-batch`` and ``api-batch`` submit what falls due
    within each 50 ms together (up to 1,000 a request), through ``job_submit_batch`` or
    ``POST /api/v1/jobs/batch/``, as a CI pipeline submitting a sweep would.
    """
    submitters = {
        "service": _service_submitter,
        "api": _api_submitter,
        "service-batch": _service_batch_submitter,
        "api-batch": _api_batch_submitter,
    }
    submit = submitters[variant](user, base_url)
    lags: list[float] = []  # from a workload's time to the end of its submission
    start = time.monotonic()

    def submit_on_time(workloads) -> None:
        submit([job_body(workload) for workload in workloads])
        finished = time.monotonic()
        lags.extend(finished - (start + workload.at) for workload in workloads)

    with ThreadPoolExecutor(max_workers=SUBMITTERS) as pool:
        sent = []
        for group in _groups(scenario.workloads, batched=variant.endswith("-batch")):
            delay = start + group[0].at - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            sent.append(pool.submit(submit_on_time, group))
    for future in sent:
        future.result()  # a refused submission ends the run, rather than a wait for nothing
    timeout = max(600, 20 * scenario.physical_bound_seconds)
    finished = _wait_until_finished(scenario, timeout=timeout)
    return _measure(scenario, variant, lags, gave_up=None if finished else time.monotonic() - start)


def _groups(workloads, *, batched: bool):
    """One workload at a time, or what falls due within each window, 1,000 at most."""
    if not batched:
        yield from ([workload] for workload in workloads)
        return
    group: list = []
    for workload in workloads:
        if group and (
            workload.at - group[0].at >= BATCH_WINDOW_SECONDS or len(group) == BATCH_SIZE
        ):
            yield group
            group = []
        group.append(workload)
    if group:
        yield group


def _scenario_jobs(scenario: Scenario):
    """The scenario's jobs only (a probe may share the database)."""
    from jobs.models import Job

    return Job.objects.filter(queue__node__path__in=[q.path for q in scenario.queues])


def _service_submitter(user, _base_url):
    from jobs.document.schema import job_parse
    from jobs.services import job_submit

    def submit(bodies: list[dict]) -> None:
        for body in bodies:
            job_submit(user=user, draft=job_parse(body))

    return submit


def _service_batch_submitter(user, _base_url):
    from jobs.services import job_submit_batch

    def submit(bodies: list[dict]) -> None:
        job_submit_batch(user=user, documents=bodies)

    return submit


def _api_submitter(user, base_url: str):
    post = _api_poster(user)

    def submit(bodies: list[dict]) -> None:
        for body in bodies:
            post(f"{base_url}/api/v1/jobs/", body)

    return submit


def _api_batch_submitter(user, base_url: str):
    post = _api_poster(user)

    def submit(bodies: list[dict]) -> None:
        post(f"{base_url}/api/v1/jobs/batch/", {"jobs": bodies})

    return submit


def _api_poster(user):
    """POST JSON with the user's token, one HTTP session per submitting thread."""
    import requests

    from access.services import full_token

    token = full_token(user, name="bench")
    local = threading.local()

    def post(url: str, body: dict) -> None:
        session = getattr(local, "session", None)
        if session is None:
            session = local.session = requests.Session()
            session.headers["Authorization"] = f"Token {token}"
        response = session.post(url, json=body, timeout=60)
        response.raise_for_status()

    return post


def _wait_until_finished(scenario: Scenario, *, timeout: float) -> bool:
    """True once every job has finished; False if the timeout came first."""
    from jobs.models import TERMINAL

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        finished = _scenario_jobs(scenario).filter(state__in=TERMINAL).count()
        if finished >= len(scenario.workloads):
            return True
        time.sleep(0.5)
    return False


def _measure(
    scenario: Scenario, variant: str, lags: list[float], *, gave_up: float | None = None
) -> ReplayResult:
    """The figures; after a timeout (``gave_up``: seconds waited), over the finished jobs,
    with the wait as a lower bound of the wall time and a note saying so."""
    every = list(
        _scenario_jobs(scenario).values_list(
            "name", "queue__node__path", "enqueued_at", "dequeued_at", "finished_at",
            "request", "preemption_count", "state",
        )
    )  # fmt: skip
    rows = [row for row in every if row[3] is not None and row[4] is not None]
    failed = [name for name, *_rest, state in rows if state != "succeeded"]
    start = min(row[2] for row in every)
    end = max(row[4] for row in rows)
    wall = max((end - start).total_seconds(), gave_up or 0)
    waits: dict[str, list[float]] = defaultdict(list)
    held: dict[str, float] = defaultdict(float)
    for name, queue, enqueued, dequeued, finished, request, _preempted, _state in rows:
        waits[name.split("-")[0]].append((dequeued - enqueued).total_seconds())
        held[queue] += request.get("cpu", 0) / 1000 * (finished - dequeued).total_seconds()
    nominal = {q.path: q.nominal_cpu for q in scenario.queues}
    usage = [100 * held[path] / (cpu * wall) for path, cpu in nominal.items()]
    notes = [f"{len(failed)} jobs did not succeed"] if failed else []
    if gave_up is not None:
        notes.append(
            f"{scenario.name} through the {variant}: only {len(rows):,} of "
            f"{len(scenario.workloads):,} jobs had finished after {gave_up:.0f} s; the wall "
            "shown is that wait, a lower bound, and the other figures cover the finished jobs"
        )
    return ReplayResult(
        scenario=scenario.name,
        variant=variant,
        jobs=len(every),
        wall_seconds=round(wall, 1),
        physical_bound_seconds=round(scenario.physical_bound_seconds, 1),
        mean_admission_seconds={k: round(statistics.fmean(v), 2) for k, v in sorted(waits.items())},
        p99_admission_seconds={k: round(_p99(v), 2) for k, v in sorted(waits.items())},
        queue_usage_percent={
            "min": round(min(usage), 1),
            "mean": round(statistics.fmean(usage), 1),
            "max": round(max(usage), 1),
        },
        preemptions=sum(row[6] for row in every),
        submit_lag_p99_seconds=round(_p99(lags), 3),
        notes=notes,
    )


def _p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]
