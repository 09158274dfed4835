"""The ``caldera`` command against a live server, over real HTTP: a child process per
command, as a user or a pipeline runs it (tests/support/cli.py).

Jobs move when the admission cycle and the cluster sync run: the tests that need them
finished or held for quota use the suite's real Celery worker, which the server's
triggers drive; the others leave their jobs queued. The exit codes are those of
client/caldera_cli/exit_codes.py.
"""

from __future__ import annotations

import json
import re
import socket
import stat
import threading
import time
from datetime import timedelta

import pytest
import yaml

from access.models import AccessToken
from access.services import token_revoke
from audit.models import AuditEntry
from jobs.engine.sync import cluster_sync
from jobs.engine.triggers import request_admission
from jobs.models import PENDING, Job, SimulatedPod, State
from queues.services import tree_apply

from ..support.cli import Cli, json_lines
from ..support.jobs import RAY_JOB, running, submit_document
from ..support.polling import wait_for
from ..support.trees import pooled_tree_document

pytestmark = pytest.mark.django_db(transaction=True)

SHORT = {**RAY_JOB, "name": "cli-short", "run_seconds": 1}


def document(tmp_path, body: dict, name: str = "job.yaml") -> str:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(body) if name.endswith(".yaml") else json.dumps(body))
    return str(path)


def test_it_logs_in_to_a_private_config_that_whoami_reads(live_server, tmp_path, token):
    cli = Cli(tmp_path)
    signed_in = cli.run("login", "--url", live_server.url + "/", input=token + "\n")
    assert signed_in.returncode == 0, signed_in.stderr
    assert "as alice" in signed_in.stdout
    assert stat.S_IMODE(cli.config.stat().st_mode) == 0o600
    assert json.loads(cli.config.read_text()) == {"url": live_server.url, "token": token}

    me = cli.run("whoami")
    assert me.returncode == 0, me.stderr
    assert me.stdout.startswith(f"alice at {live_server.url}\n")
    assert f"token {token[:14]}… 'cli': manage, all departments" in me.stdout
    [answer] = json_lines(cli.run("whoami", "--output", "json").stdout)
    assert answer["user"] == "alice" and answer["token"]["prefix"] == token[:14]


def test_a_token_the_server_refuses_exits_5_at_once_and_saves_nothing(
    live_server, tmp_path, member, token
):
    cli = Cli(tmp_path)
    wrong = token[:-1] + ("y" if token.endswith("x") else "x")  # one character off
    refused = cli.run("login", "--url", live_server.url, CALDERA_TOKEN=wrong)
    assert refused.returncode == 5
    assert not cli.config.exists()

    token_revoke(
        token=AccessToken.objects.get(user=member, name="cli"),
        actor=member,
        source=AuditEntry.Source.API,
    )
    # Retried for ten minutes, this would outlive the run's timeout: a 401 is final at once.
    revoked = cli.run("ls", timeout=60, CALDERA_URL=live_server.url, CALDERA_TOKEN=token,
                      CALDERA_RETRY_SECONDS="600")  # fmt: skip
    assert revoked.returncode == 5
    assert "revoked" in revoked.stderr


def test_a_server_that_is_not_there_exits_5_after_its_retries(tmp_path):
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    cli = Cli(tmp_path, {"CALDERA_URL": f"http://127.0.0.1:{port}", "CALDERA_TOKEN": "t"})
    answer = cli.run("status", "1", CALDERA_RETRY_SECONDS="1")
    assert answer.returncode == 5
    assert f"cannot reach http://127.0.0.1:{port}" in answer.stderr
    job = cli.run("submit", document(tmp_path, SHORT), "--wait", CALDERA_RETRY_SECONDS="1")
    assert job.returncode == 5


def test_it_submits_a_yaml_document_and_waits_until_it_succeeds(cli, tmp_path, celery_worker):
    done = cli.run("submit", document(tmp_path, SHORT), "--wait", "--timeout", "2m")
    assert done.returncode == 0, done.stdout + done.stderr
    job = Job.objects.get(name="cli-short")
    assert job.state == State.SUCCEEDED and job.owner.username == "alice"
    assert done.stdout.splitlines()[0].startswith(f"submitted job {job.pk} cli-short")
    assert done.stdout.splitlines()[-1] == f"job {job.pk} cli-short: succeeded"


