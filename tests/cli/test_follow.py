"""``--follow`` against a live server: ``submit --follow`` tells a job's changes, the
cluster's events about its pods and then its log as it grows; ``events --follow`` prints a
job's history as it grows and ends with the exit code of ``--wait``.

The suite's real Celery worker runs the admission cycle and the simulated cluster; a job
whose gang two small nodes cannot hold (UNPACKABLE), though its quota admits it, draws the
simulated scheduler's GangFailedScheduling warnings.
"""

from __future__ import annotations

import json
import subprocess
import threading
from collections.abc import Callable, Iterator

import pytest
import yaml

from jobs.cluster import get_backend
from jobs.models import Job, State

from ..support.cli import json_lines
from ..support.jobs import RAY_JOB, UNPACKABLE, submit_document
from ..support.polling import wait_for

pytestmark = pytest.mark.django_db(transaction=True)

SHORT = {**RAY_JOB, "name": "cli-short", "run_seconds": 1}
FAILING = {**SHORT, "name": "cli-failing", "env": {"CALDERA_SIMULATED_EXIT_CODE": "3"}}


@pytest.fixture
def small_nodes(settings) -> Iterator[None]:
    """Two 8-cpu nodes: a gang of 14 cpu fits the video leaf's quota, not the nodes."""
    settings.SIMULATED_CLUSTER_NODES = "2xcpu=8,memory=64Gi"
    get_backend.cache_clear()
    yield
    get_backend.cache_clear()


class Records:
    """The JSON lines a running command writes, read as they come. A command that never
    writes what is awaited is killed after ``timeout`` seconds, which ends the reading."""

    def __init__(self, process: subprocess.Popen[str], timeout: float = 120) -> None:
        self.process = process
        self.read: list[dict] = []
        self.stop = threading.Timer(timeout, process.kill)
        self.stop.start()

    def until(self, wanted: Callable[[dict], bool]) -> dict:
        """The first record from now on that ``wanted`` accepts."""
        assert self.process.stdout is not None
        for line in iter(self.process.stdout.readline, ""):
            record = json.loads(line)
            self.read.append(record)
            if wanted(record):
                return record
        raise AssertionError(f"the command ended without it; it wrote {self.read}")

    def end(self) -> tuple[int, list[dict]]:
        """The exit code and the records written after those read."""
        assert self.process.stdout is not None
        code = self.process.wait(timeout=60)
        self.stop.cancel()
        return code, json_lines(self.process.stdout.read())


def document(tmp_path, *bodies: dict) -> str:
    path = tmp_path / "jobs.yaml"
    path.write_text(yaml.safe_dump_all(bodies))
    return str(path)


def test_submit_follow_says_its_place_moving_up_then_that_its_gang_cannot_be_placed(
    cli, tmp_path, api, member, small_nodes, celery_worker
):
    blocker = submit_document(member, {**RAY_JOB, "name": "blocker"})  # 12 of the 14 cpu
    wait_for(lambda: Job.objects.get(pk=blocker.pk).state == State.RUNNING)
    ahead = submit_document(member, {**RAY_JOB, **UNPACKABLE, "name": "ahead"})  # 14 cpu
    unpackable = {**SHORT, **UNPACKABLE, "name": "unpackable"}
    following = Records(
        cli.start("submit", document(tmp_path, unpackable), "--follow", "-o", "json")
    )

    submitted = following.until(lambda r: r["event"] == "submitted")
    job_id = submitted["id"]
    following.until(lambda r: r["event"] == "changed" and r["position"] == 2)
    assert api(member).post(f"/api/v1/jobs/{ahead.pk}/cancel/").status_code == 200
    moved = following.until(lambda r: r["event"] == "changed" and r["position"] != 2)
    assert api(member).post(f"/api/v1/jobs/{blocker.pk}/cancel/").status_code == 200
    gang = following.until(lambda r: r["event"] == "cluster_event")
    assert api(member).post(f"/api/v1/jobs/{job_id}/cancel/").status_code == 200
    code, rest = following.end()

    assert moved == {"event": "changed", "id": job_id, "state": moved["state"], "position": 1,
                     "waiting": moved["waiting"], "attempt": 1}  # fmt: skip
    assert moved["state"] in {"queued", "backoff"}
    assert (gang["id"], gang["reason"], gang["type"]) == (job_id, "GangFailedScheduling", "Warning")
    assert "in gang failed to be scheduled in cycle" in gang["message"]
    assert gang["involved"].startswith(f"pod/unpackable-{job_id}-")
    assert code == 3
    assert rest[-1]["event"] == "ended" and rest[-1]["state"] == "cancelled"
    # Only the cluster's events: the portal's own (Enqueued, Dequeued) are the changes said.
    records = following.read + rest
    assert {r["reason"] for r in records if r["event"] == "cluster_event"} <= {
        "GangFailedScheduling"
    }
    printed = [json.dumps(r, sort_keys=True) for r in records if r["event"] == "cluster_event"]
    assert len(printed) == len(set(printed))  # no event printed twice as it read


