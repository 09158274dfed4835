"""Time limits, retries and stop policies through the API: as a document gives them, as a
team's RayJob, PyTorchJob and Volcano Job give them, refused with their reasons, the
failed attempts answered, job.retrying told to webhooks (docs/jobs.md)."""

from __future__ import annotations

import copy
from datetime import timedelta

import pytest
import yaml
from django.utils import timezone

from hooks.models import Delivery
from hooks.services import webhook_create
from jobs.engine.admission.cycle import admission_cycle
from jobs.engine.reconcile import jobs_reconcile
from jobs.engine.sync import cluster_sync
from queues.services import tree_apply, tree_export, tree_find

from ..support.jobs import RAY_JOB
from .test_native_manifests import documents

pytestmark = pytest.mark.django_db

SMALL = {"head": {"resources": {"cpu": "2", "memory": "1Gi"}}, "workers": []}
YAML = "application/yaml"


def set_node(path: str, **fields) -> None:
    document = tree_export()
    tree_find(document, path).update(fields)
    tree_apply(document=document)


def submitted(api, user, **changes) -> dict:
    body = {**copy.deepcopy(RAY_JOB), **SMALL, **changes}
    response = api(user).post("/api/v1/jobs/", body, format="json")
    assert response.status_code == 201, response.json()
    return response.json()


def test_a_document_s_time_limit_and_retries_are_answered_with_its_attempts(api, member):
    job = submitted(api, member, time_limit="1h30m", retries=2)
    assert (job["time_limit"], job["retries"], job["attempt"], job["attempts"]) == (
        5400, 2, 1, [],
    )  # fmt: skip
    document = api(member).get(f"/api/v1/jobs/{job['id']}/document/")
    if document.status_code == 200:  # the document as submitted, where the API gives it
        assert document.json()["time_limit"] == "1h30m"


def test_a_rayjob_s_deadline_is_its_time_limit_and_one_above_the_leaf_s_ceiling_is_refused(
    api, member
):
    objects = documents("kuberay-ray-job.sample.yaml")
    for obj in objects:
        if obj["kind"] == "RayJob":
            obj["spec"]["activeDeadlineSeconds"] = 7200
    body = yaml.safe_dump_all(objects)
    answer = api(member).post("/api/v1/jobs/?queue=root/algorithm/video", body, content_type=YAML)
    assert answer.status_code == 201, answer.json()
    assert answer.json()["time_limit"] == 7200

    set_node("root/algorithm", limits={"maxTime": "1h"})
    refused = api(member).post("/api/v1/jobs/?queue=root/algorithm/video", body, content_type=YAML)
    assert refused.status_code == 400
    assert refused.json()["items[0].spec.activeDeadlineSeconds"] == [
        "2h is above the longest root/algorithm allows: 1h (limits.maxTime)"
    ]


def test_a_volcano_job_gives_its_time_limit_and_retries_by_annotation(api, member):
    objects = documents("volcano-ray-plugin.yaml")
    for obj in objects:
        if obj["kind"] == "Job":
            obj["metadata"].setdefault("annotations", {}).update(
                {"caldera.io/time-limit": "45m", "caldera.io/retries": "3"}
            )
    answer = api(member).post(
        "/api/v1/jobs/?queue=root/algorithm/video", yaml.safe_dump_all(objects), content_type=YAML
    )
    assert answer.status_code == 201, answer.json()
    assert (answer.json()["time_limit"], answer.json()["retries"]) == (2700, 3)


def test_a_pytorchjob_s_run_policy_deadline_is_its_time_limit(api, member):
    objects = documents("kubeflow-pytorch-simple.yaml")
    for obj in objects:
        if obj["kind"] == "PyTorchJob":
            obj["spec"].setdefault("runPolicy", {})["activeDeadlineSeconds"] = 600
    answer = api(member).post(
        "/api/v1/jobs/?queue=root/algorithm/text", yaml.safe_dump_all(objects), content_type=YAML
    )
    assert answer.status_code == 201, answer.json()
    assert answer.json()["time_limit"] == 600


def test_a_tree_s_stop_policy_and_limits_are_refused_with_every_reason_at_once(api, staff, tree):
    document = tree_export()
    node = tree_find(document, "root/algorithm")
    node["stopPolicy"] = "Drain"
    node["limits"] = {"maxTime": "forever", "perPerson": {"jobs": 0}}
    refused = api(staff).put("/api/v1/quota-tree/", document, format="json")
    assert refused.status_code == 400, refused.json()
    said = str(refused.json())
    for reason in (
        "must be None, Hold or HoldAndDrain",
        "must be a duration from 1s to 365d, such as 2h or 1h30m",
        "must be a whole number from 1 to 100000",
    ):
        assert reason in said
    node["stopPolicy"], node["limits"] = "Hold", {"maxTime": "1d", "perPerson": {"jobs": 2}}
    applied = api(staff).put("/api/v1/quota-tree/", document, format="json")
    assert applied.status_code == 200, applied.json()
    kept = tree_find(applied.json(), "root/algorithm")
    assert (kept["stopPolicy"], kept["limits"]) == (
        "Hold",
        {"maxTime": "1d", "perPerson": {"jobs": 2}},
    )


def test_a_department_hook_is_told_of_each_retry(
    api, receivable, departments, manager, member, listener
):
    hook, _secret = webhook_create(
        department=departments["algorithm"], url=listener.url(), actor=manager
    )
    job = submitted(api, member, retries=1, env={"CALDERA_SIMULATED_EXIT_CODE": "2"}, run_seconds=5)
    at = timezone.now()
    admission_cycle(now=at)
    jobs_reconcile([job["id"]], now=at)
    cluster_sync(now=at)
    cluster_sync(now=at + timedelta(seconds=10))
    answer = api(member).get(f"/api/v1/jobs/{job['id']}/").json()
    assert answer["state"] == "stopping"
    assert [a["attempt"] for a in answer["attempts"]] == [1]
    assert "exited with code 2" in answer["attempts"][0]["reason"]
    events = list(Delivery.objects.filter(hook=hook).values_list("event", flat=True))
    assert "job.retrying" in events and "job.failed" not in events
