"""``caldera submit --webhook URL``: the job's own webhook, added as it is queued, tells a real
receiver the job's state, then each change, signed with the secret the command printed
once; a retried submit (its key) adds no second hook."""

from __future__ import annotations

import json

import pytest
import yaml

from hooks.models import Webhook
from hooks.task_names import DELIVER_TASK
from jobs.models import Job
from portal.celery import app

from ..support.cli import Cli, json_lines
from ..support.hooks import readme_verify
from ..support.jobs import RAY_JOB
from ..support.polling import wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_pipeline_learns_the_outcome_from_a_signed_webhook(
    cli: Cli,
    tmp_path,
    receivable,
    listener,
    celery_worker,
):
    (tmp_path / "job.yaml").write_text(yaml.safe_dump({**RAY_JOB, "run_seconds": 1}))

    done = cli.run("submit", "job.yaml", "--webhook", listener.url(), "--wait", "--output", "json")

    assert done.returncode == 0, done.stderr
    told = {line["event"]: line for line in json_lines(done.stdout)}
    secret = told["webhook"]["secret"]
    assert secret.startswith("whsec_") and told["ended"]["state"] == "succeeded"
    app.send_task(DELIVER_TASK)  # beat's pass, which the tests run without
    received = listener.requests
    wait_for(lambda: received and json.loads(received[-1].body)["type"] == "job.succeeded")
    verify = readme_verify()
    assert all(verify(secret, r.headers, r.body) for r in received)
    events = [json.loads(r.body)["type"] for r in received]
    # First the state the job was in as its hook was added (job.queued, unless the cluster
    # was quicker than the command), then each change.
    lifecycle = ["job.queued", "job.admitted", "job.running", "job.succeeded"]
    assert events == lifecycle[lifecycle.index(events[0]) :]


def test_a_retried_submit_adds_no_second_webhook(cli: Cli, tmp_path, receivable, listener):
    (tmp_path / "job.yaml").write_text(yaml.safe_dump(RAY_JOB))
    args = ("submit", "job.yaml", "--webhook", listener.url(), "--idempotency-key", "k1")

    first, again = cli.run(*args), cli.run(*args)

    assert first.returncode == again.returncode == 0, again.stderr
    assert "its signing secret, shown this once: whsec_" in first.stdout
    assert "has its webhook" in again.stdout and "whsec_" not in again.stdout
    assert Webhook.objects.filter(job=Job.objects.get()).count() == 1


def test_an_address_the_server_refuses_exits_2_and_the_job_stays(cli: Cli, tmp_path):
    (tmp_path / "job.yaml").write_text(yaml.safe_dump(RAY_JOB))

    refused = cli.run("submit", "job.yaml", "--webhook", "https://10.0.0.1/hook")

    assert refused.returncode == 2
    assert "is queued, but the server refused its webhook" in refused.stderr
    assert "url: " in refused.stderr
    assert Job.objects.count() == 1 and not Webhook.objects.exists()
