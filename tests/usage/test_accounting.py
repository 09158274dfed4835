"""The accounting's figures (jobs/usage/accounting.py) against sums added up here from the
raw spans and jobs: held resource-seconds (a span crossing midnight, an open span, a job
preempted and readmitted), jobs by final state, waits and preemptions; the daily summary
beat writes answers the same as the live computation, and writing it twice changes nothing."""

from __future__ import annotations

import threading
from datetime import UTC, date, datetime

import pytest
from django.conf import settings as django_settings
from django.db import connection

from audit.models import AuditEntry
from jobs.engine.task_names import ACCOUNTING_TASK
from jobs.models import (
    WAIT_BOUNDS,
    AccountingDay,
    AccountingDone,
    AccountingMonth,
    Hold,
    Job,
    State,
)
from jobs.usage.accounting import (
    Figures,
    Visibility,
    accounting_report,
    accounting_summarise,
    day_summarise,
    visibility_for,
)
from portal.celery import app
from queues.services import tree_apply

from ..support.ledger import (
    NOW,
    at,
    expected_held,
    expected_jobs,
    expected_waits,
    write_ledger,
)
from ..support.polling import wait_for
from ..support.trees import seed_tree_document

EVERYTHING = Visibility(everything=True)
OCT_1, OCT_3 = date(2026, 10, 1), date(2026, 10, 3)


@pytest.fixture
def ledger(db, member, intern, outsider):
    return write_ledger(member=member, intern=intern, outsider=outsider)


def report(
    group="person",
    every="day",
    visibility=EVERYTHING,
    since=OCT_1,
    until=OCT_3,
    within=None,
    now=NOW,
):
    return accounting_report(
        since=since,
        until=until,
        group=group,
        every=every,
        visibility=visibility,
        within=within,
        now=now,
    )


def by_key(rows) -> dict:
    return {(row.start, row.group): row.figures for row in rows}


def test_it_adds_up_held_resource_seconds_by_day_and_person(ledger):
    figures = by_key(report().rows)
    expected = expected_held(
        since=datetime(2026, 10, 1, tzinfo=UTC), until=NOW, key=lambda h: h.job.owner.username
    )
    assert {key for key, f in figures.items() if f.held} == set(expected)
    for key, held in expected.items():
        assert figures[key].held == pytest.approx(held)
    # The span from 22:00 to 02:00: two hours on each side of midnight.
    crossing = ledger["crossing"]
    assert figures[(OCT_1, "alice")].held["cpu"] == crossing.request["cpu"] * 7200
    assert figures[(date(2026, 10, 2), "alice")].held["cpu"] == crossing.request["cpu"] * 7200
    # The open span holds from 09:00 on the 2nd to NOW, 06:00 on the 3rd.
    holding = ledger["holding"]
    assert figures[(OCT_3, "oscar")].held["nvidia.com/gpu"] == 3 * 6 * 3600
    assert holding.request["nvidia.com/gpu"] == 3
    # Preempted and readmitted: 10:00:30 to 12:05, then 15:00 to 18:00.
    preempted = ledger["preempted"]
    assert figures[(OCT_1, "ian")].held["cpu"] == preempted.request["cpu"] * (7470 + 10800)


def test_it_counts_jobs_by_final_state_waits_and_preemptions(ledger):
    figures = by_key(report().rows)
    jobs = expected_jobs(since=OCT_1, until=OCT_3, key=lambda job: job.owner.username)
    for (day, person), states in jobs.items():
        assert figures[(day, person)].states() == {
            State.SUCCEEDED: states.get(State.SUCCEEDED, 0),
            State.FAILED: states.get(State.FAILED, 0),
            State.CANCELLED: states.get(State.CANCELLED, 0),
        }
    assert figures[(OCT_1, "alice")].cancelled == 1
    assert figures[(date(2026, 10, 2), "alice")].succeeded == 1
    assert figures[(OCT_1, "ian")].failed == 1
    for (day, person), waits in expected_waits(key=lambda job: job.owner.username).items():
        cell = figures[(day, person)]
        assert cell.admissions == len(waits)
        assert cell.wait_seconds == pytest.approx(sum(waits))
    # The readmission is no second wait: ian's one wait is his first admission's.
    assert figures[(OCT_1, "ian")].admissions == 1
    assert figures[(OCT_1, "ian")].wait_mean == 30
    assert figures[(OCT_1, "ian")].wait_p90 == 60  # 30 s lies in the bucket [30, 60)
    assert figures[(OCT_1, "alice")].wait_p90 == 86400  # 13 hours: [12 h, 1 day)
    assert figures[(OCT_1, "ian")].preemptions == 1
    assert sum(f.preemptions for f in figures.values()) == 1


