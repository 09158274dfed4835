"""The Kubernetes backend at scale, against a small API server in a process of its own
(bench/apiserver.py): how fast admitted jobs' objects are stored, and what one sync pass
costs with 1,000 and 10,000 live jobs, each beside the server's own cost for the same
requests (bare HTTP, nothing parsed), so that what is Caldera's can be told from what is
the server's.

Then the same at a platform's scale, on a database of its own (``measure_scale``): 60,000
live jobs in 2,000 namespaces, the quiet sync listed and watched both ways (a watch per
kind and namespace, and with KUBERNETES_WATCH_SCOPE=cluster one per kind), each with the
watches the server has open and the process's memory and sockets.

The jobs are RayJobs spread over 20 namespaces (the tree's leaves); they are queued
through the batch service and marked admitted in SQL (the admission cycle is measured
elsewhere), then reconciled (their objects created) in batches of 1,000, as one admission
cycle's reconcile would be. The sync is measured at each size in the pass that sees every
job start running (every job changes, each namespace listed), and where nothing changed
(the steady state, what beat pays every second): listing every namespace, and reading
them from the watches (KUBERNETES_WATCH, the default).
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

import urllib3

from portal.memory import freeze_loaded_objects

from .kueue import quota_tree
from .services import REPO

NAMESPACES = 20
SIZES = (1_000, 10_000)
BATCH = 1_000
CONCURRENCY = 8  # the backend's calls in flight (jobs.cluster.kubernetes.Settings)
QUIET_PASSES = 5


SCALE_NAMESPACES = 2_000
SCALE_JOBS = 60_000
SCALE_PASSES = 3


def tree_document(namespaces: int = NAMESPACES) -> dict:
    leaves = [
        {
            "name": f"team-{n}",
            "min": {"cpu": 1_000},
            "max": {"cpu": 100_000},
            "namespaces": [f"team-{n}"],
        }
        for n in range(namespaces)
    ]
    total = namespaces * 1_000
    return quota_tree(min_cpu=total, max_cpu=100 * total, children=leaves)


def _documents(start: int, count: int, namespaces: int = NAMESPACES) -> list[dict]:
    return [
        {
            "queue": f"root/team-{i % namespaces}",
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
    freeze_loaded_objects()  # as a worker's pool process does before its first task
    results: dict = {"namespaces": NAMESPACES, "concurrency": CONCURRENCY, "sizes": []}
    with apiserver() as (url, control):
        with override_settings(**_backend_settings(url, timeout=30)):
            get_backend.cache_clear()
            live = 0
            for size in SIZES:
                created = _create(size - live, live, user, jobs_reconcile, job_submit_batch)
                # The server's own pace now that it holds as many objects.
                created["server_creates_per_second"] = _bare_creates(url, 2_000, f"{size}")
                created["of_server_rate"] = _of_server_rate(created)
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


def measure_scale() -> dict:
    """60,000 live jobs in 2,000 namespaces: objects stored per second, the sync where
    every job changed, and the quiet sync listed, watched per namespace and watched per
    kind for every namespace, each with the watches open, the memory and the sockets."""
    from django.contrib.auth import get_user_model
    from django.test import override_settings
    from django.utils import timezone

    from jobs.cluster import get_backend
    from jobs.engine.reconcile import jobs_reconcile
    from jobs.engine.sync import cluster_sync
    from jobs.models import Job, State
    from jobs.services import job_submit_batch
    from queues.services import tree_apply

    tree_apply(document=tree_document(SCALE_NAMESPACES))
    user = get_user_model().objects.create_superuser("bench", "bench@example.com", "bench-pw")
    freeze_loaded_objects()
    row: dict = {"namespaces": SCALE_NAMESPACES, "live_jobs": SCALE_JOBS}
    with apiserver() as (url, control):
        with override_settings(**_backend_settings(url, timeout=60)):
            get_backend.cache_clear()
            row["rss_before_mb"] = _rss_mb()
            row |= _create(SCALE_JOBS, 0, user, jobs_reconcile, job_submit_batch,
                           namespaces=SCALE_NAMESPACES)  # fmt: skip
            urllib.request.urlopen(urllib.request.Request(f"{control}/running", method="POST"))
            started = time.perf_counter()
            first = cluster_sync(now=timezone.now())
            row["sync_all_changed_seconds"] = time.perf_counter() - started
            assert first is not None and len(first.started) == SCALE_JOBS, "not started"
            row["sync_quiet_seconds"] = _quiet_passes(cluster_sync, SCALE_PASSES)
            row["listed"] = _process(control)
            for scope in ("cluster", "namespace"):  # the leaner first: RSS only grows
                with override_settings(KUBERNETES_WATCH=True, KUBERNETES_WATCH_SCOPE=scope):
                    get_backend.cache_clear()
                    started = time.perf_counter()
                    cluster_sync(now=timezone.now())  # lists, and starts the watches
                    _in_step(get_backend(), timeout=600)
                    row[f"in_step_{scope}_seconds"] = time.perf_counter() - started
                    row[f"sync_quiet_watched_{scope}_seconds"] = _quiet_passes(
                        cluster_sync, SCALE_PASSES
                    )
                    row[f"watched_{scope}"] = _process(control)
                    get_backend().close()
                    _watches_closed(control)
            get_backend.cache_clear()
            assert Job.objects.filter(state=State.RUNNING).count() == SCALE_JOBS
            # Last: the bare objects would be in the listings of every namespace.
            row["server_creates_per_second"] = _bare_creates(url, 2_000, "scale")
            row["of_server_rate"] = _of_server_rate(row)
    print(f"bench: cluster at scale {json.dumps(row)}", flush=True)
    return row


def _watches_closed(control: str) -> None:
    """Wait until the server has closed the watches of the informers just stopped."""
    deadline = time.monotonic() + 60
    while json.loads(urllib.request.urlopen(f"{control}/connections").read())["watches"]:
        assert time.monotonic() < deadline, "the server kept the stopped watches"
        time.sleep(0.2)


def _backend_settings(url: str, *, timeout: float) -> dict:
    """The portal on the benchmark's API server, RayJobs only, every sync listing."""
    return dict(
        CLUSTER_BACKEND="kubernetes",
        CLUSTER_RUNTIMES=["kuberay"],
        KUBERNETES_HOST=url,
        KUBERNETES_TIMEOUT_SECONDS=timeout,
        KUBERNETES_WATCH=False,
    )


