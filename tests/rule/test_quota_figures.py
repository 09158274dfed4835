"""The quota tree's figures on hand-built trees (queues/quota.py): borrowed, lent, free and
pending demand per node and resource, and the bars and charts drawn from them
(jobs/usage/charts.py). No database."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from jobs.usage.charts import bar, chart, nice_step, tick_label, y_scale
from jobs.usage.samples import RANGES, Point
from queues.quota import Balance, Node, balances, lent_by_node, rollup

CORES = 1000
GI = 2**30


def cpu(cores: float) -> dict[str, int]:
    return {"cpu": int(cores * CORES)}


def tree_of(*nodes: Node) -> dict[str, Node]:
    return {node.path: node for node in nodes}


# root keeps 4 cpu of its min for no child; a and b split the rest, c is guaranteed nothing.
TREE = tree_of(
    Node("root", cpu(20), cpu(20)),
    Node("root/a", cpu(10), cpu(16)),
    Node("root/a/x", cpu(6), cpu(12)),
    Node("root/a/y", cpu(4), cpu(12)),
    Node("root/b", cpu(6), cpu(12)),
    Node("root/c", cpu(0), {}),  # no max: no limit
)


def figures(leaves: dict[str, dict[str, int]], pending: dict | None = None):
    return balances(tree=TREE, used=rollup(leaves), pending=rollup(pending or {}))


def test_it_counts_what_a_node_uses_above_its_min_as_borrowed():
    found = figures({"root/a/x": cpu(9), "root/b": cpu(2)})
    assert found["root/a/x"]["cpu"].borrowed == 3 * CORES  # 9 used, min 6
    assert found["root/a"]["cpu"].borrowed == 0  # 9 used, min 10
    assert found["root/b"]["cpu"].borrowed == 0
    assert found["root"]["cpu"].used == 11 * CORES


def test_borrowing_within_the_parents_unassigned_min_lends_nothing():
    # c borrows 4: exactly what root's min holds for no child (20 - 10 - 6).
    found = figures({"root/c": cpu(4)})
    assert found["root/c"]["cpu"].borrowed == 4 * CORES
    assert found["root/a"]["cpu"].lent == found["root/b"]["cpu"].lent == 0


def test_siblings_that_leave_min_unused_lend_what_is_borrowed_beyond_it_in_proportion():
    # c borrows 12: 4 from root's unassigned min, the other 8 from a (10 unused) and b (6
    # unused), shared 10:6 -> 5 and 3.
    found = figures({"root/c": cpu(12)})
    assert found["root/a"]["cpu"].lent == 5 * CORES
    assert found["root/b"]["cpu"].lent == 3 * CORES
    assert found["root"]["cpu"].lent == 0  # the root has no siblings
    assert found["root/c"]["cpu"].lent == 0  # it borrows: it has nothing unused to lend
    total_lent = sum(found[p]["cpu"].lent for p in ("root/a", "root/b", "root/c"))
    assert total_lent == 12 * CORES - 4 * CORES


def test_a_node_never_lends_more_than_it_leaves_unused():
    # b uses 5 of its 6: only 1 left unused; a idle with 10. c borrows 20.
    found = figures({"root/c": cpu(20), "root/b": cpu(5)})
    assert found["root/b"]["cpu"].lent <= 1 * CORES
    assert found["root/a"]["cpu"].lent <= 10 * CORES
    assert found["root/a"]["cpu"].unused == 10 * CORES


def test_lending_is_between_siblings_at_every_level():
    # y borrows 3 above its min of 4; x leaves 6 unused and lends the 3 (a's own min holds
    # nothing for no child: 6 + 4 = 10).
    lent = lent_by_node(TREE, rollup({"root/a/y": cpu(7)}))
    assert lent["root/a/x"] == cpu(3)
    assert "root/a/y" not in lent


def test_free_is_what_is_left_below_max_or_no_limit():
    found = figures({"root/a/x": cpu(9), "root/c": cpu(2)})
    assert found["root/a/x"]["cpu"].free == 3 * CORES
    assert found["root/c"]["cpu"].free is None  # c has no max
    over = figures({"root/b": cpu(14)})  # an admin lowered b's max below its use
    assert over["root/b"]["cpu"].free == 0


def test_pending_demand_is_summed_up_the_tree():
    found = figures({}, pending={"root/a/x": cpu(12), "root/a/y": {"cpu": 500, "memory": GI}})
    assert found["root/a/x"]["cpu"].pending == 12 * CORES
    assert found["root/a"]["cpu"].pending == 12500
    assert found["root"]["memory"].pending == GI
    # A resource only asked for still gets its figures (no min, no limit).
    assert found["root/a/y"]["memory"] == Balance(
        where="root/a/y", resource="memory", min=0, max=None, used=0, lent=0, pending=GI
    )
    assert list(found["root/a/y"]) == ["cpu", "memory"]  # cpu first


def test_the_bar_shows_used_borrowed_lent_and_idle_min_in_proportion_to_max():
    # min 6, max 12: used 3 -> half of min used; lent 2; 1 idle.
    b = bar(Balance("n", "cpu", min=6, max=12, used=3, lent=2, pending=9))
    assert (b.used, b.borrowed) == (25.0, 0.0)
    assert (b.lent_x, b.lent) == (25.0, 16.67)
    assert (b.idle_x, b.idle) == (41.67, 8.33)
    assert b.min_x == 50.0
    assert (b.pending_x, b.pending, b.pending_beyond) == (25.0, 75.0, False)
    over = bar(Balance("n", "cpu", min=6, max=12, used=9, lent=0, pending=6))
    assert (over.used, over.borrowed_x, over.borrowed) == (50.0, 50.0, 25.0)
    assert over.pending_beyond and over.pending == 25.0  # cut at max
    unlimited = bar(Balance("n", "cpu", min=0, max=None, used=2, lent=0, pending=2))
    assert not unlimited.limited and unlimited.borrowed == 50.0 and unlimited.min_x is None


def test_the_y_axis_takes_nice_steps_in_whole_units():
    assert nice_step(3.5) == 5 and nice_step(0.75) == 1 and nice_step(16) == 20
    assert y_scale("cpu", 14 * CORES) == (15 * CORES, [0, 5000, 10000, 15000])
    assert y_scale("nvidia.com/gpu", 3) == (3, [0, 1, 2, 3])
    top, ticks = y_scale("memory", 14 * GI)
    assert top == 15 * GI and ticks[1] == 5 * GI
    assert y_scale("cpu", 0) == (1000, [0, 250, 500, 750, 1000])


def test_long_tick_labels_are_shortened_to_fit():
    assert tick_label("cpu", 1500) == "1.5" and tick_label("memory", 64 * GI) == "64Gi"
    assert tick_label("cpu", 1_500_000 * CORES) == "1.5M"
    assert tick_label("memory", 75_000 * GI) == "73.2Ti"
    assert tick_label("nvidia.com/gpu", 2_500_000) == "2500k"  # already short


def test_the_chart_draws_a_level_per_bucket_and_breaks_where_samples_are_missing():
    until = datetime(2026, 11, 24, 12, 0, tzinfo=UTC)
    step = timedelta(minutes=1)
    since = until - RANGES["hour"].span

    def point(minutes_ago: int, used: int) -> Point:
        at = until - timedelta(minutes=minutes_ago)
        return Point(at, "root", "cpu", used, 6000, 12000, 1000, 1)

    points = [point(10, 2000), point(9, 4000), point(3, 5000)]  # 8 .. 4 minutes ago missing
    drawn = chart(
        node="root", resource="cpu", points=points, window=RANGES["hour"],
        since=since, until=until, step=step,
    )  # fmt: skip
    assert drawn.used_line.count("M") == 2  # two runs
    assert drawn.used_line.count("V") == 1  # 10 -> 9 minutes ago joined
    assert drawn.used_area.count("Z") == 2
    assert drawn.max_line and drawn.min_line and drawn.pending_line
    assert [t.label for t in drawn.x_ticks] == ["11:00", "11:15", "11:30", "11:45", "12:00"]
    assert "Used 5 at the last sample (highest 5), min 6, max 12" in drawn.summary
    none = chart(
        node="root", resource="cpu", points=[], window=RANGES["hour"],
        since=since, until=until, step=step,
    )  # fmt: skip
    assert none.used_line == none.used_area == "" and "No samples" in none.summary


def test_a_backlog_far_above_max_leaves_the_scale_to_used_min_and_max():
    until = datetime(2026, 11, 24, 12, 0, tzinfo=UTC)
    step = timedelta(minutes=1)
    backlog = [
        Point(until - timedelta(minutes=m), "root/a/x", "cpu", 12 * CORES, 12 * CORES,
              14 * CORES, 6000 * CORES, 3)
        for m in (3, 2)
    ]  # fmt: skip
    drawn = chart(
        node="root/a/x", resource="cpu", points=backlog, window=RANGES["hour"],
        since=until - RANGES["hour"].span, until=until, step=step,
    )  # fmt: skip
    assert [t.label for t in drawn.y_ticks] == ["0", "5", "10", "15"]  # not 0 .. 6,000
    assert drawn.pending_beyond == "pending demand off the top, up to 6000"
    # A node without a max has no ceiling to read the demand against: it is the scale.
    unlimited = chart(
        node="root/a/x", resource="cpu", points=[replace(p, max=None) for p in backlog],
        window=RANGES["hour"], since=until - RANGES["hour"].span, until=until, step=step,
    )  # fmt: skip
    assert unlimited.pending_beyond == "" and unlimited.y_ticks[-1].label == "6000"
