"""Beat as two replicas (portal/heartbeat.py): the one that holds the beat lease sends the
schedule, the other waits; it takes over within BEAT_LEASE_SECONDS of the leader's death,
and at once when the leader stops cleanly. Each tick is beat's own loop's, as ``celery
beat`` runs it; what a scheduler sends is recorded instead of reaching the broker."""

from __future__ import annotations

import contextlib
import time

import pytest

from jobs.engine.locks import BEAT
from jobs.models import Lease
from portal.beat import Scheduler
from portal.celery import app as celery_app

from ..support.polling import wait_for

pytestmark = pytest.mark.django_db(transaction=True)  # each statement commits, as in beat

LEASE_SECONDS = 1.0


@pytest.fixture
def beats(tmp_path, settings):
    settings.BEAT_LEASE_SECONDS = LEASE_SECONDS
    made: list[Scheduler] = []

    def beat(name: str) -> Scheduler:
        scheduler = Scheduler(app=celery_app, schedule_filename=str(tmp_path / name))
        scheduler.sent = []
        scheduler.apply_entry = lambda entry, producer=None: scheduler.sent.append(entry.name)
        made.append(scheduler)
        return scheduler

    yield beat
    for scheduler in made:
        with contextlib.suppress(ValueError):  # one a test stopped already
            scheduler.close()


def ticking(*schedulers: Scheduler, seconds: float) -> None:
    """Each scheduler ticks, as its beat's loop would, for ``seconds``."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for scheduler in schedulers:
            scheduler.tick()
        time.sleep(0.05)


def test_one_beat_sends_the_schedule_and_the_other_waits(beats):
    first, second = beats("first"), beats("second")
    ticking(first, second, seconds=2.5)  # admit and sync are due every second

    assert {"admit", "sync"} <= set(first.sent)
    assert second.sent == []
    assert Lease.objects.get(name=BEAT).holder == first.lease.holder


def test_the_stand_by_takes_over_within_the_lease_when_the_leader_dies(beats):
    first, second = beats("first"), beats("second")
    ticking(first, second, seconds=0.5)
    assert first.leading() and not second.leading()

    # The leader dies: it neither ticks nor gives its lease back.
    died = time.monotonic()
    wait_for(lambda: second.tick() is not None and second.leading(), timeout=LEASE_SECONDS * 3)
    assert time.monotonic() - died <= LEASE_SECONDS + 0.5
    ticking(second, seconds=1.5)
    assert "admit" in second.sent
    # A leader that comes back finds its lease gone, and sends nothing more.
    first.sent.clear()
    ticking(first, second, seconds=1.5)
    assert first.sent == [] and not first.leading()


def test_a_leader_that_stops_hands_over_at_once(beats):
    first, second = beats("first"), beats("second")
    ticking(first, second, seconds=0.2)
    first.close()

    assert second.leading()
