"""Bounded jobs: no member's job can slow another's page or take the cluster's pods.

A job has at most JOB_MAX_WORKER_GROUPS worker groups and JOB_MAX_PODS pods, both declared
in the schema; its request counts its pods (``pods``, as a ResourceQuota counts them), so
a tree that names ``pods`` limits them and one that does not, does not; the nodes hold a
kubelet's 110 pods unless they say otherwise, and a gang of more pods than the nodes hold
together can never run. The job page shows a bounded summary of a large job. ``image``
is an OCI image reference.
"""

from __future__ import annotations

import copy
import importlib
from datetime import UTC, datetime

import pytest
from django.apps import apps as django_apps
from django.db import connection
from django.test import override_settings

from jobs.cluster.simulated import SimulatedCluster, parse_nodes
from jobs.cluster.spec import PodGroup
from jobs.models import JOBS, Job
from queues import exchange
from queues.services import tree_apply, tree_export

from ..support.cluster import simulated_nodes
from ..support.jobs import RAY_JOB
from ..support.specs import ray_spec
from ..support.trees import seed_tree_document

pytestmark = pytest.mark.django_db

# The migration that gave every existing job's request its pods (a module name that begins
# with a digit is imported by name).
count_pods = importlib.import_module("jobs.migrations.0017_request_counts_pods").count_pods
JOBS_API = "/api/v1/jobs/"
VIDEO = "root/algorithm/video"
TINY = {"cpu": "10m", "memory": "1Mi"}


def ray_job(**changes) -> dict:
    return {**copy.deepcopy(RAY_JOB), **changes}


def groups(count: int, replicas: int = 1) -> list[dict]:
    return [{"name": f"g{n}", "replicas": replicas, "resources": TINY} for n in range(count)]


def submit(api, user, document):
    return api(user).post(JOBS_API, document, format="json")


# -- the limits of one job ------------------------------------------------------------------


def test_a_job_of_a_thousand_groups_is_refused_naming_the_limit(api, member):
    response = submit(api, member, ray_job(head={"resources": TINY}, workers=groups(1000)))

    assert response.status_code == 400
    assert response.json() == {"workers": ["a job has at most 8 worker groups, got 1000"]}
    assert not Job.objects.exists()


def test_eight_groups_of_a_thousand_replicas_are_refused_for_their_pods(api, member):
    response = submit(api, member, ray_job(head={"resources": TINY}, workers=groups(8, 1000)))

    assert response.status_code == 400
    reason = response.json()["workers"][0]
    assert reason.startswith("a job has at most 1000 pods") and "this one has 8001" in reason
    assert not Job.objects.exists()


@override_settings(JOB_MAX_WORKER_GROUPS=200)
def test_a_job_of_a_hundred_thousand_pods_is_refused_naming_the_limit(api, member):
    response = submit(api, member, ray_job(head={"resources": TINY}, workers=groups(100, 1000)))

    assert response.status_code == 400
    assert "at most 1000 pods" in response.json()["workers"][0]
    assert "100001" in response.json()["workers"][0]


def test_an_autoscaling_group_counts_at_its_max_replicas_against_the_pod_limit(api, member):
    workers = [{"name": "grows", "replicas": 1, "max_replicas": 1000, "resources": TINY}]

    response = submit(api, member, ray_job(head={"resources": TINY}, workers=workers))

    assert response.status_code == 400
    assert "1001 at its groups' max_replicas" in response.json()["workers"][0]


def test_the_schema_declares_the_limits(api, member):
    schema = api(member).get("/api/schema/?format=json").json()
    submission = schema["components"]["schemas"]["JobSubmissionRequest"]["properties"]

    assert submission["workers"]["maxItems"] == 8
    assert "at most 1000 pods" in submission["workers"]["description"]
    assert submission["image"]["maxLength"] == 500 and submission["image"]["pattern"]


# -- pods in the request, the tree and the nodes ----------------------------------------------


def test_a_jobs_request_counts_its_pods(api, member):
    response = submit(api, member, ray_job())

    assert response.status_code == 201
    assert response.json()["request"]["pods"] == "3"  # the head and two workers
    assert Job.objects.get().request["pods"] == 3


