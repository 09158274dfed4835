"""The triggers' sender: requests for the worker leave the caller at once, a burst of
them takes one place, and beyond its queue they are dropped with a warning instead of
waiting (a hung broker, tests/support/outages.py)."""

from __future__ import annotations

import logging

from jobs.engine.triggers import (
    SENDER,
    SENDER_QUEUE_SIZE,
    request_admission,
    request_quota_publish,
    request_reconcile,
)

from ..support.outages import broker_hung


def test_a_burst_of_admission_requests_takes_one_place_in_the_sender(settings):
    with broker_hung(settings):
        for _ in range(1000):
            request_admission()
            request_quota_publish()
        # At most one of each being sent (waiting on the broker) and one waiting behind it.
        assert SENDER.unsent() <= 4


def test_requests_beyond_the_senders_queue_are_dropped_with_one_warning(settings, caplog):
    with broker_hung(settings), caplog.at_level(logging.WARNING, logger="jobs.engine.triggers"):
        for job_id in range(2 * SENDER_QUEUE_SIZE):
            request_reconcile([job_id])  # returns at once, however many wait
        assert SENDER.unsent() <= SENDER_QUEUE_SIZE + 1  # the queue, and one being sent
        dropped = [r for r in caplog.records if "broker request dropped" in r.getMessage()]
        assert len(dropped) == 1
        assert "the sender's queue is full" in dropped[0].getMessage()
