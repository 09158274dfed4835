"""Locks: the singletons that hold across processes and hosts, and the one order in which
every writer locks job rows.

Why no session lock: behind a pooler in transaction mode (PgBouncer's
``pool_mode=transaction``) each transaction may run on another server connection, so a
session advisory lock is taken on one connection, "released" on another, and kept by the
first, which a later session re-enters: two holders at once. Every exclusive section is
therefore held by something that lives inside one transaction or inside one row:

- the admission cycle, all database work, runs each cycle in one transaction that takes
  a transaction-scoped advisory lock first (``transaction_lock``); ``admission_held`` waits
  for the same lock;
- work that talks to the network or runs long between its transactions (the cluster sync,
  the start estimates, a webhook pass, beat's schedule) holds a lease: a row of
  ``Lease`` with a holder and an expiry, taken by one statement, renewed while the work
  runs, given back when it ends, and free again ``seconds`` after a holder died.

Why one order: the admission cycle, the sync, a bulk action and a single button each lock
several jobs in one transaction. Two transactions that lock the same rows in different
orders can each wait for the other, and PostgreSQL then kills one with ``deadlock
detected``. Every statement that locks more than one job therefore locks them by id,
ascending, before it changes any (``lock_jobs``, or a ``SELECT ... ORDER BY id FOR
UPDATE``). What contention is left (a lock timeout, a serialization failure) is retried a
bounded number of times (``retrying``) and, if it persists, answered as "busy", never as
"the database is down" (``is_contention``, read by ``portal.errors``).
"""

from __future__ import annotations

import logging
import os
import random
import socket
import threading
import time
import uuid
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TypeVar

import psycopg
from django.db import DatabaseError, OperationalError, connection, transaction

from jobs.models import JOBS, LEASES

log = logging.getLogger(__name__)

ADMISSION = 0xC41D_0001  # the transaction-scoped advisory lock of the admission cycle

# The leases, by name, and how long each lasts unrenewed: a holder that died frees it
# after this long, so another process takes the work over within it. Beat's is
# BEAT_LEASE_SECONDS (portal/heartbeat.py).
SYNC = "sync"
ESTIMATES = "estimates"
WEBHOOK_PASS = "webhook-pass"
BEAT = "beat"
LEASE_SECONDS = {SYNC: 15.0, ESTIMATES: 60.0, WEBHOOK_PASS: 60.0}

# A transaction that lost to another's locks is tried again this many times in all.
CONTENTION_ATTEMPTS = 4
CONTENTION_PAUSE_SECONDS = 0.05  # the first pause; it doubles, with jitter
CONTENTION_ERRORS = (
    psycopg.errors.DeadlockDetected,
    psycopg.errors.SerializationFailure,
    psycopg.errors.LockNotAvailable,
)

T = TypeVar("T")


def transaction_lock(key: int) -> bool:
    """Try the transaction-scoped advisory lock ``key`` without waiting; whether this
    transaction holds it now. It is released when the transaction ends (commit, rollback
    or a connection lost), so it is correct behind any pooler."""
    if not connection.in_atomic_block:
        raise transaction.TransactionManagementError("transaction_lock needs a transaction")
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_xact_lock(%s)", [key])
        return cursor.fetchone()[0]


