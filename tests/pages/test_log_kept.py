"""The end kept: the cluster sync reads the last lines of a finished job's log before it
removes the job's objects and pods, keeps them with the job, and the page, the download
and the API answer them once the pods are gone, saying it is the kept end.

On the simulated cluster a job that runs 60 s writes its start line, eleven progress lines
(at 5 s to 55 s) and its exit line: 13 lines.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from jobs.cluster import ObjectRef
from jobs.engine import log_tails
from jobs.engine.admission.cycle import admission_cycle
from jobs.engine.log_tails import NOT_ANSWERED, POD_GONE, tails_keep
from jobs.engine.objects import job_object_name, job_spec
from jobs.engine.reconcile import jobs_reconcile
from jobs.engine.sync import cluster_sync
from jobs.models import Job, SimulatedPod, State

from ..support.jobs import running, submit
from ..support.kube_emulator import status
from ..support.kubernetes import on_kubernetes, play_operator
from ..support.pages import HTMX, login

pytestmark = pytest.mark.django_db

FAILING = {"CALDERA_SIMULATED_EXIT_CODE": "3"}
# Small enough that several run at once in the video leaf.
SMALL = {"head": {"resources": {"cpu": "1", "memory": "1G"}}, "workers": []}


@pytest.fixture(autouse=True)
def three_lines(settings):
    settings.JOB_LOG_TAIL_LINES = 3


def started(user, *, env=None, name="rayjob-video", ago: float = 70) -> Job:
    """A job of ``user``'s that runs 60 s, started ``ago`` seconds ago."""
    at = timezone.now() - timedelta(seconds=ago)
    job = submit(user, now=at, name=name, run_seconds=60, env=env or {}, **SMALL)
    admission_cycle(now=at)
    jobs_reconcile([job.pk], now=at)
    cluster_sync(now=at)
    return job


def ended(user, *, env=None) -> Job:
    """A job of ``user``'s that ran its 60 s: the sync saw it end and removed its pods."""
    job = started(user, env=env)
    cluster_sync()
    job.refresh_from_db()
    assert job.state == (State.FAILED if env else State.SUCCEEDED)
    assert not SimulatedPod.objects.filter(job_id=job.pk).exists()  # its pods are gone
    return job


def words(text: str) -> list[str]:
    """The log's lines without their times."""
    return [line.split(" ", 1)[1] for line in text.splitlines()]


def head(job: Job) -> str:
    return f"rayjob-video-{job.pk}-head-0"


# -- what the sync keeps ----------------------------------------------------------------------


def test_it_keeps_the_last_lines_the_pod_and_the_exit_code_before_the_pods_go(member):
    job = started(member, env=FAILING)
    now = timezone.now()

    cluster_sync(now=now)

    job.refresh_from_db()
    assert job.state == State.FAILED
    assert words(job.log_tail) == [
        "step 10: 50 s of 60 s, 83%",
        "step 11: 55 s of 60 s, 91%",
        "Exited with code 3 after 60 s",
    ]
    assert job.log_tail_pod == head(job) and job.log_tail_truncated is True
    assert job.log_tail_at == now and job.exit_code == 3 and job.log_tail_missing == ""
    assert not SimulatedPod.objects.filter(job_id=job.pk).exists()


def test_a_pod_gone_before_its_log_was_read_is_the_reason_kept_and_loses_no_other_log(member):
    gone, other = ended(member), ended(member)
    Job.objects.filter(pk__any=[gone.pk, other.pk]).update(log_tail_at=None, log_tail="")
    first = started(member, name="still-here", ago=10)  # its pod is there to read
    Job.objects.filter(pk=first.pk).update(state=State.SUCCEEDED)

    left = tails_keep(
        [
            (gone.pk, ObjectRef(f"rayjob-video-{gone.pk}")),
            (first.pk, ObjectRef(job_object_name(first))),
        ],
        now=timezone.now(),
    )

    assert left == set()
    gone.refresh_from_db()
    first.refresh_from_db()
    assert gone.log_tail == "" and gone.log_tail_missing == POD_GONE
    assert gone.log_tail_at is not None and gone.exit_code is None
    assert words(first.log_tail)[-1] == "step 2: 10 s of 60 s, 16%" and first.log_tail_pod


