"""What the command retries, against a server of the test's own that answers "not now":
reads through 503s and a gateway's 502, honouring Retry-After; a submission only where the
server cannot have taken it, so a job is never submitted twice."""

from __future__ import annotations

import json

from ..support.cli import Cli, stub_server

PAGE = {"count": 0, "next": None, "previous": None, "results": []}


def test_a_read_is_retried_through_busy_answers_until_one_succeeds(tmp_path):
    asked = []

    def answer(method, path, headers):
        asked.append((method, path, headers["Authorization"]))
        if len(asked) == 1:
            return 503, {"Retry-After": "0"}, {"detail": "busy", "reason": "busy"}
        if len(asked) == 2:
            return 502, {}, {"detail": "Bad Gateway"}
        return 200, {}, PAGE

    with stub_server(answer) as url:
        listed = Cli(tmp_path).run("ls", "-o", "json", CALDERA_URL=url, CALDERA_TOKEN="t")
    assert listed.returncode == 0, listed.stderr
    assert asked == [("GET", "/api/v1/jobs/?limit=20", "Token t")] * 3


def test_a_submission_a_gateway_may_have_passed_on_is_not_sent_again(tmp_path):
    asked = []

    def answer(method, path, headers):
        asked.append((method, path))
        return 502, {}, {"detail": "Bad Gateway"}

    (tmp_path / "job.json").write_text(json.dumps({"queue": "root/algorithm/video"}))
    with stub_server(answer) as url:
        sent = Cli(tmp_path).run(
            "submit", "job.json", CALDERA_URL=url, CALDERA_TOKEN="t", CALDERA_RETRY_SECONDS="30"
        )
    assert sent.returncode == 5
    assert asked == [("POST", "/api/v1/jobs/")]


def test_a_busy_server_is_asked_until_the_retries_run_out_then_5(tmp_path):
    asked = []

    def answer(method, path, headers):
        asked.append(method)
        return 503, {}, {"detail": "busy"}

    (tmp_path / "job.json").write_text(json.dumps({"queue": "root/algorithm/video"}))
    with stub_server(answer) as url:
        sent = Cli(tmp_path).run(
            "submit", "job.json", CALDERA_URL=url, CALDERA_TOKEN="t", CALDERA_RETRY_SECONDS="2"
        )
    assert sent.returncode == 5
    assert "answered 503: busy" in sent.stderr
    assert len(asked) >= 2 and set(asked) == {"POST"}