def _rss_mb() -> float:
    """This process's resident memory, in MiB."""
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _process(control: str) -> dict:
    """What the process holds now: memory, threads, sockets (to the API server, the
    database, Redis), and the watches the server has open."""
    sockets = 0
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            sockets += os.readlink(f"/proc/self/fd/{fd}").startswith("socket:")
    watches = json.loads(urllib.request.urlopen(f"{control}/connections").read())["watches"]
    return {
        "rss_mb": _rss_mb(),
        "threads": threading.active_count(),
        "sockets": sockets,
        "watches": watches,
    }


def _create(
    count: int, start: int, user, jobs_reconcile, job_submit_batch, namespaces: int = NAMESPACES
) -> dict:
    """Queue ``count`` jobs, mark them admitted, and reconcile them in batches: the jobs
    whose objects were stored per second, and the same creates as bare requests."""
    from django.utils import timezone

    from jobs.models import Job, State

    ids: list[int] = []
    for offset in range(0, count, BATCH):
        batch = _documents(start + offset, min(BATCH, count - offset), namespaces)
        ids += [job.pk for job in job_submit_batch(user=user, documents=batch)]
    Job.objects.filter(pk__in=ids).update(state=State.ADMITTED, dequeued_at=timezone.now())
    started = time.perf_counter()
    for offset in range(0, len(ids), BATCH):
        jobs_reconcile(ids[offset : offset + BATCH])
    seconds = time.perf_counter() - started
    return {"created": len(ids), "create_jobs_per_second": len(ids) / seconds}


def _quiet_passes(cluster_sync, count: int = QUIET_PASSES) -> float:
    from django.utils import timezone

    passes = []
    for _ in range(count):
        started = time.perf_counter()
        cluster_sync(now=timezone.now())
        passes.append(time.perf_counter() - started)
    return statistics.median(passes)


def _in_step(backend, timeout: float = 120) -> None:
    """Wait until every informer holds its objects."""
    deadline = time.monotonic() + timeout
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


def _of_server_rate(row: dict) -> float:
    """Objects stored against the server's own creates, in the same run: the median over
    repeats is of these, not of each figure apart."""
    return row["create_jobs_per_second"] / row["server_creates_per_second"]


def _bare_creates(url: str, count: int, tag: str) -> float:
    """The server's own pace: RayJobs created per second by bare requests, CONCURRENCY at
    a time over kept-alive connections, in a namespace of their own (``tag`` in their
    names), each the manifest Caldera sent for a job of the benchmark, read back (the
    server's cost grows with the body, so a smaller one would flatter it). Measured after
    Caldera's creates of each size: a server that holds more objects is slower (its own
    collector walks them)."""
    pool = urllib3.PoolManager(maxsize=CONCURRENCY)
    listed = pool.request("GET", f"{url}/apis/ray.io/v1/namespaces/team-0/rayjobs?limit=1")
    [stored] = json.loads(listed.data)["items"]
    kept = ("name", "labels", "annotations")
    manifest = {
        "apiVersion": stored["apiVersion"],
        "kind": stored["kind"],
        "metadata": {k: v for k, v in stored["metadata"].items() if k in kept},
        "spec": stored["spec"],
    }
    address = f"{url}/apis/ray.io/v1/namespaces/bare/rayjobs"

    def one(index: int) -> None:
        name = f"bare-{tag}-{index}"
        body = {**manifest, "metadata": {**manifest["metadata"], "name": name}}
        answer = pool.request(
            "POST", address, body=json.dumps(body), headers={"Content-Type": "application/json"}
        )
        assert answer.status == 201, answer.status

    started = time.perf_counter()
    with ThreadPoolExecutor(CONCURRENCY) as threads:
        list(threads.map(one, range(count)))
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
