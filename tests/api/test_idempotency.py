"""The Idempotency-Key of POST /api/v1/jobs/ and /jobs/batch/: a retried submission answers
the jobs the first one queued (200), for IDEMPOTENCY_KEY_HOURS, per person whichever token
they use; the same key with another body answers 409; a refused request keeps no key."""

from __future__ import annotations

import copy
import threading
from datetime import UTC, timedelta

import pytest
from django.conf import settings as django_settings
from django.db import connection, transaction
from django.utils import timezone
from rest_framework.test import APIClient

from access.services import full_token
from jobs.document.idempotency import IdempotencyKey, request_digest
from jobs.document.schema import job_parse
from jobs.engine.task_names import SUBMISSION_KEYS_PRUNE_TASK
from jobs.models import Job, JobEvent, SubmissionKey
from jobs.services import AlreadySubmitted, job_submit, submission_keys_prune
from portal.celery import app

from ..support.jobs import PYTORCH_JOB, RAY_JOB
from ..support.polling import wait_for

JOBS = "/api/v1/jobs/"
BATCH = "/api/v1/jobs/batch/"


def post(client, path, body, key="run-42/attempt-1"):
    return client.post(path, body, format="json", HTTP_IDEMPOTENCY_KEY=key)


def sweep(count: int) -> dict:
    return {"jobs": [{**copy.deepcopy(RAY_JOB), "name": f"sweep-{i}"} for i in range(count)]}


@pytest.mark.django_db
def test_it_answers_a_retried_submit_with_the_first_job(api, member):
    client = api(member)

    first = post(client, JOBS, RAY_JOB)
    again = post(client, JOBS, RAY_JOB)

    assert first.status_code == 201, first.json()
    assert "Idempotent-Replayed" not in first.headers
    assert again.status_code == 200, again.json()
    assert again.headers["Idempotent-Replayed"] == "true"
    assert again.json() == first.json()
    assert list(Job.objects.values_list("id", flat=True)) == [first.json()["id"]]
    assert JobEvent.objects.count() == 1
    key = SubmissionKey.objects.get()
    assert (key.owner, key.key, key.job_ids) == (member, "run-42/attempt-1", [first.json()["id"]])


@pytest.mark.django_db
def test_the_replay_says_what_the_job_is_now(api, member):
    client = api(member)
    job_id = post(client, JOBS, RAY_JOB).json()["id"]
    client.post(f"{JOBS}{job_id}/cancel/")

    again = post(client, JOBS, RAY_JOB)

    assert again.status_code == 200
    assert (again.json()["id"], again.json()["state"]) == (job_id, "cancelled")


@pytest.mark.django_db
def test_the_same_document_with_its_fields_in_another_order_is_the_same_request(api, member):
    client = api(member)
    first = post(client, JOBS, RAY_JOB)

    again = post(client, JOBS, dict(reversed(list(RAY_JOB.items()))))

    assert again.status_code == 200 and again.json()["id"] == first.json()["id"]


@pytest.mark.django_db
def test_it_answers_a_retried_batch_with_the_first_jobs_in_order(api, member):
    client = api(member)

    first = post(client, BATCH, sweep(3))
    again = post(client, BATCH, sweep(3))

    assert first.status_code == 201, first.json()
    assert again.status_code == 200, again.json()
    assert again.headers["Idempotent-Replayed"] == "true"
    assert again.json() == first.json()
    ids = [job["id"] for job in first.json()["jobs"]]
    assert sorted(Job.objects.values_list("id", flat=True)) == sorted(ids)
    assert SubmissionKey.objects.get().job_ids == ids


@pytest.mark.django_db
def test_the_same_key_with_another_body_answers_409_naming_it(api, member):
    client = api(member)
    post(client, JOBS, RAY_JOB)
    used_at = SubmissionKey.objects.get().created_at

    other = post(client, JOBS, {**RAY_JOB, "name": "another"})

    assert other.status_code == 409
    at = used_at.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
    assert other.json() == {
        "detail": f"Idempotency-Key 'run-42/attempt-1' was used for another request at {at}; "
        "use a new key"
    }
    assert Job.objects.count() == 1


@pytest.mark.django_db
def test_a_key_used_for_a_job_alone_answers_409_on_the_batch_endpoint(api, member):
    client = api(member)
    post(client, JOBS, RAY_JOB)

    batch = post(client, BATCH, {"jobs": [RAY_JOB]})

    assert batch.status_code == 409
    assert "was used for another request at" in batch.json()["detail"]
    assert Job.objects.count() == 1


@pytest.mark.django_db
def test_another_persons_same_key_is_their_own(api, member, other_member):
    mine = post(api(member), JOBS, RAY_JOB)

    theirs = post(api(other_member), JOBS, RAY_JOB)

    assert theirs.status_code == 201
    assert theirs.json()["id"] != mine.json()["id"]
    assert Job.objects.filter(owner=other_member).count() == 1


@pytest.mark.django_db
def test_one_persons_key_is_the_same_from_each_of_their_tokens(member):
    laptop, pipeline = APIClient(), APIClient()
    laptop.credentials(HTTP_AUTHORIZATION=f"Token {full_token(member, name='laptop')}")
    pipeline.credentials(HTTP_AUTHORIZATION=f"Token {full_token(member, name='pipeline')}")

    first = post(laptop, JOBS, RAY_JOB)
    again = post(pipeline, JOBS, RAY_JOB)

    assert again.status_code == 200 and again.json()["id"] == first.json()["id"]
    assert Job.objects.count() == 1


