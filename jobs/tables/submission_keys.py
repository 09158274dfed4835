"""The raw statement on the submission keys' table: a key's claim, which the ORM cannot say
(an INSERT that, on the unique index, replaces only an expired row and tells which it did).
"""

from __future__ import annotations

from datetime import datetime

from django.db import connection

from jobs.models import SUBMISSION_KEYS


def submission_key_claim(
    *, owner_id: int, key: str, digest: str, now: datetime, since: datetime
) -> int | None:
    """Take ``key`` for its owner inside the caller's transaction: insert it, or replace
    the owner's row of that key if it is older than ``since``; its id, or None when the
    owner holds the key from ``since`` on (a request made it, committed first).

    A concurrent claim of the same key waits on the unique index until this transaction
    ends: if it commits, the other finds the row (None); if it rolls back, the other
    inserts. The row is written before the jobs, so a twin request waits here before it
    stores anything.
    """
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            INSERT INTO {SUBMISSION_KEYS} AS k (owner_id, key, digest, job_ids, created_at)
            VALUES (%(owner)s, %(key)s, %(digest)s, '{{}}', %(now)s)
            ON CONFLICT (owner_id, key) DO UPDATE
                SET digest = EXCLUDED.digest, job_ids = EXCLUDED.job_ids,
                    created_at = EXCLUDED.created_at
                WHERE k.created_at < %(since)s
            RETURNING k.id
            """,
            {"owner": owner_id, "key": key, "digest": digest, "now": now, "since": since},
        )
        row = cursor.fetchone()
    return row[0] if row else None
