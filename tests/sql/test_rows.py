"""The shared SQL (sql/): a filter on any number of values and an update of any number of
rows, each in one statement with a parameter per column, never one per row."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from jobs.models import Job, JobEvent
from sql.rows import chunks, rows_update

from ..support.jobs import submit

pytestmark = pytest.mark.django_db

PAST_THE_LIMIT = 70_000  # PostgreSQL takes at most 65,535 parameters in a statement


def test_it_filters_on_more_values_than_a_statement_has_parameters(member):
    job = submit(member)
    wanted = [*range(10**9, 10**9 + PAST_THE_LIMIT), job.pk]
    with CaptureQueriesContext(connection) as queries:
        found = list(Job.objects.filter(pk__any=wanted).values_list("pk", flat=True))
    assert found == [job.pk]
    assert "= ANY(" in queries[0]["sql"]


def test_it_filters_on_text_and_on_a_relation(member):
    job = submit(member)
    assert list(Job.objects.filter(namespace__any=["nowhere", job.namespace])) == [job]
    assert list(Job.objects.filter(queue_id__any=[job.queue_id])) == [job]
    assert list(Job.objects.exclude(queue_id__any=[job.queue_id])) == []
    assert list(Job.objects.filter(pk__any=[])) == []


def test_it_updates_many_rows_each_its_own_values_in_one_statement(member):
    jobs = [submit(member, name=f"sweep-{i}") for i in range(3)]
    now = timezone.now().replace(microsecond=0)
    for index, job in enumerate(jobs):
        job.backoff_reason = f"reason {index}"
        job.backoff_args = {"index": index, "text": 'a "quoted", {braced} value'}
        job.next_attempt_at = now + timedelta(seconds=index) if index else None
    with CaptureQueriesContext(connection) as queries:
        assert rows_update(jobs, ["backoff_reason", "backoff_args", "next_attempt_at"]) == 3
    assert len(queries) == 1
    stored = Job.objects.order_by("pk").values_list(
        "backoff_reason", "backoff_args", "next_attempt_at"
    )
    assert list(stored) == [
        ("reason 0", {"index": 0, "text": 'a "quoted", {braced} value'}, None),
        (
            "reason 1",
            {"index": 1, "text": 'a "quoted", {braced} value'},
            now + timedelta(seconds=1),
        ),
        (
            "reason 2",
            {"index": 2, "text": 'a "quoted", {braced} value'},
            now + timedelta(seconds=2),
        ),
    ]


def test_it_updates_past_the_parameter_limit(member):
    job = submit(member)
    events = list(JobEvent.objects.filter(job=job))
    copies = [JobEvent(pk=events[0].pk, count=7, message="again")] * PAST_THE_LIMIT
    assert rows_update(copies, ["count", "message"]) == 1
    assert JobEvent.objects.get(pk=events[0].pk).count == 7


def test_it_cuts_a_sequence_in_chunks():
    assert [list(c) for c in chunks(list(range(7)), 3)] == [[0, 1, 2], [3, 4, 5], [6]]
    assert list(chunks([], 3)) == []
