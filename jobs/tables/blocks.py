"""The raw statements on the pending blocks (``PendingBlock``): the triggers of migration
0004 append their rows, and the admission cycle folds them."""

from __future__ import annotations

from django.db import connection

from jobs.models import PENDING_BLOCKS


def compact_pending_blocks() -> None:
    """Fold the appended changes of each (queue, priority, block) into one row.

    Run under the admission lock, so by one process at a time. Rows that writers append
    meanwhile are not in this statement's snapshot and stay, so no count is lost.
    """
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            WITH folded AS (
                DELETE FROM {PENDING_BLOCKS} b
                USING (
                    SELECT queue_id, priority, block FROM {PENDING_BLOCKS}
                    GROUP BY 1, 2, 3 HAVING COUNT(*) > 1 OR SUM(jobs) = 0
                ) k
                WHERE (b.queue_id, b.priority, b.block) = (k.queue_id, k.priority, k.block)
                RETURNING b.queue_id, b.priority, b.block, b.jobs
            )
            INSERT INTO {PENDING_BLOCKS} (queue_id, priority, block, jobs)
            SELECT queue_id, priority, block, SUM(jobs) FROM folded
            GROUP BY 1, 2, 3 HAVING SUM(jobs) <> 0
            """
        )
