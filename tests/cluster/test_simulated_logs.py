"""The simulated cluster's pod logs: lines written from each pod's timeline, on a fixed clock."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from jobs.cluster import LogUnavailable, ObjectRef
from jobs.cluster.simulated import SimulatedBackend, parse_nodes
from jobs.cluster.simulated_log import Timeline, simulated_log

from ..support.specs import gang_spec

T0 = datetime(2026, 11, 23, 10, 0, tzinfo=UTC)
HEAD = Timeline(
    pod="rayjob-7-head-0",
    node="node-2",
    requests={"cpu": 4000, "memory": 4_000_000_000},
    started_at=T0,
    run_seconds=60,
)


def text_at(seconds: float, timeline: Timeline = HEAD, **window) -> str:
    window = {"tail_lines": None, "limit_bytes": 1_000_000} | window
    log = simulated_log(timeline, finished=False, now=T0 + timedelta(seconds=seconds), **window)
    return log.text


def test_it_starts_with_a_line_naming_the_pods_node_and_requests():
    assert text_at(0) == (
        "2026-11-23T10:00:00.000Z Started rayjob-7-head-0 on node-2 (cpu 4, memory 4G)\n"
    )


def test_it_writes_a_progress_line_every_five_seconds_of_its_run_time():
    lines = text_at(12.5).splitlines()

    assert lines[1:] == [
        "2026-11-23T10:00:05.000Z step 1: 5 s of 60 s, 8%",
        "2026-11-23T10:00:10.000Z step 2: 10 s of 60 s, 16%",
    ]


def test_it_ends_with_its_exit_code_once_its_run_time_is_over():
    lines = text_at(600).splitlines()

    assert len(lines) == 1 + 11 + 1  # the start, 5 s to 55 s, the exit
    assert lines[-2] == "2026-11-23T10:00:55.000Z step 11: 55 s of 60 s, 91%"
    assert lines[-1] == "2026-11-23T10:01:00.000Z Exited with code 0 after 60 s"
    assert text_at(60) == text_at(600)  # nothing is written after the exit


def test_a_pod_the_cluster_saw_succeed_has_its_exit_line_whatever_the_clock():
    log = simulated_log(HEAD, finished=True, now=T0, tail_lines=1, limit_bytes=1000)

    assert log.text == "2026-11-23T10:01:00.000Z Exited with code 0 after 60 s\n"


def test_the_log_grows_as_time_passes_and_reads_the_same_at_the_same_moment():
    earlier, later = text_at(21), text_at(33)

    assert later.startswith(earlier) and later != earlier
    assert text_at(33) == later


def test_tail_lines_keep_the_last_lines_and_say_earlier_ones_were_left_out():
    last = simulated_log(HEAD, finished=True, now=T0, tail_lines=2, limit_bytes=1000)
    every = simulated_log(HEAD, finished=True, now=T0, tail_lines=13, limit_bytes=1000)

    assert [line.split(" ", 1)[1] for line in last.text.splitlines()] == [
        "step 11: 55 s of 60 s, 91%",
        "Exited with code 0 after 60 s",
    ]
    assert last.truncated
    assert not every.truncated and len(every.text.splitlines()) == 13


def test_limit_bytes_cuts_the_log_and_says_so():
    cut = simulated_log(HEAD, finished=True, now=T0, tail_lines=None, limit_bytes=30)
    fits = simulated_log(HEAD, finished=False, now=T0, tail_lines=None, limit_bytes=78)

    assert (cut.text, cut.truncated) == ("2026-11-23T10:00:00.000Z Start", True)
    assert len(fits.text.encode()) == 78 and not fits.truncated


def test_a_jobs_shorter_than_a_step_has_its_start_and_exit_only():
    short = Timeline("p-head-0", "node-1", {"cpu": 500}, T0, 0.2)

    assert [line.split(" ", 1)[1] for line in text_at(1, short).splitlines()] == [
        "Started p-head-0 on node-1 (cpu 0.5)",
        "Exited with code 0 after 0.2 s",
    ]


def test_reading_the_end_of_a_week_long_log_writes_only_the_lines_asked_for():
    week = Timeline("long-head-0", "node-1", {"cpu": 1000}, T0, 7 * 24 * 3600)
    log = simulated_log(
        week, finished=False, now=T0 + timedelta(days=6), tail_lines=1, limit_bytes=1000
    )

    # One line, written from its step alone: not the 103,680 before it.
    assert log.text.split(" ", 1)[1] == "step 103680: 518400 s of 604800 s, 85%\n"


# -- through the backend, its pods in the database -----------------------------------------


@pytest.fixture
def backend(db):
    return SimulatedBackend(parse_nodes("2xcpu=16,memory=64Gi"), cycle_seconds=5)


def read(backend, job, *, now):
    return backend.pod_log(
        ObjectRef(f"rayjob-{job.id}"),
        job_id=job.id,
        head="head",
        tail_lines=100,
        limit_bytes=100_000,
        now=now,
    )


def test_a_running_jobs_head_pod_has_written_its_lines_so_far(backend):
    job = gang_spec(7, run_seconds=60)
    backend.apply([job], now=T0)

    log = read(backend, job, now=T0 + timedelta(seconds=10))

    assert log.pod == "rayjob-7-head-0" and not log.truncated
    assert [line.split(" ", 1)[1] for line in log.text.splitlines()] == [
        "Started rayjob-7-head-0 on node-1 (cpu 4, memory 4G)",
        "step 1: 5 s of 60 s, 8%",
        "step 2: 10 s of 60 s, 16%",
    ]


def test_a_finished_jobs_head_pod_ends_with_its_exit_code(backend):
    job = gang_spec(7, run_seconds=20)
    backend.apply([job], now=T0)
    backend.observe(now=T0 + timedelta(seconds=20))

    log = read(backend, job, now=T0 + timedelta(seconds=20))

    assert log.text.splitlines()[-1].endswith("Exited with code 0 after 20 s")


def test_a_pod_that_waits_for_room_or_its_dequeue_has_no_log_yet_and_says_why(backend):
    running, waiting = gang_spec(1, head_cpu="16", workers=1, worker_cpu="16"), gang_spec(2)
    suspended = gang_spec(3)
    backend.apply([running, waiting], now=T0)
    backend.apply([replace(suspended, suspend=True)], now=T0)

    with pytest.raises(LogUnavailable, match="^Pod rayjob-2-head-0 has no log yet: it waits"):
        read(backend, waiting, now=T0)
    with pytest.raises(LogUnavailable, match="^Pod rayjob-3-head-0 has not started: its job is"):
        read(backend, suspended, now=T0)


def test_a_pod_that_is_gone_is_missing(backend):
    job = gang_spec(7)
    backend.apply([job], now=T0)
    backend.remove([ObjectRef("rayjob-7")], now=T0)

    with pytest.raises(LogUnavailable, match="^The head pod of rayjob-7 is not there.$") as raised:
        read(backend, job, now=T0)

    assert raised.value.missing
