"""LOG_FORMAT=json (portal/logs.py): one JSON object per line with the request id, the
person, the job of the URL and the Celery task; the default stays a readable line."""

from __future__ import annotations

import io
import json
import logging
import os
import subprocess
import sys

import pytest

from jobs.tasks import reconcile
from portal.logs import Context, JsonFormatter, logging_config, task_ended, task_started

from ..support.paths import REPO

pytestmark = pytest.mark.django_db


@pytest.fixture
def lines():
    """What the root logger writes through a JSON handler, as parsed lines."""
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(JsonFormatter())
    handler.addFilter(Context())
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        yield lambda: [json.loads(line) for line in out.getvalue().splitlines()]
    finally:
        root.removeHandler(handler)


def test_a_request_s_lines_name_its_id_its_person_and_its_job(api, member, lines):
    client = api(member)
    answer = client.get("/api/v1/jobs/987654/", HTTP_X_REQUEST_ID="ci-run-42")

    assert answer.status_code == 404 and answer["X-Request-ID"] == "ci-run-42"
    [line] = [line for line in lines() if line["logger"] == "django.request"]
    assert line["level"] == "WARNING" and line["message"] == "Not Found: /api/v1/jobs/987654/"
    assert (line["request_id"], line["person"], line["job_id"]) == ("ci-run-42", "alice", 987654)
    assert line["time"].endswith("Z")


def test_a_request_without_a_sane_id_gets_one_of_its_own(client):
    answer = client.get("/livez", HTTP_X_REQUEST_ID="no spaces\nor newlines")
    assert len(answer["X-Request-ID"]) == 32 and answer["X-Request-ID"].isalnum()
    assert client.get("/livez")["X-Request-ID"] != answer["X-Request-ID"]


def test_a_task_s_lines_name_it_and_its_job(lines):
    task_started(task_id="5d1e", task=reconcile, args=([17],))
    try:
        logging.getLogger("jobs.engine.reconcile").warning("the cluster did not answer")
    finally:
        task_ended()
    logging.getLogger("jobs.engine.reconcile").warning("after the task")

    during, after = lines()
    assert (during["task"], during["task_id"], during["job_id"]) == (
        "jobs.tasks.reconcile",
        "5d1e",
        17,
    )
    assert "task" not in after and "job_id" not in after


def test_an_exception_is_one_line_and_the_default_stays_readable(lines):
    try:
        raise ValueError("bad")
    except ValueError:
        logging.getLogger("x").exception("it failed")
    [line] = lines()
    assert line["message"] == "it failed" and "ValueError: bad" in line["exception"]
    plain = logging_config("plain", "INFO")["formatters"]["plain"]["format"]
    assert plain == "%(asctime)s %(levelname)s %(name)s %(message)s"
    with pytest.raises(ValueError, match="LOG_FORMAT must be plain or json"):
        logging_config("yaml", "INFO")


def test_the_settings_read_log_format():
    code = "import django; django.setup(); import logging; logging.getLogger('x').warning('héllo')"
    environment = {**os.environ, "LOG_FORMAT": "json", "DJANGO_SETTINGS_MODULE": "portal.settings"}
    done = subprocess.run(
        [sys.executable, "-c", code], env=environment, cwd=REPO, capture_output=True, text=True
    )
    written = [json.loads(text) for text in done.stderr.splitlines()]  # every line is JSON
    assert {"logger": "x", "message": "héllo", "level": "WARNING"}.items() <= written[-1].items()
