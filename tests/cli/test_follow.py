"""``--follow`` against a live server: ``events --follow`` prints a job's history as it
grows and ends with the exit code of ``--wait``. The suite's real Celery worker runs the
admission cycle and the simulated cluster."""

from __future__ import annotations

import pytest

from jobs.models import Job

from ..support.cli import json_lines
from ..support.jobs import RAY_JOB, submit_document

pytestmark = pytest.mark.django_db(transaction=True)

SHORT = {**RAY_JOB, "name": "cli-short", "run_seconds": 1}
FAILING = {**SHORT, "name": "cli-failing", "env": {"CALDERA_SIMULATED_EXIT_CODE": "3"}}


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