def test_a_wait_goes_on_through_every_attempt_and_ends_with_the_last(cli, tmp_path, celery_worker):
    retried = {**SHORT, "name": "cli-retried", "retries": 1,
               "env": {"CALDERA_SIMULATED_EXIT_CODE": "3"}}  # fmt: skip
    # Beat re-drives the admission cycle every ADMIT_BEAT_SECONDS, which is what tries a
    # backing-off attempt once it is due; the test's worker runs no beat: this stands in.
    stop = threading.Event()

    def admit_now_and_then() -> None:
        while not stop.wait(1):
            request_admission()

    beat = threading.Thread(target=admit_now_and_then)
    beat.start()
    try:
        done = cli.run("submit", document(tmp_path, retried), "--follow", "--timeout", "3m",
                       timeout=240)  # fmt: skip
    finally:
        stop.set()
        beat.join()
    job = Job.objects.get(name="cli-retried")
    assert (job.state, job.attempt) == (State.FAILED, 2), done.stdout + done.stderr
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    said = [line for line in lines if "attempt 2 of 2, after attempt 1 failed: " in line]
    assert said and "exited with code 3" in said[0], "\n".join(lines)
    assert lines[-1].startswith(f"job {job.pk} cli-retried: failed")
    told = cli.run("status", str(job.pk)).stdout
    assert "  attempt:   2 of 2\n    attempt 1 failed: Pod cli-retried-" in told


def test_a_field_the_api_refuses_exits_2_with_its_words(cli, tmp_path):
    bad = {**SHORT, "head": {"resources": {"cpu": "4 cores", "memory": "4G"}}}
    refused = cli.run("submit", document(tmp_path, bad, "bad.json"), "--wait")
    assert refused.returncode == 2
    assert "bad.json: head.resources.cpu: '4 cores' is not a Kubernetes quantity" in refused.stderr
    assert not Job.objects.exists()


def test_the_command_line_overrides_the_documents_queue_and_priority(cli, tmp_path):
    refused = cli.run("submit", document(tmp_path, SHORT), "--priority", "5")
    assert refused.returncode == 2
    assert "priority" in refused.stderr  # a member submits at 0 or below
    moved = cli.run("submit", document(tmp_path, SHORT), "-q", "root/algorithm/text", "-p", "-1")
    assert moved.returncode == 0, moved.stderr
    job = Job.objects.get()
    assert (job.queue.node.path, job.priority) == ("root/algorithm/text", -1)


def test_a_retried_submit_with_its_key_answers_the_first_job(cli, tmp_path):
    path = document(tmp_path, SHORT)
    first = cli.run("submit", path, "--idempotency-key", "train-42", "-o", "json")
    again = cli.run("submit", path, "--idempotency-key", "train-42", "-o", "json")

    assert first.returncode == again.returncode == 0, first.stderr + again.stderr
    assert json_lines(first.stdout)[0]["id"] == json_lines(again.stdout)[0]["id"]
    assert Job.objects.count() == 1


def test_a_ci_step_retried_in_the_same_attempt_queues_one_job(cli, tmp_path):
    path = document(tmp_path, SHORT)
    github = {"GITHUB_RUN_ID": "6242", "GITHUB_RUN_ATTEMPT": "1", "GITHUB_JOB": "train",
              "GITHUB_ACTION": "submit"}  # fmt: skip

    runs = [cli.run("submit", path, "-o", "json", **github) for _ in range(2)]
    rerun = cli.run("submit", path, "-o", "json", **{**github, "GITHUB_RUN_ATTEMPT": "2"})

    ids = [json_lines(run.stdout)[0]["id"] for run in [*runs, rerun]]
    assert ids[0] == ids[1] != ids[2]
    assert Job.objects.count() == 2


