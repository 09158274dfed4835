"""The job document's fields are declared once (``jobs.document.shape.FIELDS``): every place
a job's fields go through takes every row, so a field is added by a row, a column of the
model, and the documents below."""

from __future__ import annotations

import copy

import pytest
from django.conf import settings

from jobs.document.forms import SubmitForm, form_data
from jobs.document.schema import JobIn, job_document, job_parse
from jobs.document.shape import FIELDS, FormInput, NoInput
from jobs.engine.objects import job_spec
from jobs.models import Job, kind_shape
from jobs.web.answers.jobs import JobOut, job_out
from queues.services import tree_apply

from ..support.jobs import submit_document
from ..support.trees import pooled_tree_document

pytestmark = pytest.mark.django_db

# Every field of a job given something other than what the API reads without it, as
# job_document gives it back. Between them the two documents hold every row.
RAY = {
    "queue": "root/algorithm/video",
    "kind": "ray",
    "runtime": "kuberay",
    "name": "every-field",
    "image": "rayproject/ray:2.36.1",
    "entrypoint": "python main.py --every-field",
    "script": "print('every field')\n",
    "script_filename": "train.py",
    "head": {"resources": {"cpu": "1", "memory": "1G"}},
    "workers": [{"name": "small", "replicas": 1, "max_replicas": 2, "resources": {"cpu": "1"}}],
    "priority": -3,
    "run_seconds": 90.5,
    "pip": ["torch==2.4.0"],
    "env": {"MODE": "fast run"},
    "time_limit": "1h30m",
}
PYTORCH = {
    "queue": "root/algorithm/text",
    "kind": "pytorch",
    "runtime": "kubeflow",
    "name": "every-field-ddp",
    "image": "pytorch/pytorch:2.4.0-cuda12.1-cudnn9-runtime",
    "command": ["torchrun", "--nproc-per-node", "1", "train.py"],
    "master": {"resources": {"cpu": "1", "memory": "1Gi"}},
    "workers": [{"name": "worker", "replicas": 2, "resources": {"cpu": "1"}}],
    "priority": -1,
    "run_seconds": 30,
    "claims": [{"claim": "datasets", "path": "/data", "read_only": True}],
    "shm": "8Gi",
    "secret_env": {"HF_TOKEN": "hf-credentials/token"},
    "pools": ["a100", "h100"],
    "retries": 2,
}
# What Caldera adds to a job: the columns no field of the document is kept in.
CALDERA_S_OWN = {
    "id",
    "manifest",  # the objects a team sent (jobs.document.native), not a document's field
    "object_name",
    "queue",
    "namespace",
    "owner",
    "token",
    "request",
    "state",
    "created_at",
    "enqueued_at",
    "dequeued_at",
    "started_at",
    "finished_at",
    "backoff_reason",
    "backoff_code",
    "backoff_args",
    "next_attempt_at",
    "backoff_count",
    "last_tried_at",
    "preemption_count",
    "start_timeouts",
    "start_clock_at",
    "leaving_since",
    "ticket",
    "pool",  # the node pool the admission cycle placed it in
    "held_at",  # held by a person (?held=true at submit, or POST /jobs/{id}/hold/)
    "held_by",
    "attempt",  # its attempt, and the failed ones before it (jobs.engine.lifecycle)
    "attempts",
    "ends_as",
    # The end of its log kept as it ended, its exit code (jobs.engine.log_tails), and a
    # RayJob's RayCluster, whose head Service serves its dashboard.
    "log_tail",
    "log_tail_pod",
    "log_tail_at",
    "log_tail_truncated",
    "log_tail_missing",
    "exit_code",
    "ray_cluster",
}


def test_the_documents_here_hold_every_field():
    assert set(RAY) | set(PYTORCH) == {field.name for field in FIELDS}


def test_every_column_of_a_job_is_a_fields_or_caldera_s_own():
    kept = {field.column for field in FIELDS if field.column}
    columns = {column.name for column in Job._meta.concrete_fields}

    assert columns - CALDERA_S_OWN == kept
    assert not kept & CALDERA_S_OWN


def test_the_api_declares_every_field_in_order():
    assert list(JobIn().fields) == [field.name for field in FIELDS]
    answered = list(JobOut().fields)
    assert answered[: len(FIELDS) - len(JobOut.UNANSWERED)] == [
        field.name for field in FIELDS if field.name not in JobOut.UNANSWERED
    ]


@pytest.mark.parametrize("document", [RAY, PYTORCH], ids=["ray", "pytorch"])
def test_every_field_goes_through_every_place(member, document):
    if "pools" in document:  # a tree that declares them
        tree_apply(document=pooled_tree_document())
    shape = kind_shape(document["kind"])
    own = [f for f in FIELDS if not f.of_kind or getattr(shape, f.of_kind) == f.name]
    draft = job_parse(copy.deepcopy(document))

    job = Job.objects.get(pk=submit_document(member, document).pk)

    # The draft and the job it becomes: every field, kept in its column.
    for field in own:
        if field.column:
            assert draft.columns[field.column] == getattr(job, field.column), field.name
    assert job.queue.node.path == draft.queue == document["queue"]
    # Given back as it was given, and answered by the API but for the script.
    assert job_document(job) == document
    answer = job_out(job, None)
    for field in own:
        if field.name not in JobOut.UNANSWERED:
            assert field.name in answer, field.name
    # The cluster's description takes what the table says it takes.
    spec = job_spec(job)
    for field in own:
        if field.spec is not None and field.column:
            assert getattr(spec, field.name) == field.spec(getattr(job, field.column))
    assert (spec.name, spec.image, spec.priority) == (job.name, job.image, job.priority)
    # The submit page: an input for every field it asks for, filled from the job, and the
    # same job again from its values, but for what it cannot hold (and says so).
    runtimes = [(v, label) for v, label in Job.Runtime.choices if v in settings.CLUSTER_RUNTIMES]
    data, left_out = form_data(job_document(job))
    form = SubmitForm(data, queues=[(document["queue"], "x")], runtimes=runtimes)
    held = copy.deepcopy(document)
    for field in own:
        if isinstance(field.form, FormInput):
            assert form.inputs[field.name].value == data[field.name], field.name
        if isinstance(field.form, NoInput) and field.name in document:
            assert f"{field.form.words} {document[field.name]!r}" in left_out
            del held[field.name]
    assert job_parse(form.document()) == job_parse(held)
