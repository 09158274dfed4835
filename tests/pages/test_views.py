"""The HTML pages: dashboard, submit form, job, queue, queue list and quota tree."""

from __future__ import annotations

import html
import re
from datetime import timedelta

import pytest
import yaml
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from jobs.engine.admission.cycle import admission_cycle
from jobs.models import Job, JobEvent
from jobs.reads.estimate import estimates_refresh
from jobs.services import job_cancel

from ..support import k8s_schema
from ..support.jobs import RAY_JOB, UNPACKABLE, running, submit
from ..support.pages import HTMX, PYTORCH_FORM, RAY_FORM, confirmed, login

pytestmark = pytest.mark.django_db


def test_it_sends_anonymous_visitors_to_the_login_page(client, tree):
    response = client.get(reverse("dashboard"))
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))


def test_it_lists_my_jobs_and_my_queues_on_the_dashboard(client, member, other_member):
    mine = submit(member, name="my-training")
    submit(other_member, name="not-mine")
    response = login(client, member).get(reverse("dashboard"))
    assert response.status_code == 200
    html = response.content.decode()
    assert reverse("job-detail", args=[mine.pk]) in html
    assert "my-training" in html and "not-mine" not in html
    assert response.context["jobs"] == [(mine, 1)]
    names = [row["queue"].name for row in response.context["queues"]]
    assert names == ["root-algorithm-text", "root-algorithm-video"]
    video = response.context["queues"][1]
    assert video["pending"] == 2
    # The job table polls while a job of mine is live.
    assert 'hx-trigger="every 2s"' in html


def test_it_stops_polling_the_dashboard_when_none_of_my_jobs_is_live(client, member):
    job = submit(member)
    job_cancel(user=member, job=job)
    page = login(client, member).get(reverse("dashboard"))
    assert 'hx-trigger="every 2s"' not in page.content.decode()
    fragment = client.get(reverse("dashboard"), headers=HTMX)
    assert fragment.status_code == 286
    assert fragment.content.decode().lstrip().startswith('<div id="my-jobs"')


def test_it_submits_a_ray_job_from_the_form_and_redirects_to_it(client, member):
    before = Job.objects.count()
    response = login(client, member).post(reverse("job-submit"), RAY_FORM)
    assert response.status_code == 302
    job = Job.objects.get()
    assert Job.objects.count() == before + 1
    assert response["Location"] == reverse("job-detail", args=[job.pk])
    assert job.owner == member and job.state == "queued"
    assert job.queue.name == "root-algorithm-video"
    assert job.head == RAY_JOB["head"] and job.workers == RAY_JOB["workers"]
    assert job.request == {"cpu": 12_000, "memory": 12_000_000_000, "pods": 3}
    assert job.entrypoint == RAY_JOB["entrypoint"] and job.run_seconds == 600
    assert job.events.get().reason == "Enqueued"


def test_it_submits_a_pytorch_job_with_a_shell_style_command_and_gpus(client, member):
    form = RAY_FORM | {
        "queue": "root/algorithm/text",
        "kind": "pytorch",
        "name": "resnet-ddp",
        "entrypoint": "",
        "command": "torchrun train.py --note 'two words'",
        "head_cpu": "2",
        "head_memory": "8Gi",
        "head_gpu": "1",
        "worker_name": "",
        "worker_cpu": "2",
        "worker_memory": "8Gi",
        "worker_gpu": "1",
    }
    response = login(client, member).post(reverse("job-submit"), form)
    assert response.status_code == 302
    job = Job.objects.get()
    assert job.kind == "pytorch" and job.runtime == "kubeflow"
    assert job.command == ["torchrun", "train.py", "--note", "two words"]
    assert job.head == {"resources": {"cpu": "2", "memory": "8Gi", "nvidia.com/gpu": "1"}}
    assert job.workers[0]["name"] == "worker" and job.workers[0]["replicas"] == 2
    assert job.request["nvidia.com/gpu"] == 3


