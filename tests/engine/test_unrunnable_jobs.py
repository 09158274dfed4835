"""A job must be able to run somewhere (docs/architecture.md section 4), and one whose pods
keep not starting is failed after START_TIMEOUT_ATTEMPTS (section 3).

Refused at submit (API, batch, form preview) with the pod, the resource and the largest
node; failed while waiting when the quota tree changes, by whichever door the change came
in. The default simulated cluster has 4 nodes of 16 cpu, 64Gi and 4 nvidia.com/gpu.
"""

from __future__ import annotations

import copy
import io
from datetime import timedelta

import pytest
import yaml
from django.core.management import call_command
from django.db import connection
from django.test import override_settings
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from jobs.cluster import get_backend
from jobs.document.validation import job_pods
from jobs.engine.admission.cycle import admission_cycle
from jobs.engine.reconcile import jobs_reconcile
from jobs.engine.sync import cluster_sync
from jobs.engine.unrunnable import jobs_fail_unrunnable
from jobs.models import Job
from kube.scheduling import ClusterNode
from queues.models import QuotaNode

from ..support import k8s_schema
from ..support.cluster import simulated_nodes
from ..support.jobs import PYTORCH_JOB, RAY_JOB, UNPACKABLE, refresh, submit
from ..support.kube_emulator import emulator
from ..support.pages import RAY_FORM
from ..support.personas import client_for
from ..support.trees import seed_tree_document

pytestmark = pytest.mark.django_db

TEXT = "root/algorithm/text"  # max 24 cpu: room for a pod larger than any node


def ray_job(**changes) -> dict:
    return {**copy.deepcopy(RAY_JOB), "queue": TEXT, **changes}


@pytest.fixture
def now():
    return timezone.now().replace(microsecond=0)


# -- refused at submit ---------------------------------------------------------------------


def test_it_refuses_a_head_larger_than_every_node_naming_the_pod_and_the_largest_node(api, member):
    response = api(member).post(
        "/api/v1/jobs/", ray_job(head={"resources": {"cpu": "20"}}, workers=[]), format="json"
    )

    assert response.status_code == 400
    assert response.json() == {
        "head.resources": ["can never run: head asks for cpu 20; the largest node has 16"]
    }
    assert not Job.objects.exists()


def test_it_refuses_a_resource_no_node_has_though_max_does_not_mention_it(api, member):
    workers = [{"name": "foo", "replicas": 1, "resources": {"cpu": "1", "example.com/foo": "1"}}]

    response = api(member).post("/api/v1/jobs/", ray_job(workers=workers), format="json")

    assert response.status_code == 400
    assert response.json() == {
        "workers[0].resources": [
            "can never run: workers[0] asks for example.com/foo 1; no node has example.com/foo"
        ]
    }
    assert not Job.objects.exists()


def test_a_pytorch_master_is_named_master(api, member):
    job = copy.deepcopy(PYTORCH_JOB)
    job["master"]["resources"]["nvidia.com/gpu"] = "5"

    response = api(member).post("/api/v1/jobs/", job, format="json")

    assert response.status_code == 400
    assert response.json() == {
        "master.resources": [
            "can never run: master asks for nvidia.com/gpu 5; the largest node has 4"
        ]
    }


def test_kuberays_autoscaler_is_counted_on_the_head_pod(api, member):
    group = {"name": "auto", "replicas": 1, "max_replicas": 2, "resources": {"cpu": "1"}}
    fits = ray_job(head={"resources": {"cpu": "15500m"}}, workers=[group])  # + 500m: 16
    too_big = ray_job(head={"resources": {"cpu": "15600m"}}, workers=[group])

    assert api(member).post("/api/v1/jobs/", fits, format="json").status_code == 201
    response = api(member).post("/api/v1/jobs/", too_big, format="json")

    assert response.status_code == 400
    assert response.json() == {
        "head.resources": ["can never run: head asks for cpu 16.1; the largest node has 16"]
    }
    fixed = ray_job(head={"resources": {"cpu": "15600m"}}, workers=[{**group, "max_replicas": 1}])
    assert api(member).post("/api/v1/jobs/", fixed, format="json").status_code == 201


