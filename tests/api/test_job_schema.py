"""One declared job schema: the API, the batch endpoint, the form and the OpenAPI document
all take it from ``jobs.document.schema``."""

from __future__ import annotations

import copy
import json
import re

import pytest
import yaml
from django.core.management import call_command
from django.urls import reverse
from django.utils import timezone

from jobs.document.fields import flat
from jobs.document.forms import SubmitForm
from jobs.document.schema import JobIn
from jobs.document.validation import PRIORITY_RANGE
from jobs.engine.admission.cycle import admission_cycle
from jobs.models import Job
from jobs.web.answers.events import EventOut
from jobs.web.answers.jobs import JobBatchOut, JobOut, batch_out
from jobs.web.answers.queues import BackoffOut

from ..support.jobs import PYTORCH_JOB, RAY_JOB
from ..support.pages import RAY_FORM, login

pytestmark = pytest.mark.django_db


def test_the_openapi_schema_validates_without_a_warning(tmp_path):
    target = tmp_path / "schema.yaml"

    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(target))

    assert "/api/v1/jobs/batch/" in yaml.safe_load(target.read_text())["paths"]


def test_the_schema_served_again_is_the_same_and_every_reference_resolves(api, member):
    # The schema's hooks rewrite components in place: a process answered its second request
    # with references to enums it no longer declared.
    first, second = (api(member).get("/api/schema/?format=json").json() for _ in range(2))

    assert second == first
    references = set(re.findall(r'"#/components/schemas/([^"]+)"', json.dumps(second)))
    assert references <= set(second["components"]["schemas"])


def _resolve(schema: dict, node: dict) -> dict:
    while "$ref" in node:
        node = schema["components"]["schemas"][node["$ref"].rsplit("/", 1)[-1]]
    return node


def test_every_operation_answers_a_typed_body(api, member):
    schema = api(member).get("/api/schema/?format=json").json()

    untyped = []
    for route, operations in schema["paths"].items():
        for method, operation in operations.items():
            for status, response in operation["responses"].items():
                if status == "204":
                    continue
                body = response["content"]["application/json"]["schema"]
                for choice in body.get("anyOf", [body]):
                    choice = _resolve(schema, choice)
                    if choice.get("type") == "array":
                        choice = _resolve(schema, choice["items"])
                    if not (choice.get("properties") or choice.get("additionalProperties")):
                        untyped.append(f"{method.upper()} {route} {status}")
    assert untyped == []


def test_a_queue_field_has_one_type_in_the_list_and_in_the_detail(api, member):
    schema = api(member).get("/api/schema/?format=json").json()["components"]["schemas"]
    listed, detail = schema["Queue"]["properties"], schema["QueueDetail"]["properties"]

    for name in set(listed) & set(detail):
        assert listed[name].get("type") == detail[name].get("type"), name
    assert detail["active"]["type"] == "array" and "active" not in listed
    assert listed["retired"]["type"] == detail["retired"]["type"] == "boolean"
    queues = api(member).get("/api/v1/queues/").json()
    assert {q["retired"] for q in queues} == {False}


def test_nested_errors_are_named_by_their_path():
    detail = {"workers": [{}, {"replicas": ["too many"]}], "env": {"1X": ["bad"]}, "pip": {}}

    assert flat(detail) == {"workers[1].replicas": ["too many"], "env.1X": ["bad"]}
    assert flat({"non_field_errors": ["no"]}, "jobs[2]") == {"jobs[2]": ["no"]}


def test_drf_validation_gives_the_same_paths_as_the_service():
    body = copy.deepcopy(RAY_JOB)
    body["workers"][0]["replicas"] = -1
    body["head"]["resources"]["cpu"] = "4 cores"

    reader = JobIn(data=body)

    assert not reader.is_valid()
    assert set(reader.errors) == {"workers[0].replicas", "head.resources.cpu"}
    assert reader.errors["workers[0].replicas"] == ["must be between 0 and 1000, got -1"]


def _two_groups(**second) -> dict:
    return RAY_FORM | {
        "groups": "2",
        "worker1_name": "big-group",
        "worker1_replicas": "1",
        "worker1_cpu": "2",
        "worker1_memory": "2G",
    } | second  # fmt: skip


def test_the_form_adds_a_worker_group_without_submitting(client, member):
    response = login(client, member).post(reverse("job-submit"), RAY_FORM | {"action": "add-group"})

    assert response.status_code == 200
    assert not Job.objects.exists()
    html = response.content.decode()
    assert 'name="worker1_cpu"' in html and 'name="groups" value="2"' in html
    assert 'value="rayjob-video"' in html  # what was typed stays


def test_the_form_submits_several_worker_groups(client, member):
    response = login(client, member).post(reverse("job-submit"), _two_groups())

    assert response.status_code == 302
    job = Job.objects.get()
    assert [group["name"] for group in job.workers] == ["small-group", "big-group"]
    assert job.request["cpu"] == (4 + 2 * 4 + 2) * 1000  # millicores