def test_it_rerenders_the_form_with_the_error_beside_the_field_and_stores_nothing(client, member):
    before = Job.objects.count()
    response = login(client, member).post(
        reverse("job-submit"), RAY_FORM | {"head_cpu": "4 cores", "name": "Bad_Name"}
    )
    assert response.status_code == 400
    assert Job.objects.count() == before
    assert JobEvent.objects.count() == 0
    html = response.content.decode()
    assert response.context["errors"]["head_cpu"] == [
        "'4 cores' is not a Kubernetes quantity (examples: 500m, 2, 1.5, 4Gi, 4G)"
    ]
    # The message sits right after its input, and the input keeps what was typed.
    cpu_input = html.index('id="id_head_cpu" value="4 cores"')
    cpu_errors = html.index('<ul class="errors" id="head_cpu-errors"><li>&#x27;4 cores&#x27;')
    assert cpu_input < cpu_errors < html.index('id="id_head_memory"')
    assert 'id="name-errors"' in html and 'value="Bad_Name"' in html
    assert 'value="python /home/ray/samples/sample_code.py"' in html
    assert response.context["top_errors"] == []


def test_a_form_sent_as_it_opened_says_what_to_fill_in_and_focuses_it(client, member):
    empty = {name: "" for name in RAY_FORM} | {"kind": "ray", "worker_replicas": "1"}

    response = login(client, member).post(reverse("job-submit"), empty)

    assert response.status_code == 400
    html = response.content.decode()
    errors = response.context["errors"]
    assert errors["head"] == ["give the pod's CPU and memory"]  # a person's words
    # Only the inputs with an error are marked; the optional GPU is not.
    gpu = re.search(r'<input [^>]*id="id_head_gpu"[^>]*>', html)[0]
    assert "aria-invalid" not in gpu and 'placeholder="e.g.' not in gpu
    name = re.search(r'<input [^>]*id="id_name"[^>]*>', html)[0]
    assert 'aria-invalid="true"' in name and 'aria-required="true"' in name
    assert 'placeholder="e.g. rayjob-video"' in name  # an example, not a value
    # The focus goes to the first field with an error (no script: the autofocus attribute).
    assert html.count(" autofocus") == 1
    first = re.search(r"<(input|select|textarea) [^>]* autofocus", html)[0]
    assert 'id="id_queue"' in first or 'id="id_name"' in first
    cpu = re.search(r'<label for="id_head_cpu">[^<]*<abbr class="required"', html)
    assert cpu is not None  # required fields are marked


def test_it_shows_errors_it_cannot_place_on_a_field_at_the_top_of_the_form(client, member):
    too_big = RAY_FORM | {"worker_replicas": "10"}  # 44 cpu can never fit video's max 14
    response = login(client, member).post(reverse("job-submit"), too_big)
    assert response.status_code == 400
    assert Job.objects.count() == 0
    [message] = response.context["top_errors"]
    assert message.startswith("request: can never be admitted: Insufficient quota in")
    html = response.content.decode()
    assert html.index('id="form-errors"') < html.index('<form method="post" action="/jobs/new/"')


def test_it_offers_only_the_users_active_leaf_queues(client, outsider):
    response = login(client, outsider).get(reverse("job-submit"))
    assert response.status_code == 200
    assert [q.node.path for q in response.context["queues"]] == ["root/infrastructure/devops"]
    assert 'value="root/algorithm/video"' not in response.content.decode()


def test_it_refuses_a_queue_outside_the_users_departments(client, outsider):
    response = login(client, outsider).post(reverse("job-submit"), RAY_FORM)
    assert response.status_code == 400
    assert response.context["errors"]["queue"] == [
        "'root/algorithm/video' is not a queue you can submit to"
    ]
    assert Job.objects.count() == 0


def test_it_shows_positions_and_backoff_reasons_on_the_queue_page(client, member, other_member):
    first = submit(member, name="first")
    second = submit(member, name="second")
    result = admission_cycle()
    assert result.admitted == [first.pk] and result.backed_off == [second.pk]
    third = submit(other_member, name="third")
    estimates_refresh()
    response = login(client, member).get(reverse("queue-detail", args=["root-algorithm-video"]))
    assert response.status_code == 200
    assert [(row[0], row[1].pk) for row in response.context["pending"]] == [
        (1, second.pk),
        (2, third.pk),
    ]
    assert [job.pk for job in response.context["in_cluster"]] == [first.pk]
    html = response.content.decode()
    assert (
        "Insufficient quota in root/algorithm/video: cpu requested 12, free 2 (used 12 of max 14)"
        in html
    )
    assert '<td class="num position">1</td>' in html
    assert '<td class="num position">2</td>' in html
    # Each row says why, as the rule would answer now: the head backs off and meets the
    # leaf's max; the job behind it is told so.
    now_meets = "waits for cpu in root/algorithm/video: used 12 of max 14; it asks for 12"
    assert f"tried now, it {now_meets}" in html
    assert f"1 job ahead; the first job ahead, #{second.pk}, backs off until" in html
    _, _, told, estimate = response.context["pending"][1]
    assert told.reason == "behind" and told.head_id == second.pk
    # No run time declared, no finished job in the queue: 10 minutes each (the fallback).
    assert estimate.basis.startswith("about 20 min: 1 job ahead, 1 running job expected to end")
    assert 'hx-trigger="every 2s"' in html
    # Used of max for the queue's quota: 12 cpu of 14 are admitted.
    cpu = next(row for row in response.context["resources"] if row["name"] == "cpu")
    assert (cpu["used"], cpu["max"], cpu["min"]) == ("12", "14", "12")