# The simulated cluster removes a job's pods as it ends, as KubeRay does: a log's last lines,
# written after the last poll that found the job running, may be gone by the next.


def test_submit_follow_prints_each_jobs_log_after_its_id(cli, tmp_path, celery_worker):
    path = document(tmp_path, {**SHORT, "name": "first"}, {**SHORT, "name": "second"})

    followed = cli.run("submit", path, "--follow", timeout=180)

    assert followed.returncode == 0, followed.stdout + followed.stderr
    lines = followed.stdout.splitlines()
    for job in Job.objects.all():
        assert job.state == State.SUCCEEDED
        log = [line for line in lines if line.startswith(f"[{job.pk}] ")]
        assert "Started " in log[0], "\n".join(lines)
        # Its last line, written after the last poll that found it running, is printed
        # from the end kept as it ended, its pods gone.
        assert log[-1].endswith(" Exited with code 0 after 1 s"), "\n".join(lines)
        assert len(log) == len(set(log))  # no line printed twice
        # Its state first, its ending last.
        said = next(i for i, line in enumerate(lines) if line.startswith(f"job {job.pk} "))
        assert said < lines.index(log[0])
        assert lines[-2:].count(f"job {job.pk} {job.name}: succeeded") == 1


def test_submit_follow_in_json_writes_each_log_line_as_a_record(cli, tmp_path, celery_worker):
    followed = cli.run("submit", document(tmp_path, SHORT), "--follow", "-o", "json", timeout=120)

    assert followed.returncode == 0, followed.stdout + followed.stderr
    records = json_lines(followed.stdout)
    job_id = records[0]["id"]
    log = [r for r in records if r["event"] == "log"]
    assert set(log[0]) == {"event", "id", "line"} and {r["id"] for r in log} == {job_id}
    assert "Started " in log[0]["line"]
    assert len(log) == len({r["line"] for r in log})
    assert records[-1] == {
        "event": "ended",
        "id": job_id,
        "name": "cli-short",
        "state": "succeeded",
    }
    assert any(r["event"] == "changed" for r in records)


@pytest.mark.parametrize(
    ("body", "code", "reason"), [(SHORT, 0, "Succeeded"), (FAILING, 1, "Failed")]
)
def test_events_follow_prints_the_history_until_the_job_ends(
    cli, member, celery_worker, body, code, reason
):
    job = submit_document(member, body)

    followed = cli.run("events", str(job.pk), "--follow", "-o", "json", timeout=120)

    assert followed.returncode == code, followed.stdout + followed.stderr
    *history, ended = json_lines(followed.stdout)
    reasons = [event["reason"] for event in history]
    assert reasons[0] == "Enqueued" and "Dequeued" in reasons and reason in reasons
    assert len(reasons) == len(set(reasons))  # each once
    assert (ended["event"], ended["state"]) == ("ended", Job.objects.get(pk=job.pk).state)
    assert ended["state"] == {0: "succeeded", 1: "failed"}[code]


def test_events_follow_of_a_job_cancelled_in_its_queue_exits_3(cli, api, member):
    job = submit_document(member, SHORT)  # no worker: it stays queued
    following = cli.start("events", str(job.pk), "--follow")
    assert following.stdout is not None and following.stderr is not None
    first = following.stdout.readline()  # printed at its first poll

    assert api(member).post(f"/api/v1/jobs/{job.pk}/cancel/").status_code == 200

    assert following.wait(timeout=60) == 3
    lines = [first, *following.stdout.read().splitlines()]
    assert "  Enqueued: " in lines[0]
    assert [line.split("  ")[1].split(":")[0] for line in lines[1:]] == ["Cancelled"]
    assert (
        following.stderr.read()
        .splitlines()[-1]
        .startswith(f"job {job.pk} cli-short: cancelled (Cancelled")
    )
