"""The start estimates take at most ESTIMATE_SHARE of a worker process's time: after a
replay, beat's next ones are skipped for the rest of its share."""

from __future__ import annotations

from jobs import tasks
from jobs.engine.triggers import paused
from jobs.models import StartEstimate
from tests.support.jobs import submit


def _estimate_again() -> bool:
    """Run beat's task once; whether it replayed the rule (it wrote the estimates)."""
    StartEstimate.objects.all().delete()
    tasks.estimates()
    return StartEstimate.objects.exists()


def test_a_replay_pauses_the_next_ones_for_the_rest_of_its_share(settings, member):
    settings.ESTIMATE_SHARE = 0.001  # any replay takes a thousand times its length off
    submit(member)
    assert _estimate_again()
    assert paused(tasks.ESTIMATES_PAUSE)
    assert not _estimate_again()  # beat's next one is skipped


def test_a_share_of_one_replays_at_every_beat(settings, member):
    settings.ESTIMATE_SHARE = 1.0
    submit(member)
    assert _estimate_again()
    assert not paused(tasks.ESTIMATES_PAUSE)
    assert _estimate_again()