def test_the_p90_is_read_from_the_histogram():
    waits = [0] * (len(WAIT_BOUNDS) + 1)
    waits[0], waits[3] = 89, 11  # 89 under a second, 11 from 5 to 10 seconds
    assert Figures(waits=waits).wait_p90 == 10
    waits[0], waits[3] = 90, 10
    assert Figures(waits=waits).wait_p90 == 1
    waits = [0] * len(waits)
    waits[-1] = 1  # a week or more
    assert Figures(waits=waits).wait_p90 == WAIT_BOUNDS[-1]
    assert Figures().wait_p90 is None and Figures().wait_mean is None


def test_a_month_adds_up_its_days_and_its_node_s_min_and_max(ledger):
    daily = report(group="leaf", every="day").rows
    [video] = [
        row
        for row in report(group="leaf", every="month", until=date(2026, 10, 31)).rows
        if row.group == "root/algorithm/video"
    ]
    assert video.start == OCT_1
    days = [row.figures for row in daily if row.group == "root/algorithm/video"]
    assert video.figures.held == pytest.approx(
        {name: sum(day.held.get(name, 0) for day in days) for name in video.figures.held}
    )
    assert video.figures.succeeded == 1 and video.figures.cancelled == 1
    # The seed's min of 12 cpu and max of 14 over the month up to NOW (2 days, 6 hours).
    seconds = (NOW - at(1, 0)).total_seconds()
    assert video.min["cpu"] == 12_000 * seconds
    assert video.max["cpu"] == 14_000 * seconds


def test_min_and_max_follow_the_audit_of_the_tree(ledger):
    document = seed_tree_document()
    algorithm = next(c for c in document["spec"]["root"]["children"] if c["name"] == "algorithm")
    video = next(c for c in algorithm["children"] if c["name"] == "video")
    video["min"]["cpu"] = 6
    tree_apply(document=document)
    AuditEntry.objects.filter(at__gt=datetime(2026, 9, 2, tzinfo=UTC)).update(at=at(2, 0))
    [row] = [
        r for r in report(group="leaf", every="month").rows if r.group == "root/algorithm/video"
    ]
    day, rest = 86400, (NOW - at(2, 0)).total_seconds()
    assert row.min["cpu"] == 12_000 * day + 6_000 * rest
    assert row.max["cpu"] == 14_000 * (day + rest)


def test_departments_add_up_their_leaves(ledger):
    rows = report(group="department", every="month").rows
    groups = {row.group: row.figures for row in rows}
    assert set(groups) == {"algorithm", "interns", "infrastructure"}
    leaves = by_key(report(group="leaf", every="month").rows)
    assert groups["algorithm"].held == leaves[(OCT_1, "root/algorithm/video")].held
    [algorithm] = [row for row in rows if row.group == "algorithm"]
    assert algorithm.min["nvidia.com/gpu"] == 8 * (NOW - at(1, 0)).total_seconds()


def test_grouped_by_resource_each_row_is_one_resource(ledger):
    rows = report(group="resource", every="month").rows
    person = report(group="person", every="month").rows
    for row in rows:
        assert list(row.figures.held) == [row.group] and not row.with_jobs
        assert row.figures.held[row.group] == pytest.approx(
            sum(p.figures.held.get(row.group, 0) for p in person)
        )


