"""Backoff reasons, event messages and the waiting sentence in the reader's language and
zone: the admission cycle stores each as a code with its numbers beside its English text,
and a page renders it for the person reading (their chosen language, else the browser's
Accept-Language; their zone)."""

from __future__ import annotations

import html
from datetime import UTC, timedelta

import pytest
from django.db import connection
from django.urls import reverse
from django.utils import timezone

from access.models import Preference
from jobs.engine.admission.cycle import admission_cycle
from jobs.models import JobEvent
from jobs.services import job_cancel, job_set_priority
from queues import phrases

from ..support.catalogues import compile_catalogues
from ..support.jobs import refresh, submit
from ..support.pages import login

pytestmark = pytest.mark.django_db

QUOTA_REASON = "root/algorithm/video 的配额不足：cpu 请求 12，空闲 2（已用 12，上限 14）"


@pytest.fixture(autouse=True)
def _catalogues():
    compile_catalogues()


@pytest.fixture
def backed_off(member):
    """The seed's scenario: the first job is dequeued, the second backs off for quota."""
    now = timezone.now().replace(microsecond=0)
    submit(member, now)
    second = submit(member, now + timedelta(seconds=1))
    admission_cycle(now=now + timedelta(seconds=2))
    return refresh(second)


def test_a_backoff_is_stored_with_its_code_and_numbers_beside_its_english_text(backed_off):
    assert backed_off.backoff_code == phrases.QUOTA_SHORT
    assert backed_off.backoff_args["requested"] == {"resource": "cpu", "units": 12000}
    assert backed_off.backoff_reason == (
        "Insufficient quota in root/algorithm/video: cpu requested 12, free 2 (used 12 of max 14)"
    )
    event = backed_off.events.get(reason=JobEvent.Reason.BACKOFF)
    assert event.code == phrases.NEXT_TRY and event.args["reason"]["code"] == phrases.QUOTA_SHORT
    utc = timezone.localtime(backed_off.next_attempt_at, UTC)
    assert event.message == f"{backed_off.backoff_reason}; next try at {utc:%H:%M:%S}"
    dequeued = backed_off.queue.jobs.get(state="admitted").events.get(reason="Dequeued")
    assert dequeued.code == phrases.DEQUEUED
    assert dequeued.message == f"Dequeued from {backed_off.queue.name} after waiting 2.0s"


def test_the_job_page_says_the_reason_in_chinese_with_the_next_try_in_the_readers_zone(
    client, member, backed_off
):
    Preference.objects.create(user=member, language="zh-hans", time_zone="Asia/Shanghai")
    page = html.unescape(
        login(client, member).get(reverse("job-detail", args=[backed_off.pk])).content.decode()
    )
    shanghai = timezone.localtime(backed_off.next_attempt_at, timezone.get_fixed_timezone(480))
    # The event, as the cycle wrote it.
    assert f"{QUOTA_REASON}；下次尝试于 {shanghai:%H:%M:%S}" in page
    # The waiting sentence, with the same numbers.
    assert f"该作业退避至 {shanghai:%H:%M:%S}（有容量释放时会提前），原因：{QUOTA_REASON}" in page
    assert "Insufficient quota" not in page


def test_the_queue_page_tells_the_job_behind_in_the_browsers_language(
    client, member, other_member, backed_off
):
    third = submit(other_member, name="third")
    page = html.unescape(
        login(client, member)
        .get(
            reverse("queue-detail", args=["root-algorithm-video"]),
            HTTP_ACCEPT_LANGUAGE="zh-CN,zh;q=0.9",
        )
        .content.decode()
    )
    assert third.pk and QUOTA_REASON in page
    assert f"前面有 1 个作业；前面第一个作业 #{backed_off.pk} 退避至" in page
    assert "本作业请求 cpu 12" in page


def test_an_event_written_before_codes_keeps_its_text_in_chinese(client, member, backed_off):
    JobEvent.objects.create(
        job=backed_off, reason="Backoff", message="Written before codes: cpu short",
        created_at=timezone.now(),
    )  # fmt: skip
    Preference.objects.create(user=member, language="zh-hans")
    page = login(client, member).get(reverse("job-detail", args=[backed_off.pk])).content.decode()
    assert "Written before codes: cpu short" in page


def test_what_people_do_to_a_job_is_said_in_the_readers_language(
    client, member, manager, backed_off
):
    job_set_priority(user=manager, job=backed_off, priority=5)
    job_cancel(user=member, job=backed_off)
    changed = backed_off.events.get(reason=JobEvent.Reason.PRIORITY_CHANGED)
    cancelled = backed_off.events.get(reason=JobEvent.Reason.CANCELLED)
    assert (changed.code, changed.message) == (
        phrases.PRIORITY_CHANGED,
        f"{manager.username} changed priority from 0 to 5",
    )
    assert cancelled.message == f"Cancelled by {member.username} while backoff"
    page = login(client, member).get(
        reverse("job-detail", args=[backed_off.pk]), HTTP_ACCEPT_LANGUAGE="zh-CN"
    )
    text = html.unescape(page.content.decode())
    assert f"{manager.username} 将优先级从 0 改为 5" in text
    assert f"在 backoff 状态下被 {member.username} 取消" in text


def test_a_writer_that_knows_no_codes_still_inserts_events_and_jobs(backed_off):
    """During a deploy, processes of the version before go on writing without the columns."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {JobEvent._meta.db_table} (job_id, created_at, type, reason, message,"
            " involved) VALUES (%s, now(), 'Normal', 'Old', 'written by the version before', '')"
            " RETURNING code, args",
            [backed_off.pk],
        )
        assert cursor.fetchone() == ("", "{}")