def test_many_ended_jobs_are_read_and_written_a_chunk_at_a_time(
    member, monkeypatch, django_assert_num_queries
):
    jobs = [started(member, name=f"many-{n}", ago=10) for n in range(5)]
    Job.objects.filter(pk__any=[job.pk for job in jobs]).update(state=State.SUCCEEDED)
    monkeypatch.setattr(log_tails, "KEEP_CHUNK", 2)

    # The jobs, then each chunk's pods and its one UPDATE (3 chunks).
    with django_assert_num_queries(1 + 3 * 2):
        tails_keep([(job.pk, ObjectRef(job_object_name(job))) for job in jobs], now=timezone.now())

    assert Job.objects.filter(log_tail_at__isnull=False, log_tail__contains="Started").count() == 5


def test_jobs_not_read_in_time_keep_their_pods_for_the_next_sync(member, monkeypatch):
    job = started(member)
    monkeypatch.setattr(log_tails, "KEEP_SECONDS", -1.0)

    cluster_sync()

    job.refresh_from_db()
    assert job.state == State.SUCCEEDED and job.log_tail_at is None
    assert SimulatedPod.objects.filter(job_id=job.pk).exists()  # not removed unread
    monkeypatch.setattr(log_tails, "KEEP_SECONDS", 30.0)

    cluster_sync()

    job.refresh_from_db()
    assert words(job.log_tail)[-1] == "Exited with code 0 after 60 s"
    assert not SimulatedPod.objects.filter(job_id=job.pk).exists()


def test_a_kept_end_is_read_once(member):
    job = ended(member)
    kept = job.log_tail_at

    cluster_sync()

    job.refresh_from_db()
    assert job.log_tail_at == kept


# -- the page, the download, the API -----------------------------------------------------------


def test_the_log_section_answers_the_kept_end_and_says_so(client, member):
    job = ended(member)

    response = login(client, member).get(reverse("job-log", args=[job.pk]), headers=HTMX)

    assert response.status_code == 286  # it has ended: the polling stops
    html = response.content.decode()
    assert "Kept:</strong>" in html
    assert (
        f'Pod <span class="mono">{head(job)}</span>: the last 3 lines of its log, kept when '
        "the job ended at <time" in html
    )
    assert "its pods are gone." in html and "its log with it" not in html
    shown = html[html.index("<code>") + 6 : html.index("</code>")]
    assert words(shown)[-1] == "Exited with code 0 after 60 s"


def test_without_javascript_and_as_a_download_it_is_the_kept_end_too(client, member):
    job = ended(member)
    login(client, member)

    plain = client.get(reverse("job-log", args=[job.pk]))
    download = client.get(reverse("job-log-download", args=[job.pk]))

    assert plain.status_code == 200 and len(words(plain.content.decode())) == 3
    assert download.status_code == 200
    *lines, note = download.content.decode().splitlines()
    assert words("\n".join(lines))[-1] == "Exited with code 0 after 60 s"
    assert note.startswith(
        "[Caldera: the pods are gone; these are the last lines of the log, kept when the job "
        "ended at "
    )


def test_the_api_answers_the_kept_end_with_200_and_its_header(api, member):
    job = ended(member, env=FAILING)
    url = reverse("api-job-log", args=[job.pk])

    whole = api(member).get(url)
    last = api(member).get(url, {"tail_lines": 1})

    assert whole.status_code == 200 and whole["X-Caldera-Log"] == "kept-tail"
    answer = whole.json()
    assert answer["pod"] == head(job) and answer["truncated"] is True
    assert answer["exit_code"] == 3 and answer["kept_at"] is not None
    assert words("\n".join(answer["lines"])) == words(job.log_tail)
    assert words("\n".join(last.json()["lines"])) == ["Exited with code 3 after 60 s"]


def test_a_job_whose_end_could_not_be_kept_says_why(api, client, member):
    job = ended(member)
    Job.objects.filter(pk=job.pk).update(log_tail="", log_tail_pod="", log_tail_missing=POD_GONE)

    answer = api(member).get(reverse("api-job-log", args=[job.pk]))
    page = login(client, member).get(reverse("job-log", args=[job.pk]), headers=HTMX)

    assert answer.status_code == 409
    assert answer.json()["detail"] == (
        "The job's head pod is gone, and its log with it; none of it was kept as the job "
        "ended: The pod was gone before its log could be read."
    )
    assert "none of it was kept as the job ended" in page.content.decode()


