"""How far the estimated start (jobs/reads/estimate.py) is from the actual start, over Kueue's
baseline scenario replayed in real time.

While the replay runs, the sampler makes the estimates every ESTIMATE_SECONDS, as beat
does in production (the bench's worker leaves it to the sampler, so that each refresh is
timed), and about SAMPLES times reads the estimates of up to SAMPLE_JOBS pending jobs
picked at random, as a job page does. Once every job has finished, each estimate is
compared with the job's actual start (its dequeue: the simulated cluster starts its pods
at once).
"""

from __future__ import annotations

import statistics
import threading
import time
from collections import defaultdict

SAMPLES = 40  # over the scenario's physical bound, so over the busy part of its replay
SAMPLE_JOBS = 25


def sample(
    paths: list[str], *, every: float, until: threading.Event, took: list[float]
) -> list[tuple[int, float, float | None]]:
    """(job id, when asked, the estimate) as epoch seconds, every ``every`` seconds until
    ``until`` is set; the estimate is None where there was none. ``took`` receives the
    seconds each refresh of the estimates took."""
    from django.conf import settings
    from django.db import connection
    from django.utils import timezone

    from jobs.models import PENDING, Job
    from jobs.reads.estimate import estimates, estimates_refresh
    from jobs.reads.selectors import job_positions

    samples: list[tuple[int, float, float | None]] = []
    refresh_at = time.monotonic()
    try:
        while not until.wait(every):
            if time.monotonic() >= refresh_at:
                refresh_at += settings.ESTIMATE_SECONDS
                begun = time.perf_counter()
                estimates_refresh()
                took.append(time.perf_counter() - begun)
            jobs = list(
                Job.objects.filter(state__in=PENDING, queue__node__path__in=paths)
                .select_related("queue__node")
                .order_by("?")[:SAMPLE_JOBS]
            )
            now = timezone.now()
            told = estimates(jobs, job_positions(jobs))
            samples += [
                (key, now.timestamp(), None if e.at is None else e.at.timestamp())
                for key, e in told.items()
            ]
    finally:
        connection.close()
    return samples


def errors(samples: list[tuple[int, float, float | None]]) -> dict:
    """Per workload class and over all: how many estimates, how many had none, the mean
    absolute error, its 90th percentile and its mean with the sign (below zero: early),
    and how long the jobs went on waiting after each estimate, on average (seconds)."""
    from jobs.models import Job

    started = dict(
        Job.objects.filter(pk__in={key for key, _at, _estimate in samples}).values_list(
            "pk", "dequeued_at"
        )
    )
    names = dict(Job.objects.filter(pk__in=started).values_list("pk", "name"))
    by_class: dict[str, dict[str, list]] = defaultdict(lambda: defaultdict(list))
    for key, asked, estimate in samples:
        start = started.get(key)
        for group in (names[key].split("-")[0], "all"):
            if estimate is None or start is None:
                by_class[group]["none"].append(key)
                continue
            by_class[group]["error"].append(abs(estimate - start.timestamp()))
            by_class[group]["signed"].append(estimate - start.timestamp())
            by_class[group]["wait"].append(start.timestamp() - asked)
    return {group: _summary(figures) for group, figures in sorted(by_class.items())}


def call_times(took: list[float]) -> dict:
    ordered = sorted(took)
    return {
        "calls": len(ordered),
        "p50_ms": 1000 * ordered[len(ordered) // 2] if ordered else None,
        "max_ms": 1000 * ordered[-1] if ordered else None,
    }


def _summary(figures: dict[str, list]) -> dict:
    error, wait = sorted(figures["error"]), figures["wait"]
    return {
        "estimates": len(error),
        "without": len(figures["none"]),
        "mae_seconds": statistics.fmean(error) if error else None,
        # Below zero: the estimates came early on the whole.
        "bias_seconds": statistics.fmean(figures["signed"]) if error else None,
        "p90_seconds": error[int(0.9 * (len(error) - 1))] if error else None,
        "mean_wait_seconds": statistics.fmean(wait) if wait else None,
    }
