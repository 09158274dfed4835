"""A job's log on its page, as a download and through the API: the last lines of its head
(Ray) or master (PyTorch) pod, refreshed while it runs; the plain reason when there are
none; the same rights as the job itself.

The simulated cluster writes its pods' logs from their timelines, so a job that started
ten seconds ago has written its start line and two progress lines.
"""

from __future__ import annotations

import pytest
from django.urls import reverse
from django.utils import timezone

from jobs.engine.admission.cycle import admission_cycle
from jobs.engine.objects import job_spec
from jobs.engine.reconcile import jobs_reconcile
from jobs.engine.sync import cluster_sync
from jobs.models import Job, State
from jobs.services import job_cancel

from ..support.jobs import running, submit
from ..support.kube_emulator import status
from ..support.kubernetes import on_kubernetes, play_operator
from ..support.pages import HTMX, login

pytestmark = pytest.mark.django_db


def messages(text: str) -> list[str]:
    """The log's lines without their times."""
    return [line.split(" ", 1)[1] for line in text.splitlines()]


def head(job: Job) -> str:
    return f"rayjob-video-{job.pk}-head-0"


# -- the job page ---------------------------------------------------------------------------


def test_the_job_page_has_a_log_section_that_asks_for_the_lines_and_links_the_whole_log(
    client, member
):
    job = running(member)

    html = login(client, member).get(reverse("job-detail", args=[job.pk])).content.decode()

    section = html[html.index('<section id="job-log">') :]
    log_url, download = (
        reverse("job-log", args=[job.pk]),
        reverse("job-log-download", args=[job.pk]),
    )
    assert f'hx-get="{log_url}" hx-trigger="load"' in section
    assert f'<a href="{log_url}">Show the last lines</a>' in section  # without JavaScript
    assert f'<a href="{download}">Download the whole log</a>' in section
    assert html.index('<section id="job-log">') > html.index("<h2>Events</h2>")


def test_the_section_gets_the_last_lines_of_the_head_pod_and_polls_while_the_job_runs(
    client, member, settings
):
    settings.JOB_LOG_TAIL_LINES = 2
    job = running(member)

    response = login(client, member).get(reverse("job-log", args=[job.pk]), headers=HTMX)

    assert response.status_code == 200
    html = response.content.decode()
    assert html.lstrip().startswith('<div id="log-lines" hx-get="')
    assert 'hx-trigger="every 2s"' in html and "?lines=1" in html
    assert f'Pod <span class="mono">{head(job)}</span>: the last 2 lines of its log.' in html
    shown = html[html.index("<code>") + 6 : html.index("</code>")]
    assert messages(shown) == ["step 1: 5 s of 600 s, 0%", "step 2: 10 s of 600 s, 1%"]


def test_a_log_that_has_not_changed_answers_304_so_the_lines_on_the_page_stay(client, member):
    job = running(member)
    login(client, member)
    first = client.get(reverse("job-log", args=[job.pk]), headers=HTMX).content.decode()
    asked = first[first.index('hx-get="') + 8 :].split('"', 1)[0].replace("&amp;", "&")
    polled = client.get(asked, headers=HTMX)
    assert polled.status_code == 200

    again = client.get(asked, headers=HTMX | {"If-None-Match": polled["ETag"]})

    assert again.status_code == 304 and again.content == b""


def test_a_queued_job_says_it_has_not_started_and_its_section_keeps_asking(client, member):
    job = submit(member)
    login(client, member)

    response = client.get(reverse("job-log", args=[job.pk]), headers=HTMX)

    html = response.content.decode()
    assert response.status_code == 200 and 'hx-trigger="every 2s"' in html
    assert (
        "The job has not started: it waits in its queue, and its head pod is created when it "
        "is admitted." in html
    )
    assert "<pre" not in html and "lines=1" not in html
    asked = html[html.index('hx-get="') + 8 :].split('"', 1)[0]
    assert asked == reverse("job-log", args=[job.pk])  # the same address: one ETag
    again = client.get(asked, headers=HTMX | {"If-None-Match": response["ETag"]})
    assert again.status_code == 304  # the same reason