# -- a failed job's page leads with its cause ----------------------------------------------------


def test_a_failed_jobs_page_leads_with_its_reason_exit_code_and_last_lines(client, member):
    job = ended(member, env=FAILING)

    html = login(client, member).get(reverse("job-detail", args=[job.pk])).content.decode()

    cause = html[html.index('<section class="card failure"') :]
    cause = cause[: cause.index("</section>")]
    assert html.index('<section class="card failure"') < html.index("<dt>State</dt>")
    assert '<h2 id="failure-title">Why it failed</h2>' in cause
    assert f"Pod {head(job)} exited with code 3" in cause
    assert '<dd class="mono exit-code">3</dd>' in cause
    assert "The last 3 lines of its log, kept when it ended at <time" in cause
    shown = cause[cause.index("<code>") + 6 : cause.index("</code>")]
    assert words(shown) == words(job.log_tail)


def test_a_succeeded_jobs_page_has_no_cause(client, member):
    job = ended(member)

    html = login(client, member).get(reverse("job-detail", args=[job.pk])).content.decode()

    assert "Why it failed" not in html


# -- on a Kubernetes cluster ------------------------------------------------------------------


def test_on_kubernetes_the_sync_reads_the_head_pods_log_before_it_deletes_the_rayjob(api, member):
    with on_kubernetes() as kube:
        job = running(member, kube=kube)
        pod = play_operator(kube, job_spec(job))
        kube.write_log("video", pod, "ray start --head\nloss 0.9\nloss 0.4\nTraceback: boom\n")
        ended = {
            "name": "ray-head", "image": "busybox", "imageID": "", "restartCount": 0,
            "ready": False, "state": {"terminated": {"exitCode": 2, "reason": "Error"}},
        }  # fmt: skip
        kube.core.patch_namespaced_pod(pod, "video", {"status": {"containerStatuses": [ended]}})
        name = f"rayjob-video-{job.pk}"
        failed = {"jobDeploymentStatus": "Complete", "jobStatus": "FAILED", "message": "boom"}
        kube.set_status("kuberay", "video", name, failed)

        cluster_sync()

        requests = [
            (request.method.value, str(request.url))
            for request in kube.server
            if f"pods/{pod}/log" in str(request.url)
            or (request.method.value == "DELETE" and f"rayjobs/{name}" in str(request.url))
        ]
        kube.core.delete_namespaced_pod(pod, "video")  # its pods go with the RayJob
        answer = api(member).get(reverse("api-job-log", args=[job.pk]))

    assert [method for method, _url in requests] == ["GET", "DELETE"]
    assert "tailLines=4" in requests[0][1]  # JOB_LOG_TAIL_LINES and one more
    job.refresh_from_db()
    assert job.state == State.FAILED and job.exit_code == 2
    assert job.log_tail == "loss 0.9\nloss 0.4\nTraceback: boom\n"
    assert job.log_tail_pod == pod and job.log_tail_truncated is True
    assert answer.status_code == 200 and answer["X-Caldera-Log"] == "kept-tail"
    assert answer.json()["lines"] == ["loss 0.9", "loss 0.4", "Traceback: boom"]


def test_on_kubernetes_a_log_the_cluster_does_not_answer_is_recorded_and_the_sync_goes_on(
    member,
):
    with on_kubernetes(JOB_LOG_TIMEOUT_SECONDS=0.3) as kube:
        job = running(member, kube=kube)
        pod = play_operator(kube, job_spec(job))
        failed = status(500, "InternalError", "no preferred addresses found; known addresses: []")
        kube.answer_next("get", f"/api/v1/namespaces/video/pods/{pod}/log", failed)
        name = f"rayjob-video-{job.pk}"
        done = {"jobDeploymentStatus": "Complete", "jobStatus": "SUCCEEDED"}
        kube.set_status("kuberay", "video", name, done)

        result = cluster_sync()

        deleted = kube.requests("DELETE", f"rayjobs/{name}")

    assert result is not None and result.finished == [job.pk]
    job.refresh_from_db()
    assert job.state == State.SUCCEEDED and job.log_tail == ""
    assert job.log_tail_missing == NOT_ANSWERED and job.log_tail_at is not None
    assert len(deleted) == 1  # its objects are removed all the same