# Taken by one statement: the row is made the first time, or taken over once its last
# holder let it expire. A row another transaction has locked (taking or renewing it) is
# skipped, not waited for, and a row that is not free is not locked at all; so a taking
# that fails holds nothing, even inside a longer transaction. A holder is never
# re-entered: each taking has a holder of its own.
TAKE = f"""
    WITH free AS (
        SELECT name FROM {LEASES}
        WHERE name = %(name)s AND expires_at <= now()
        FOR UPDATE SKIP LOCKED
    ), taken AS (
        UPDATE {LEASES} l
        SET holder = %(holder)s, taken_at = now(),
            expires_at = now() + make_interval(secs => %(seconds)s)
        FROM free WHERE l.name = free.name
        RETURNING l.holder
    ), made AS (
        INSERT INTO {LEASES} (name, holder, taken_at, expires_at)
        SELECT %(name)s, %(holder)s, now(), now() + make_interval(secs => %(seconds)s)
        WHERE NOT EXISTS (SELECT FROM {LEASES} WHERE name = %(name)s)
        ON CONFLICT (name) DO NOTHING
        RETURNING holder
    )
    SELECT holder FROM taken UNION ALL SELECT holder FROM made
"""
RENEW = f"""
    UPDATE {LEASES} SET expires_at = now() + make_interval(secs => %(seconds)s)
    WHERE name = %(name)s AND holder = %(holder)s AND expires_at > now()
"""
# A lease given back after work that ended well keeps when (``done_at``): the metrics'
# "last successful sync"; one given back after a failure keeps the last success.
GIVE_BACK = f"""
    UPDATE {LEASES}
    SET expires_at = LEAST(expires_at, now()),
        done_at = CASE WHEN %(done)s THEN now() ELSE done_at END
    WHERE name = %(name)s AND holder = %(holder)s
"""


@dataclass
class Lease:
    """A lease this process holds: ``name``, taken as ``holder`` for ``seconds``."""

    name: str
    holder: str
    seconds: float

    def renew(self) -> bool:
        """Make it last ``seconds`` from now; False if it expired and may be another's."""
        with connection.cursor() as cursor:
            cursor.execute(
                RENEW, {"name": self.name, "holder": self.holder, "seconds": self.seconds}
            )
            return cursor.rowcount == 1

    def give_back(self, *, done: bool) -> None:
        """Free it now; ``done``: the work it guarded ended well, and when is kept."""
        with connection.cursor() as cursor:
            cursor.execute(GIVE_BACK, {"name": self.name, "holder": self.holder, "done": done})


# The admission cycle's row: never taken (its lock is its transaction's), it keeps when
# the last cycle ended well, beside the leases' own, for the deployment's metrics.
ADMISSION_DONE = "admission"
DONE = f"""
    INSERT INTO {LEASES} (name, holder, taken_at, expires_at, done_at)
    VALUES (%s, '', now(), now(), now())
    ON CONFLICT (name) DO UPDATE SET done_at = now()
"""


def work_done(name: str) -> None:
    """Record that the work ``name`` (not a lease: the admission cycle) just ended well."""
    with connection.cursor() as cursor:
        cursor.execute(DONE, [name])


def holder_name() -> str:
    """Who takes a lease, readable in the table: host, process, and a part of its own."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def lease_take(name: str, *, seconds: float | None = None) -> Lease | None:
    """Take the lease ``name`` if it is free (never held, given back, or expired); None if
    another holds it. One statement, in autocommit or in the caller's transaction."""
    seconds = LEASE_SECONDS[name] if seconds is None else seconds
    holder = holder_name()
    with connection.cursor() as cursor:
        cursor.execute(TAKE, {"name": name, "holder": holder, "seconds": seconds})
        taken = cursor.fetchone() is not None
    return Lease(name, holder, seconds) if taken else None


@contextmanager
def leased(name: str, *, seconds: float | None = None) -> Iterator[Lease | None]:
    """Hold the lease ``name`` for the block (None if another holds it).

    Outside a transaction, a thread renews it every third of its time while the block
    runs, so that work longer than ``seconds`` keeps it, and a process that dies loses it
    within ``seconds``. Inside a transaction the lease row stays locked by it until it
    ends, so nobody else can take it meanwhile and no renewal is needed (nor possible:
    another connection would wait for that lock). Given back when the block ends, with
    the time of its success when it raised nothing.
    """
    lease = lease_take(name, seconds=seconds)
    if lease is None:
        yield None
        return
    stop = threading.Event()
    renewer = None
    if not connection.in_atomic_block:
        renewer = threading.Thread(
            target=_keep, args=(lease, stop), name=f"lease {name}", daemon=True
        )
        renewer.start()
    done = False
    try:
        yield lease
        done = True
    finally:
        stop.set()
        if renewer is not None:
            renewer.join()
        try:
            lease.give_back(done=done)
        except DatabaseError as error:  # it expires by itself
            log.warning(
                "lease %s not given back (it expires in %ss): %s", name, lease.seconds, error
            )


