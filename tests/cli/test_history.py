"""``caldera events --follow``'s reading of a history read whole at each poll
(client/caldera_cli/history.py): an event is printed once as it reads, and a cluster event
the cluster reports again, its row updated in place, is printed again with its count."""

from __future__ import annotations

from caldera_cli.history import NewEvents
from caldera_cli.output import event_words

ENQUEUED = {"at": "2026-11-27T01:00:00Z", "type": "Normal", "reason": "Enqueued",
            "message": "queued in root/algorithm/video", "actor": "alice", "involved": None,
            "cycle": None, "count": 1, "first_at": None}  # fmt: skip
GANG = {"at": "2026-11-27T01:00:05Z", "type": "Warning", "reason": "GangFailedScheduling",
        "message": "head-0 in gang failed to be scheduled in cycle 1", "actor": None,
        "involved": "pod/head-0", "cycle": 1, "count": 1, "first_at": None}  # fmt: skip
REPEATED = GANG | {"at": "2026-11-27T01:00:09Z", "count": 3, "first_at": GANG["at"]}


def reader() -> NewEvents:
    return NewEvents(None, 1)  # type: ignore[arg-type]  # unseen() asks no server


def test_it_prints_each_event_once():
    history = reader()
    assert history.unseen([ENQUEUED]) == [ENQUEUED]
    assert history.unseen([ENQUEUED, GANG]) == [GANG]
    assert history.unseen([ENQUEUED, GANG]) == []


def test_a_repeat_is_printed_again_with_its_count_wherever_it_moved():
    history = reader()
    history.unseen([GANG, ENQUEUED])
    assert history.unseen([ENQUEUED, REPEATED]) == [REPEATED]
    assert event_words(REPEATED).endswith("in cycle 1 (x3)")
    assert history.unseen([ENQUEUED, REPEATED]) == []
