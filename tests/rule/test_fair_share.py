"""Fair sharing over time as properties of the pure rule (``queues.fairness`` and the
shares used ``queues.admission.plan_admissions`` takes): with no half-life the plans are
today's exactly; among otherwise equal borrowers the one that used less of its share
borrows first; when reclaim chooses among borrowers the one that used more gives back
first; the
decay and the entitled shares add up."""

from __future__ import annotations

import math
from datetime import timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from queues import fairness
from queues.admission import RECLAIM, Admitted, Candidate, QueueHeads
from queues.quota import Node, rollup, shortfall

from .test_admission_properties import _leaf_usage, crowded, run, scenarios


@given(scenarios())
def test_with_no_half_life_the_plans_are_todays(scenario):
    tree, admitted, queues, allocatable, leaving = scenario
    today = run(tree, admitted, queues, allocatable, leaving)
    for fair in (None, {}):
        assert run(tree, admitted, queues, allocatable, leaving, fair) == today


@given(crowded(), st.floats(0, 5))
def test_shares_used_that_are_all_equal_change_nothing(scenario, level):
    tree, admitted, queues, allocatable, leaving = scenario
    fair = dict.fromkeys(tree, level)
    assert run(tree, admitted, queues, allocatable, leaving, fair) == run(
        tree, admitted, queues, allocatable, leaving
    )


@st.composite
def twins(draw):
    """Two departments alike in every number, each with one leaf and the same jobs
    running, each offering the same borrowing candidate; the first has the better place
    in the queue order (enqueued earlier), the second used less of its share."""
    low = draw(st.integers(0, 8))
    high = draw(st.integers(low, 30))
    root = Node("root", {"cpu": 2 * low}, {"cpu": draw(st.integers(2 * low, 2 * low + 30))})
    tree = {"root": root}
    for department in ("a", "b"):
        tree[f"root/{department}"] = Node(f"root/{department}", {"cpu": low}, {"cpu": high})
        tree[f"root/{department}/q"] = Node(f"root/{department}/q", {"cpu": low}, {"cpu": high})
    admitted: list[Admitted] = []
    for key, size in enumerate(draw(st.lists(st.integers(1, 8), max_size=4)), start=1):
        pair = [
            Admitted(key * 10 + side, f"root/{d}/q", {"cpu": size}, 0, key)
            for side, d in enumerate("ab")
        ]
        used = rollup(_leaf_usage(admitted + pair))
        if all(
            used.get(p, {}).get("cpu", 0) <= n.max.get("cpu", math.inf) for p, n in tree.items()
        ):
            admitted += pair
    size = draw(st.integers(1, 20))
    queues = [
        QueueHeads(f"root/{d}/q", [Candidate(1000 + side, {"cpu": size}, (0, side, side))])
        for side, d in enumerate("ab")
    ]
    higher = draw(st.floats(0.01, 10))
    lower = draw(st.floats(0, higher, exclude_max=True))
    fair = {"root/a": higher, "root/a/q": higher, "root/b": lower, "root/b/q": lower}
    return tree, admitted, queues, fair


@given(twins())
def test_the_department_that_used_less_of_its_share_borrows_first(scenario):
    tree, admitted, queues, fair = scenario
    plan = run(tree, admitted, queues, None, (), fair)
    admitted_keys = {candidate.key for candidate in plan.admitted}
    if 1000 in admitted_keys:  # the first department's candidate got spare capacity...
        assert 1001 in admitted_keys  # ...only once the second's had
    # Without shares used the queue order alone decides: the first goes first.
    today = {candidate.key for candidate in run(tree, admitted, queues, None, (), None).admitted}
    if 1001 in today:
        assert 1000 in today