def _keep(lease: Lease, stop: threading.Event) -> None:
    """Renew ``lease`` every third of its time until ``stop``; the thread's own database
    connection is closed when it ends."""
    try:
        while not stop.wait(lease.seconds / 3):
            try:
                if not lease.renew():
                    log.error("lease %s expired while held by %s", lease.name, lease.holder)
                    return
            except DatabaseError as error:  # tried again at the next third
                log.warning("lease %s not renewed: %s", lease.name, error)
                connection.close()
    finally:
        connection.close()


def admission_held(*, timeout_seconds: float) -> None:
    """Wait for the admission cycle's lock, at most ``timeout_seconds``, and hold it until
    the caller's transaction ends: no cycle plans between what the caller reads and what it
    writes (a cycle that tries meanwhile goes round again once it is free). A lock timeout
    past that (``LockNotAvailable``) is contention: the caller answers "busy". Taken before
    any row lock, as the cycle takes it."""
    if not connection.in_atomic_block:
        raise transaction.TransactionManagementError("admission_held needs a transaction")
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT current_setting('lock_timeout'), set_config('lock_timeout', %s, true)",
            [f"{int(timeout_seconds * 1000)}ms"],
        )
        before = cursor.fetchone()[0]
        cursor.execute("SELECT pg_advisory_xact_lock(%s)", [ADMISSION])
        cursor.execute("SELECT set_config('lock_timeout', %s, true)", [before])


# The ids of the jobs a statement is about to change, locked in the one order. A statement
# that changes many jobs selects them through this, so that it waits for the rows in the
# same order as every other writer.
# FOR NO KEY UPDATE: writers still wait for each other, but not for the foreign-key checks
# of the events other transactions insert for these jobs (FOR KEY SHARE, taken at their
# COMMIT in no particular order), which FOR UPDATE would deadlock with.
LOCK_IN_ORDER = f"SELECT id FROM {JOBS} WHERE id = ANY(%s) ORDER BY id FOR NO KEY UPDATE"


def lock_jobs(ids: Collection[int]) -> list[int]:
    """Lock these jobs' rows, by id, until the transaction ends; the ids that exist.

    Called inside a transaction before the first change to several jobs: the changes that
    follow then wait for no row another writer could hold while waiting for ours.
    """
    if not connection.in_atomic_block:
        raise RuntimeError("lock_jobs holds its locks until the transaction ends: call it in one")
    if not ids:
        return []
    with connection.cursor() as cursor:
        cursor.execute(LOCK_IN_ORDER, [sorted(set(ids))])
        return [row[0] for row in cursor.fetchall()]


def is_contention(error: BaseException | None) -> bool:
    """Whether ``error`` is a transaction that lost to other transactions' locks (a
    deadlock, a serialization failure, a lock it could not have): the database answers,
    and the same work tried again shortly succeeds."""
    while error is not None:
        if isinstance(error, CONTENTION_ERRORS):
            return True
        error = error.__cause__
    return False


def retrying(work: Callable[[], T], *, attempts: int = CONTENTION_ATTEMPTS) -> T:
    """Run ``work`` in a transaction of its own, again when it loses to contention.

    Only an outermost transaction is retried: inside another, the outer one is already
    aborted and only its own caller can begin again. The last failure is raised as it is,
    and answered as "busy" by ``portal.errors``.
    """
    if connection.in_atomic_block:
        with transaction.atomic():
            return work()
    for attempt in range(1, attempts):
        try:
            with transaction.atomic():
                return work()
        except OperationalError as error:
            if not is_contention(error):
                raise
            pause = CONTENTION_PAUSE_SECONDS * 2 ** (attempt - 1)
            time.sleep(pause * random.uniform(0.5, 1.5))
    with transaction.atomic():
        return work()