def test_it_returns_only_the_queue_lists_to_an_htmx_request(client, member):
    submit(member, name="waiting")
    url = reverse("queue-detail", args=["root-algorithm-video"])
    response = login(client, member).get(url, headers=HTMX)
    assert response.status_code == 200
    html = response.content.decode().strip()
    assert html.startswith('<div id="queue-lists"') and html.endswith("</div>")
    assert "<html" not in html and "<nav" not in html
    assert "waiting" in html


def test_it_hides_jobs_and_queues_from_outsiders(client, member, outsider):
    job = submit(member)
    login(client, outsider)
    assert client.get(reverse("job-detail", args=[job.pk])).status_code == 404
    assert client.get(reverse("job-detail", args=[job.pk]), headers=HTMX).status_code == 404
    assert client.get(reverse("queue-detail", args=["root-algorithm-video"])).status_code == 404
    assert client.post(reverse("job-cancel", args=[job.pk])).status_code == 404
    response = client.post(reverse("job-priority", args=[job.pk]), {"priority": "-5"})
    assert response.status_code == 404
    job.refresh_from_db()
    assert job.state == "queued" and job.priority == 0
    assert "root-algorithm-video" not in client.get(reverse("queue-list")).content.decode()


def test_it_shows_the_job_with_position_events_by_cycle_and_manifest(client, member):
    job = submit(member)
    JobEvent.objects.create(
        job=job, created_at=job.enqueued_at, type="Warning", reason="GangFailedScheduling",
        message="0/4 nodes are available", cycle=3,
    )  # fmt: skip
    response = login(client, member).get(reverse("job-detail", args=[job.pk]))
    assert response.status_code == 200
    assert response.context["position"] == 1
    html = response.content.decode()
    assert '<dd class="position">1</dd>' in html
    assert "It fits now: it is dequeued at the next admission cycle" in html
    assert "Scheduling cycle 3" in html
    assert '<tr class="event warning">' in html
    assert [getattr(row, "reason", "cycles") for row in response.context["timeline"]] == [
        "Enqueued",
        "cycles",
    ]
    assert "kind: RayJob" in response.context["manifest"]
    assert "kind: RayJob" in html
    assert 'hx-trigger="every 2s"' in html
    assert reverse("job-cancel", args=[job.pk]) in html
    assert reverse("job-priority", args=[job.pk]) in html


def test_it_shows_the_backoff_reason_and_next_try_on_the_job_page(client, member):
    submit(member)
    second = submit(member)
    admission_cycle()
    response = login(client, member).get(reverse("job-detail", args=[second.pk]))
    html = response.content.decode()
    second.refresh_from_db()
    retry = timezone.localtime(second.next_attempt_at)
    assert (
        f"It backs off until {retry:%H:%M:%S} (sooner if capacity frees) after: Insufficient "
        "quota in root/algorithm/video"
    ) in html


def test_it_polls_an_active_job_and_stops_with_286_once_it_is_terminal(client, member):
    job = submit(member)
    login(client, member)
    live = client.get(reverse("job-detail", args=[job.pk]), headers=HTMX)
    assert live.status_code == 200
    assert live.content.decode().lstrip().startswith('<div id="job-status" hx-get=')
    job_cancel(user=member, job=job)
    final = client.get(reverse("job-detail", args=[job.pk]), headers=HTMX)
    assert final.status_code == 286
    html = final.content.decode()
    assert 'state-cancelled">cancelled' in html
    assert "hx-trigger" not in html and "<html" not in html


def test_it_lets_a_member_cancel_their_own_job(client, member):
    job = submit(member)
    cancel = reverse("job-cancel", args=[job.pk])
    response = confirmed(login(client, member), cancel, {}, follow=True)
    assert response.status_code == 200
    job.refresh_from_db()
    assert job.state == "cancelled"
    assert "Job cancelled." in response.content.decode()
    # A finished job offers no actions.
    assert reverse("job-cancel", args=[job.pk]) not in response.content.decode()


