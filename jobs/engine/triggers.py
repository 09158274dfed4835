"""Coalescing triggers for the singleton background cycles (admit, sync), and the sender
that takes the broker off the request path.

A trigger marks the cycle dirty and sends a task only if none is already waiting, so a
burst of a thousand submits runs a few cycles, not a thousand. The running cycle checks
the dirty mark after it releases its lock, so no trigger is lost while a cycle runs.

Asking for a task (``request_admission``, ``request_sync``, ``request_reconcile``,
``request_quota_publish``, ``request_sync_at``) never touches the broker in the caller's
thread: the request is handed to this process's sender thread (``SENDER``) through a small
bounded queue, and the caller goes on at once. A hung Redis (stopped, not refusing: every
read waits out its socket timeout) then holds only the sender, never a submit, a cancel
or a priority change. Nothing is lost for good when a request is
dropped (the queue is full, or the broker failed a moment ago): the database holds every
change, beat re-drives admission and the sync every few seconds, and each sync removes the
objects of jobs that want none. Callers hand a request over once their change is committed
(``transaction.on_commit``), and the sender sets the dirty mark later still, so the mark
still follows the change it announces.

What the cycles themselves call under their lock (``Trigger.started``, ``clear``,
``is_dirty``, ``mark``) and the small shared marks (``once_per``, ``seen_before``,
``remember``) stay synchronous: the worker acts on their answers.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from functools import cache

import redis
from celery import Celery, current_app
from django.conf import settings
from kombu.exceptions import OperationalError

from jobs.engine.task_names import ADMIT_TASK, PUBLISH_QUOTA_TASK, RECONCILE_TASK, SYNC_TASK

log = logging.getLogger(__name__)
PENDING_TTL_SECONDS = 30  # a lost task message cannot block the trigger for longer
# Each Redis command of the triggers and the heartbeats gives up after this long.
BROKER_TIMEOUT_SECONDS = 2
# Requests waiting for the sender. Admission, sync and the quota publish take one place
# each however often they are asked for (coalesced); the rest are reconciles and wakes.
# Beyond this the broker is not keeping up, and a request is dropped with a warning.
SENDER_QUEUE_SIZE = 256
# After the broker failed a request, the sender drops requests for this long instead of
# waiting out the timeout on each: a hung broker then costs the sender one timeout every
# few seconds, and requests never pile up stale behind it.
SENDER_REST_SECONDS = 5.0
# A process that exits (a gunicorn worker recycled, a management command) gives its last
# requests this long to leave; beat covers what does not.
SENDER_EXIT_SECONDS = 1.0


def redis_client() -> redis.Redis:
    """The process's Redis client (the broker's server): the triggers' marks, and the keys
    other modules keep there (the workers' heartbeats)."""
    return process_redis_client(os.getpid())


@cache
def process_redis_client(pid: int) -> redis.Redis:
    """One client per process, never one inherited through a fork.

    Why: a worker forks beat and its pool processes while its heartbeat thread may be
    inside the client's connection pool, holding the pool's lock. The child inherits that
    lock held by a thread it does not have, and redis-py's first call in the child (which
    resets the pool for the new process under that lock) waits for ever: beat never sent
    a task again. A child therefore makes its own client, and keeps the inherited one
    referenced here, since collecting it would close its pool under the same lock.
    """
    return redis.Redis.from_url(
        settings.REDIS_URL,
        socket_timeout=BROKER_TIMEOUT_SECONDS,
        socket_connect_timeout=BROKER_TIMEOUT_SECONDS,
    )


class BrokerRequest:
    """One request for the broker, to be sent by the sender thread.

    ``send(client, app)`` does the Redis and Celery calls. The client and the Celery app
    are taken in the caller's thread: Celery's current app is per thread, and the request
    goes to the broker its caller would have used. ``key`` coalesces: a request whose key
    is already waiting is not queued again.
    """

    def __init__(
        self,
        what: str,
        send: Callable[[redis.Redis, Celery], None],
        *,
        key: str | None = None,
    ):
        self.what = what
        self.send = send
        self.key = key
        self.client = redis_client()
        self.app = current_app._get_current_object()


@dataclass
class _SenderState:
    """What a process's sender holds; made anew in a forked child (the parent's thread
    does not exist there, and its locks may have been held at the fork)."""

    requests: queue.Queue
    lock: threading.Lock
    idle: threading.Condition
    waiting: set[str]
    thread: threading.Thread | None = None
    unsent: int = 0  # handed over and not yet sent or dropped
    resting_until: float = 0.0
    dropped: int = 0  # in the current outage

    @classmethod
    def new(cls, size: int) -> _SenderState:
        lock = threading.Lock()
        return cls(
            requests=queue.Queue(maxsize=size),
            lock=lock,
            idle=threading.Condition(lock),
            waiting=set(),
        )


class Sender:
    """One daemon thread per process sends the broker requests of every other thread.

    ``submit`` takes a few microseconds and never blocks: a full queue drops the request.
    The thread sends requests in order; a broker error (a refusal, a timeout) drops that
    request and rests the sender for SENDER_REST_SECONDS, dropping what arrives meanwhile,
    so a hung broker costs one timeout per rest. The first drop of an outage is logged as
    a warning, the return of the broker with the count dropped.
    """

    def __init__(self, size: int = SENDER_QUEUE_SIZE):
        self.size = size
        self.state = _SenderState.new(size)

    def reset(self) -> None:
        """An empty sender with no thread yet, as a new process has (a forked child's; the
        old state is left untouched, since its lock may have been held at the fork)."""
        self.state = _SenderState.new(self.size)

    def submit(self, request: BrokerRequest) -> None:
        state = self.state
        with state.lock:
            if request.key is not None and request.key in state.waiting:
                return  # the one waiting sets its mark after this caller's commit too
            if state.thread is None:
                state.thread = threading.Thread(
                    target=self._run, args=(state,), name="caldera-broker-sender", daemon=True
                )
                state.thread.start()
            try:
                state.requests.put_nowait(request)
            except queue.Full:
                full = True
            else:
                full = False
                state.unsent += 1
                if request.key is not None:
                    state.waiting.add(request.key)
        if full:
            self._drop(state, request, "the sender's queue is full")

    def unsent(self) -> int:
        """Requests handed over and not yet sent (or dropped)."""
        with self.state.lock:
            return self.state.unsent

    def flush(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for every request handed over so far to be sent
        or dropped; whether they were."""
        state = self.state
        with state.lock:
            return state.idle.wait_for(lambda: state.unsent == 0, timeout)

    def _run(self, state: _SenderState) -> None:
        while True:
            request = state.requests.get()
            with state.lock:
                # Taken off before it is sent: a request asked for during the send may
                # follow a commit the send did not see, so it must be queued again.
                state.waiting.discard(request.key)
            try:
                self._send(state, request)
            finally:
                with state.lock:
                    state.unsent -= 1
                    if state.unsent == 0:
                        state.idle.notify_all()

    def _send(self, state: _SenderState, request: BrokerRequest) -> None:
        if time.monotonic() < state.resting_until:
            self._drop(state, request, "the broker failed a moment ago")
            return
        try:
            request.send(request.client, request.app)
        except (redis.RedisError, OperationalError) as error:
            state.resting_until = time.monotonic() + SENDER_REST_SECONDS
            self._drop(state, request, str(error) or type(error).__name__)
            return
        except Exception:
            # A bug in one request must not stop the thread, or every later request
            # would wait for ever; it is logged with its traceback and dropped.
            log.exception("broker request failed: %s", request.what)
            return
        with state.lock:
            dropped, state.dropped = state.dropped, 0
        if dropped:
            log.warning(
                "broker requests are sent again; %d were dropped meanwhile (beat re-drove "
                "admission and the sync)",
                dropped,
            )

    @staticmethod
    def _drop(state: _SenderState, request: BrokerRequest, reason: str) -> None:
        with state.lock:
            first = state.dropped == 0
            state.dropped += 1
        if first:
            log.warning(
                "broker request dropped (%s): %s; beat re-drives admission and the sync, "
                "further drops are counted until the broker answers",
                reason,
                request.what,
            )


SENDER = Sender()
# A forked child (a Celery pool process) starts with an empty sender of its own.
os.register_at_fork(after_in_child=SENDER.reset)
atexit.register(SENDER.flush, SENDER_EXIT_SECONDS)


class Trigger:
    def __init__(self, name: str, task: str):
        self.task = task
        self.dirty_key = f"caldera:{name}:dirty"
        self.pending_key = f"caldera:{name}:pending"

    def fire(self) -> None:
        """Ask for a run of the task soon; the sender marks the cycle and sends the task."""
        SENDER.submit(BrokerRequest(f"run {self.task}", self._fire, key=self.dirty_key))

    def _fire(self, client: redis.Redis, app: Celery) -> None:
        pipe = client.pipeline(transaction=False)  # one round trip for both
        pipe.set(self.dirty_key, 1)
        pipe.set(self.pending_key, 1, nx=True, ex=PENDING_TTL_SECONDS)
        _dirty, first = pipe.execute()
        if first:
            try:
                app.send_task(self.task, retry=False)
            except OperationalError:
                # No task went: the next trigger must send one rather than wait out
                # the pending mark.
                with contextlib.suppress(redis.RedisError):
                    client.delete(self.pending_key)
                raise

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
    """Ask for the quota tree to be written to the cluster (CLUSTER_PUBLISH_QUOTA); when
    the request is dropped, beat's publish every minute writes it."""
    SENDER.submit(
        BrokerRequest(
            "publish the quota tree",
            lambda client, app: app.send_task(PUBLISH_QUOTA_TASK, retry=False),
            key=PUBLISH_QUOTA_TASK,
        )
    )


def request_reconcile(job_ids: list[int]) -> None:
    """Ask for the cluster to be made to match these jobs (a cancel, a preemption).

    When the request is dropped the caller's answer stands: the database already holds
    the change, and every sync removes the objects of jobs that want none.
    """
    ids = list(job_ids)
    SENDER.submit(
        BrokerRequest(
            f"reconcile jobs {ids}",
            lambda client, app: app.send_task(RECONCILE_TASK, args=[ids], retry=False),
        )
    )


WAKE_KEY = "caldera:sync:wake"


def request_sync_at(moment: datetime) -> None:
    """Ask for a sync at ``moment``, when the cluster said it will change by itself.

    Only the earliest wake is kept scheduled; that sync asks for the next one. Beat still
    re-drives the sync, so a lost wake only delays a change, never loses it.
    """
    SENDER.submit(
        BrokerRequest(
            f"sync at {moment.isoformat()}", lambda client, app: _wake(client, app, moment)
        )
    )


def _wake(client: redis.Redis, app: Celery, moment: datetime) -> None:
    at = moment.timestamp()
    scheduled = client.get(WAKE_KEY)
    if scheduled is not None and time.time() < float(scheduled) <= at:
        return
    client.set(WAKE_KEY, at, ex=max(int(at - time.time()) + 60, 60))
    app.send_task(SYNC_TASK, eta=moment, retry=False)


def once_per(key: str, seconds: float) -> bool:
    """True for the first call with ``key`` in any ``seconds``, across every process; also
    True when Redis does not answer (the caller's work is then merely done more often)."""
    try:
        return bool(redis_client().set(f"caldera:once:{key}", 1, nx=True, px=int(seconds * 1000)))
    except redis.RedisError:
        return True


def pause(key: str, seconds: float) -> None:
    """Let ``paused(key)`` be True for the next ``seconds``, across every process."""
    if seconds <= 0:
        return
    try:
        redis_client().set(f"caldera:pause:{key}", 1, px=max(1, int(seconds * 1000)))
    except redis.RedisError as error:
        log.warning("could not pause %s (it runs at every beat): %s", key, error)


def paused(key: str) -> bool:
    """Whether ``pause(key, ...)`` still holds; False when Redis does not answer (the
    paused work then merely runs more often)."""
    try:
        return bool(redis_client().exists(f"caldera:pause:{key}"))
    except redis.RedisError:
        return False


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