def test_a_dry_run_says_whether_it_would_run_and_stores_nothing(cli, tmp_path):
    fits = cli.run("submit", document(tmp_path, SHORT), "--dry-run")
    bad = {**SHORT, "head": {"resources": {"cpu": "4 cores", "memory": "4G"}}}
    refused = cli.run("submit", document(tmp_path, bad, "bad.json"), "--dry-run")

    assert fits.returncode == 0, fits.stderr
    assert "job.yaml: fits now (position 1 in root-algorithm-video)" in fits.stdout
    assert refused.returncode == 2
    assert "bad.json: head.resources.cpu" in refused.stderr
    assert not Job.objects.exists()


def test_a_dry_run_of_several_documents_asks_as_their_batch(cli, tmp_path):
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump_all([RAY_JOB, {**RAY_JOB, "name": "second"}]))
    bad = {**SHORT, "head": {"resources": {"cpu": "4 cores", "memory": "4G"}}}

    told = cli.run("submit", "sweep.yaml", "--dry-run")  # the command runs in tmp_path
    first, second = json_lines(cli.run("submit", "sweep.yaml", "--dry-run", "-o", "json").stdout)
    refused = cli.run("submit", "sweep.yaml", document(tmp_path, bad, "bad.json"), "--dry-run")

    assert told.returncode == 0, told.stderr
    lines = told.stdout.splitlines()
    assert lines[0].startswith("sweep.yaml#1: fits now (position 1 in root-algorithm-video)")
    # The second stands behind the first, which would hold 12 of the leaf's 14 cpu.
    assert lines[1].startswith("sweep.yaml#2: would wait: It waits for cpu in root/algorithm")
    assert "(position 2 in root-algorithm-video)" in lines[1]
    assert (first["file"], first["fits_now"], second["position"]) == ("sweep.yaml#1", True, 2)
    assert refused.returncode == 2 and refused.stdout == ""
    assert "bad.json: head.resources.cpu" in refused.stderr
    assert not Job.objects.exists()


def test_a_job_cancelled_elsewhere_ends_the_wait_with_3(cli, tmp_path, api, member):
    waiting = cli.start("submit", document(tmp_path, SHORT), "--wait", "--output", "json")
    submitted = json.loads(waiting.stdout.readline())  # no worker: it stays queued
    assert submitted["event"] == "submitted" and submitted["state"] == "queued"
    assert api(member).post(f"/api/v1/jobs/{submitted['id']}/cancel/").status_code == 200
    assert waiting.wait(timeout=60) == 3
    ended = json_lines(waiting.stdout.read())[-1]
    assert ended["event"] == "ended" and ended["state"] == "cancelled"
    assert ended["reason"].startswith("Cancelled")


def test_a_wait_that_times_out_exits_4_and_the_job_keeps_its_place(
    cli, tmp_path, member, celery_worker
):
    blocker = submit_document(member, {**RAY_JOB, "name": "blocker"})  # 12 of the 14 cpu
    wait_for(lambda: Job.objects.get(pk=blocker.pk).state == State.RUNNING)

    timed_out = cli.run("submit", document(tmp_path, SHORT), "--follow", "--timeout", "2s")
    assert timed_out.returncode == 4, timed_out.stdout + timed_out.stderr
    job = Job.objects.get(name="cli-short")
    assert job.state in PENDING
    # --follow said where it stands and why it waits, in the API's sentence.
    assert re.search(
        rf"^job {job.pk} cli-short: (queued|backoff), position 1", timed_out.stdout, re.M
    )
    assert re.search(r"^(job \d+ cli-short: |  )It ", timed_out.stdout, re.MULTILINE)
    assert f"job {job.pk}: timed out, still" in timed_out.stdout

    cancelled = cli.run(
        "submit", document(tmp_path, SHORT), "--timeout", "1s", "--cancel-on-timeout", "-o", "json"
    )
    assert cancelled.returncode == 4
    submitted, ended = json_lines(cancelled.stdout)
    assert ended == {"event": "timed_out", "id": submitted["id"], "state": "cancelled",
                     "position": ended["position"], "cancelled": True}  # fmt: skip
    assert Job.objects.get(pk=submitted["id"]).state == State.CANCELLED


