"""The triggers' sender: requests for the worker leave the caller at once, a burst of
them takes one place, and beyond its queue they are dropped with a warning instead of
waiting (a hung broker, tests/support/outages.py). A process forked from one whose threads
use Redis has a client of its own."""

from __future__ import annotations

import logging
import os
import signal
import threading

from jobs.engine.triggers import (
    SENDER,
    SENDER_QUEUE_SIZE,
    redis_client,
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


def test_a_process_forked_while_another_thread_is_inside_the_redis_pool_still_reaches_redis():
    """As a worker forks beat while its heartbeat thread is in the pool: the child must not
    wait for the pool's lock, held for ever by a thread it does not have."""
    assert redis_client().ping()
    inside, forked = threading.Event(), threading.Event()

    def heartbeat() -> None:
        with redis_client().connection_pool._lock:
            inside.set()
            forked.wait(10)

    thread = threading.Thread(target=heartbeat)
    thread.start()
    inside.wait(10)
    pid = os.fork()
    if pid == 0:  # the child: a stuck call ends it by SIGALRM
        signal.alarm(10)
        try:
            os._exit(0 if redis_client().ping() else 1)
        except BaseException:
            os._exit(2)
    forked.set()
    thread.join()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