def test_a_cancelled_running_job_shows_it_holds_its_quota_until_it_is_gone(client, member):
    job = submit(member)
    Job.objects.filter(pk=job.pk).update(state="running", dequeued_at=timezone.now())
    cancel = reverse("job-cancel", args=[job.pk])
    response = confirmed(login(client, member), cancel, {}, follow=True)
    html = response.content.decode()
    assert "Cancel requested: the job stops as the cluster removes its objects." in html
    assert 'state-stopping">stopping' in html
    assert (
        "<strong>Stopping:</strong> cancelled; its objects are being removed from the cluster, "
        "and it holds its quota (" in html
    )
    assert reverse("job-cancel", args=[job.pk]) not in html  # nothing more to do


def test_a_job_stopping_longer_than_the_setting_says_the_cluster_has_not_removed_it(
    client, member, settings
):
    settings.LEAVING_WARN_SECONDS = 600
    stuck, leaving = submit(member), submit(member)
    Job.objects.filter(pk__in=[stuck.pk, leaving.pk]).update(
        state="running", dequeued_at=timezone.now()
    )
    for job in (stuck, leaving):
        job_cancel(user=member, job=job)
    Job.objects.filter(pk=stuck.pk).update(leaving_since=timezone.now() - timedelta(seconds=601))
    login(client, member)

    html = client.get(reverse("job-detail", args=[stuck.pk])).content.decode()
    within = client.get(reverse("job-detail", args=[leaving.pk])).content.decode()

    assert "<strong>Not removed yet:</strong> it began to leave 10\xa0minutes ago" in html
    assert "the cluster still has its objects. Kubernetes' garbage collector" in html
    assert f"kubectl get rayjobs.ray.io rayjob-video-{stuck.pk} -n video -o yaml" in html
    assert f"kubectl get pods -n video -l caldera.io/job-id={stuck.pk}" in html
    assert "<strong>Stopping:</strong> cancelled" in within
    assert "Not removed yet" not in within


def test_it_refuses_a_member_cancelling_another_members_job(client, member, other_member):
    job = submit(other_member)
    page = login(client, member).get(reverse("job-detail", args=[job.pk]))
    assert reverse("job-cancel", args=[job.pk]) not in page.content.decode()
    response = confirmed(client, reverse("job-cancel", args=[job.pk]), {}, follow=True)
    assert response.status_code == 200
    assert "members cancel only their own jobs" in response.content.decode()
    job.refresh_from_db()
    assert job.state == "queued"


def test_it_refuses_a_member_raising_the_priority_and_says_why(client, member):
    job = submit(member)
    response = login(client, member).post(
        reverse("job-priority", args=[job.pk]), {"priority": "5"}, follow=True
    )
    assert response.status_code == 200
    assert response.redirect_chain == [(reverse("job-detail", args=[job.pk]), 302)]
    assert "only the department&#x27;s managers and staff may raise a priority" in (
        response.content.decode()
    )
    job.refresh_from_db()
    assert job.priority == 0
    assert not job.events.filter(reason="PriorityChanged").exists()


def test_it_lets_a_manager_raise_the_priority(client, member, manager):
    job = submit(member)
    response = login(client, manager).post(
        reverse("job-priority", args=[job.pk]), {"priority": "5"}, follow=True
    )
    assert response.status_code == 200
    assert "Priority changed from 0 to 5." in response.content.decode()
    job.refresh_from_db()
    assert job.priority == 5
    event = job.events.get(reason="PriorityChanged")
    assert event.actor == manager and event.message == "bob changed priority from 0 to 5"


def test_it_rejects_a_priority_that_is_not_a_number(client, member):
    job = submit(member)
    response = login(client, member).post(
        reverse("job-priority", args=[job.pk]), {"priority": "high"}, follow=True
    )
    assert "Cannot change the priority: priority: must be an integer, got 'high'." in html.unescape(
        response.content.decode()
    )
    job.refresh_from_db()
    assert job.priority == 0


def test_it_says_a_running_job_cannot_change_priority(client, member, manager):
    job = submit(member)
    admission_cycle()
    response = login(client, manager).post(
        reverse("job-priority", args=[job.pk]), {"priority": "5"}, follow=True
    )
    assert response.status_code == 200
    assert "only a pending job can change priority; this one is admitted" in (
        response.content.decode()
    )


