"""Workers and beat say they are alive in Redis; /healthz counts the workers with one read,
and ``manage.py probe`` asks about the process of its own host (a container's health check).

Pinging every worker from every health check (``app.control.ping``) cost half a second
per request and, under a flood of anonymous checks, longer than the liveness probe's
timeout. Instead each worker runs ``WorkerHeartbeat``, a bootstep of the worker's
blueprint (so it runs in ``celery worker`` and in the tests' embedded worker alike), whose
thread writes the worker's name into one sorted set every WORKER_HEARTBEAT_SECONDS, scored
by Redis's own clock. A worker counts as live for three beats after its last; one that is
stopped removes itself, and one that is killed ages out. Both sides run a short Lua script,
so each is one round trip and the hosts' clocks never matter.
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

import redis
from celery import bootsteps
from django.conf import settings

from jobs.engine.triggers import redis_client

log = logging.getLogger(__name__)

WORKERS_KEY = "caldera:workers"
BEAT_KEY = "caldera:beat:{host}"  # beat's last tick, one key per host it runs on
BEATS_TO_LIVE = 3

_BEAT = """
local now = tonumber(redis.call('TIME')[1])
redis.call('ZADD', KEYS[1], now, ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - tonumber(ARGV[2]))
redis.call('EXPIRE', KEYS[1], ARGV[2])
"""
_LIVE = """
local now = tonumber(redis.call('TIME')[1])
return redis.call('ZCOUNT', KEYS[1], now - tonumber(ARGV[1]), '+inf')
"""
_ONE_LIVE = """
local now = tonumber(redis.call('TIME')[1])
local at = redis.call('ZSCORE', KEYS[1], ARGV[1])
if at and now - tonumber(at) <= tonumber(ARGV[2]) then return 1 end
return 0
"""


def _time_to_live() -> int:
    return max(1, round(settings.WORKER_HEARTBEAT_SECONDS * BEATS_TO_LIVE))


def beat(hostname: str) -> None:
    """Record that the worker ``hostname`` is alive now."""
    redis_client().eval(_BEAT, 1, WORKERS_KEY, hostname, _time_to_live())


def live_workers(client: redis.Redis | None = None) -> int:
    """How many workers beat within the last BEATS_TO_LIVE beats, read through ``client``
    (the probes pass one with a short timeout; default: the process's). Raises redis
    errors."""
    client = client or redis_client()
    return int(client.eval(_LIVE, 1, WORKERS_KEY, _time_to_live()))


def worker_live(hostname: str) -> bool:
    """Whether the worker ``hostname`` (``celery@<host>``) beat within its time to live.
    Raises redis errors."""
    return bool(redis_client().eval(_ONE_LIVE, 1, WORKERS_KEY, hostname, _time_to_live()))


def alive_file(process: str) -> Path:
    """The file a worker's heartbeat thread, or beat's loop, touches at each beat: the
    liveness probe of its container reads its age, so that neither Redis nor the database
    being away restarts a process that is only waiting for them."""
    return Path(settings.ALIVE_DIR) / f"caldera-{process}-alive"


def mark_alive(process: str) -> None:
    alive_file(process).touch()


def alive(process: str) -> bool:
    """Whether this container's ``process`` touched its file within BEATS_TO_LIVE beats."""
    try:
        age = time.time() - alive_file(process).stat().st_mtime
    except FileNotFoundError:
        return False
    return age <= _time_to_live()


def beat_ticked(host: str) -> None:
    """Record that beat on ``host`` is running its schedule now."""
    redis_client().set(BEAT_KEY.format(host=host), "1", ex=_time_to_live())


def beat_live(host: str) -> bool:
    """Whether beat on ``host`` ticked within BEATS_TO_LIVE beats. Raises redis errors."""
    return bool(redis_client().exists(BEAT_KEY.format(host=host)))


class WorkerHeartbeat(bootsteps.StartStopStep):
    """A worker bootstep: a daemon thread beats while the worker runs.

    A broker outage only skips beats (logged once per outage); the thread carries on and
    the worker, which survives the outage, is counted again once Redis is back.
    """

    def __init__(self, worker, **kwargs):
        super().__init__(worker, **kwargs)
        self.stopping = threading.Event()
        self.thread: threading.Thread | None = None

    def start(self, worker) -> None:
        self.stopping.clear()
        self.thread = threading.Thread(
            target=self._run, args=(worker.hostname,), name="caldera-heartbeat", daemon=True
        )
        self.thread.start()

    def stop(self, worker) -> None:
        self.stopping.set()
        if self.thread is not None:
            self.thread.join(timeout=settings.WORKER_HEARTBEAT_SECONDS + 5)
        try:
            redis_client().zrem(WORKERS_KEY, worker.hostname)
        except redis.RedisError as error:
            log.warning("could not remove the heartbeat of %s: %s", worker.hostname, error)

    def terminate(self, worker) -> None:  # a cold shutdown stops the beats the same way
        self.stop(worker)

    def _run(self, hostname: str) -> None:
        failing = False
        while not self.stopping.is_set():
            mark_alive("worker")
            try:
                beat(hostname)
                failing = False
            except redis.RedisError as error:
                if not failing:
                    log.warning("worker heartbeat not written (Redis down?): %s", error)
                failing = True
            self.stopping.wait(settings.WORKER_HEARTBEAT_SECONDS)
