"""Faults, as production meets them: a worker killed mid-admission, the broker stopped and
started, the database dropping a worker's connections.

Real processes: Celery workers (prefork, with beat inside: ``-B``) and, for the broker
outage, gunicorn, run as subprocesses on the test database and on a private Redis this
module starts and stops (never the shared one). After each fault: no job lost or duplicated
(counted by name), the usage of every node equal to the requests of the admitted jobs and
never above its max, and admission resumes on its own (beat, no help from the test) until
every job has run. Every wait is bounded.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from urllib.parse import quote

import pytest
import requests
from django.conf import settings
from django.db import connection, transaction

from access.services import full_token
from jobs.cluster import get_backend
from jobs.engine.admission.inputs import holding_jobs, leaf_usage, usage_of
from jobs.engine.locks import ADMISSION
from jobs.engine.usage_audit import usage_audit
from jobs.models import HOLDING, Job, JobEvent, SimulatedPod, State
from jobs.services import job_submit_batch
from kube.quantity import add
from portal.embedded import free_port, redis_pings, redis_server_program
from queues.quota import rollup
from queues.selectors import tree_nodes

from ..support.paths import REPO
from ..support.polling import wait_for

pytestmark = [pytest.mark.faults, pytest.mark.django_db(transaction=True)]

# Three leaves of the seed tree whose maxima (14, 24 and 16 cpu) fit the cluster together,
# so nothing is preempted and every job is dequeued exactly once.
LEAVES = ("root/algorithm/video", "root/algorithm/text", "root/infrastructure/devops")
RUN_SECONDS = 0.5
START_SECONDS = 90.0  # a subprocess up, an admission cycle seen (a loaded machine is slow)
RECOVERY_SECONDS = 120.0  # every job run after the last fault (bounds only a failure)
# Beat inside each worker re-drives admission and sync at this pace, as it would in
# production at its own (2 s and 1 s).
BEAT_SECONDS = "0.5"


def small_jobs(prefix: str, count: int) -> list[dict]:
    return [
        {
            "queue": LEAVES[index % len(LEAVES)],
            "kind": "ray",
            "name": f"{prefix}-{index}",
            "image": "rayproject/ray:2.36.1",
            "entrypoint": "python train.py",
            "head": {"resources": {"cpu": "1"}},
            "run_seconds": RUN_SECONDS,
        }
        for index in range(count)
    ]


class RedisServer:
    """A private redis-server on a port of its own, stopped and started on that port."""

    def __init__(self, directory: Path):
        self.directory = directory
        self.port = free_port()
        self.process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.process = subprocess.Popen(
            [str(redis_server_program()), "--bind", "127.0.0.1", "--port", str(self.port),
             "--save", "", "--appendonly", "no", "--dir", str(self.directory)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )  # fmt: skip
        wait_for(lambda: redis_pings(self.port), 10, "the private Redis answers")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=10)


class Stack:
    """The processes of one test: a private Redis, workers, a web server; all stopped after."""

    def __init__(self, directory: Path):
        self.directory = directory
        self.redis = RedisServer(directory)
        self.processes: list[subprocess.Popen] = []
        self.killed: set[int] = set()
        self.logs: list[Path] = []
        database = connection.settings_dict  # the test database pytest-django made
        password = f":{quote(database['PASSWORD'])}" if database["PASSWORD"] else ""
        self.env = {
            **os.environ,
            "DATABASE_URL": f"postgres://{quote(database['USER'])}{password}"
            f"@{database['HOST']}:{database['PORT']}/{database['NAME']}",
            "REDIS_URL": self.redis.url,
            "SECRET_KEY": settings.SECRET_KEY,
            "CALDERA_STATE_DIR": str(directory),
            "SIMULATED_CLUSTER_NODES": settings.SIMULATED_CLUSTER_NODES,
            "ADMIT_BEAT_SECONDS": BEAT_SECONDS,
            "SYNC_BEAT_SECONDS": BEAT_SECONDS,
            "BACKOFF_BASE_SECONDS": "0.2",
            "BACKOFF_MAX_SECONDS": "1",
            "DEMO_TRAFFIC": "0",
            "LOG_LEVEL": "WARNING",
        }

    def _start(self, name: str, command: list[str]) -> subprocess.Popen:
        log = self.directory / f"{name}-{len(self.logs)}.log"
        self.logs.append(log)
        with log.open("wb") as output:
            # Its own process group, so a kill reaches its pool processes and beat too.
            process = subprocess.Popen(
                command, cwd=REPO, env=self.env, stdout=output, stderr=subprocess.STDOUT,
                start_new_session=True,
            )  # fmt: skip
        self.processes.append(process)
        return process

    def worker(self) -> subprocess.Popen:
        return self._start(
            "worker",
            [sys.executable, "-m", "celery", "-A", "portal", "worker", "-B",
             "--schedule", str(self.directory / "beat-schedule"), "-l", "warning",
             "--concurrency", "2", "--without-mingle", "--without-gossip",
             "-n", f"faults-{len(self.logs)}@%h"],
        )  # fmt: skip

    def web(self) -> str:
        port = free_port()
        self._start(
            "web",
            [sys.executable, "-m", "gunicorn", "portal.wsgi:application",
             "--bind", f"127.0.0.1:{port}", "--workers", "1", "--threads", "4",
             "--log-level", "warning"],
        )  # fmt: skip
        url = f"http://127.0.0.1:{port}"
        wait_for(lambda: _answers(url + "/healthz"), START_SECONDS, "the web server answers")
        return url

    def kill(self, process: subprocess.Popen) -> None:
        """SIGKILL to the whole process: its main process, pool processes and beat."""
        self.killed.add(process.pid)
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)

    def assert_none_died(self) -> None:
        """No process ended that the test did not kill (a worker must outlive every fault)."""
        died = [
            process.args[2:5]
            for process in self.processes
            if process.pid not in self.killed and process.poll() is not None
        ]
        assert not died, f"exited: {died}"

    def stop(self) -> None:
        """Everything ends at once: what the test checks is done, a graceful stop adds time."""
        for process in self.processes:
            if process.poll() is None:
                self.kill(process)
        self.redis.stop()

    def log_tail(self) -> str:
        return "\n".join(f"--- {log.name}\n{log.read_text()[-3000:]}" for log in self.logs)


def _answers(url: str) -> bool:
    try:
        return requests.get(url, timeout=2).status_code == 200
    except requests.RequestException:
        return False


@pytest.fixture
def stack(tree, tmp_path):
    stack = Stack(tmp_path)
    stack.redis.start()
    try:
        yield stack
    finally:
        stack.stop()


def wait_for_a_cycle(stack: Stack, what: str) -> None:
    """Wait until a process holds the admission cycle's lock; fail with the processes' logs."""
    try:
        wait_for(admission_cycle_running, START_SECONDS, what, every=0.002)
    except AssertionError as error:
        raise AssertionError(f"{error}\n{stack.log_tail()}") from None


def admission_cycle_running() -> bool:
    """Whether a process holds the admission cycle's lock in the test database now."""
    with connection.cursor() as cursor:
        cursor.execute(
            """
            SELECT EXISTS (
                SELECT 1 FROM pg_locks l JOIN pg_database d ON d.oid = l.database
                WHERE d.datname = current_database() AND l.locktype = 'advisory' AND l.granted
                  AND (l.classid::bigint << 32) + l.objid::bigint = %s
            )
            """,
            [ADMISSION],
        )
        return cursor.fetchone()[0]