def test_the_summary_answers_as_the_live_computation(ledger):
    live = {g: report(group=g).rows for g in ("person", "leaf", "department", "runtime")}
    assert accounting_summarise(now=NOW) == [OCT_1, date(2026, 10, 2)]  # the completed days
    assert set(AccountingDone.objects.values_list("day", flat=True)) == {OCT_1, date(2026, 10, 2)}
    for group, rows in live.items():
        summarised = report(group=group).rows
        assert [(r.start, r.group) for r in summarised] == [(r.start, r.group) for r in rows]
        for mine, theirs in zip(summarised, rows, strict=True):
            assert mine.figures.held == pytest.approx(theirs.figures.held)
            assert mine.figures.states() == theirs.figures.states()
            assert mine.figures.waits == theirs.figures.waits
            assert mine.figures.preemptions == theirs.figures.preemptions
            assert mine.min == theirs.min


def test_summarising_again_writes_no_duplicates(ledger):
    accounting_summarise(now=NOW)
    rows = sorted(AccountingDay.objects.values_list("day", "path", "owner", "runtime", "held"))
    assert accounting_summarise(now=NOW) == []  # nothing left to do
    day_summarise(OCT_1, now=NOW)
    assert (
        sorted(AccountingDay.objects.values_list("day", "path", "owner", "runtime", "held")) == rows
    )
    # The day before yesterday is written once more once its next day is over.
    assert accounting_summarise(now=at(4, 1)) == [date(2026, 10, 2), OCT_3]


def month_sums() -> dict:
    """The October day rows added up here by (path, owner, runtime)."""
    sums: dict = {}
    for day in AccountingDay.objects.filter(day__month=10):
        cell = sums.setdefault((day.path, day.owner_id, day.runtime), Figures())
        cell.add(Figures(held=day.held, succeeded=day.succeeded, failed=day.failed,
                         cancelled=day.cancelled, preemptions=day.preemptions,
                         admissions=day.admissions, wait_seconds=day.wait_seconds,
                         waits=day.waits))  # fmt: skip
    return sums


def assert_month_rows_add_up_the_days() -> None:
    months = {
        (m.path, m.owner_id, m.runtime): m for m in AccountingMonth.objects.filter(month=OCT_1)
    }
    sums = month_sums()
    assert set(months) == set(sums)
    for key, month in months.items():
        assert month.held == pytest.approx(sums[key].held)
        assert (month.succeeded, month.failed, month.cancelled, month.preemptions) == (
            sums[key].succeeded,
            sums[key].failed,
            sums[key].cancelled,
            sums[key].preemptions,
        )
        assert month.waits == sums[key].waits
        assert month.wait_seconds == pytest.approx(sums[key].wait_seconds)


def test_a_month_row_is_its_days_added_up_and_follows_a_day_written_again(ledger):
    november = datetime(2026, 11, 2, 12, tzinfo=UTC)
    accounting_summarise(now=november)
    accounting_summarise(now=november)  # 32 days: two runs of at most 31
    assert AccountingDone.objects.filter(day__month=10).count() == 31
    assert_month_rows_add_up_the_days()
    # A late write to a summarised day: summarising the day again writes the month again.
    Hold.objects.filter(job=ledger["crossing"]).update(ended_at=at(2, 3))
    day_summarise(date(2026, 10, 2), now=november)
    assert_month_rows_add_up_the_days()