def test_it_lists_the_users_queues_with_pending_counts_and_usage(client, member):
    submit(member)
    submit(member)
    admission_cycle()
    response = login(client, member).get(reverse("queue-list"))
    assert response.status_code == 200
    rows = {row["queue"].name: row for row in response.context["queues"]}
    assert set(rows) == {"root-algorithm-text", "root-algorithm-video"}
    assert rows["root-algorithm-video"]["pending"] == 1
    cpu = rows["root-algorithm-video"]["resources"][0]
    assert (cpu["name"], cpu["used"], cpu["max"]) == ("cpu", "12", "14")
    assert "12 / 14" in response.content.decode()


def test_it_shows_the_whole_quota_tree_with_usage_to_any_user(client, member, outsider):
    submit(member)
    admission_cycle()
    response = login(client, outsider).get(reverse("quota-tree"))
    assert response.status_code == 200
    rows = {row["node"].path: row for row in response.context["rows"]}
    assert list(rows)[:4] == [
        "root",
        "root/algorithm",
        "root/algorithm/text",
        "root/algorithm/video",
    ]
    assert rows["root/algorithm/video"]["depth"] == 2
    used = {r["name"]: r["used"] for r in rows["root/algorithm"]["resources"]}
    assert used["cpu"] == "12" and used["memory"] == "12G"
    # Leaves link to queue pages only where the user may open them.
    assert rows["root/infrastructure/devops"]["queue_name"] == "root-infrastructure-devops"
    assert rows["root/algorithm/video"]["queue_name"] is None


def test_it_reads_the_dashboard_and_queue_page_in_a_constant_number_of_queries(
    client, member, other_member
):
    def queries(url: str) -> int:
        with CaptureQueriesContext(connection) as captured:
            assert client.get(url).status_code == 200
        return len(captured)

    login(client, member)
    pages = [reverse("dashboard"), reverse("queue-detail", args=["root-algorithm-video"])]
    submit(member)
    submit(member)  # one behind the other: the head's explanation is read too
    few = [queries(url) for url in pages]
    for index in range(5):
        submit(member, name=f"more-{index}")
        submit(other_member, name=f"other-{index}")
    admission_cycle()
    assert [queries(url) for url in pages] == few


def test_it_links_the_admin_site_for_staff_only(client, member, staff):
    page = login(client, member).get(reverse("dashboard")).content.decode()
    assert 'href="/api/docs/"' in page and 'href="/admin/"' not in page
    assert 'hx-headers=\'{"X-CSRFToken": "' in page
    assert '<script src="/static/htmx.min.js" defer></script>' in page
    staff_page = login(client, staff).get(reverse("dashboard")).content.decode()
    assert 'href="/admin/"' in staff_page


def test_the_form_offers_the_cluster_runtimes_and_submits_to_volcano(client, member, settings):
    settings.CLUSTER_RUNTIMES = ["kuberay", "volcano"]
    page = login(client, member).get(reverse("job-submit")).content.decode()

    assert '<option value="volcano">Volcano Job</option>' in page
    assert '<option value="kuberay">KubeRay RayJob</option>' in page
    assert 'value="kubeflow"' not in page  # not offered by this cluster

    response = client.post(reverse("job-submit"), RAY_FORM | {"runtime": "volcano"})
    job = Job.objects.get()
    assert response.status_code == 302 and job.runtime == "volcano"
    detail = client.get(reverse("job-detail", args=[job.pk])).content.decode()
    assert "batch.volcano.sh/v1alpha1" in detail


def test_the_form_takes_pip_packages_and_env_vars(client, member):
    form = RAY_FORM | {"pip": "torch==2.4.0  pandas", "env": "MODE=fast\r\nGREETING=a=b\r\n"}

    response = login(client, member).post(reverse("job-submit"), form)

    assert response.status_code == 302
    job = Job.objects.get()
    assert job.pip == ["torch==2.4.0", "pandas"]
    assert job.env == {"MODE": "fast", "GREETING": "a=b"}


def test_a_bad_env_line_is_shown_beside_the_env_field(client, member):
    response = login(client, member).post(reverse("job-submit"), RAY_FORM | {"env": "MODE"})

    assert response.status_code == 400
    html = response.content.decode()
    errors = html[html.index('id="env-errors"') :]
    assert "MODE: needs a value (NAME=value)" in errors[: errors.index("</ul>")]
    assert not Job.objects.exists()


