"""The Kubernetes backend at scale, against a small API server in a process of its own
(bench/apiserver.py): how fast admitted jobs' objects are stored, and what one sync pass
costs with 1,000 and 10,000 live jobs, each beside the server's own cost for the same
requests (bare HTTP, nothing parsed), so that what is Caldera's can be told from what is
the server's.

The jobs are RayJobs spread over 20 namespaces (the tree's leaves); they are queued
through the batch service and marked admitted in SQL (the admission cycle is measured
elsewhere), then reconciled (their objects created) in batches of 1,000, as one admission
cycle's reconcile would be. The sync is measured at each size in the pass that sees every
job start running (every job changes, each namespace listed), and where nothing changed
(the steady state, what beat pays every second): listing every namespace, and reading
them from the watches (KUBERNETES_WATCH, the default).
"""

from __future__ import annotations

import json
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

import urllib3

from .kueue import quota_tree
from .services import REPO

NAMESPACES = 20
SIZES = (1_000, 10_000)
BATCH = 1_000
CONCURRENCY = 8  # the backend's calls in flight (jobs.cluster.kubernetes.Settings)
QUIET_PASSES = 5


def tree_document() -> dict:
    leaves = [
        {
            "name": f"team-{n}",
            "min": {"cpu": 1_000},
            "max": {"cpu": 100_000},
            "namespaces": [f"team-{n}"],
        }
        for n in range(NAMESPACES)
    ]
    total = NAMESPACES * 1_000
    return quota_tree(min_cpu=total, max_cpu=100 * total, children=leaves)


def _documents(start: int, count: int) -> list[dict]:
    return [
        {
            "queue": f"root/team-{i % NAMESPACES}",
            "kind": "ray",
            "name": f"sweep-{i}",
            "image": "rayproject/ray:2.36.1",
            "entrypoint": "python train.py",
            "head": {"resources": {"cpu": "1"}},
        }
        for i in range(start, start + count)
    ]


def measure() -> dict:
    from django.contrib.auth import get_user_model
    from django.test import override_settings
    from django.utils import timezone

    from jobs.cluster import get_backend
    from jobs.engine.reconcile import jobs_reconcile
    from jobs.engine.sync import cluster_sync
    from jobs.models import Job, State
    from jobs.services import job_submit_batch
    from queues.services import tree_apply

    tree_apply(document=tree_document())
    user = get_user_model().objects.create_superuser("bench", "bench@example.com", "bench-pw")
    results: dict = {"namespaces": NAMESPACES, "concurrency": CONCURRENCY, "sizes": []}
    with apiserver() as (url, control):
        results["server_creates_per_second"] = _bare_creates(url, 2_000)
        settings = dict(
            CLUSTER_BACKEND="kubernetes",
            CLUSTER_RUNTIMES=["kuberay"],
            KUBERNETES_HOST=url,
            KUBERNETES_TIMEOUT_SECONDS=30,
            KUBERNETES_WATCH=False,
        )
        with override_settings(**settings):
            get_backend.cache_clear()
            live = 0
            for size in SIZES:
                created = _create(size - live, live, user, jobs_reconcile, job_submit_batch)
                before, live = live, size
                now = timezone.now()
                urllib.request.urlopen(urllib.request.Request(f"{control}/running", method="POST"))
                started = time.perf_counter()
                first = cluster_sync(now=now)
                changed = time.perf_counter() - started
                assert first is not None and len(first.started) == size - before, "not started"
                quiet = _quiet_passes(cluster_sync)
                with override_settings(KUBERNETES_WATCH=True):
                    get_backend.cache_clear()
                    cluster_sync(now=timezone.now())  # lists, and starts the watches
                    _in_step(get_backend())
                    watched = _quiet_passes(cluster_sync)
                    get_backend().close()
                get_backend.cache_clear()
                assert Job.objects.filter(state=State.RUNNING).count() == size
                results["sizes"].append(
                    {
                        "live_jobs": size,
                        **created,
                        "sync_all_changed_seconds": changed,
                        "sync_quiet_seconds": quiet,
                        "sync_quiet_watched_seconds": watched,
                        "server_list_seconds": _bare_lists(url),
                    }
                )
                print(f"bench: cluster {json.dumps(results['sizes'][-1])}", flush=True)
            get_backend.cache_clear()
    return results


