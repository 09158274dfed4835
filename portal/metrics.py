"""Prometheus figures at two addresses: GET /metrics/deployment, the deployment's figures
read from the database; GET /metrics, what this pod's processes counted.

One set of the deployment's figures per deployment: every web pod can answer
/metrics/deployment with the same figures, so it is scraped once, through the Service
(deploy/monitoring/scrapeconfig.yaml), not once per pod, and two replicas never give an
alert or a sum duplicate series. The database is the truth, so every figure is what it
holds at the moment of the scrape, whichever pod answers: no counter lives in a web or
worker process to be lost with it, and the counters read from events only grow: events
retention deletes are kept as tallies (``jobs.models.RetiredEvents``).
The names follow Kueue's where they mean the same (``kueue_pending_workloads`` ->
``caldera_pending_jobs``, ``kueue_admitted_workloads_total`` ->
``caldera_admitted_jobs_total``, ``kueue_admission_wait_time_seconds`` ->
``caldera_admission_wait_time_seconds``, the cluster queue's nominal quota and usage ->
``caldera_quota_min`` / ``_max`` / ``_used``), so a platform team's Kueue dashboards and
alerts carry over. Resources are in their base units (cpu in cores, memory in bytes).

At /metrics, what the processes count: HTTP requests and their latency (counted here),
admission cycles and cluster calls (jobs.telemetry), added up over the pod's processes
(portal/process_metrics.py), scraped from every pod.

Who may read: with METRICS_TOKEN set, a request that sends it as a bearer token; without
it, only requests from the machine itself (a sidecar, ``kubectl port-forward``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

from django.conf import settings
from django.db.models import Count
from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
)
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)

from jobs.models import JobEvent, Lease, State
from jobs.reads.selectors import jobs_stuck_leaving, usage_by_path
from jobs.tables.events import ADMISSION_WAIT_BOUNDS, event_waits
from jobs.tables.jobs import HELD, queue_pending_counts
from kube.quantity import pool_parts, scale
from queues.limits import limits_of
from queues.models import Queue
from queues.selectors import tree_nodes

from .process_metrics import allowed, process_registry

REASON = JobEvent.Reason
# The status label of caldera_pending_jobs for each pending state, as Kueue names them, and
# for held jobs, which Kueue would call deactivated.
PENDING_STATUS = {State.QUEUED: "active", State.BACKOFF: "inadmissible", HELD: "held"}


class DatabaseCollector:
    """Every figure, from a few grouped queries."""

    def collect(self) -> Iterator[Metric]:
        yield self._pending()
        yield self._stuck_leaving()
        yield from self._admissions()
        yield from self._quota()
        yield self._last_success()

    def _last_success(self) -> Metric:
        """When each singleton last ended well, whichever process ran it: a sync or a cycle
        that stopped (beat down, every worker stuck) shows as a time that no longer moves."""
        done = GaugeMetricFamily(
            "caldera_last_success_timestamp_seconds",
            "When the work last ended well (Unix time): the admission cycle, the cluster "
            "sync, the start estimates, a webhook pass",
            labels=["work"],
        )
        for name, at in Lease.objects.values_list("name", "done_at"):
            if at is not None:
                done.add_metric([name], at.timestamp())
        return done

    def _pending(self) -> Metric:
        """Every active queue, with 0 where nothing waits (as Kueue's gauge does), so a
        graph or an alert sees an empty queue rather than a missing one; a retired queue
        only while jobs still wait in it."""
        pending = GaugeMetricFamily(
            "caldera_pending_jobs",
            "Jobs waiting in each queue: active (queued, to be tried), inadmissible "
            "(in backoff after a try) or held (skipped until released)",
            labels=["queue", "status"],
        )
        rows = queue_pending_counts()
        counts = {(queue, state): count for queue, state, count in rows}
        for queue in sorted({queue for queue, _, _ in rows}):
            for state, status in PENDING_STATUS.items():
                pending.add_metric([queue, status], counts.get((queue, state), 0))
        return pending

    def _stuck_leaving(self) -> Metric:
        """Every active queue, with 0 where no job is stuck, as for pending jobs; a
        retired queue only while one is."""
        stuck = GaugeMetricFamily(
            "caldera_leaving_jobs_stuck",
            "Jobs stopping or preempted for longer than LEAVING_WARN_SECONDS whose objects "
            "the cluster has not removed (its garbage collector may be down), holding their "
            "quota, by queue",
            labels=["queue"],
        )
        counts = dict(
            jobs_stuck_leaving(now=timezone.now())
            .order_by()
            .values_list("queue__name")
            .annotate(n=Count("id"))
            .values_list("queue__name", "n")
        )
        active = Queue.objects.filter(active=True).values_list("name", flat=True)
        for queue in sorted({*active, *counts}):
            stuck.add_metric([queue], counts.get(queue, 0))
        return stuck

    def _admissions(self) -> Iterator[Metric]:
        admitted = CounterMetricFamily(
            "caldera_admitted_jobs",
            "Admissions (dequeues) of jobs, by queue",
            labels=["queue"],
        )
        preempted = CounterMetricFamily(
            "caldera_preempted_jobs",
            "Jobs preempted (reclaim or priority), by the queue they were preempted from",
            labels=["queue"],
        )
        evicted = CounterMetricFamily(
            "caldera_evicted_jobs",
            "Jobs sent out of the cluster after their admission, by queue and reason "
            "(Preempted, StartTimeout)",
            labels=["queue", "reason"],
        )
        wait = HistogramMetricFamily(
            "caldera_admission_wait_time_seconds",
            "Time from a job's enqueue to each of its admissions",
            labels=["queue"],
        )
        bounds = list(ADMISSION_WAIT_BOUNDS)
        rows = event_waits()
        evictions: dict[tuple[str, str], int] = {}
        waits: dict[str, tuple[list[int], float]] = {}
        for queue, reason, bucket, count, seconds in rows:
            if reason != REASON.DEQUEUED:
                evictions[queue, reason] = evictions.get((queue, reason), 0) + count
                continue
            per_bucket, total = waits.setdefault(queue, ([0] * (len(bounds) + 1), 0.0))
            per_bucket[bucket] += count
            waits[queue] = (per_bucket, total + float(seconds or 0))
        for queue, (per_bucket, total) in sorted(waits.items()):
            admitted.add_metric([queue], sum(per_bucket))
            cumulative, buckets = 0, []
            for bound, count in zip([*bounds, float("inf")], per_bucket, strict=True):
                cumulative += count
                buckets.append(("+Inf" if bound == float("inf") else str(bound), cumulative))
            wait.add_metric([queue], buckets, total)
        for (queue, reason), count in sorted(evictions.items()):
            evicted.add_metric([queue, reason], count)
            if reason == REASON.PREEMPTED:
                preempted.add_metric([queue], count)
        yield from (admitted, preempted, evicted, wait)

    def _quota(self) -> Iterator[Metric]:
        """Each node's min, max and use per resource; where the tree has node pools, each
        pool's share of them beside, with the pool as ``flavor`` (Kueue's name for it)."""
        described = {
            "min": "The node's guaranteed quota (min)",
            "max": "The node's ceiling (max)",
            "used": "What the jobs under the node hold (admitted, running, leaving)",
        }
        families = {
            name: GaugeMetricFamily(f"caldera_quota_{name}", text, labels=["node", "resource"])
            for name, text in described.items()
        }
        in_pools = {
            name: GaugeMetricFamily(
                f"caldera_pool_quota_{name}",
                f"{text}, in one node pool (flavor)",
                labels=["node", "resource", "flavor"],
            )
            for name, text in described.items()
        }
        used = usage_by_path()
        tree = tree_nodes()
        stopped = GaugeMetricFamily(
            "caldera_queue_stopped",
            "1 for each queue its tree stops (stopPolicy Hold or HoldAndDrain on its leaf or "
            "above, as the policy label says): nothing new is admitted; 0 for those admitting",
            labels=["queue", "policy"],
        )
        parents = {node.parent for node in tree.values()}
        for path in sorted(set(tree) - parents):
            stop = limits_of(tree, path).stop
            stopped.add_metric([Queue.name_for(path), stop or "None"], 1 if stop else 0)
        yield stopped
        for path, node in sorted(tree.items()):
            for name, amounts in (
                ("min", node.min),
                ("max", node.max),
                ("used", used.get(path, {})),
            ):
                for key, units in sorted(amounts.items()):
                    resource, pool = pool_parts(key)
                    if pool:
                        in_pools[name].add_metric([path, resource, pool], units / scale(key))
                    else:
                        families[name].add_metric([path, resource], units / scale(resource))
        yield from families.values()
        if any(family.samples for family in in_pools.values()):
            yield from in_pools.values()


DATABASE = CollectorRegistry(auto_describe=False)
DATABASE.register(DatabaseCollector())

HTTP_REQUESTS = Counter(
    "caldera_http_requests",
    "HTTP requests answered, by method, view (the URL's name) and status",
    ["method", "view", "status"],
)
HTTP_REQUEST_SECONDS = Histogram(
    "caldera_http_request_duration_seconds",
    "Time from a request's arrival to its answer, by method and view",
    ["method", "view"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0),
)


class RequestMetrics:
    """Counts and times every request, by the URL's name (a bounded set), not its path."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        started = time.perf_counter()
        response = self.get_response(request)
        match = request.resolver_match
        view = (match.view_name if match else "") or "unmatched"
        HTTP_REQUESTS.labels(request.method, view, str(response.status_code)).inc()
        HTTP_REQUEST_SECONDS.labels(request.method, view).observe(time.perf_counter() - started)
        return response


def _scrape(request: HttpRequest, registry: Callable[[], CollectorRegistry]) -> HttpResponse:
    refusal = allowed(
        request.headers.get("Authorization", ""),
        request.META.get("REMOTE_ADDR", ""),
        settings.METRICS_TOKEN,
    )
    if refusal is not None:
        status, reason = refusal
        return HttpResponse(reason, status=status, content_type="text/plain")
    return HttpResponse(generate_latest(registry()), content_type=CONTENT_TYPE_LATEST)


def metrics(request: HttpRequest) -> HttpResponse:
    """This pod's processes' figures."""
    return _scrape(request, process_registry)


def deployment_metrics(request: HttpRequest) -> HttpResponse:
    """The deployment's figures, from the database: the same whichever pod answers."""
    return _scrape(request, lambda: DATABASE)