def test_ls_status_events_cancel_and_queues(cli, member, other_member):
    first = submit_document(member, {**RAY_JOB, "name": "first"})
    second = submit_document(member, {**RAY_JOB, "name": "second"})
    carols = submit_document(other_member, {**RAY_JOB, "name": "carols"})

    listed = json_lines(cli.run("ls", "--mine", "-o", "json").stdout)
    assert [job["name"] for job in listed] == ["second", "first"]
    table = cli.run("ls", "--state", "queued", "--limit", "2").stdout.splitlines()
    assert table[0].split() == ["ID", "STATE", "POS", "QUEUE", "NAME", "OWNER", "SUBMITTED"]
    assert [line.split()[4] for line in table[1:3]] == ["carols", "second"]
    assert "2 shown of 3" in table[3]

    [shown] = json_lines(cli.run("status", str(second.pk), "-o", "json").stdout)
    assert (shown["id"], shown["state"], shown["position"]) == (second.pk, "queued", 2)
    text = cli.run("status", str(second.pk)).stdout
    assert "state:     queued, position 2" in text

    history = json_lines(cli.run("events", str(first.pk), "-o", "json").stdout)
    assert [event["reason"] for event in history] == ["Enqueued"]

    cancelled = cli.run("cancel", str(first.pk), "999999")
    assert cancelled.returncode == 2
    assert f"job {first.pk} first: cancelled" in cancelled.stdout
    assert "job 999999: " in cancelled.stderr
    assert Job.objects.get(pk=first.pk).state == State.CANCELLED

    queues = cli.run("queues").stdout
    assert any(
        line.split()[:2] == ["root-algorithm-video", "root/algorithm/video"]
        for line in queues.splitlines()
    )
    [video] = json_lines(cli.run("queue", "root/algorithm/video", "-o", "json").stdout)
    assert [(job["position"], job["job"]) for job in video["active"]] == [
        (1, second.pk),
        (2, carols.pk),
    ]


def test_logs_prints_the_end_of_a_running_jobs_log(cli, member):
    job = running(member)
    tail = cli.run("logs", str(job.pk), "--tail", "2")
    assert tail.returncode == 0, tail.stderr
    assert len(tail.stdout.splitlines()) == 2
    [answer] = json_lines(cli.run("logs", str(job.pk), "-o", "json").stdout)
    assert answer["lines"][-2:] == tail.stdout.splitlines()


def test_logs_of_a_finished_job_whose_pods_are_gone_prints_the_kept_end_and_says_so(
    cli, member, settings
):
    settings.JOB_LOG_TAIL_LINES = 3
    job = running(member)
    cluster_sync(now=job.started_at + timedelta(seconds=601))  # it ends; its pods go
    assert not SimulatedPod.objects.filter(job_id=job.pk).exists()
    job.refresh_from_db()

    kept = cli.run("logs", str(job.pk))

    assert kept.returncode == 0, kept.stderr
    lines = kept.stdout.splitlines()
    assert len(lines) == 3 and lines[-1].endswith(" Exited with code 0 after 600 s")
    assert kept.stderr == (
        f"job {job.pk}: the pods are gone; its last 3 lines of pod rayjob-video-{job.pk}-head-0, "
        f"kept when the job ended at {job.log_tail_at.isoformat().replace('+00:00', 'Z')}\n"
    )


def test_a_job_that_fails_exits_1_with_its_last_reason(cli, tmp_path, celery_worker):
    failing = {**SHORT, "name": "cli-failing", "env": {"CALDERA_SIMULATED_EXIT_CODE": "3"}}
    failed = cli.run("submit", document(tmp_path, failing), "--wait", "--timeout", "2m")
    assert failed.returncode == 1, failed.stdout + failed.stderr
    job = Job.objects.get(name="cli-failing")
    assert job.state == State.FAILED
    last = failed.stdout.splitlines()[-1]
    assert last.startswith(f"job {job.pk} cli-failing: failed (Failed: ")
    assert "exited with code 3" in last


