"""Submit a copy: a stored job back as its submission, on the form and through JobIn."""

from __future__ import annotations

import copy

import pytest
from django.conf import settings

from jobs.document.forms import MAX_GROUPS, SubmitForm, form_data
from jobs.document.schema import job_document, job_parse
from jobs.models import Job

from ..support.jobs import PYTORCH_JOB, RAY_JOB, submit_document

pytestmark = pytest.mark.django_db

WITH_EVERYTHING = {
    **RAY_JOB,
    "runtime": "kuberay",
    "script": "import ray\nprint('hello')\n",
    "pip": ["torch==2.4.0", "pandas"],
    "env": {"MODE": "fast run", "SEED": "7"},
    "workers": [
        {"name": "small", "replicas": 1, "resources": {"cpu": "2", "memory": "2G"}},
        {"name": "wide", "replicas": 2, "max_replicas": 4, "resources": {"cpu": "1"}},
    ],
    "priority": -3,
    "run_seconds": 90,
}
DOCUMENTS = [
    RAY_JOB,
    PYTORCH_JOB,
    WITH_EVERYTHING,
    {**PYTORCH_JOB, "command": ["python", "-c", "print('a b')"]},
]


def form_for(data) -> SubmitForm:
    runtimes = [(v, label) for v, label in Job.Runtime.choices if v in settings.CLUSTER_RUNTIMES]
    return SubmitForm(data, queues=[("root/algorithm/video", "x")], runtimes=runtimes)


@pytest.mark.parametrize("document", DOCUMENTS)
def test_a_job_becomes_its_submission_again_through_the_api_and_the_form(member, document):
    job = submit_document(member, document)
    again = job_document(job)
    assert job_parse(copy.deepcopy(again)) == job_parse(copy.deepcopy(job_document(job)))
    original = job_parse({**copy.deepcopy(document), "runtime": job.runtime})
    assert job_parse(copy.deepcopy(again)) == original
    data, left_out = form_data(again)
    assert left_out == []
    assert job_parse(form_for(data).document()) == original


def test_what_the_form_cannot_hold_is_named():
    document = {
        **copy.deepcopy(RAY_JOB),
        "head": {"resources": {"cpu": "1", "metax-tech.com/gpu": "1"}},
        "workers": [{"replicas": 1, "resources": {"cpu": "1"}}] * (MAX_GROUPS + 1),
        "script": "print(1)",
        "script_filename": "train.py",
    }
    _, left_out = form_data(document)
    assert left_out == [
        "head: metax-tech.com/gpu",
        f"worker groups after the first {MAX_GROUPS}",
        "the script's file name 'train.py'",
    ]


def test_the_submit_page_opens_filled_in_from_a_job(client, member, other_member, outsider):
    job = submit_document(other_member, WITH_EVERYTHING)  # a colleague's job: members may copy it
    client.force_login(member)
    assert f'href="/jobs/new/?copy={job.pk}"' in client.get(f"/jobs/{job.pk}/").content.decode()
    page = client.get(f"/jobs/new/?copy={job.pk}").content.decode()
    assert f'A copy of <a href="/jobs/{job.pk}/">rayjob-video #{job.pk}</a>' in page
    assert 'value="rayproject/ray:2.36.1"' in page and "torch==2.4.0 pandas" in page
    assert "MODE=fast run" in page and 'value="wide"' in page
    data, _ = form_data(job_document(job))
    answer = client.post("/jobs/new/", data)
    assert answer.status_code == 302
    made = Job.objects.exclude(pk=job.pk).get()
    assert made.owner == member and job_document(made) == job_document(job)
    client.force_login(outsider)
    assert client.get(f"/jobs/new/?copy={job.pk}").status_code == 404  # not theirs to see
    assert client.get("/jobs/new/?copy=many").status_code == 400  # no job number at all