def drop_database_connections() -> int:
    """Terminate every other session on the test database (the worker's); how many."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        return cursor.fetchone()[0]


def assert_usage_is_the_admitted_requests_within_every_max() -> None:
    """One snapshot: usage from SQL, from the admitted jobs and summed here from the rows
    agree on every node; no node above its max, the root within the cluster."""
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        from_sql = rollup(leaf_usage())
        admitted, leaving = holding_jobs()
        from_admitted = usage_of(admitted + leaving)
        rows = list(
            Job.objects.filter(state__in=HOLDING).values_list("queue__node__path", "request")
        )
    leaves: dict[str, dict[str, int]] = {}
    for path, request in rows:
        leaves[path] = add(leaves.get(path, {}), {k: int(v) for k, v in request.items()})
    summed = rollup(leaves)
    assert from_sql == summed == from_admitted
    for path, node in tree_nodes().items():
        used = summed.get(path, {})
        over = {
            r: (used.get(r, 0), limit) for r, limit in node.max.items() if used.get(r, 0) > limit
        }
        assert not over, f"{path} above its max (used, max): {over}"
    allocatable = get_backend().allocatable()
    root = summed.get("root", {})
    assert all(amount <= allocatable.get(r, 0) for r, amount in root.items()), root


def assert_each_job_once(prefix: str, count: int) -> None:
    names = Counter(
        Job.objects.filter(name__startswith=f"{prefix}-").values_list("name", flat=True)
    )
    assert names == Counter(f"{prefix}-{index}" for index in range(count))


def run_to_completion(stack: Stack, prefix: str, count: int) -> None:
    """Wait, without driving anything, until every job succeeded; check usage all along."""
    jobs = Job.objects.filter(name__startswith=f"{prefix}-")

    def done() -> bool:
        stack.assert_none_died()
        assert_usage_is_the_admitted_requests_within_every_max()
        return jobs.filter(state=State.SUCCEEDED).count() == count

    try:
        wait_for(done, RECOVERY_SECONDS, f"all {count} {prefix} jobs succeeded", every=0.25)
    except AssertionError as error:
        states = Counter(jobs.values_list("state", flat=True))
        raise AssertionError(f"{error}; states {dict(states)}\n{stack.log_tail()}") from None
    assert_each_job_once(prefix, count)
    # Dequeued once and run once each: nothing admitted twice, nothing left in the cluster.
    for reason in ("Dequeued", "Succeeded"):
        per_job = Counter(
            JobEvent.objects.filter(job__in=jobs, reason=reason).values_list("job_id", flat=True)
        )
        assert len(per_job) == count and set(per_job.values()) == {1}, reason
    # The sync records a finish, then removes the pods: they go moments after the state.
    left = SimulatedPod.objects.filter(job_id__in=jobs.values("id"))
    wait_for(lambda: not left.exists(), 10, "the finished jobs' pods removed")
    assert_usage_is_the_admitted_requests_within_every_max()
    assert rollup(leaf_usage()) == {}
    # The audit beat runs agrees: no node above a limit, no pending count drifted.
    assert usage_audit().lines() == []


def test_a_worker_killed_mid_admission_loses_nothing_and_the_next_one_carries_on(stack, staff):
    job_submit_batch(user=staff, documents=small_jobs("killed", 300))
    first = stack.worker()
    wait_for_a_cycle(stack, "the first admission cycle")
    stack.kill(first)
    assert_each_job_once("killed", 300)
    assert_usage_is_the_admitted_requests_within_every_max()

    second = stack.worker()
    # Killed again later, in a cycle that admits into what finished jobs freed.
    wait_for(
        lambda: Job.objects.filter(name__startswith="killed-", state=State.SUCCEEDED).count() >= 60,
        RECOVERY_SECONDS,
        "jobs finishing under the second worker",
        every=0.05,
    )
    wait_for_a_cycle(stack, "a later admission cycle")
    stack.kill(second)
    assert_each_job_once("killed", 300)
    assert_usage_is_the_admitted_requests_within_every_max()

    stack.worker()
    run_to_completion(stack, "killed", 300)


def test_the_broker_stopped_and_started_during_submissions_loses_nothing(stack, staff):
    url = stack.web()
    token = full_token(staff, name="tests")

    def submit(jobs: list[dict]) -> requests.Response:
        return requests.post(
            url + "/api/v1/jobs/batch/",
            json={"jobs": jobs},
            headers={"Authorization": f"Token {token}"},
            timeout=30,
        )

    worker = stack.worker()
    documents = small_jobs("outage", 300)
    assert submit(documents[:100]).status_code == 201
    wait_for(
        lambda: Job.objects.filter(name__startswith="outage-", state=State.SUCCEEDED).exists(),
        START_SECONDS,
        "jobs running before the outage",
    )

    stack.redis.stop()
    # Accepted while the broker is away: the database is the truth.
    response = submit(documents[100:200])
    assert response.status_code == 201, response.text
    assert_usage_is_the_admitted_requests_within_every_max()
    time.sleep(1.5)  # the outage: the worker and beat retry meanwhile
    stack.redis.start()

    assert submit(documents[200:]).status_code == 201
    run_to_completion(stack, "outage", 300)
    # The same worker did it all: it outlived the broker.
    assert worker.poll() is None


def test_dropped_database_connections_of_the_worker_lose_nothing(stack, staff):
    job_submit_batch(user=staff, documents=small_jobs("dropped", 200))
    worker = stack.worker()
    for _ in range(3):
        wait_for_a_cycle(stack, "an admission cycle")
        assert drop_database_connections() >= 1
        assert_each_job_once("dropped", 200)
        assert_usage_is_the_admitted_requests_within_every_max()

    run_to_completion(stack, "dropped", 200)
    assert worker.poll() is None


def test_workers_killed_while_jobs_retry_run_past_their_limit_and_drain_lose_nothing(stack, staff):
    """Every job fails: half of them retry twice (three attempts), the others run past a
    time limit; a worker is killed as the first attempts fail, another while a leaf drains.
    Each job ends failed once, with all its attempts and no more, its quota freed."""
    failing = [
        {**job, "retries": 2, "env": {"CALDERA_SIMULATED_EXIT_CODE": "3"}}
        for job in small_jobs("retried", 30)
    ]
    limited = [{**job, "time_limit": "2s", "run_seconds": 600} for job in small_jobs("limited", 30)]
    job_submit_batch(user=staff, documents=failing + limited)
    first = stack.worker()
    wait_for(
        lambda: JobEvent.objects.filter(reason="Retrying").exists(),
        START_SECONDS, "a first attempt failing", every=0.01,
    )  # fmt: skip
    stack.kill(first)
    assert_usage_is_the_admitted_requests_within_every_max()
    second = stack.worker()
    wait_for(
        lambda: JobEvent.objects.filter(reason="TimeLimitExceeded").exists(),
        START_SECONDS, "a job stopped at its limit", every=0.01,
    )  # fmt: skip
    stack.kill(second)
    assert_usage_is_the_admitted_requests_within_every_max()
    stack.worker()

    jobs = Job.objects.filter(name__regex=r"^(retried|limited)-")

    def ended() -> bool:
        stack.assert_none_died()
        assert_usage_is_the_admitted_requests_within_every_max()
        return jobs.filter(state=State.FAILED).count() == 60

    try:
        wait_for(ended, RECOVERY_SECONDS, "all 60 jobs failed", every=0.25)
    except AssertionError as error:
        states = Counter(jobs.values_list("state", flat=True))
        raise AssertionError(f"{error}; states {dict(states)}\n{stack.log_tail()}") from None
    assert_each_job_once("retried", 30)
    assert_each_job_once("limited", 30)
    for job in jobs.filter(name__startswith="retried-"):
        assert job.attempt == 3 and [a["attempt"] for a in job.attempts] == [1, 2], job.name
        assert job.events.filter(reason="Retrying").count() == 2, job.name
    for job in jobs.filter(name__startswith="limited-"):
        assert job.attempt == 1 and job.attempts == [], job.name
        assert job.events.filter(reason="Failed").get().message == (
            "Ran past its limit of 2s; its quota is freed"
        )
    assert rollup(leaf_usage()) == {}
    assert usage_audit().lines() == []


def test_a_worker_killed_while_a_leaf_drains_leaves_every_job_queued_until_it_resumes(stack, staff):
    from queues.services import tree_apply, tree_export, tree_find

    jobs = [{**job, "queue": LEAVES[0], "run_seconds": 3.0} for job in small_jobs("drained", 10)]
    job_submit_batch(user=staff, documents=jobs)
    first = stack.worker()
    drained = Job.objects.filter(name__startswith="drained-")
    wait_for(
        lambda: drained.filter(state=State.RUNNING).count() >= 5,
        START_SECONDS, "jobs running in the leaf", every=0.05,
    )  # fmt: skip
    document = tree_export()
    tree_find(document, LEAVES[0])["stopPolicy"] = "HoldAndDrain"
    tree_apply(document=document)
    wait_for(
        lambda: JobEvent.objects.filter(reason="Preempted").exists(),
        START_SECONDS, "the drain's first preemption", every=0.005,
    )  # fmt: skip
    stack.kill(first)
    assert_usage_is_the_admitted_requests_within_every_max()
    stack.worker()
    wait_for(
        lambda: not drained.filter(state__in=HOLDING).exists(),
        RECOVERY_SECONDS, "every job of the drained leaf back in its queue", every=0.1,
    )  # fmt: skip
    time.sleep(2)  # beat's cycles meanwhile admit nothing
    assert not drained.filter(state__in=HOLDING).exists()
    assert (
        drained.filter(state=State.SUCCEEDED).count()
        + drained.filter(state__in=(State.QUEUED, State.BACKOFF)).count()
        == 10
    )

    document = tree_export()
    tree_find(document, LEAVES[0]).pop("stopPolicy")
    tree_apply(document=document)
    run_to_completion_after_preemptions(stack, drained, 10)


def run_to_completion_after_preemptions(stack: Stack, jobs, count: int) -> None:
    """Wait until every job succeeded, each once, its quota freed (preempted jobs are
    dequeued again: more than one Dequeued each)."""

    def done() -> bool:
        stack.assert_none_died()
        assert_usage_is_the_admitted_requests_within_every_max()
        return jobs.filter(state=State.SUCCEEDED).count() == count

    wait_for(done, RECOVERY_SECONDS, f"all {count} jobs succeeded", every=0.25)
    per_job = Counter(
        JobEvent.objects.filter(job__in=jobs, reason="Succeeded").values_list("job_id", flat=True)
    )
    assert len(per_job) == count and set(per_job.values()) == {1}
    assert rollup(leaf_usage()) == {}
