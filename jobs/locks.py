"""PostgreSQL advisory locks: singletons that hold across processes and hosts."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from django.db import connection

ADMISSION = 0xC41D_0001
SYNC = 0xC41D_0002
ESTIMATES = 0xC41D_0003


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
