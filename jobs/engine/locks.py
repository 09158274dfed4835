"""Locks: the singletons that hold across processes and hosts (PostgreSQL advisory locks),
and the one order in which every writer locks job rows.

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

import random
import time
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from typing import TypeVar

import psycopg
from django.db import OperationalError, connection, transaction

from jobs.models import JOBS

ADMISSION = 0xC41D_0001
SYNC = 0xC41D_0002
ESTIMATES = 0xC41D_0003

# A transaction that lost to another's locks is tried again this many times in all.
CONTENTION_ATTEMPTS = 4
CONTENTION_PAUSE_SECONDS = 0.05  # the first pause; it doubles, with jitter
CONTENTION_ERRORS = (
    psycopg.errors.DeadlockDetected,
    psycopg.errors.SerializationFailure,
    psycopg.errors.LockNotAvailable,
)

T = TypeVar("T")


@contextmanager
def advisory_lock(key: int) -> Iterator[bool]:
    """Try the lock without waiting; yields whether this process holds it.

    A session lock, so it holds across the transactions of a cycle and is released when
    the block ends or the connection dies with its process.
    """
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_lock(%s)", [key])
        acquired = cursor.fetchone()[0]
    try:
        yield acquired
    finally:
        if acquired:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_unlock(%s)", [key])


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
