"""About when a pending job starts (jobs/reads/estimate.py): the admission rule replayed forward
over expected ends, on hand-built trees."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from django.utils import timezone

from jobs.reads.estimate import Holder, Line, Start, Waiter, describe, estimate_starts
from queues.admission import BEST_EFFORT, PRIORITY
from queues.quota import Node

CORES = 1000
NOW = datetime(2026, 11, 24, 12, 0, tzinfo=UTC)
TREE = {
    n.path: n
    for n in [
        Node("root", {"cpu": 20 * CORES}, {"cpu": 20 * CORES}),
        Node("root/a", {"cpu": 10 * CORES}, {"cpu": 14 * CORES}),
        Node("root/b", {"cpu": 10 * CORES}, {"cpu": 20 * CORES}),
    ]
}


def minutes(n: float) -> timedelta:
    return timedelta(minutes=n)


def holder(key: int, leaf: str, cores: int, ends_in: float) -> Holder:
    return Holder(key, leaf, {"cpu": cores * CORES}, NOW + minutes(ends_in))


def waiter(key: int, cores: int, run: float, priority: int = 0) -> Waiter:
    return Waiter(key, {"cpu": cores * CORES}, priority, minutes(run))


def starts(holders, lines, wanted, allocatable=None):
    return estimate_starts(
        now=NOW, tree=TREE, allocatable=allocatable, holders=holders, lines=lines, wanted=wanted
    )


def test_a_job_that_fits_starts_now():
    found = starts([holder(9, "root/a", 4, 30)], [Line("root/a", PRIORITY, [waiter(1, 4, 5)])], {1})
    assert found == {1: Start(NOW, 0, None)}


def test_jobs_start_as_the_running_ones_are_expected_to_end_in_queue_order():
    # root/a holds 12 of its max 14 until +10; three 8-core jobs of 5 minutes wait in line.
    lines = [Line("root/a", PRIORITY, [waiter(1, 8, 5), waiter(2, 8, 5), waiter(3, 2, 5)])]
    found = starts([holder(9, "root/a", 12, 10)], lines, {1, 2, 3})
    assert found[1] == Start(NOW + minutes(10), 1, NOW + minutes(10))
    # The second waits for the first to end; the third, small enough to fit beside the
    # second, waits behind it all the same: the Priority policy keeps the order.
    assert found[2] == Start(NOW + minutes(15), 1, NOW + minutes(10))  # 1 running now
    assert found[3].at == NOW + minutes(15)


def test_under_best_effort_a_small_job_passes_a_big_one():
    lines = [Line("root/a", BEST_EFFORT, [waiter(1, 8, 5), waiter(2, 2, 5)])]
    found = starts([holder(9, "root/a", 10, 10)], lines, {1, 2})
    assert found[2].at == NOW and found[1].at == NOW + minutes(10)


def test_other_queues_compete_for_what_their_parent_holds():
    # The root holds 18 of 20 until root/b's job ends at +10. Then root/b's head, within
    # its guarantee, goes before root/a's, which borrows; 8 more cores for root/a would
    # take the root to 22, so it waits for its own running job to end at +30.
    holders = [holder(8, "root/b", 8, 10), holder(9, "root/a", 10, 30)]
    lines = [
        Line("root/a", PRIORITY, [waiter(1, 8, 5)]),
        Line("root/b", PRIORITY, [waiter(2, 4, 60)]),
    ]
    found = starts(holders, lines, {1, 2})
    assert found[2].at == NOW + minutes(10)
    assert found[1] == Start(NOW + minutes(30), 2, NOW + minutes(30))


def test_a_job_nothing_running_makes_room_for_gets_no_start():
    found = starts([], [Line("root/a", PRIORITY, [waiter(1, 4, 5)])], {1}, {"cpu": 2 * CORES})
    assert found == {}


def test_the_basis_says_how_the_estimate_was_reached():
    start = Start(NOW + minutes(12), 2, NOW + minutes(12))
    told = describe(start, now=NOW, ahead=3)
    by = timezone.localtime(NOW + minutes(12))
    assert told.at == NOW + minutes(12)
    assert told.basis == f"about 12 min: 3 jobs ahead, 2 running jobs expected to end by {by:%H:%M}"
    assert describe(Start(NOW, 0, None), now=NOW, ahead=0).basis.startswith("now: it fits")
    assert describe(None, now=NOW, ahead=0).at is None
    assert describe(Start(NOW + timedelta(hours=3), 1, NOW), now=NOW, ahead=0).basis.startswith(
        "about 3 h: 1 running job"
    )