def _create(count: int, start: int, user, jobs_reconcile, job_submit_batch) -> dict:
    """Queue ``count`` jobs, mark them admitted, and reconcile them in batches: the jobs
    whose objects were stored per second, and the same creates as bare requests."""
    from django.utils import timezone

    from jobs.models import Job, State

    ids: list[int] = []
    for offset in range(0, count, BATCH):
        batch = _documents(start + offset, min(BATCH, count - offset))
        ids += [job.pk for job in job_submit_batch(user=user, documents=batch)]
    Job.objects.filter(pk__in=ids).update(state=State.ADMITTED, dequeued_at=timezone.now())
    started = time.perf_counter()
    for offset in range(0, len(ids), BATCH):
        jobs_reconcile(ids[offset : offset + BATCH])
    seconds = time.perf_counter() - started
    return {"created": len(ids), "create_jobs_per_second": len(ids) / seconds}


def _quiet_passes(cluster_sync) -> float:
    from django.utils import timezone

    passes = []
    for _ in range(QUIET_PASSES):
        started = time.perf_counter()
        cluster_sync(now=timezone.now())
        passes.append(time.perf_counter() - started)
    return statistics.median(passes)


def _in_step(backend) -> None:
    """Wait until every namespace's informer holds its objects."""
    deadline = time.monotonic() + 120
    while any(i.items() is None for i in backend._informers.values()):
        assert time.monotonic() < deadline, "the watches did not get in step"
        time.sleep(0.05)


@contextmanager
def apiserver():
    """bench/apiserver.py in a process of its own: its URL and its control URL."""
    ports = []
    for _ in range(2):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            ports.append(probe.getsockname()[1])
    server = subprocess.Popen(
        [sys.executable, "-m", "bench.apiserver", str(ports[0]), str(ports[1]), "8"], cwd=REPO
    )
    url = f"http://127.0.0.1:{ports[0]}"
    try:
        for _ in range(100):
            try:
                urllib.request.urlopen(f"{url}/api/v1/nodes")
                break
            except OSError:
                time.sleep(0.05)
        yield url, f"http://127.0.0.1:{ports[1]}"
    finally:
        server.terminate()
        server.wait(timeout=10)


def _bare_creates(url: str, count: int) -> float:
    """The server's own pace: RayJobs created per second by bare requests, CONCURRENCY at
    a time, in a namespace of their own."""

    def one(index: int) -> None:
        body = json.dumps({"metadata": {"name": f"bare-{index}"}, "spec": {}}).encode()
        request = urllib.request.Request(
            f"{url}/apis/ray.io/v1/namespaces/bare/rayjobs",
            data=body,
            headers={"Content-Type": "application/json"},
        )
        urllib.request.urlopen(request).read()

    started = time.perf_counter()
    with ThreadPoolExecutor(CONCURRENCY) as pool:
        list(pool.map(one, range(count)))
    return count / (time.perf_counter() - started)


def _bare_lists(url: str) -> float:
    """The server's own time to answer one sync's listings (every namespace, several at a
    time, through a pool of kept-alive connections as the backend asks), read as bytes and
    not parsed: the median of QUIET_PASSES."""
    pool = urllib3.PoolManager(maxsize=CONCURRENCY)

    def one(namespace: int) -> int:
        address = (
            f"{url}/apis/ray.io/v1/namespaces/team-{namespace}/rayjobs"
            "?labelSelector=caldera.io/job-id&limit=500"
        )
        return len(pool.request("GET", address).data)

    one(0)  # connected
    passes = []
    for _ in range(QUIET_PASSES):
        started = time.perf_counter()
        with ThreadPoolExecutor(CONCURRENCY) as pool_threads:
            list(pool_threads.map(one, range(NAMESPACES)))
        passes.append(time.perf_counter() - started)
    return statistics.median(passes)