def test_the_form_offers_max_replicas_and_says_what_it_needs_and_reserves(client, member):
    html = login(client, member).get(reverse("job-submit")).content.decode()

    name = html.index('name="worker_max_replicas"')
    tag = html[html.rindex("<input", 0, name) : html.index(">", name)]
    assert 'type="number"' in tag and 'value=""' in tag  # optional: empty by default
    help = html[html.index('<small class="help" id="worker_max_replicas-help">') :]
    help = help[: help.index("</small>")]
    assert "Ray on KubeRay only" in help and "Quota counts Replicas" in help


def test_the_form_submits_an_autoscaling_worker_group_and_the_manifest_shows_it(client, member):
    form = RAY_FORM | {"queue": "root/algorithm/text", "worker_max_replicas": "4"}

    response = login(client, member).post(reverse("job-submit"), form)

    assert response.status_code == 302
    job = Job.objects.get()
    assert job.workers == [{**RAY_JOB["workers"][0], "max_replicas": 4}]
    assert job.request["cpu"] == 12_500  # head 4 + the 2 workers it starts with x 4 + 0.5
    detail = client.get(reverse("job-detail", args=[job.pk]))
    rayjob = list(yaml.safe_load_all(detail.context["manifest"]))[-1]
    assert rayjob["spec"]["rayClusterSpec"]["enableInTreeAutoscaling"] is True
    (group,) = rayjob["spec"]["rayClusterSpec"]["workerGroupSpecs"]
    assert (group["replicas"], group["minReplicas"], group["maxReplicas"]) == (2, 2, 4)
    assert "maxReplicas: 4" in detail.content.decode()


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        ({"worker_max_replicas": "1"}, "must be between replicas (2) and 1000, got 1"),
        ({"worker_max_replicas": "many"}, "must be an integer, got &#x27;many&#x27;"),
        (
            {"worker_max_replicas": "4", "runtime": "volcano"},
            "autoscaling needs Ray on KubeRay; a Volcano Job has a fixed number of pods",
        ),
    ],
)
def test_a_bad_max_replicas_is_shown_beside_its_field(client, member, changes, reason):
    response = login(client, member).post(reverse("job-submit"), RAY_FORM | changes)

    assert response.status_code == 400
    assert not Job.objects.exists()
    html = response.content.decode()
    value = changes["worker_max_replicas"]
    field = html.index(f'id="id_worker_max_replicas" value="{value}"')
    errors = html.index(f'<ul class="errors" id="worker_max_replicas-errors"><li>{reason}</li>')
    assert field < errors < html.index('id="id_worker_cpu"')
    assert response.context["top_errors"] == []


def test_the_form_asks_for_a_preview_as_it_is_filled_in(client, member):
    html = login(client, member).get(reverse("job-submit")).content.decode()

    form = html[
        html.index('<form method="post"') : html.index(">", html.index('<form method="post"'))
    ]
    assert f'hx-post="{reverse("job-submit-preview")}"' in form
    assert 'hx-target="#preview"' in form and 'id="preview"' in html


def test_the_preview_shows_the_objects_a_valid_job_becomes_and_saves_nothing(client, member):
    form = RAY_FORM | {"script": "import ray\nray.init()\n"}

    response = login(client, member).post(reverse("job-submit-preview"), form)

    assert response.status_code == 200
    html = response.content.decode()
    assert "Ready to submit. Its quota request: cpu 12, memory 12G, pods 3." in html
    configmap, rayjob = yaml.safe_load_all(response.context["manifest"])
    assert configmap["kind"] == "ConfigMap" and configmap["data"] == {"main.py": form["script"]}
    assert rayjob["kind"] == "RayJob" and rayjob["metadata"]["name"] == "rayjob-video-0"
    assert rayjob["metadata"]["namespace"] == "video"
    assert "<strong>Submitted now:</strong> it would be dequeued at the next admission cycle." in (
        html
    )
    assert not Job.objects.exists()


def test_the_preview_says_why_the_job_would_wait_if_submitted_now(client, member):
    holder = running(member)

    response = login(client, member).post(reverse("job-submit-preview"), RAY_FORM)

    html = response.content.decode()
    assert (
        "it would be number 1 in its queue. It waits for cpu in root/algorithm/video: used 12 "
        "of max 14; it asks for 12."
    ) in html
    assert list(Job.objects.values_list("pk", flat=True)) == [holder.pk]


