"""A job's events on its page (selectors.event_timeline): scheduling failures grouped by
attempt and cycle, identical cycles in a row collapsed, and a page at a time."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone

from jobs.models import JobEvent
from jobs.reads.selectors import EVENT_PAGE, Cycles, event_timeline, timeline_page

from ..support.jobs import RAY_JOB, submit_document

START = datetime(2026, 11, 24, 12, 0, tzinfo=UTC)
GANG = "rayjob-{pod} in gang failed to be scheduled in cycle {cycle}: {why}"
FULL = "0/4 nodes are available: 4 Insufficient cpu."


def event(seconds: float, reason: str, *, cycle=None, pod="head", why=FULL) -> JobEvent:
    message = GANG.format(pod=pod, cycle=cycle, why=why) if cycle else reason
    involved = f"pod/rayjob-{pod}" if cycle else ""
    return JobEvent(
        created_at=START + timedelta(seconds=seconds), reason=reason, message=message,
        cycle=cycle, involved=involved, type="Warning" if cycle else "Normal",
    )  # fmt: skip


def failures(first: int, last: int, at: float, *, why=FULL) -> list[JobEvent]:
    """Cycles first..last, five seconds apart from ``at``, each for the head and a worker."""
    return [
        event(at + 5 * (c - first), "GangFailedScheduling", cycle=c, pod=pod, why=why)
        for c in range(first, last + 1)
        for pod in ("head", "worker-0")
    ]


def test_identical_cycles_in_a_row_collapse_into_one_row():
    rows = event_timeline(
        [event(0, "Enqueued"), event(1, "Dequeued"), *failures(1, 2, 2),
         *failures(3, 60, 12, why="0/4 nodes are available: 4 Insufficient memory.")]
    )  # fmt: skip
    assert [r.reason for r in rows[:2]] == ["Enqueued", "Dequeued"]
    first, second = rows[2:]
    assert (first.first, first.last, first.times, first.label) == (
        1,
        2,
        2,
        "Scheduling cycles 1 to 2, 2 times",
    )
    assert second.label == "Scheduling cycles 3 to 60, 58 times"
    # The row quotes the last cycle: its events, one per pod.
    assert [e.cycle for e in second.events] == [60, 60] and "memory" in second.events[0].message


def test_a_new_attempt_starts_new_rows_even_for_the_same_cycle_numbers():
    rows = event_timeline(
        [event(0, "Dequeued"), *failures(1, 3, 1), event(300, "StartTimeout"),
         event(310, "Dequeued"), *failures(1, 2, 311)]
    )  # fmt: skip
    cycles = [r for r in rows if isinstance(r, Cycles)]
    assert [(c.attempt, c.first, c.last) for c in cycles] == [(1, 1, 3), (2, 1, 2)]
    assert rows[-1].created_at == START + timedelta(seconds=311 + 5)
    assert [getattr(r, "reason", None) for r in rows] == [
        "Dequeued", None, "StartTimeout", "Dequeued", None,
    ]  # fmt: skip


def test_a_cycle_that_said_something_else_breaks_the_row():
    rows = event_timeline(
        [*failures(1, 2, 0), *failures(3, 3, 10, why="no nodes"), *failures(4, 5, 15)]
    )
    assert [(r.first, r.last) for r in rows] == [(1, 2), (3, 3), (4, 5)]


def test_the_page_shows_the_newest_rows_unless_asked_for_another():
    timeline = list(range(2 * EVENT_PAGE + 3))
    rows, page, pages = timeline_page(timeline, None)
    assert (page, pages, rows) == (3, 3, timeline[-3:])
    assert timeline_page(timeline, 1)[0] == timeline[:EVENT_PAGE]
    assert timeline_page(timeline, 99)[1] == 3 and timeline_page(timeline, -4)[1] == 1
    assert timeline_page([], None) == ([], 1, 1)


@pytest.mark.django_db
def test_thousands_of_cycles_keep_the_page_small(client, member):
    job = submit_document(member, RAY_JOB)
    JobEvent.objects.bulk_create(
        [*(JobEvent(job=job, **vars_of(e)) for e in failures(1, 2000, 10))]
    )
    client.force_login(member)
    page = client.get(f"/jobs/{job.pk}/").content.decode()
    assert "Scheduling cycles 1 to 2000, 2000 times" in page
    assert page.count('<tr class="event warning">') == 2  # the last cycle's two pods
    assert client.get(f"/jobs/{job.pk}/?events=x").status_code == 400


@pytest.mark.django_db
def test_the_api_pages_the_events_with_a_link_to_the_next(api, member):
    job = submit_document(member, RAY_JOB)
    JobEvent.objects.bulk_create([JobEvent(job=job, **vars_of(e)) for e in failures(1, 300, 10)])
    answer = api(member).get(f"/api/v1/jobs/{job.pk}/events/")
    assert len(answer.json()) == 500 and answer.json()[0]["reason"] == "Enqueued"
    assert answer["Link"].endswith('/events/?offset=500&limit=500>; rel="next"')
    rest = api(member).get(f"/api/v1/jobs/{job.pk}/events/?offset=500&limit=500")
    assert len(rest.json()) == 101 and "Link" not in rest
    assert api(member).get(f"/api/v1/jobs/{job.pk}/events/?limit=ten").status_code == 400


def vars_of(e: JobEvent) -> dict:
    """The event's fields, moved to after the job's Enqueued event."""
    names = ("created_at", "type", "reason", "message", "cycle", "involved")
    fields = {name: getattr(e, name) for name in names}
    return fields | {"created_at": timezone.now() + (e.created_at - START)}
