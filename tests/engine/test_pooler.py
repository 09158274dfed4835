"""Behind a real PgBouncer in transaction pooling mode (tests/support/pooler.py), where each
transaction may run on another server connection: two workers' admission cycles never
overlap, nothing is admitted twice, nothing goes over ``max``, and a lease is held by one
holder at a time. With the session advisory locks of before (``pg_try_advisory_lock``,
unlocked by a later statement), the first test fails: a server connection keeps the lock
it was never unlocked on, and the next client that runs a statement on it holds it too.

The workers are threads, each with its own connection to the pooler, as worker processes
have, one more than the pooler's server connections."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from jobs.engine.admission import cycle
from jobs.engine.locks import SYNC, leased
from jobs.models import JobEvent, Lease, State
from jobs.reads.selectors import usage_by_path
from queues.selectors import tree_nodes

from ..support.jobs import submit
from ..support.pooler import SERVER_CONNECTIONS, pgbouncer, through

pytestmark = pytest.mark.django_db(transaction=True)

WORKERS = SERVER_CONNECTIONS + 1  # so that they share server connections
SECONDS = 3.0  # each worker runs cycles for this long
SMALL = {
    "head": {"resources": {"cpu": "1", "memory": "1G"}},
    "workers": [{"name": "small-group", "replicas": 1, "resources": {"cpu": "1", "memory": "1G"}}],
}


@pytest.fixture(scope="module")
def pooler():
    with pgbouncer() as port:
        yield port


Span = tuple[float, float, str]


def _workers(work: Callable[[list[Span]], None]) -> list[Span]:
    """``work`` run by WORKERS threads at once for SECONDS, each on its own connection;
    the spans they recorded, in order of their start."""
    spans: list[Span] = []
    failures: list[BaseException] = []

    def run() -> None:
        try:
            deadline = time.monotonic() + SECONDS
            while time.monotonic() < deadline:
                work(spans)
        except BaseException as error:  # noqa: BLE001 - reported by the test
            failures.append(error)
        finally:
            connection.close()

    threads = [threading.Thread(target=run, name=f"worker {n}") for n in range(WORKERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not failures, failures
    return sorted(spans)


def _overlaps(spans: list[Span]) -> list[tuple[Span, Span]]:
    return [(a, b) for a, b in zip(spans, spans[1:], strict=False) if b[0] < a[1]]


def test_two_workers_cycles_never_overlap_and_admit_each_job_once_within_max(
    pooler, member, monkeypatch
):
    now = timezone.now()
    jobs = [submit(member, now + timedelta(milliseconds=n), **SMALL) for n in range(60)]
    spans: list[Span] = []
    one_cycle = cycle._one_cycle

    def recorded(when):
        began = time.monotonic()
        try:
            return one_cycle(when)
        finally:
            spans.append((began, time.monotonic(), threading.current_thread().name))

    monkeypatch.setattr(cycle, "_one_cycle", recorded)

    with through(pooler):
        _workers(lambda _: cycle.admission_cycle())

    spans.sort()
    assert {name for _, _, name in spans} == {f"worker {n}" for n in range(WORKERS)}
    assert _overlaps(spans) == []
    dequeued = JobEvent.objects.filter(reason=JobEvent.Reason.DEQUEUED, job__in=jobs)
    assert dequeued.count() == dequeued.values("job").distinct().count() > 0
    # video's max is 14 cpu: 7 of these 2-cpu jobs, no more.
    held = [job for job in jobs if type(job).objects.get(pk=job.pk).state == State.ADMITTED]
    assert len(held) == 7
    video = tree_nodes()["root/algorithm/video"]
    assert usage_by_path()["root/algorithm/video"]["cpu"] <= video.max["cpu"]


def test_a_lease_has_one_holder_at_a_time_behind_the_pooler(pooler):
    def hold(spans: list[Span]) -> None:
        with leased(SYNC, seconds=5) as lease:
            if lease is None:
                return
            began = time.monotonic()
            time.sleep(0.005)
            connection.ensure_connection()  # a statement meanwhile, on any server connection
            with connection.cursor() as cursor:
                cursor.execute("SELECT 1")
            spans.append((began, time.monotonic(), threading.current_thread().name))

    with through(pooler):
        spans = _workers(hold)

    assert len({name for _, _, name in spans}) == WORKERS
    assert _overlaps(spans) == []
    assert Lease.objects.get(name=SYNC).expires_at <= timezone.now()  # given back
