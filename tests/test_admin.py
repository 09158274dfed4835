"""The admin site edits the quota tree through the same checks as the API."""

from __future__ import annotations

import pytest
import yaml
from django.urls import reverse

from jobs.services import job_submit
from jobs.validation import job_parse
from queues.models import Queue, QuotaNode

from .conftest import RAY_JOB

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client(client, staff, tree):
    client.force_login(staff)
    return client


def node_form(**changes) -> dict:
    form = {
        "min_text": "cpu: 12\nmemory: 12Gi\nnvidia.com/gpu: 2",
        "max_text": "cpu: 14\nmemory: 14Gi\nnvidia.com/gpu: 4",
        "namespaces_text": "video",
    }
    form.update(changes)
    return form


def video_url() -> str:
    node = QuotaNode.objects.get(path="root/algorithm/video")
    return reverse("admin:queues_quotanode_change", args=[node.pk])


def test_an_admin_raises_a_leafs_max(admin_client):
    response = admin_client.post(video_url(), node_form(max_text="cpu: 20\nmemory: 14Gi"))
    assert response.status_code == 302
    node = QuotaNode.objects.get(path="root/algorithm/video")
    assert node.max == {"cpu": 20_000, "memory": 14 * 2**30}


def test_a_max_above_the_parents_max_is_shown_in_place_and_nothing_is_saved(admin_client):
    before = QuotaNode.objects.get(path="root/algorithm/video").max
    response = admin_client.post(video_url(), node_form(max_text="cpu: 100"))
    assert response.status_code == 200
    errors = " ".join(response.context["adminform"].form.non_field_errors())
    assert "root/algorithm/video" in errors and "cpu" in errors
    assert QuotaNode.objects.get(path="root/algorithm/video").max == before


def test_a_bad_quantity_is_shown_beside_its_field(admin_client):
    response = admin_client.post(video_url(), node_form(min_text="cpu: lots"))
    assert response.status_code == 200
    form = response.context["adminform"].form
    assert any("'lots' is not a Kubernetes quantity" in e for e in form.errors["min_text"])


def test_a_line_that_is_not_resource_colon_quantity_is_refused(admin_client):
    response = admin_client.post(video_url(), node_form(max_text="cpu 14"))
    assert response.status_code == 200
    errors = response.context["adminform"].form.errors
    assert errors["max_text"] == ["line 1: write 'resource: quantity', got 'cpu 14'"]


def test_the_tree_page_applies_yaml_and_adds_a_leaf_with_its_queue(admin_client):
    url = reverse("admin:queues_quotanode_tree")
    document = yaml.safe_load(admin_client.get(url).context["document"])
    algorithm = document["spec"]["root"]["children"][0]
    assert algorithm["name"] == "algorithm"
    algorithm["children"].append(
        {"name": "speech", "min": {"cpu": "0"}, "max": {"cpu": "8"}, "namespaces": ["speech"]}
    )
    response = admin_client.post(url, {"document": yaml.safe_dump(document)})
    assert response.status_code == 302
    assert Queue.objects.get(name="root-algorithm-speech").active


def test_the_tree_page_shows_errors_and_writes_nothing(admin_client):
    url = reverse("admin:queues_quotanode_tree")
    nodes = QuotaNode.objects.filter(active=True).count()
    response = admin_client.post(url, {"document": "spec: {root: {name: root, min: {cpu: x}}}"})
    assert response.status_code == 200
    assert "spec.root.min.cpu" in response.content.decode()
    response = admin_client.post(url, {"document": "spec: [unclosed"})
    assert "not valid YAML" in response.content.decode()
    assert QuotaNode.objects.filter(active=True).count() == nodes


def test_an_admin_sets_a_queues_policy(admin_client):
    queue = Queue.objects.get(name="root-algorithm-video")
    url = reverse("admin:queues_queue_change", args=[queue.pk])
    assert admin_client.post(url, {"policy": "BestEffort"}).status_code == 302
    queue.refresh_from_db()
    assert queue.policy == "BestEffort"


def test_jobs_are_shown_but_not_changed_in_the_admin(admin_client, member):
    job = job_submit(user=member, draft=job_parse(dict(RAY_JOB)))
    url = reverse("admin:jobs_job_change", args=[job.pk])
    response = admin_client.get(url)
    assert response.status_code == 200
    assert "Enqueued in root-algorithm-video" in response.content.decode()
    admin_client.post(url, {"state": "succeeded"})
    job.refresh_from_db()
    assert job.state == "queued"


def test_members_cannot_open_the_admin(client, member):
    client.force_login(member)
    response = client.get(reverse("admin:queues_quotanode_tree"))
    assert response.status_code == 302