def test_job_pods_names_each_kind_of_pod_and_skips_groups_without_pods():
    workers = [
        {"name": "none", "replicas": 0, "resources": {"cpu": "9"}},
        {"name": "auto", "replicas": 0, "max_replicas": 2, "resources": {"cpu": "2"}},
    ]
    pods = job_pods(
        kind="ray", runtime="kuberay", head={"resources": {"cpu": "1"}}, workers=workers
    )

    assert pods == {"head": {"cpu": 1500, "memory": 512 * 2**20}, "workers[1]": {"cpu": 2000}}


def test_the_batch_names_the_job_and_stores_none(api, member):
    jobs = [ray_job(), ray_job(head={"resources": {"cpu": "17"}}, workers=[]), ray_job()]

    response = api(member).post("/api/v1/jobs/batch/", {"jobs": jobs}, format="json")

    assert response.status_code == 400
    assert response.json() == {
        "jobs[1].head.resources": ["can never run: head asks for cpu 17; the largest node has 16"]
    }
    assert not Job.objects.exists()


def test_the_form_preview_shows_why_the_job_can_never_run(client, member):
    form = RAY_FORM | {"queue": TEXT, "head_cpu": "17", "worker_replicas": "1"}

    client.force_login(member)
    response = client.post(reverse("job-submit-preview"), form)

    assert response.context["problems"] == [
        "head.resources: can never run: head asks for cpu 17; the largest node has 16"
    ]
    assert not Job.objects.exists()


def test_nothing_is_refused_for_the_nodes_while_they_cannot_be_read(member, now):
    with (
        emulator() as kube,
        override_settings(
            CLUSTER_BACKEND="kubernetes", KUBERNETES_HOST=kube.url, KUBERNETES_ATTEMPTS=1
        ),
    ):
        kube.add_node("node-1", {"cpu": "16", "memory": "64Gi"})
        kube.answer_next("get", "/api/v1/nodes", 503)
        get_backend.cache_clear()
        try:
            job = submit(member, now, **ray_job(head={"resources": {"cpu": "20"}}, workers=[]))
        finally:
            get_backend.cache_clear()

    assert job.state == "queued"  # nothing is known against it; it was not refused


# -- failed while waiting, when the tree changes -----------------------------------------


def through_the_api(client, staff, document, tmp_path) -> None:
    response = client_for(staff).put("/api/v1/quota-tree/", document, format="json")
    assert response.status_code == 200, response.json()


def through_the_admins_node_page(client, staff, document, tmp_path) -> None:
    video = QuotaNode.objects.get(path="root/algorithm/video")
    client.force_login(staff)
    response = client.post(
        reverse("admin:queues_quotanode_change", args=[video.pk]),
        {
            "min_text": "cpu: 12\nmemory: 12Gi\nnvidia.com/gpu: 2",
            "max_text": "cpu: 14\nmemory: 15Gi\nnvidia.com/gpu: 4",
            "namespaces_text": "video",
            "children-TOTAL_FORMS": "0",
            "children-INITIAL_FORMS": "0",
        },
    )
    assert response.status_code == 302


def through_a_yaml_upload(client, staff, document, tmp_path) -> None:
    client.force_login(staff)
    response = client.post(
        reverse("admin:queues_quotanode_tree"), {"document": yaml.safe_dump(document)}
    )
    assert response.status_code == 302


def through_import_tree(client, staff, document, tmp_path) -> None:
    path = tmp_path / "tree.yaml"
    path.write_text(yaml.safe_dump(document))
    call_command("import_tree", str(path), stdout=io.StringIO())