def test_whole_months_by_person_answer_as_the_live_computation(ledger):
    """A monthly read by person takes October from its month rows and the days around it
    from the day rows; computed live (nothing summarised) it is the same."""
    november = datetime(2026, 11, 2, 12, tzinfo=UTC)
    period = {"since": date(2026, 9, 20), "until": date(2026, 11, 1), "now": november}
    live = report(group="person", every="month", **period).rows
    accounting_summarise(now=november)
    accounting_summarise(now=november)
    assert AccountingMonth.objects.filter(month=OCT_1).exists()
    AccountingDay.objects.filter(day__month=10).update(held={}, succeeded=0)  # not read
    summarised = report(group="person", every="month", **period).rows
    assert [(r.start, r.group) for r in summarised] == [(r.start, r.group) for r in live]
    assert sorted({r.start for r in live}) == [OCT_1, date(2026, 11, 1)]
    for mine, theirs in zip(summarised, live, strict=True):
        assert mine.figures.held == pytest.approx(theirs.figures.held)
        assert mine.figures.states() == theirs.figures.states()
        assert mine.figures.waits == theirs.figures.waits
        assert mine.figures.preemptions == theirs.figures.preemptions


@pytest.mark.parametrize("summarised", [False, True])
def test_a_node_narrows_the_report_to_the_leaves_under_it(ledger, summarised):
    if summarised:
        accounting_summarise(now=NOW)
    everyone = by_key(report(group="leaf").rows)
    under = by_key(report(group="leaf", within="root/infrastructure").rows)
    assert under and all(group.startswith("root/infrastructure/") for _, group in under)
    assert under == {key: f for key, f in everyone.items() if key in under}
    assert {g for _, g in by_key(report(within="root/infrastructure").rows)} == {"oscar"}
    # A node is its subtree, not every path that starts with its name.
    assert report(group="leaf", within="root/infra").rows == []


@pytest.mark.django_db(transaction=True)
def test_two_workers_at_once_write_each_row_once(member, intern, outsider):
    write_ledger(member=member, intern=intern, outsider=outsider)
    errors = []

    def work():
        try:
            accounting_summarise(now=NOW)
        except Exception as error:  # noqa: BLE001 - reported below
            errors.append(error)
        finally:
            connection.close()

    workers = [threading.Thread(target=work) for _ in range(2)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert errors == []
    keys = list(AccountingDay.objects.values_list("day", "path", "owner", "runtime"))
    assert len(keys) == len(set(keys)) > 0


def test_a_manager_sees_the_department_and_a_member_their_own_jobs(
    ledger, manager, member, outsider, intern, staff
):
    assert visibility_for(staff).everything
    assert {row.group for row in report(visibility=visibility_for(staff)).rows} == {
        "alice",
        "ian",
        "oscar",
    }
    for user, people in [(manager, {"alice"}), (member, {"alice"}), (outsider, {"oscar"})]:
        rows = report(visibility=visibility_for(user)).rows
        assert {row.group for row in rows} == people
    # Summarised, the same rows are seen.
    accounting_summarise(now=NOW)
    assert {row.group for row in report(visibility=visibility_for(intern)).rows} == {"ian"}
    assert {row.group for row in report(visibility=visibility_for(manager)).rows} == {"alice"}
    # By department, from the rows per leaf (a manager's) and per person (a member's own).
    for user, seen in [(manager, {"algorithm"}), (outsider, {"infrastructure"}), (staff, None)]:
        rows = report(group="department", every="month", visibility=visibility_for(user)).rows
        assert seen is None or {row.group for row in rows} == seen
    [mine] = report(group="leaf", every="month", visibility=visibility_for(intern)).rows
    everyone = report(group="leaf", every="month").rows
    assert mine.figures.held == next(r for r in everyone if r.group == mine.group).figures.held
    assert Job.objects.filter(owner=manager).count() == 0


def test_beat_summarises_the_completed_days_through_the_task(
    member, intern, outsider, celery_worker
):
    write_ledger(member=member, intern=intern, outsider=outsider)
    entry = next(
        e for e in django_settings.CELERY_BEAT_SCHEDULE.values() if e["task"] == ACCOUNTING_TASK
    )
    assert entry["options"]["expires"] < entry["schedule"]

    app.send_task(ACCOUNTING_TASK)

    # From the first job's day (October the 1st) on, at most 31 days a run.
    wait_for(lambda: AccountingDone.objects.count() == 31)
    assert AccountingDone.objects.order_by("day").first().day == OCT_1
    assert AccountingDay.objects.filter(day=OCT_1).exists()