def test_a_finished_job_stops_the_polling_and_says_its_pod_is_gone(client, member):
    job = running(member)
    job_cancel(user=member, job=job)  # stopping: its objects are being removed
    jobs_reconcile([job.pk])
    cluster_sync()
    job.refresh_from_db()
    assert job.state == State.CANCELLED

    response = login(client, member).get(reverse("job-log", args=[job.pk]), headers=HTMX)

    assert response.status_code == 286
    html = response.content.decode()
    assert "hx-get" not in html and "<pre" not in html
    assert (
        "The job&#x27;s head pod is gone, and its log with it: the cluster removes a job&#x27;s "
        "pods once it has ended or left the cluster." in html
    )


def test_lines_on_the_page_stay_when_the_job_ends_and_only_the_note_says_why(client, member):
    job = running(member)
    login(client, member)
    first = client.get(reverse("job-log", args=[job.pk]), headers=HTMX).content.decode()
    asked = first[first.index('hx-get="') + 8 :].split('"', 1)[0].replace("&amp;", "&")
    job_cancel(user=member, job=job)
    jobs_reconcile([job.pk])
    cluster_sync()

    response = client.get(asked, headers=HTMX)

    assert response.status_code == 286 and response["HX-Reswap"] == "none"
    html = response.content.decode()
    assert html.lstrip().startswith('<p id="log-note"') and 'hx-swap-oob="true"' in html
    assert "its log with it" in html and "The lines below are the last that were read." in html


def test_without_javascript_the_link_gives_the_last_lines_as_text(client, member):
    job = running(member)
    queued = submit(member, name="later")
    login(client, member)

    lines = client.get(reverse("job-log", args=[job.pk]))
    waiting = client.get(reverse("job-log", args=[queued.pk]))

    assert lines.status_code == 200 and lines["Content-Type"] == "text/plain; charset=utf-8"
    assert messages(lines.content.decode())[0].startswith(f"Started {head(job)} on node-")
    assert waiting.status_code == 409
    assert waiting.content.decode().startswith("The job has not started")


# -- the whole log ----------------------------------------------------------------------------


def test_the_whole_log_downloads_as_a_file_named_after_the_pod(client, member):
    job = running(member)

    response = login(client, member).get(reverse("job-log-download", args=[job.pk]))

    assert response.status_code == 200
    assert response["Content-Type"] == "text/plain; charset=utf-8"
    assert response["Content-Disposition"] == f'attachment; filename="{head(job)}.log"'
    assert messages(response.content.decode())[1:] == [
        "step 1: 5 s of 600 s, 0%",
        "step 2: 10 s of 600 s, 1%",
    ]


def test_a_log_longer_than_the_limit_is_cut_and_the_file_says_so(client, member, settings):
    settings.JOB_LOG_LIMIT_BYTES = 40
    job = running(member)

    text = login(client, member).get(reverse("job-log-download", args=[job.pk])).content.decode()

    first, note = text.splitlines()
    assert len(first.encode()) == 40
    assert note == (
        "[Caldera: the log goes on; this file holds its first 40 bytes (JOB_LOG_LIMIT_BYTES).]"
    )


def test_a_download_without_a_log_answers_the_reason_as_text(client, member):
    job = submit(member)

    response = login(client, member).get(reverse("job-log-download", args=[job.pk]))

    assert response.status_code == 409 and "Content-Disposition" not in response
    assert response.content.decode().startswith("The job has not started")


# -- rights -----------------------------------------------------------------------------------


@pytest.mark.parametrize("page", ["job-log", "job-log-download"])
def test_whoever_may_see_the_job_may_read_its_log_and_no_one_else(
    client, member, manager, staff, outsider, page
):
    job = running(member)
    url = reverse(page, args=[job.pk])

    for reader in (member, manager, staff):
        assert login(client, reader).get(url).status_code == 200
    assert login(client, outsider).get(url).status_code == 404
    client.logout()
    assert client.get(url).status_code == 302  # to the login page


# -- the API ----------------------------------------------------------------------------------


def test_the_api_gives_the_last_lines_and_says_whether_the_log_goes_on(api, member):
    job = running(member)
    url = reverse("api-job-log", args=[job.pk])

    last = api(member).get(url, {"tail_lines": 2}).json()
    whole = api(member).get(url).json()

    assert last["pod"] == head(job) and last["truncated"] is True
    assert messages("\n".join(last["lines"])) == [
        "step 1: 5 s of 600 s, 0%",
        "step 2: 10 s of 600 s, 1%",
    ]
    assert len(whole["lines"]) == 3 and whole["truncated"] is False


