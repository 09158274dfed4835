"""A running Ray job's page leads to its Ray dashboard: the deployment's URL for the job's
head Service (RAY_DASHBOARD_URL), else the ``kubectl port-forward`` line that serves it
locally. The head Service is ``<RayCluster>-head-svc`` for a KubeRay RayJob (the cluster
names the RayCluster; the sync keeps its name) and ``<job>-head-svc`` for a Volcano Job
with the ray plugin. Nothing for a PyTorch job, nor once the job has ended."""

from __future__ import annotations

from datetime import timedelta

import pytest
import yaml
from django.urls import reverse
from django.utils import timezone

from jobs.cluster.simulated import ray_cluster_name
from jobs.engine.admission.cycle import admission_cycle
from jobs.engine.reconcile import jobs_reconcile
from jobs.engine.sync import cluster_sync
from jobs.models import Job, State

from ..support.jobs import PYTORCH_JOB, running, submit, submit_document
from ..support.kubernetes import on_kubernetes
from ..support.pages import login
from ..support.paths import REPO

pytestmark = pytest.mark.django_db


def started(job: Job, at) -> Job:
    admission_cycle(now=at)
    jobs_reconcile([job.pk], now=at)
    cluster_sync(now=at)
    job.refresh_from_db()
    assert job.state == State.RUNNING
    return job


def dashboard(html: str) -> str:
    """The Ray dashboard's line of the job's facts; "" when there is none."""
    if "<dt>Ray dashboard</dt>" not in html:
        return ""
    line = html[html.index("<dt>Ray dashboard</dt>") :]
    return line[: line.index("</dd>")]


def page(client, user, job: Job) -> str:
    return login(client, user).get(reverse("job-detail", args=[job.pk])).content.decode()


def test_a_running_rayjob_shows_the_port_forward_line_to_its_head_service(client, member):
    job = running(member)
    service = f"{ray_cluster_name(f'rayjob-video-{job.pk}')}-head-svc"
    assert job.ray_cluster == ray_cluster_name(f"rayjob-video-{job.pk}")  # kept by the sync

    shown = dashboard(page(client, member, job))

    assert "Serve it on your machine, then open http://localhost:8265:" in shown
    assert (
        f'<code class="command">kubectl -n video port-forward svc/{service} 8265:8265</code>'
        in (shown)
    )
    assert "<a " not in shown


def test_with_the_deployments_url_it_links_the_dashboard(client, member, settings):
    settings.RAY_DASHBOARD_URL = "https://ray.example.com/{namespace}/{service}/?job={id}"
    job = running(member)
    service = f"{job.ray_cluster}-head-svc"

    shown = dashboard(page(client, member, job))

    assert (
        f'<a href="https://ray.example.com/video/{service}/?job={job.pk}" rel="noopener" '
        'target="_blank">Open the Ray dashboard</a>' in shown
    )
    assert f'Service <span class="mono">{service}</span>' in shown
    assert "port-forward" not in shown


def test_a_volcano_ray_job_names_the_head_service_the_ray_plugin_makes(client, member, settings):
    at = timezone.now() - timedelta(seconds=5)
    job = started(submit(member, now=at, runtime="volcano", name="ray-on-volcano"), at)

    without = dashboard(page(client, member, job))
    settings.RAY_DASHBOARD_URL = "https://ray.example.com/{namespace}/{name}/"
    linked = dashboard(page(client, member, job))

    assert job.ray_cluster == ""  # a Volcano Job has no RayCluster
    assert (
        f"kubectl -n video port-forward svc/ray-on-volcano-{job.pk}-head-svc 8265:8265" in without
    )
    assert f'href="https://ray.example.com/video/ray-on-volcano-{job.pk}/"' in linked


def test_a_volcano_job_sent_with_its_own_dashboard_port_forwards_that_port(api, client, member):
    [volcano] = yaml.safe_load_all((REPO / "k8s/samples/volcano-ray-plugin.yaml").read_text())
    volcano["metadata"]["name"] = "ray-own-port"
    volcano["spec"]["plugins"]["ray"] = ["--dashboardPort=8266"]
    answer = api(member).post(
        reverse("api-jobs") + "?queue=root/algorithm/video", volcano, format="json"
    )
    assert answer.status_code == 201, answer.content
    job = started(Job.objects.get(pk=answer.json()["id"]), timezone.now())

    shown = dashboard(page(client, member, job))

    assert "kubectl -n video port-forward svc/ray-own-port-head-svc 8265:8266" in shown


def test_a_pytorch_job_and_a_ray_job_that_ended_show_no_dashboard(client, member):
    at = timezone.now() - timedelta(seconds=5)
    pytorch = started(submit_document(member, PYTORCH_JOB, now=at), at)
    ray = running(member)
    Job.objects.filter(pk=ray.pk).update(state=State.SUCCEEDED, finished_at=timezone.now())
    ray.refresh_from_db()

    assert dashboard(page(client, member, pytorch)) == ""
    assert dashboard(page(client, member, ray)) == ""


def test_on_kubernetes_the_rayjobs_own_raycluster_names_the_service(client, member):
    with on_kubernetes() as kube:
        job = running(member, kube=kube)
        name = f"rayjob-video-{job.pk}"
        status = {"jobDeploymentStatus": "Running", "rayClusterName": f"{name}-x7k2p"}
        kube.set_status("kuberay", "video", name, status)

        cluster_sync()

        job.refresh_from_db()
        shown = dashboard(page(client, member, job))

    assert job.ray_cluster == f"{name}-x7k2p"
    assert f"kubectl -n video port-forward svc/{name}-x7k2p-head-svc 8265:8265" in shown


def test_a_rayjob_whose_raycluster_is_not_named_yet_shows_no_dashboard(client, member):
    with on_kubernetes() as kube:
        job = running(member, kube=kube)  # its status has no rayClusterName

        shown = dashboard(page(client, member, job))

    assert job.ray_cluster == "" and shown == ""
