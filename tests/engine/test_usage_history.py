"""The usage history (jobs/usage/samples.py): what beat records per node and resource, once per
interval however often it runs, what it prunes, and how a chart's range is read back in a
few hundred points."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.conf import settings as django_settings
from django.utils import timezone

from jobs.engine.admission.cycle import admission_cycle
from jobs.engine.task_names import USAGE_HISTORY_TASK
from jobs.models import UsageSample
from jobs.reads.selectors import leaf_loads
from jobs.usage.samples import RANGES, interval_start, usage_record, usage_series
from portal.celery import app

from ..support.jobs import submit
from ..support.polling import wait_for

pytestmark = pytest.mark.django_db

CORES = 1000
GB = 10**9
NOW = datetime(2026, 11, 24, 12, 0, 20, tzinfo=UTC)


def samples(at: datetime | None = None) -> dict[tuple[str, str], UsageSample]:
    rows = UsageSample.objects.all() if at is None else UsageSample.objects.filter(at=at)
    return {(row.node, row.resource): row for row in rows}


@pytest.fixture
def one_running_one_waiting(member):
    """The seed scenario: video runs one 12-cpu job, the second waits for it."""
    first, second = submit(member, name="first"), submit(member, name="second")
    result = admission_cycle()
    assert result.admitted == [first.pk] and result.backed_off == [second.pk]


def test_it_records_every_node_and_resource_of_the_tree(one_running_one_waiting):
    assert usage_record(now=NOW) == 27  # 9 nodes x cpu, memory, nvidia.com/gpu

    rows = samples(at=datetime(2026, 11, 24, 12, 0, tzinfo=UTC))
    assert len(rows) == 27
    video = rows["root/algorithm/video", "cpu"]
    assert (video.used, video.min, video.max) == (12 * CORES, 12 * CORES, 14 * CORES)
    assert (video.pending, video.admitted) == (12 * CORES, 1)
    assert rows["root/algorithm/video", "memory"].pending == 12 * GB
    root = rows["root", "cpu"]
    assert (root.used, root.pending, root.admitted) == (12 * CORES, 12 * CORES, 1)
    interns = rows["root/interns", "cpu"]
    assert (interns.used, interns.min, interns.pending, interns.admitted) == (0, 0, 0, 0)
    gpu = rows["root/algorithm/video", "nvidia.com/gpu"]
    assert (gpu.used, gpu.max, gpu.admitted) == (0, 4, 0)  # the job asks for no GPU


def test_a_second_recording_in_the_same_interval_adds_nothing(member, one_running_one_waiting):
    usage_record(now=NOW)
    submit(member, name="third")  # pending demand grows...
    usage_record(now=NOW + timedelta(seconds=30))  # ...but the minute has its sample
    assert UsageSample.objects.count() == 27
    assert samples()["root/algorithm/video", "cpu"].pending == 12 * CORES

    usage_record(now=NOW + timedelta(seconds=40))  # the next minute
    assert UsageSample.objects.count() == 54
    nxt = samples(at=datetime(2026, 11, 24, 12, 1, tzinfo=UTC))
    assert nxt["root/algorithm/video", "cpu"].pending == 24 * CORES


def test_the_interval_follows_the_setting(settings, tree):
    settings.USAGE_HISTORY_SECONDS = 300
    assert interval_start(NOW + timedelta(minutes=4)) == datetime(2026, 11, 24, 12, 0, tzinfo=UTC)
    usage_record(now=NOW)
    usage_record(now=NOW + timedelta(minutes=4))
    assert UsageSample.objects.count() == 27


def test_it_deletes_samples_older_than_the_retention(settings, tree):
    settings.USAGE_HISTORY_DAYS = 3
    usage_record(now=NOW - timedelta(days=4))
    usage_record(now=NOW - timedelta(days=2))
    assert UsageSample.objects.count() == 54

    usage_record(now=NOW)

    kept = sorted({row.at for row in UsageSample.objects.all()})
    assert kept == [
        datetime(2026, 11, 22, 12, 0, tzinfo=UTC),
        datetime(2026, 11, 24, 12, 0, tzinfo=UTC),
    ]


def test_beat_records_the_history_through_the_task(tree, celery_worker):
    entry = next(
        e for e in django_settings.CELERY_BEAT_SCHEDULE.values() if e["task"] == USAGE_HISTORY_TASK
    )
    assert entry["schedule"] == 60 and entry["options"]["expires"] < 60

    sent_at = timezone.now()
    app.send_task(USAGE_HISTORY_TASK)

    wait_for(lambda: UsageSample.objects.count() >= 27)
    minutes = {row.at for row in UsageSample.objects.all()}
    assert minutes <= {interval_start(sent_at), interval_start(timezone.now())}
    assert UsageSample.objects.count() == 27 * len(minutes)


def test_pending_demand_is_read_for_the_trees_resources(member, one_running_one_waiting):
    loads = leaf_loads(resources=["cpu", "memory"])
    # Every resource the running job holds, its pods too; demand only for those asked.
    assert loads.used["root/algorithm/video"] == {"cpu": 12 * CORES, "memory": 12 * GB, "pods": 3}
    assert loads.admitted["root/algorithm/video"] == {"cpu": 1, "memory": 1, "pods": 1}
    assert loads.pending == {"root/algorithm/video": {"cpu": 12 * CORES, "memory": 12 * GB}}
    assert leaf_loads(resources=["cpu"]).pending == {"root/algorithm/video": {"cpu": 12 * CORES}}
    assert leaf_loads(resources=[]).pending == {}


def week_of_samples(until: datetime, skip: range = range(0)) -> None:
    """One cpu sample of root a minute for a week: used = the minute of the day, so each
    bucket's highest value is its last minute's; the minutes in ``skip`` are missing."""
    start = interval_start(until - timedelta(days=7))
    rows = []
    for minute in range(7 * 24 * 60):
        if minute in skip:
            continue
        at = start + timedelta(minutes=minute)
        used = (at.hour * 60 + at.minute) * CORES
        rows.append(
            UsageSample(
                at=at,
                node="root",
                resource="cpu",
                used=used,
                min=64 * CORES,
                max=None if minute % 2 else 64 * CORES,
                pending=minute,
                admitted=minute % 5,
            )  # fmt: skip
        )
    UsageSample.objects.bulk_create(rows)


def test_a_week_is_read_as_the_highest_value_of_each_half_hour(tree):
    now = datetime(2026, 11, 24, 12, 0, 30, tzinfo=UTC)
    week_of_samples(now)

    series = usage_series(node="root", window=RANGES["week"], now=now)

    assert series.step == timedelta(minutes=30)
    assert 330 <= len(series.points) <= 337  # not 10,080
    for point in series.points[1:-1]:
        assert point.at.minute in (0, 30) and point.at.second == 0
        assert point.used == (point.at.hour * 60 + point.at.minute + 29) * CORES
        assert point.max == 64 * CORES  # a limit in the bucket beats "no limit"
        assert point.admitted == 4
    day = usage_series(node="root", window=RANGES["day"], now=now)
    assert day.step == timedelta(minutes=5) and len(day.points) in (288, 289)
    hour = usage_series(node="root", window=RANGES["hour"], now=now)
    assert len(hour.points) == 60 and hour.points[-1].used == (11 * 60 + 59) * CORES


def test_missing_samples_are_missing_buckets_not_zeros(tree):
    now = datetime(2026, 11, 24, 12, 0, 30, tzinfo=UTC)
    week_of_samples(now, skip=range(7 * 24 * 60 - 40, 7 * 24 * 60 - 10))  # beat down 30 min

    hour = usage_series(node="root", window=RANGES["hour"], now=now)

    assert len(hour.points) == 30
    gaps = [b.at - a.at for a, b in zip(hour.points, hour.points[1:], strict=False)]
    assert max(gaps) == timedelta(minutes=31)
    assert usage_series(node="root/algorithm", window=RANGES["hour"], now=now).points == []