@pytest.mark.parametrize(
    ("tail_lines", "reason"),
    [
        ("0", "must be at least 1, got '0'"),
        ("-3", "must be at least 1, got '-3'"),
        ("ten", "must be an integer, got 'ten'"),
        ("1.5", "must be an integer, got '1.5'"),
        ("1000001", "must be at most 1000000, got '1000001'"),
        ("", "is empty; give a value or leave the parameter out"),
        (["5", "6"], "is given 2 times; give it once"),
    ],
)
def test_the_api_names_a_bad_tail_lines(api, member, tail_lines, reason):
    job = running(member)

    response = api(member).get(reverse("api-job-log", args=[job.pk]), {"tail_lines": tail_lines})

    assert response.status_code == 400
    assert response.json() == {"tail_lines": [reason]}


def test_the_api_hides_the_log_of_a_job_the_user_may_not_see(api, member, outsider):
    job = running(member)

    response = api(outsider).get(reverse("api-job-log", args=[job.pk]), {"tail_lines": "ten"})

    assert response.status_code == 404


def test_the_api_answers_409_with_the_reason_when_there_is_no_log(api, member):
    job = submit(member)

    response = api(member).get(reverse("api-job-log", args=[job.pk]))

    assert response.status_code == 409
    assert response.json()["detail"].startswith("The job has not started")


def test_an_admitted_job_whose_pods_are_not_made_yet_says_so(api, member):
    job = submit(member)
    admission_cycle(now=timezone.now())  # dequeued; its objects are not created yet
    job.refresh_from_db()
    assert job.state == State.ADMITTED

    response = api(member).get(reverse("api-job-log", args=[job.pk]))

    assert response.status_code == 409
    assert response.json() == {
        "detail": "The job's head pod has not been created yet: the cluster is making the "
        "job's pods."
    }


# -- on a Kubernetes cluster ------------------------------------------------------------------


def test_on_a_kubernetes_cluster_the_head_pods_log_is_read_through_its_api(api, member):
    with on_kubernetes() as kube:
        job = running(member, kube=kube)
        pod = play_operator(kube, job_spec(job))
        kube.write_log("video", pod, "ray start --head\nhello from the driver\n")

        answer = api(member).get(reverse("api-job-log", args=[job.pk]), {"tail_lines": 1})

    assert answer.json() == {
        "pod": pod,
        "lines": ["hello from the driver"],
        "truncated": True,
        "kept_at": None,
        "exit_code": None,
    }
    assert answer["X-Caldera-Log"] == "cluster"


def test_a_cluster_that_does_not_answer_is_a_503_and_a_plain_sentence_on_the_page(
    client, api, member
):
    with on_kubernetes(JOB_LOG_TIMEOUT_SECONDS=0.3) as kube:
        job = running(member, kube=kube)
        kube.pause_next("get", "/api/v1/namespaces/video/pods", seconds=1.5, times=2)

        answer = api(member).get(reverse("api-job-log", args=[job.pk]))
        page = login(client, member).get(reverse("job-log", args=[job.pk]), headers=HTMX)

    assert answer.status_code == 503
    assert answer.json()["detail"].startswith(
        f"The cluster did not answer: list the head pod of rayjob-video-{job.pk} in video: "
    )
    assert page.status_code == 200 and "The cluster did not answer: list the head pod" in (
        page.content.decode()
    )


def test_the_servers_own_words_reach_the_person_when_the_log_cannot_be_read(client, api, member):
    with on_kubernetes() as kube:
        job = running(member, kube=kube)
        pod = play_operator(kube, job_spec(job))
        failed = status(500, "InternalError", "no preferred addresses found; known addresses: []")
        kube.answer_next("get", f"/api/v1/namespaces/video/pods/{pod}/log", failed, times=2)

        answer = api(member).get(reverse("api-job-log", args=[job.pk]))
        page = login(client, member).get(reverse("job-log", args=[job.pk]), headers=HTMX)

    said = "HTTP 500: no preferred addresses found; known addresses: []"
    assert answer.status_code == 503 and answer.json()["detail"].endswith(said)
    assert page.status_code == 200 and said in page.content.decode()