def test_the_preview_lists_every_problem_as_the_api_names_it(client, member):
    form = RAY_FORM | {"head_cpu": "4 cores", "image": ""}

    response = login(client, member).post(reverse("job-submit-preview"), form)

    assert response.context["problems"] == [
        "image: is required",
        "head.resources.cpu: '4 cores' is not a Kubernetes quantity (examples: 500m, 2, 1.5, "
        "4Gi, 4G)",
    ]
    assert response.context["manifest"] == ""


def test_the_preview_checks_what_only_submitting_would_find(client, member):
    too_big = RAY_FORM | {"worker_replicas": "3"}  # video's max is 14 cpu: 4 + 3 x 4 = 16
    jump = RAY_FORM | {"priority": "5"}

    login(client, member)
    problems = [
        client.post(reverse("job-submit-preview"), form).context["problems"]
        for form in (too_big, jump)
    ]

    assert problems == [
        [
            "request: can never be admitted: Insufficient quota in root/algorithm/video: cpu "
            "requested 16, free 14 (used 0 of max 14)"
        ],
        ["priority: members submit at priority 0 or below; ask a manager to raise it"],
    ]


def test_an_admitted_job_whose_pods_wait_says_what_the_cluster_last_said_and_until_when(
    client, member, settings
):
    from datetime import timedelta

    from django.utils import timezone

    from jobs.cluster import get_backend
    from jobs.engine.reconcile import jobs_reconcile
    from jobs.engine.sync import cluster_sync

    settings.SIMULATED_CLUSTER_NODES = "2xcpu=8,memory=64Gi"
    settings.START_TIMEOUT_SECONDS = 120
    get_backend.cache_clear()
    try:
        now = timezone.now().replace(microsecond=0)
        job = submit(member, **UNPACKABLE)
        admission_cycle(now=now)
        jobs_reconcile([job.pk], now=now)
        cluster_sync(now=now)
        cluster_sync(now=now + timedelta(seconds=5))
        job.refresh_from_db()
        html = login(client, member).get(reverse("job-detail", args=[job.pk])).content.decode()
    finally:
        get_backend.cache_clear()

    starting = html[html.index('<p class="waiting starting"') :]
    starting = " ".join(starting[: starting.index("</p>")].split())
    deadline = timezone.localtime(job.dequeued_at + timedelta(seconds=120))
    assert "It is dequeued and holds its quota; the cluster is placing its pods." in starting
    assert (
        "The cluster&#x27;s last word (scheduling cycle 2): "
        f"rayjob-video-{job.pk}-small-group-worker-1 in gang failed to be "
        "scheduled in cycle 2: 0/2 nodes are available: 2 Insufficient cpu. "
    ) in starting
    assert f"running by {deadline:%H:%M:%S}, it leaves the cluster" in starting


def test_every_page_sends_a_policy_without_inline_script_or_style(client, member, staff):
    """The pages keep to the Content-Security-Policy (the browser tests check that they do);
    here, that it is sent, and that no page of ours carries an inline script or style."""
    client.force_login(member)
    for url in ["/", "/jobs/new/", "/queues/", "/quota/", "/accounts/login/"]:
        response = client.get(url)
        policy = response["Content-Security-Policy"]
        assert "script-src 'self'" in policy and "style-src 'self'" in policy, url
        assert "unsafe-inline" not in policy and "frame-ancestors 'none'" in policy
        page = response.content.decode()
        assert "<style" not in page and " style=" not in page, url
        assert all("src=" in tag for tag in page.split("<script")[1:]), url
    client.force_login(staff)
    for url in ["/admin/queues/quotanode/tree/", "/api/docs/"]:
        page = client.get(url).content.decode()
        assert "<style" not in page and " style=" not in page, url