@given(st.integers(1, 8), st.floats(0, 10), st.floats(0, 10), st.booleans())
def test_reclaim_takes_from_the_borrower_that_used_more_of_its_share(
    size, first, second, newest_first
):
    """Two departments without a guarantee each borrow ``size`` cpu; a third, within its
    guarantee, needs exactly that much back. Today the newest job gives way; with
    shares used, the job of the department that used more of its share, whatever its age."""
    tree = {
        "root": Node("root", {"cpu": size}, {"cpu": 2 * size}),
        "root/a": Node("root/a", {}, {"cpu": 2 * size}),
        "root/b": Node("root/b", {}, {"cpu": 2 * size}),
        "root/g": Node("root/g", {"cpu": size}, {"cpu": size}),
    }
    older, newer = (1, 2) if newest_first else (2, 1)
    running = [
        Admitted(1, "root/a", {"cpu": size}, 0, older),
        Admitted(2, "root/b", {"cpu": size}, 0, newer),
    ]
    queues = [QueueHeads("root/g", [Candidate(9, {"cpu": size}, (0, 0, 9))])]
    assert shortfall(leaf="root/g", request={"cpu": size}, tree=tree,
                     used=rollup(_leaf_usage(running)), allocatable=None)  # fmt: skip
    fair = {"root/a": first, "root/b": second, "root/g": 0.0}
    [victim] = run(tree, running, queues, None, (), fair).preempted
    assert victim.rule == RECLAIM
    if first != second:
        assert victim.victim.key == (1 if first > second else 2)
    else:
        assert victim.victim.key == (2 if newest_first else 1)  # the newest, as today


def test_decay_halves_each_half_life_and_sums_to_one_for_ever():
    day = timedelta(days=1).total_seconds()
    assert fairness.decay(0, day) == 1.0
    assert fairness.decay(day, day) == pytest.approx(0.5)
    assert fairness.decay(-5, day) == 1.0  # a span that starts later than now weighs as now
    # The whole cluster held for ever is 1; held for one half-life, until now, 0.5.
    assert fairness.decayed_fraction(1.0, math.inf, 0, day) == pytest.approx(1.0)
    assert fairness.decayed_fraction(1.0, day, 0, day) == pytest.approx(0.5)
    # Half of it for one half-life, then nothing for another.
    assert fairness.decayed_fraction(0.5, 2 * day, day, day) == pytest.approx(0.125)


@given(st.lists(st.floats(0.1, 10), min_size=1, max_size=4), st.floats(0.1, 10))
def test_entitled_shares_divide_each_parent_among_its_children_by_weight(weights, other):
    tree = {"root": Node("root"), "root/x": Node("root/x", weight=other)}
    for index, weight in enumerate(weights):
        tree[f"root/x/k{index}"] = Node(f"root/x/k{index}", weight=weight)
    tree["root/y"] = Node("root/y", weight=1.0)
    shares = fairness.entitled_shares(tree)
    assert shares["root"] == 1.0
    assert shares["root/x"] + shares["root/y"] == pytest.approx(1.0)
    kids = [shares[f"root/x/k{index}"] for index in range(len(weights))]
    assert sum(kids) == pytest.approx(shares["root/x"])
    for index, weight in enumerate(weights):
        assert kids[index] == pytest.approx(shares["root/x"] * weight / sum(weights))


def test_a_share_used_is_usage_over_entitled_share():
    tree = {
        "root": Node("root"),
        "root/a": Node("root/a", weight=3.0),
        "root/b": Node("root/b", weight=1.0),
    }
    used = fairness.shares_used(tree, {"root": 0.5, "root/a": 0.3, "root/b": 0.2})
    assert used == pytest.approx({"root": 0.5, "root/a": 0.4, "root/b": 0.8})


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("7d", 7 * 86400), ("168h", 7 * 86400), ("1h30m", 5400), ("90m", 5400), ("3600s", 3600)],
)
def test_a_half_life_is_written_as_go_writes_durations_or_in_days(text, seconds):
    value = fairness.parse_half_life(text)
    assert value == timedelta(seconds=seconds)
    assert fairness.parse_half_life(fairness.format_half_life(value)) == value


@pytest.mark.parametrize("text", ["", "7", "d7", "7 d", "7w", "1h-5m", 7, None, "9" * 40])
def test_anything_else_is_not_a_half_life(text):
    assert fairness.parse_half_life(text) is None