def test_an_error_in_any_worker_group_is_shown_on_that_group_as_the_api_says_it(
    client, api, member
):
    response = login(client, member).post(
        reverse("job-submit"), _two_groups(worker1_replicas="5000", worker1_cpu="lots")
    )
    body = copy.deepcopy(RAY_JOB)
    body["workers"].append(
        {"name": "big-group", "replicas": 5000, "resources": {"cpu": "lots", "memory": "2G"}}
    )
    answer = api(member).post("/api/v1/jobs/", body, format="json").json()

    assert response.status_code == 400
    errors = response.context["errors"]
    assert errors["worker1_replicas"] == answer["workers[1].replicas"]
    assert errors["worker1_cpu"] == answer["workers[1].resources.cpu"]
    assert "worker_replicas" not in errors and "worker_cpu" not in errors
    html = response.content.decode()
    assert html.index('id="id_worker1_cpu"') < html.index('id="worker1_cpu-errors"')


def test_an_empty_group_between_two_is_skipped_and_errors_still_land_on_their_group(client, member):
    form = _two_groups(worker1_cpu="lots") | {
        "groups": "2",
        "worker_name": "",
        "worker_cpu": "",
        "worker_memory": "",
    }

    response = login(client, member).post(reverse("job-submit"), form)

    assert response.status_code == 400
    assert response.context["errors"]["worker1_cpu"][0].startswith("'lots' is not")


def test_the_form_takes_its_limits_and_help_from_the_declaration(rf, member):
    form = SubmitForm(None, queues=[("root/algorithm/video", "video")], runtimes=[])

    priority = form.inputs["priority"]
    assert (priority.minimum, priority.maximum) == PRIORITY_RANGE
    assert priority.help == JobIn().fields["priority"].help_text
    assert form.inputs["worker_replicas"].maximum == 1000
    assert form.inputs["head_cpu"].path == "head.resources.cpu"


@pytest.mark.parametrize("groups", ["²", "9" * 5000, "-1", "x", "0"])
def test_a_strange_group_count_shows_one_group(client, member, groups):
    response = login(client, member).post(
        reverse("job-submit"), RAY_FORM | {"groups": groups, "action": "add-group"}
    )

    assert response.status_code == 200
    assert response.context["form"].groups == 2


def test_the_batch_answer_is_what_its_declared_serializer_writes(api, member):
    body = copy.deepcopy(RAY_JOB)
    answer = api(member).post("/api/v1/jobs/batch/", {"jobs": [body, body]}, format="json")

    assert answer.status_code == 201
    jobs = Job.objects.select_related("queue").order_by("id")
    assert batch_out(list(jobs)) == answer.json()
    assert answer.json() == JobBatchOut({"count": 2, "jobs": jobs}).data  # DRF's own loop


def test_every_job_answer_is_what_its_declared_serializer_writes(api, member, staff):
    ray = api(member).post("/api/v1/jobs/", RAY_JOB, format="json").json()
    torch = api(member).post("/api/v1/jobs/", PYTORCH_JOB, format="json").json()
    Job.objects.filter(pk=torch["id"]).update(
        state="backoff", backoff_reason="waits", next_attempt_at=timezone.now()
    )
    listed = api(staff).get("/api/v1/jobs/").json()["results"]

    for answer in listed:
        job = Job.objects.select_related("queue__node", "owner").get(pk=answer["id"])
        job.position = answer["position"]
        assert answer == JobOut(job).data  # DRF's own loop, field by field
    assert {answer["id"] for answer in listed} == {ray["id"], torch["id"]}
    assert "master" not in listed[-1] and "head" not in listed[0]


def test_events_and_queue_entries_are_what_their_declared_serializers_write(api, member, staff):
    ids = [api(member).post("/api/v1/jobs/", RAY_JOB, format="json").json()["id"] for _ in "ab"]
    admission_cycle(now=timezone.now())  # the first is dequeued: an event without an actor
    queue = api(member).get("/api/v1/queues/root/algorithm/video/").json()
    api(member).post(f"/api/v1/jobs/{ids[0]}/cancel/")
    job = Job.objects.get(pk=ids[0])

    events = api(member).get(f"/api/v1/jobs/{job.pk}/events/").json()

    assert events == EventOut(job.events.all(), many=True).data  # DRF's own loop
    assert [e["actor"] for e in events] == ["alice", None, "alice"]
    waiting = Job.objects.select_related("owner").get(pk=ids[1])
    waiting.position = 1
    assert queue["active"] == [] and queue["backoff"] == [BackoffOut(waiting).data]
    admitted = Job.objects.select_related("owner").get(pk=ids[0])
    assert queue["admitted"][0]["job"] == admitted.pk and queue["admitted"][0]["owner"] == "alice"