def test_logs_follow_prints_the_log_as_it_grows_until_the_job_ends(cli, tmp_path, celery_worker):
    submitted = cli.run("submit", document(tmp_path, {**SHORT, "run_seconds": 2}), "-o", "json")
    [job] = json_lines(submitted.stdout)

    followed = cli.run("logs", str(job["id"]), "--follow", timeout=120)

    assert followed.returncode == 0, followed.stdout + followed.stderr
    lines = followed.stdout.splitlines()
    # Its last line leaves with its pods when the sync sees it end; the end kept has it.
    assert "Started cli-short-" in lines[0]
    assert lines[-1].endswith(" Exited with code 0 after 2 s")
    assert len(lines) == len(set(lines))  # no line printed twice
    said = followed.stderr.splitlines()
    assert said[-1] == f"job {job['id']} cli-short: succeeded"
    assert said[-2].startswith(f"job {job['id']}: the pods are gone; its whole log of pod ")
    assert Job.objects.get(pk=job["id"]).state == State.SUCCEEDED


def test_logs_follow_of_a_job_that_fails_exits_1(cli, tmp_path, celery_worker):
    failing = {**SHORT, "name": "cli-failing", "env": {"CALDERA_SIMULATED_EXIT_CODE": "3"}}
    [job] = json_lines(cli.run("submit", document(tmp_path, failing), "-o", "json").stdout)

    followed = cli.run("logs", str(job["id"]), "--follow", "-o", "json", timeout=120)

    assert followed.returncode == 1, followed.stdout + followed.stderr
    records = json_lines(followed.stdout)
    assert any(r["event"] == "log" and r["lines"] for r in records)
    assert records[-1]["event"] == "ended" and records[-1]["state"] == "failed"
    assert "exited with code 3" in records[-1]["reason"]


def test_logs_follow_of_a_queued_job_says_once_why_it_has_no_log_and_ends_with_it(cli, api, member):
    job = submit_document(member, SHORT)  # no worker: it stays queued
    following = cli.start("logs", str(job.pk), "--follow")

    time.sleep(2)  # the command starts, and polls every 0.2 s, each time finding no log
    assert api(member).post(f"/api/v1/jobs/{job.pk}/cancel/").status_code == 200

    assert following.wait(timeout=60) == 3
    assert following.stdout.read() == ""
    said = following.stderr.read().splitlines()
    assert said[0] == (
        f"job {job.pk}: no log to read: The job has not started: it waits in its queue, and "
        "its head pod is created when it is admitted."
    )
    assert sum("has not started" in line for line in said) == 1  # once, polled many times
    assert said[-1].startswith(f"job {job.pk} cli-short: cancelled (Cancelled")


def test_the_command_line_names_the_node_pools_a_job_accepts_in_order(cli, tmp_path):
    refused = cli.run("submit", document(tmp_path, SHORT), "--pool", "h100")
    assert refused.returncode == 2
    assert "the quota tree declares no node pools" in refused.stderr
    tree_apply(document=pooled_tree_document())
    sent = cli.run("submit", document(tmp_path, SHORT), "--pool", "a100", "--pool", "h100")
    assert sent.returncode == 0, sent.stderr
    assert Job.objects.get().pools == ["a100", "h100"]


def test_submit_held_release_and_hold_again(cli, tmp_path, member):
    submitted = cli.run("submit", document(tmp_path, RAY_JOB), "--hold", "-o", "json")
    assert submitted.returncode == 0, submitted.stderr
    [answer] = json_lines(submitted.stdout)
    job = Job.objects.get(pk=answer["id"])
    assert job.held_by == member and job.state == State.QUEUED
    listed = cli.run("ls").stdout.splitlines()
    assert listed[1].split()[:4] == [str(job.pk), "queued", "(held)", "1"]
    assert "waiting:   It is held by alice since " in cli.run("status", str(job.pk)).stdout

    released = cli.run("release", str(job.pk))
    assert released.returncode == 0, released.stderr
    assert released.stdout == f"job {job.pk} rayjob-video: queued, position 1\n"
    assert Job.objects.get(pk=job.pk).held_at is None

    held = cli.run("hold", str(job.pk), "999999")
    assert held.returncode == 2
    assert f"job {job.pk} rayjob-video: queued, held by alice, position 1" in held.stdout
    assert "job 999999: " in held.stderr
