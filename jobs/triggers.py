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

from .task_names import ADMIT_TASK, PUBLISH_QUOTA_TASK, RECONCILE_TASK, SYNC_TASK

log = logging.getLogger(__name__)
PENDING_TTL_SECONDS = 30  # a lost task message cannot block the trigger for longer


@cache
def redis_client() -> redis.Redis:
    """The process's Redis client (the broker's server): the triggers' marks, and the keys
    other modules keep there (the workers' heartbeats that /healthz reads)."""
    return redis.Redis.from_url(settings.REDIS_URL, socket_timeout=2, socket_connect_timeout=2)


def _send(task: str, **options) -> None:
    current_app.send_task(task, retry=False, **options)


class Trigger:
    def __init__(self, name: str, task: str):
        self.task = task
        self.dirty_key = f"caldera:{name}:dirty"
        self.pending_key = f"caldera:{name}:pending"

    def fire(self) -> None:
        """Ask for a run of the task soon."""
        try:
            pipe = redis_client().pipeline(transaction=False)  # one round trip for both
            pipe.set(self.dirty_key, 1)
            pipe.set(self.pending_key, 1, nx=True, ex=PENDING_TTL_SECONDS)
            _dirty, first = pipe.execute()
            if first:
                _send(self.task)
        except (redis.RedisError, OperationalError) as error:
            log.warning("could not trigger %s (beat will run it): %s", self.task, error)

    def mark(self) -> None:
        """Mark the cycle dirty without sending a task: for a caller about to run it itself.

        If another process holds the cycle's lock, it sees the mark and runs again.
        """
        try:
            redis_client().set(self.dirty_key, 1)
        except redis.RedisError as error:
            log.warning("could not mark %s dirty (beat will run it): %s", self.dirty_key, error)

    def started(self) -> None:
        """Called as the task starts: later triggers must send a new task."""
        redis_client().delete(self.pending_key)

    def clear(self) -> None:
        """Called under the cycle's lock, before the cycle reads the database."""
        redis_client().delete(self.dirty_key)

    def is_dirty(self) -> bool:
        return bool(redis_client().exists(self.dirty_key))


ADMIT = Trigger("admit", ADMIT_TASK)
SYNC = Trigger("sync", SYNC_TASK)


def request_admission() -> None:
    ADMIT.fire()


def request_sync() -> None:
    SYNC.fire()


def request_quota_publish() -> None:
    """Ask for the quota tree to be written to the cluster (CLUSTER_PUBLISH_QUOTA)."""
    try:
        _send(PUBLISH_QUOTA_TASK)
    except (redis.RedisError, OperationalError) as error:
        log.warning("could not ask for the quota tree to be published (beat will): %s", error)


def request_reconcile(job_ids: list[int]) -> None:
    """Ask for the cluster to be made to match these jobs (a cancel, a preemption).

    When the broker is down the request is dropped with a warning and the caller's answer
    stands: the database already holds the change, and every sync removes the objects of
    jobs that want none.
    """
    try:
        _send(RECONCILE_TASK, args=[list(job_ids)])
    except (redis.RedisError, OperationalError) as error:
        log.warning("could not ask to reconcile jobs %s (the sync will): %s", job_ids, error)


WAKE_KEY = "caldera:sync:wake"


def request_sync_at(moment: datetime) -> None:
    """Ask for a sync at ``moment``, when the cluster said it will change by itself.

    Only the earliest wake is kept scheduled; that sync asks for the next one. Beat still
    re-drives the sync, so a lost wake only delays a change, never loses it.
    """
    at = moment.timestamp()
    try:
        client = redis_client()
        scheduled = client.get(WAKE_KEY)
        if scheduled is not None and time.time() < float(scheduled) <= at:
            return
        client.set(WAKE_KEY, at, ex=max(int(at - time.time()) + 60, 60))
        _send(SYNC_TASK, eta=moment)
    except (redis.RedisError, OperationalError) as error:
        log.warning("could not schedule a sync (beat will run it): %s", error)


def once_per(key: str, seconds: float) -> bool:
    """True for the first call with ``key`` in any ``seconds``, across every process; also
    True when Redis does not answer (the caller's work is then merely done more often)."""
    try:
        return bool(redis_client().set(f"caldera:once:{key}", 1, nx=True, px=int(seconds * 1000)))
    except redis.RedisError:
        return True


def seen_before(key: str, value: str) -> bool:
    """Whether any process remembered ``value`` under ``key`` last (``remember``); False
    when Redis does not answer, so that the caller does its work again."""
    try:
        return redis_client().get(f"caldera:seen:{key}") == value.encode()
    except redis.RedisError:
        return False


def remember(key: str, value: str) -> None:
    try:
        redis_client().set(f"caldera:seen:{key}", value)
    except redis.RedisError as error:
        log.warning("could not remember %s (it is checked again): %s", key, error)