def test_the_form_submits_a_training_job_s_claim_shared_memory_secret_and_limits(client, member):
    form = PYTORCH_FORM | {
        "claims": "datasets:/data:ro\ncheckpoints:/ckpt",
        "shm": "8Gi",
        "secret_env": "HF_TOKEN=hf-credentials/token",
        "head_memory_limit": "16Gi",
        "worker_cpu_limit": "4",
    }

    response = login(client, member).post(reverse("job-submit"), form)

    assert response.status_code == 302, response.context["form"].errors
    job = Job.objects.get()
    assert job.claims == [
        {"claim": "datasets", "path": "/data", "read_only": True},
        {"claim": "checkpoints", "path": "/ckpt", "read_only": False},
    ]
    assert (job.shm, job.secret_env) == ("8Gi", {"HF_TOKEN": "hf-credentials/token"})
    assert job.request["memory"] == 3 * 8 * 2**30  # the requests; limits are the pod's own
    detail = client.get(reverse("job-detail", args=[job.pk]))
    created = list(yaml.safe_load_all(detail.context["manifest"]))[-1]
    master = created["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]
    worker = created["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]
    for pod in (master, worker):
        (container,) = pod["containers"]
        assert container["volumeMounts"] == [
            {"mountPath": "/data", "name": "claim-0", "readOnly": True},
            {"mountPath": "/ckpt", "name": "claim-1"},
            {"mountPath": "/dev/shm", "name": "dshm"},
        ]
        assert pod["volumes"] == [
            {
                "name": "claim-0",
                "persistentVolumeClaim": {"claimName": "datasets", "readOnly": True},
            },
            {"name": "claim-1", "persistentVolumeClaim": {"claimName": "checkpoints"}},
            {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "8Gi"}},
        ]
        assert {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {
            "name": "hf-credentials", "key": "token"}}} in container["env"]  # fmt: skip
    assert master["containers"][0]["resources"]["limits"]["memory"] == "16Gi"
    assert master["containers"][0]["resources"]["requests"]["memory"] == "8Gi"
    assert worker["containers"][0]["resources"]["limits"]["cpu"] == "4"
    assert k8s_schema.errors(created) == []


def test_the_form_names_a_bad_claim_secret_and_limit_on_their_inputs(client, member):
    form = PYTORCH_FORM | {
        "claims": "Datasets:data",
        "shm": "lots",
        "secret_env": "HF_TOKEN=no-key",
        "head_memory_limit": "1Gi",
    }

    response = login(client, member).post(reverse("job-submit"), form)

    assert response.status_code == 400
    errors = response.context["form"].errors
    assert set(errors) >= {"claims", "shm", "secret_env", "head_memory_limit"}
    assert "is below the request (8Gi)" in errors["head_memory_limit"][0]
    assert not Job.objects.exists()


def test_a_job_sent_as_objects_shows_them_and_is_copied_as_yaml(client, member):
    text = (k8s_schema.SAMPLES / "kuberay-ray-job.volcano-scheduler-queue.yaml").read_text()
    login(client, member)

    sent = client.post(
        reverse("job-submit-objects"), {"queue": "root/algorithm/video", "objects": text}
    )

    assert sent.status_code == 302, sent.context["problems"]
    job = Job.objects.get()
    page = client.get(reverse("job-detail", args=[job.pk])).content.decode()
    assert "As sent" in page and "kuberay-test-queue" in page  # what it said, and became
    assert "rayVersion: 2.52.0" in page
    copy = client.get(reverse("job-submit") + f"?copy={job.pk}")
    assert copy.status_code == 302 and copy["Location"].endswith(f"objects/?copy={job.pk}")
    form = client.get(copy["Location"])
    assert yaml.safe_load_all(form.context["objects"]).__next__()["kind"] == "RayJob"
    again = client.post(
        reverse("job-submit-objects"),
        {"queue": "root/algorithm/video", "objects": form.context["objects"]},
    )
    assert again.status_code == 400
    assert [where for where, _ in again.context["problems"]] == ["items[0].metadata.name"]
    renamed = form.context["objects"].replace("name: rayjob-sample-0", "name: rayjob-sample-1")
    done = client.post(
        reverse("job-submit-objects"), {"queue": "root/algorithm/video", "objects": renamed}
    )
    assert done.status_code == 302
    assert Job.objects.count() == 2


def test_the_objects_page_names_every_problem_by_path(client, member):
    login(client, member)
    privileged = (
        (k8s_schema.SAMPLES / "volcano-ray-plugin.yaml")
        .read_text()
        .replace(
            "          containers:\n", "          hostNetwork: true\n          containers:\n", 1
        )
    )

    refused = client.post(
        reverse("job-submit-objects"), {"queue": "root/algorithm/video", "objects": privileged}
    )
    broken = client.post(
        reverse("job-submit-objects"), {"queue": "root/algorithm/video", "objects": "a: [1"}
    )

    assert refused.status_code == 400
    assert [where for where, _ in refused.context["problems"]] == [
        "spec.tasks[0].template.spec.hostNetwork"
    ]
    assert broken.status_code == 400 and broken.context["problems"][0][0] == "body"
    assert not Job.objects.exists()