@pytest.mark.parametrize(
    "change",
    [through_the_api, through_the_admins_node_page, through_a_yaml_upload, through_import_tree],
)
def test_a_tree_change_fails_the_waiting_jobs_no_node_can_hold_and_no_other(
    change, client, staff, member, now, django_capture_on_commit_callbacks, tmp_path
):
    admitted = submit(member, now, **ray_job(head={"resources": {"cpu": "12"}}, workers=[]))
    assert admission_cycle(now=now).admitted == [admitted.pk]
    waiting = submit(member, now, **ray_job(head={"resources": {"cpu": "12"}}, workers=[]))
    small = submit(member, now, **ray_job(head={"resources": {"cpu": "2"}}, workers=[]))
    document = seed_tree_document()
    document["spec"]["root"]["children"][0]["children"][0]["max"]["memory"] = "15Gi"  # video

    # The nodes shrank since the jobs were submitted; the tree change checks them again.
    with simulated_nodes("4xcpu=8,memory=64Gi"):
        with django_capture_on_commit_callbacks(execute=True):
            change(client, staff, document, tmp_path)

    waiting = refresh(waiting)
    assert waiting.state == "failed" and waiting.finished_at is not None
    event = waiting.events.get(reason="Unrunnable")
    assert event.type == "Warning"
    assert event.message == "Can never run: head asks for cpu 12; the largest node has 8"
    assert refresh(small).state == "queued"
    assert refresh(admitted).state == "admitted"  # it holds its quota; the cluster decides


def test_waiting_jobs_are_checked_once_per_shape_however_many_there_are(member, now):
    nodes = [ClusterNode("node-1", {"cpu": 8000, "memory": 64 * 2**30})]
    counts = []
    for many in (1, 6):
        for _ in range(many):
            submit(member, now, **ray_job(head={"resources": {"cpu": "12"}}, workers=[]))
        with CaptureQueriesContext(connection) as queries:
            failed = jobs_fail_unrunnable(now=now, nodes=nodes)
        assert len(failed) == many
        counts.append(len(queries))

    assert counts[0] == counts[1]


def test_a_waiting_job_whose_selector_no_node_meets_any_more_fails_when_the_nodes_change(
    api, member, now
):
    """The sync reads the nodes' labels too: a pool relabelled leaves its jobs nowhere."""
    job = yaml.safe_load((k8s_schema.SAMPLES / "kubeflow-pytorch-simple.yaml").read_text())
    for spec in job["spec"]["pytorchReplicaSpecs"].values():
        spec["template"]["spec"]["nodeSelector"] = {"pool": "a100"}
    with simulated_nodes("2xcpu=16,memory=64Gi labels:pool=a100;cpu=16"):
        answer = api(member).post(f"/api/v1/jobs/?queue={TEXT}", job, format="json")
        assert answer.status_code == 201, answer.json()
        other = submit(member, now, **ray_job(head={"resources": {"cpu": "2"}}, workers=[]))
        assert jobs_fail_unrunnable(now=now) == []
    with simulated_nodes("2xcpu=16,memory=64Gi labels:pool=h100;cpu=16"):
        cluster_sync(now=now)

    waiting = Job.objects.get(pk=answer.json()["id"])
    assert waiting.state == "failed"
    assert waiting.events.get(reason="Unrunnable").message == (
        "Can never run: master asks for nodes with nodeSelector pool=a100; no node has those labels"
    )
    assert refresh(other).state == "queued"


# -- start attempts on the job's page and in the API -------------------------------------


@override_settings(
    SIMULATED_CLUSTER_NODES="2xcpu=8,memory=64Gi",
    START_TIMEOUT_SECONDS=30,
    START_TIMEOUT_ATTEMPTS=4,
)
def test_the_job_shows_how_many_start_attempts_timed_out_of_how_many(client, api, member, now):
    get_backend.cache_clear()
    try:
        job = submit(member, now, **UNPACKABLE)
        assert api(member).get(f"/api/v1/jobs/{job.pk}/").json()["start_timeouts"] == 0
        assert "Start attempts" not in client_page(client, member, job)
        admission_cycle(now=now)
        jobs_reconcile([job.pk], now=now)
        cluster_sync(now=now + timedelta(seconds=30))
    finally:
        get_backend.cache_clear()

    data = api(member).get(f"/api/v1/jobs/{job.pk}/").json()
    assert (data["state"], data["start_timeouts"], data["start_timeout_attempts"]) == (
        "backoff",
        1,
        4,
    )
    html = client_page(client, member, job)
    assert (
        '<div><dt>Start attempts</dt><dd class="start-attempts">1 of 4 timed out</dd></div>' in html
    )


def client_page(client, member, job) -> str:
    client.force_login(member)
    return client.get(reverse("job-detail", args=[job.pk])).content.decode()
