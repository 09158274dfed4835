"""What a worker process counts as it works, for the scrape (portal/metrics.py).

The database's figures (queues, admissions, quota) are read at each scrape; these are the
ones only the process sees: how long admission cycles take, and how the cluster's API
answers. Under Celery's prefork pool and gunicorn, PROMETHEUS_MULTIPROC_DIR names a
directory where every process writes them, for the scrape to add up
(portal/process_metrics.py).
"""

from __future__ import annotations

from prometheus_client import Counter, Histogram

# Kueue's admission_cycle_duration_seconds: one run of the admission rule over every
# queue, with its writes.
ADMISSION_CYCLE_SECONDS = Histogram(
    "caldera_admission_cycle_duration_seconds",
    "Time one admission cycle takes: read the queues and the tree, plan, write",
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0),
)
CLUSTER_REQUESTS = Counter(
    "caldera_cluster_requests",
    "Calls to the Kubernetes API by operation and result: ok (answered, 404 and 409 "
    "included), refused (another 4xx), error (5xx, 429, timeout, no connection, 401/403 of "
    "the authorizer)",
    ["operation", "result"],
)
CLUSTER_REQUEST_SECONDS = Histogram(
    "caldera_cluster_request_duration_seconds",
    "Time a call to the Kubernetes API takes, by operation",
    ["operation"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0),
)
