"""``caldera logs --follow``'s reading of a growing log (client/caldera_cli/tail.py): which
lines of the log's end at this poll are new since the last, found by matching lines."""

from __future__ import annotations

from caldera_cli.tail import new_lines

LOG = [f"2026-11-27T01:00:{second:02d}.000Z step {second}" for second in range(60)]


def test_it_prints_the_lines_after_the_last_read():
    assert new_lines(LOG[0:10], LOG[3:13]) == (LOG[10:13], False)


def test_nothing_is_new_when_the_log_did_not_grow():
    assert new_lines(LOG[0:10], LOG[0:10]) == ([], False)
    assert new_lines(LOG[0:10], []) == ([], False)


def test_a_first_read_shorter_than_the_window_is_found_inside_the_next():
    # --tail 2 first, then the window: the two lines are in the middle of the next read.
    assert new_lines(LOG[8:10], LOG[0:12]) == (LOG[10:12], False)


def test_everything_is_new_without_a_read_before():
    assert new_lines([], LOG[0:5]) == (LOG[0:5], False)


def test_a_log_that_grew_past_the_window_is_printed_whole_with_a_gap():
    assert new_lines(LOG[0:10], LOG[20:30]) == (LOG[20:30], True)


def test_repeated_lines_are_matched_as_far_as_the_last_read_tells_them_apart():
    before = ["start", "tick", "tick"]
    assert new_lines(before, ["start", "tick", "tick", "tick", "end"]) == (["tick", "end"], False)
    # A read that holds nothing but the repeated line cannot tell how many more came: none
    # is printed twice, and some may be missed (the documented limit).
    assert new_lines(["tick", "tick"], ["tick", "tick"]) == ([], False)