def test_a_tree_that_names_pods_limits_them_and_is_published_with_them(api, member, staff):
    document = seed_tree_document()
    (video,) = [
        n for n in document["spec"]["root"]["children"][0]["children"] if n["name"] == "video"
    ]
    video["max"]["pods"] = 4
    tree_apply(document=document)

    too_many = submit(api, member, ray_job(workers=groups(1, 4)))
    fits = submit(api, member, ray_job(head={"resources": TINY}, workers=groups(1, 2)))

    assert too_many.status_code == 400
    assert "pods" in too_many.json()["request"][0]
    assert "can never be admitted" in too_many.json()["request"][0]
    assert fits.status_code == 201
    # Its path names pods where the tree limits them, and at the cluster.
    path = api(member).get(f"{JOBS_API}{fits.json()['id']}/").json()["waiting"]["path"]
    assert [row["node"] for row in path if row["resource"] == "pods"] == [VIDEO, "cluster"]
    algorithm = tree_export()["spec"]["root"]["children"][0]
    (published,) = [n for n in algorithm["children"] if n["name"] == "video"]
    assert published["max"]["pods"] == "4"
    queue = next(
        q for q in exchange.volcano_queues() if q["metadata"]["name"] == "root-algorithm-video"
    )
    assert queue["spec"]["capability"]["pods"] == "4"
    other = next(
        q for q in exchange.volcano_queues() if q["metadata"]["name"] == "root-algorithm-text"
    )
    assert "pods" not in other["spec"]["capability"]  # a tree that does not name it


def test_a_gang_of_more_pods_than_the_nodes_hold_can_never_run(api, member):
    with simulated_nodes("4xcpu=16,memory=64Gi,pods=2"):
        response = submit(api, member, ray_job(head={"resources": TINY}, workers=groups(1, 8)))

    assert response.status_code == 400
    assert response.json() == {
        "request": ["can never run: the job asks for pods 9 in all; the 4 nodes hold 8 together"]
    }


def test_the_simulated_scheduler_counts_pods_on_each_node():
    sim = SimulatedCluster(parse_nodes("cpu=16,memory=64Gi,pods=2"), cycle_seconds=5)
    spec = ray_spec(
        id=1,
        object_name="rayjob-1",
        head=PodGroup("head", 1, {"cpu": "1"}),
        workers=(PodGroup("w", 2, {"cpu": "1"}),),
        run_seconds=60,
    )
    now = datetime(2026, 1, 1, tzinfo=UTC)
    sim.create(spec, now=now)

    messages = {event.message for event in sim.tick(now=now).events}

    assert any("1 Too many pods" in message for message in messages), messages


def test_existing_jobs_requests_gain_their_pod_count(api, member):
    job_id = submit(api, member, ray_job()).json()["id"]
    with connection.cursor() as cursor:
        cursor.execute(f"UPDATE {JOBS} SET request = request - 'pods'")
    assert "pods" not in Job.objects.get(pk=job_id).request

    with connection.schema_editor() as editor:
        count_pods(django_apps, editor)

    assert Job.objects.get(pk=job_id).request["pods"] == 3


# -- the page of a large job -----------------------------------------------------------------


def test_the_page_of_a_job_of_eight_groups_shows_each_group(client, api, member):
    job_id = submit(api, member, ray_job(head={"resources": TINY}, workers=groups(8, 3))).json()[
        "id"
    ]
    client.force_login(member)

    page = client.get(f"/jobs/{job_id}/").content.decode()

    assert "25 pods in all" in page
    assert all(f'<td class="mono">g{n}</td>' in page for n in range(8))
    assert "more group" not in page
    assert "kind: RayJob" in page  # its manifest


def test_the_page_of_a_job_from_before_the_limit_is_bounded(client, api, member):
    job_id = submit(api, member, ray_job(head={"resources": TINY}, workers=groups(1))).json()["id"]
    Job.objects.filter(pk=job_id).update(workers=groups(20_000))  # as an old job may hold
    client.force_login(member)

    page = client.get(f"/jobs/{job_id}/").content.decode()

    assert "and 19992 more groups (19992 pods)" in page
    assert '<td class="mono">g8</td>' not in page
    assert "kind: RayJob" not in page  # the manifest is at the API
    assert len(page) < 100_000


# -- the image --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "image",
    [
        "rayproject/ray:2.36.1",
        "pytorch/pytorch:2.4.0-cuda12.1-cudnn9-runtime",
        "registry.example.com:5000/team/train",
        "ghcr.io/org/image@sha256:" + "a" * 64,
        "localhost/busybox:latest@sha256:" + "b" * 64,
    ],
)
def test_an_image_reference_is_accepted(api, member, image):
    response = submit(api, member, ray_job(image=image))

    assert response.status_code == 201, response.json()


@pytest.mark.parametrize(
    "image",
    [
        '"><img src=x onerror=alert(1)>',
        "ray project/ray",
        "rayproject/ray:",
        "rayproject/ray@sha256:abc",
        "-ray/ray",
        "ray//ray",
    ],
)
def test_anything_else_is_refused_naming_image(api, member, image):
    response = submit(api, member, ray_job(image=image))

    assert response.status_code == 400
    assert list(response.json()) == ["image"]
    assert "is not an image reference" in response.json()["image"][0]
    assert not Job.objects.exists()