@pytest.mark.django_db
def test_a_key_older_than_the_window_is_a_new_request(api, member, settings):
    settings.IDEMPOTENCY_KEY_HOURS = 24
    client = api(member)
    first = post(client, JOBS, RAY_JOB).json()["id"]
    SubmissionKey.objects.update(created_at=timezone.now() - timedelta(hours=24, seconds=1))

    again = post(client, JOBS, {**RAY_JOB, "name": "other-body-too"})

    assert again.status_code == 201, again.json()
    assert again.json()["id"] != first
    assert SubmissionKey.objects.get().job_ids == [again.json()["id"]]  # replaced


@pytest.mark.django_db
def test_a_key_within_the_window_still_answers(api, member, settings):
    settings.IDEMPOTENCY_KEY_HOURS = 24
    client = api(member)
    first = post(client, JOBS, RAY_JOB).json()["id"]
    SubmissionKey.objects.update(created_at=timezone.now() - timedelta(hours=23, minutes=59))

    again = post(client, JOBS, RAY_JOB)

    assert again.status_code == 200 and again.json()["id"] == first


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("path", "refused", "corrected"),
    [
        (JOBS, {**RAY_JOB, "priority": 5}, RAY_JOB),  # a member may not jump the queue
        (BATCH, {"jobs": [{**RAY_JOB, "queue": "root/infrastructure/devops"}]}, sweep(1)),
    ],
)
def test_a_refused_request_keeps_no_key_and_its_correction_may_reuse_it(
    api, member, path, refused, corrected
):
    client = api(member)

    assert post(client, path, refused).status_code == 400
    assert not SubmissionKey.objects.exists()

    accepted = post(client, path, corrected)

    assert accepted.status_code == 201, accepted.json()
    assert SubmissionKey.objects.count() == 1


@pytest.mark.django_db
@pytest.mark.parametrize("key", ["", "two words", "k" * 256, "clé", "tab\there"])
def test_a_bad_key_answers_400_naming_the_header(api, member, key):
    response = post(api(member), JOBS, RAY_JOB, key=key)

    assert response.status_code == 400
    assert response.json() == {
        "Idempotency-Key": ["must be 1 to 255 visible ASCII characters (! to ~, no space)"]
    }
    assert not Job.objects.exists() and not SubmissionKey.objects.exists()


@pytest.mark.django_db
def test_a_key_of_255_characters_is_taken(api, member):
    assert post(api(member), BATCH, sweep(1), key="~" * 255).status_code == 201


@pytest.mark.django_db
def test_without_a_key_each_submit_queues_a_job(api, member):
    client = api(member)

    for _ in range(2):
        assert client.post(JOBS, RAY_JOB, format="json").status_code == 201

    assert Job.objects.count() == 2 and not SubmissionKey.objects.exists()


@pytest.mark.django_db
def test_beat_prunes_only_keys_older_than_the_window(api, member, settings):
    settings.IDEMPOTENCY_KEY_HOURS = 24
    client = api(member)
    post(client, JOBS, RAY_JOB, key="old")
    post(client, JOBS, PYTORCH_JOB, key="new")
    now = timezone.now()
    SubmissionKey.objects.filter(key="old").update(created_at=now - timedelta(hours=25))
    SubmissionKey.objects.filter(key="new").update(created_at=now - timedelta(hours=23))

    assert submission_keys_prune(now=now) == 1

    assert list(SubmissionKey.objects.values_list("key", flat=True)) == ["new"]
    assert Job.objects.count() == 2  # the jobs stay


def test_beat_prunes_them_hourly_through_the_task(api, member, celery_worker):
    entry = django_settings.CELERY_BEAT_SCHEDULE["submission-keys-prune"]
    assert entry["task"] == SUBMISSION_KEYS_PRUNE_TASK
    assert entry["schedule"] == 3600 and entry["options"]["expires"] < 3600
    post(api(member), JOBS, RAY_JOB)
    SubmissionKey.objects.update(created_at=timezone.now() - timedelta(days=2))

    app.send_task(SUBMISSION_KEYS_PRUNE_TASK)

    wait_for(lambda: not SubmissionKey.objects.exists(), what="the old key deleted")


def waiting_on_a_lock(pid: int) -> bool:
    """Whether the backend ``pid`` waits for a lock (pg_locks is read live, not snapshot)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_locks WHERE pid = %s AND NOT granted", [pid])
        return cursor.fetchone()[0] > 0


@pytest.mark.django_db(transaction=True)
def test_two_identical_submits_at_once_queue_one_job(member):
    """The second request claims the key while the first has stored its job but not yet
    committed: it waits on the key's unique index, then answers the first's job."""
    key = IdempotencyKey(key="twin", digest=request_digest(endpoint="jobs", body=RAY_JOB))
    draft = job_parse(copy.deepcopy(RAY_JOB))
    pid: list[int] = []
    outcome: list[BaseException | Job] = []

    def twin() -> None:
        try:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_backend_pid()")
                pid.append(cursor.fetchone()[0])
            outcome.append(job_submit(user=member, draft=draft, key=key))
        except BaseException as error:  # the test reads it
            outcome.append(error)
        finally:
            connection.close()

    with transaction.atomic():  # the first request, held open before its commit
        first = job_submit(user=member, draft=draft, key=key)
        thread = threading.Thread(target=twin)
        thread.start()
        wait_for(lambda: pid and waiting_on_a_lock(pid[0]), what="the twin waits on the key")
    thread.join(timeout=30)

    assert not thread.is_alive()
    (answer,) = outcome
    assert isinstance(answer, AlreadySubmitted), answer
    assert [job.pk for job in answer.jobs] == [first.pk]
    assert list(Job.objects.values_list("id", flat=True)) == [first.pk]
    assert SubmissionKey.objects.get().job_ids == [first.pk]
