"""Retention (jobs/engine/retention.py): finished jobs past JOB_RETENTION_DAYS are written
whole to compressed JSON lines and deleted; nothing pending or holding quota is touched,
and nothing is deleted that was not written first."""

from __future__ import annotations

import gzip
import json
from datetime import timedelta

import pytest
from django.utils import timezone

from jobs.engine.admission.cycle import admission_cycle
from jobs.engine.retention import jobs_archive
from jobs.models import AccountingDone, Hold, Job, JobEvent, State

from ..support.jobs import submit

pytestmark = pytest.mark.django_db

OLD = timedelta(days=200)


@pytest.fixture
def archive(settings, tmp_path):
    settings.JOB_RETENTION_DAYS = 180
    settings.JOB_ARCHIVE_DIR = tmp_path / "archive"
    settings.JOB_ARCHIVE_BATCH = 2
    # The accounting has summarised every day up to yesterday.
    yesterday = timezone.now().date() - timedelta(days=1)
    AccountingDone.objects.create(day=yesterday, summarised_at=timezone.now())
    return settings.JOB_ARCHIVE_DIR


def lines(files) -> list[dict]:
    return [json.loads(line) for path in files for line in gzip.open(path, "rt")]


def finished(user, state, *, ago, **changes):
    job = submit(user, **changes)
    held = Job.objects.filter(pk=job.pk)
    held.update(state=State.ADMITTED, dequeued_at=timezone.now() - ago - timedelta(hours=1))
    held.update(state=state, finished_at=timezone.now() - ago)
    return job


def test_finished_jobs_past_retention_are_written_whole_then_deleted(member, archive):
    old = [finished(member, state, ago=OLD, name=f"old-{state}")
           for state in (State.SUCCEEDED, State.FAILED, State.CANCELLED)]  # fmt: skip
    recent = finished(member, State.SUCCEEDED, ago=timedelta(days=10), name="recent")
    waiting = submit(member, name="waiting")
    Job.objects.filter(pk=waiting.pk).update(enqueued_at=timezone.now() - OLD)
    events = {job.pk: JobEvent.objects.filter(job=job).count() for job in old}

    archived = jobs_archive()

    assert archived.jobs == 3 and len(archived.files) == 2  # two to a file
    written = lines(archived.files)
    assert [line["job"]["id"] for line in written] == [job.pk for job in old]
    assert [line["job"]["name"] for line in written] == ["old-succeeded", "old-failed",
                                                         "old-cancelled"]  # fmt: skip
    assert {line["job"]["id"]: len(line["events"]) for line in written} == events
    assert written[0]["events"][0]["reason"] == "Enqueued"
    assert written[0]["holds"][0]["path"] == "root/algorithm/video"  # its span of quota
    assert not Job.objects.filter(pk__in=[job.pk for job in old]).exists()
    assert not JobEvent.objects.filter(job_id__in=[job.pk for job in old]).exists()
    assert not Hold.objects.filter(job_id__in=[job.pk for job in old]).exists()
    assert set(Job.objects.values_list("name", flat=True)) == {recent.name, "waiting"}
    assert jobs_archive().jobs == 0  # nothing left to do
    assert not list(archive.glob("*.partial"))


def test_jobs_holding_quota_are_never_archived_however_old(member, archive):
    running = submit(member, name="running")
    admission_cycle()
    Job.objects.filter(pk=running.pk).update(
        enqueued_at=timezone.now() - OLD, dequeued_at=timezone.now() - OLD,
        finished_at=timezone.now() - OLD,  # a stale stamp must not fool it
    )  # fmt: skip
    assert Job.objects.get(pk=running.pk).state == State.ADMITTED
    assert jobs_archive().jobs == 0
    assert Job.objects.filter(pk=running.pk).exists()


def test_a_file_that_cannot_be_written_deletes_nothing(member, archive, settings, tmp_path):
    old = finished(member, State.SUCCEEDED, ago=OLD)
    blocked = tmp_path / "not-a-directory"
    blocked.write_text("a file where the archive's directory should be")
    settings.JOB_ARCHIVE_DIR = blocked / "archive"
    with pytest.raises(OSError):
        jobs_archive()
    assert Job.objects.filter(pk=old.pk).exists()
    assert JobEvent.objects.filter(job_id=old.pk).exists()


def test_jobs_the_accounting_has_not_summarised_stay(member, archive):
    kept = finished(member, State.SUCCEEDED, ago=OLD)
    AccountingDone.objects.all().delete()
    AccountingDone.objects.create(
        day=(timezone.now() - OLD - timedelta(days=1)).date(), summarised_at=timezone.now()
    )
    assert jobs_archive().jobs == 0  # it finished after the last day summarised
    assert Job.objects.filter(pk=kept.pk).exists()


def test_retention_off_keeps_every_job(member, archive, settings):
    settings.JOB_RETENTION_DAYS = 0
    old = finished(member, State.SUCCEEDED, ago=timedelta(days=3000))
    assert jobs_archive().jobs == 0
    assert Job.objects.filter(pk=old.pk).exists()


def test_the_end_of_a_jobs_log_kept_as_it_ended_is_archived_with_it(member, archive):
    job = finished(member, State.FAILED, ago=OLD, name="old-failed")
    kept_at = timezone.now() - OLD
    Job.objects.filter(pk=job.pk).update(
        log_tail="loss 0.4\nTraceback: boom\n", log_tail_pod="old-failed-head-0",
        log_tail_at=kept_at, log_tail_truncated=True, exit_code=2,
    )  # fmt: skip

    [line] = lines(jobs_archive().files)

    assert line["job"]["log_tail"] == "loss 0.4\nTraceback: boom\n"
    assert line["job"]["log_tail_pod"] == "old-failed-head-0"
    assert line["job"]["log_tail_truncated"] is True and line["job"]["exit_code"] == 2
    assert line["job"]["log_tail_at"] is not None and line["job"]["log_tail_missing"] == ""
