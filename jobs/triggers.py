"""Coalescing triggers for the singleton background cycles (admit, sync).

A trigger marks the cycle dirty and sends a task only if none is already waiting, so a
burst of a thousand submits runs a few cycles, not a thousand. The running cycle checks
the dirty mark after it releases its lock, so no trigger is lost while a cycle runs. When
Redis is down the trigger is dropped with a warning: beat re-drives every cycle, and the
database still holds everything.
"""

from __future__ import annotations

import logging
import time
from datetime import datetime
from functools import cache

import redis
from celery import current_app
from django.conf import settings
from kombu.exceptions import OperationalError

log = logging.getLogger(__name__)
PENDING_TTL_SECONDS = 30  # a lost task message cannot block the trigger for longer


@cache
def _redis() -> redis.Redis:
    return redis.Redis.from_url(settings.REDIS_URL, socket_timeout=2, socket_connect_timeout=2)


def redis_client() -> redis.Redis:
    """The process's Redis client (the broker's server), for keys other modules keep there:
    the workers' heartbeats that /healthz reads."""
    return _redis()


class Trigger:
    def __init__(self, name: str):
        self.dirty_key = f"caldera:{name}:dirty"
        self.pending_key = f"caldera:{name}:pending"

    def fire(self, task) -> None:
        """Ask for a run of ``task`` soon."""
        try:
            pipe = _redis().pipeline(transaction=False)  # one round trip for both
            pipe.set(self.dirty_key, 1)
            pipe.set(self.pending_key, 1, nx=True, ex=PENDING_TTL_SECONDS)
            _dirty, first = pipe.execute()
            if first:
                task.apply_async(retry=False)
        except (redis.RedisError, OperationalError) as error:
            log.warning("could not trigger %s (beat will run it): %s", task.name, error)

    def mark(self) -> None:
        """Mark the cycle dirty without sending a task: for a caller about to run it itself.

        If another process holds the cycle's lock, it sees the mark and runs again.
        """
        try:
            _redis().set(self.dirty_key, 1)
        except redis.RedisError as error:
            log.warning("could not mark %s dirty (beat will run it): %s", self.dirty_key, error)

    def started(self) -> None:
        """Called as the task starts: later triggers must send a new task."""
        _redis().delete(self.pending_key)

    def clear(self) -> None:
        """Called under the cycle's lock, before the cycle reads the database."""
        _redis().delete(self.dirty_key)

    def is_dirty(self) -> bool:
        return bool(_redis().exists(self.dirty_key))


ADMIT = Trigger("admit")
SYNC = Trigger("sync")


def request_admission() -> None:
    from .tasks import admit

    ADMIT.fire(admit)


def request_sync() -> None:
    from .tasks import sync

    SYNC.fire(sync)


def request_quota_publish() -> None:
    """Ask for the quota tree to be written to the cluster (CLUSTER_PUBLISH_QUOTA)."""
    from .tasks import publish_quota

    try:
        publish_quota.apply_async(retry=False)
    except (redis.RedisError, OperationalError) as error:
        log.warning("could not ask for the quota tree to be published (beat will): %s", error)


RECONCILE_TASK = "jobs.tasks.reconcile"


def request_reconcile(job_ids: list[int]) -> None:
    """Ask for the cluster to be made to match these jobs (a cancel, a preemption).

    Sent by name, so this module does not import the tasks. When the broker is down the
    request is dropped with a warning and the caller's answer stands: the database already
    holds the change, and every sync removes the objects of jobs that want none.
    """
    try:
        current_app.send_task(RECONCILE_TASK, args=[list(job_ids)], retry=False)
    except (redis.RedisError, OperationalError) as error:
        log.warning("could not ask to reconcile jobs %s (the sync will): %s", job_ids, error)


WAKE_KEY = "caldera:sync:wake"


def request_sync_at(moment: datetime) -> None:
    """Ask for a sync at ``moment``, when the cluster said it will change by itself.

    Only the earliest wake is kept scheduled; that sync asks for the next one. Beat still
    re-drives the sync, so a lost wake only delays a change, never loses it.
    """
    from .tasks import sync

    at = moment.timestamp()
    try:
        client = _redis()
        scheduled = client.get(WAKE_KEY)
        if scheduled is not None and time.time() < float(scheduled) <= at:
            return
        client.set(WAKE_KEY, at, ex=max(int(at - time.time()) + 60, 60))
        sync.apply_async(eta=moment, retry=False)
    except (redis.RedisError, OperationalError) as error:
        log.warning("could not schedule a sync (beat will run it): %s", error)
