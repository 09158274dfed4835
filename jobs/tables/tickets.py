"""The raw statements on the queue tickets (``QueueTicket``): the last ticket given in
each queue, which a job's place in its queue follows."""

from __future__ import annotations

from collections.abc import Mapping

from django.db import connection

from jobs.models import QueueTicket

QUEUE_TICKETS = QueueTicket._meta.db_table


def tickets_reserve(counts: Mapping[int, int]) -> dict[int, int]:
    """Take ``counts[queue]`` tickets in each queue in one short statement; returns the
    last ticket now given in each queue (the taken ones end there).

    Run outside a batch's transaction, so concurrent batches never wait on each other's
    ticket rows for longer than this statement; the rows are taken in queue order, so two
    batches cannot deadlock. A batch refused later leaves a gap in the tickets, which
    positions never see (they count jobs, not tickets).
    """
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            INSERT INTO {QUEUE_TICKETS} AS t (queue_id, last)
            SELECT queue_id, jobs FROM unnest(%s::bigint[], %s::bigint[]) AS r(queue_id, jobs)
            ORDER BY queue_id
            ON CONFLICT (queue_id) DO UPDATE SET last = t.last + EXCLUDED.last
            RETURNING queue_id, last
            """,
            [list(counts), list(counts.values())],
        )
        return dict(cursor.fetchall())
