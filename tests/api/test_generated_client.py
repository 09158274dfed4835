"""The OpenAPI schema is good enough for a generated client: ``openapi-python-client`` (a dev
requirement) writes a package from it, without a warning, and that package submits, lists,
reads and cancels a job against a live server, over real HTTP, with a token.

The generator runs offline (the schema is written to a file first); its ``ruff`` is the
venv's, found beside the interpreter."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import call_command

from access.services import full_token
from jobs.models import Job, State

from ..support.jobs import RAY_JOB

pytestmark = pytest.mark.django_db(transaction=True)

PACKAGE = "caldera_generated_client"


@pytest.fixture
def generated(tmp_path, monkeypatch):
    """The package ``openapi-python-client`` writes from the schema, imported."""
    schema = tmp_path / "schema.yaml"
    call_command("spectacular", "--file", str(schema))
    tools = Path(sys.executable).parent
    made = subprocess.run(
        [
            str(tools / "openapi-python-client"), "generate", "--path", str(schema),
            "--output-path", str(tmp_path / PACKAGE), "--meta", "none", "--fail-on-warning",
        ],
        capture_output=True, text=True, cwd=tmp_path, timeout=300,
        env={**os.environ, "PATH": os.pathsep.join([str(tools), os.environ.get("PATH", "")])},
    )  # fmt: skip
    assert made.returncode == 0, made.stdout + made.stderr
    assert "Warning" not in made.stdout + made.stderr, made.stdout + made.stderr
    monkeypatch.syspath_prepend(str(tmp_path))
    yield importlib.import_module(PACKAGE)
    for name in [name for name in sys.modules if name.split(".")[0] == PACKAGE]:
        del sys.modules[name]


def endpoint(name: str):
    """The generated module of the operation ``name`` (its operation_id)."""
    return importlib.import_module(f"{PACKAGE}.api.v1.{name}")


def test_a_generated_client_submits_lists_reads_and_cancels_a_job(generated, live_server, member):
    models = importlib.import_module(f"{PACKAGE}.models")
    with generated.AuthenticatedClient(
        base_url=live_server.url,
        token=full_token(member, name="generated"),
        prefix="Token",
        raise_on_unexpected_status=True,
    ) as client:  # closed at the end, so the server's thread lets its database go
        submitted = endpoint("jobs_create").sync_detailed(
            client=client, body=models.JobSubmissionRequest.from_dict(RAY_JOB)
        )
        page = endpoint("jobs_list").sync(client=client, mine=models.JobsListMine.TRUE)
        read = endpoint("jobs_retrieve").sync(client=client, id=submitted.parsed.id)
        sweep = models.JobBatchRequest.from_dict({"jobs": [RAY_JOB, RAY_JOB]})
        dry_runs = endpoint("jobs_batch_dry_run").sync(client=client, body=sweep)
        cancelled = endpoint("jobs_cancel").sync(client=client, id=submitted.parsed.id)

    assert submitted.status_code == 201, submitted.content
    job = submitted.parsed
    assert isinstance(job, models.JobSubmitted)
    assert (job.name, job.state, job.position) == ("rayjob-video", models.StateEnum.QUEUED, 1)
    assert isinstance(page, models.JobPage)
    assert [listed.id for listed in page.results] == [job.id]
    assert isinstance(read, models.JobDetail)
    assert read.waiting.reason == models.ReasonEnum.NEXT
    assert read.head.resources.additional_properties == {"cpu": "4", "memory": "4G"}
    assert [(told.position, told.fits_now) for told in dry_runs] == [(2, False), (3, False)]
    assert isinstance(cancelled, models.Job)
    assert cancelled.state == models.StateEnum.CANCELLED
    assert Job.objects.get(pk=job.id).state == State.CANCELLED
