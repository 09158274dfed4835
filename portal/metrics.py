"""GET /metrics: Prometheus figures, read from the database at each scrape.

The database is the truth, so every figure is what it holds at the moment of the scrape,
whichever process answers: no counter lives in a web or worker process to be lost with it.
The names follow Kueue's where they mean the same (``kueue_pending_workloads`` ->
``caldera_pending_jobs``, ``kueue_admitted_workloads_total`` ->
``caldera_admitted_jobs_total``, ``kueue_admission_wait_time_seconds`` ->
``caldera_admission_wait_time_seconds``, the cluster queue's nominal quota and usage ->
``caldera_quota_min`` / ``_max`` / ``_used``), so a platform team's Kueue dashboards and
alerts carry over. Resources are in their base units (cpu in cores, memory in bytes).

Who may read: with METRICS_TOKEN set, a request that sends it as a bearer token; without
it, only requests from the machine itself (a sidecar, ``kubectl port-forward``).
"""

from __future__ import annotations

import hmac
from collections.abc import Iterator

from django.conf import settings
from django.db import connection
from django.http import HttpRequest, HttpResponse
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)

from jobs.models import JOBS, PENDING, JobEvent, State
from jobs.selectors import usage_by_path
from kube.quantity import scale
from queues.selectors import QUEUES, tree_nodes

# Seconds from enqueue to admission, as Kueue's admission wait buckets reach (1 s to 3 h).
WAIT_BUCKETS = (1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0, 10800.0)
EVENTS = JobEvent._meta.db_table
ADMITTED = "Dequeued"  # the event every admission writes (jobs.admission)
PREEMPTED = "Preempted"


class DatabaseCollector:
    """Every figure, from a few grouped queries."""

    def collect(self) -> Iterator[Metric]:
        yield self._pending()
        yield from self._admissions()
        yield from self._quota()

    def _pending(self) -> Metric:
        pending = GaugeMetricFamily(
            "caldera_pending_jobs",
            "Jobs waiting in each queue: active (queued, to be tried) or inadmissible "
            "(in backoff after a try)",
            labels=["queue", "status"],
        )
        with connection.cursor() as cursor:
            cursor.execute(
                f"""
                SELECT q.name, j.state, COUNT(*) FROM {JOBS} j
                JOIN {QUEUES} q ON q.id = j.queue_id
                WHERE j.state = ANY(%s) GROUP BY q.name, j.state
                """,
                [list(PENDING)],
            )
            rows = cursor.fetchall()
        for queue, state, count in sorted(rows):
            status = "active" if state == State.QUEUED else "inadmissible"
            pending.add_metric([queue, status], count)
        return pending

    def _admissions(self) -> Iterator[Metric]:
        admitted = CounterMetricFamily(
            "caldera_admitted_jobs",
            "Admissions (dequeues) of jobs, by queue",
            labels=["queue"],
        )
        preempted = CounterMetricFamily(
            "caldera_preempted_jobs",
            "Jobs preempted, by the queue they were preempted from",
            labels=["queue"],
        )
        wait = HistogramMetricFamily(
            "caldera_admission_wait_time_seconds",
            "Time from a job's enqueue to each of its admissions",
            labels=["queue"],
        )
        bounds = list(WAIT_BUCKETS)
        with connection.cursor() as cursor:
            cursor.execute(
                f"""
                SELECT q.name, e.reason, width_bucket(
                           EXTRACT(EPOCH FROM e.created_at - j.enqueued_at)::float8, %s::float8[]
                       ) AS bucket,
                       COUNT(*), SUM(EXTRACT(EPOCH FROM e.created_at - j.enqueued_at))
                FROM {EVENTS} e
                JOIN {JOBS} j ON j.id = e.job_id
                JOIN {QUEUES} q ON q.id = j.queue_id
                WHERE e.reason = ANY(%s)
                GROUP BY q.name, e.reason, bucket
                """,
                [bounds, [ADMITTED, PREEMPTED]],
            )
            rows = cursor.fetchall()
        counts: dict[str, int] = {}
        waits: dict[str, tuple[list[int], float]] = {}
        for queue, reason, bucket, count, seconds in rows:
            if reason == PREEMPTED:
                counts[queue] = counts.get(queue, 0) + count
                continue
            per_bucket, total = waits.setdefault(queue, ([0] * (len(bounds) + 1), 0.0))
            per_bucket[bucket] += count  # width_bucket: 0 below the first bound, n above
            waits[queue] = (per_bucket, total + float(seconds or 0))
        for queue, (per_bucket, total) in sorted(waits.items()):
            admitted.add_metric([queue], sum(per_bucket))
            cumulative, buckets = 0, []
            for bound, count in zip([*bounds, float("inf")], per_bucket, strict=True):
                cumulative += count
                buckets.append(("+Inf" if bound == float("inf") else str(bound), cumulative))
            wait.add_metric([queue], buckets, total)
        for queue, count in sorted(counts.items()):
            preempted.add_metric([queue], count)
        yield from (admitted, preempted, wait)

    def _quota(self) -> Iterator[Metric]:
        labels = ["node", "resource"]
        described = {
            "min": "The node's guaranteed quota (min)",
            "max": "The node's ceiling (max)",
            "used": "What the jobs under the node hold (admitted, running, leaving)",
        }
        families = {
            name: GaugeMetricFamily(f"caldera_quota_{name}", text, labels=labels)
            for name, text in described.items()
        }
        used = usage_by_path()
        for path, node in sorted(tree_nodes().items()):
            for name, amounts in (
                ("min", node.min),
                ("max", node.max),
                ("used", used.get(path, {})),
            ):
                for resource, units in sorted(amounts.items()):
                    families[name].add_metric([path, resource], units / scale(resource))
        yield from families.values()


REGISTRY = CollectorRegistry(auto_describe=False)
REGISTRY.register(DatabaseCollector())


def metrics(request: HttpRequest) -> HttpResponse:
    token = settings.METRICS_TOKEN
    if token:
        sent = request.headers.get("Authorization", "").removeprefix("Bearer ")
        if not hmac.compare_digest(sent.encode(), token.encode()):
            return HttpResponse("a bearer token (METRICS_TOKEN) is required\n", status=401)
    elif request.META.get("REMOTE_ADDR") not in ("127.0.0.1", "::1"):
        return HttpResponse(
            "set METRICS_TOKEN to read the metrics from another machine\n", status=403
        )
    return HttpResponse(generate_latest(REGISTRY), content_type=CONTENT_TYPE_LATEST)
