"""The raw statements on the ledger of quota held (``Hold``): the decayed usage fair
sharing reads (``queues.fairness``). The ledger itself is written by the database's
trigger (migration 0025); the accounting reads it too."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.db import connection

from jobs.models import HOLDS


def decayed_by_leaf(
    *, now: datetime, half_life: timedelta, kept: int
) -> dict[str, dict[str, float]]:
    """Per leaf and resource, what its spans held, each second weighted by ``2 ** -(age /
    half_life)`` and summed, over holding one unit for ever (``fairness.decayed_fraction``
    of each span, in SQL): divide by a resource's allocatable total for the leaf's
    decayed usage. Spans that ended more than ``kept`` half-lives ago weigh nothing and
    are not read; a span still open counts to ``now``."""
    seconds = half_life.total_seconds()
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            SELECT h.path, r.key, SUM(r.value::float8 * (
                power(2::float8, -LEAST(GREATEST(EXTRACT(EPOCH FROM
                    %(now)s - COALESCE(h.ended_at, %(now)s)), 0) / %(seconds)s, %(kept)s))
                - power(2::float8, -LEAST(GREATEST(EXTRACT(EPOCH FROM
                    %(now)s - h.started_at), 0) / %(seconds)s, %(kept)s))))
            FROM {HOLDS} h CROSS JOIN LATERAL jsonb_each_text(h.request) r
            WHERE h.ended_at IS NULL OR h.ended_at > %(since)s
            GROUP BY 1, 2
            """,
            {"now": now, "seconds": seconds, "kept": kept, "since": now - half_life * kept},
        )
        by_leaf: dict[str, dict[str, float]] = {}
        for path, resource, held in cursor.fetchall():
            by_leaf.setdefault(path, {})[resource] = held
    return by_leaf
