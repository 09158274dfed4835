"""What fair sharing over time costs (the ``fair-share`` part of ``make bench``).

Into a fresh bench database it loads the Kueue baseline scenario's tree with a half-life of
7 days, queues JOBS of its jobs, and writes spans of held quota over the last 20
half-lives (140 days: older ones weigh nothing and are not read), spread over the tree's
leaves, a thousand of them still open: first 100,000, then 900,000 more (times
``--scale``). At each size it times:

- beat's ``fair_share_record`` (every FAIR_SHARE_SECONDS): the decayed usage of every node
  from all those spans, best and median of ROUNDS;
- what the admission cycle reads besides the queue heads (``read_holding``), with the
  half-life on and off, best and median of CYCLE_ROUNDS: the shares used cost one more
  query per cycle.

Imported by bench/__main__.py once Django is set up.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

from .services import baseline_loaded

SIZES = (100_000, 1_000_000)
ROUNDS = 5
CYCLE_ROUNDS = 20
JOBS = 1000
OPEN = 1000  # spans still held


def measure(*, scale: float = 1.0) -> dict:
    from jobs.engine.admission.inputs import read_holding
    from jobs.engine.fair_share import fair_share_record
    from queues.models import QuotaNode

    baseline_loaded(half_life="7d", queued=JOBS)
    root = QuotaNode.objects.get(active=True, parent=None)
    sizes, written = [], 0
    for size in SIZES:
        spans = max(OPEN, int(size * scale))
        write_spans(spans - written, still_open=OPEN if written == 0 else 0)
        written = spans
        QuotaNode.objects.filter(pk=root.pk).update(half_life=root.half_life)
        on = timed(read_holding, CYCLE_ROUNDS)
        QuotaNode.objects.filter(pk=root.pk).update(half_life=None)
        off = timed(read_holding, CYCLE_ROUNDS)
        QuotaNode.objects.filter(pk=root.pk).update(half_life=root.half_life)
        sizes.append(
            {
                "spans": spans,
                "record": timed(fair_share_record, ROUNDS),
                "cycle_on": on,
                "cycle_off": off,
            }
        )
    return {
        "nodes": QuotaNode.objects.filter(active=True).count(),
        "jobs": JOBS,
        "half_life": "7d",
        "sizes": sizes,
    }


def timed(step: Callable[[], object], rounds: int) -> dict:
    costs = []
    for _ in range(rounds):
        start = time.perf_counter()
        step()
        costs.append((time.perf_counter() - start) * 1000)
    return {"best_ms": min(costs), "median_ms": statistics.median(costs)}


def write_spans(spans: int, *, still_open: int) -> None:
    """Each span: one of the queued jobs' requests, in its leaf, from a moment in the last
    140 days, held ten minutes to two days; the last ``still_open`` still held."""
    from django.db import connection
    from django.utils import timezone

    from jobs.models import HOLDS
    from jobs.models import JOBS as JOBS_TABLE
    from queues.models import Queue, QuotaNode

    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            INSERT INTO {HOLDS} (job_id, path, request, started_at, ended_at)
            SELECT j.id, n.path, j.request, s.started,
                CASE WHEN g > %(spans)s - %(open)s THEN NULL
                     ELSE LEAST(s.started + (600 + random() * 172200) * interval '1 second',
                                %(now)s) END
            FROM generate_series(1, %(spans)s) g
            CROSS JOIN LATERAL (SELECT %(now)s - random() * interval '140 days' AS started,
                                       1 + (g %% {JOBS}) AS pick) s
            JOIN (SELECT id, request, queue_id, row_number() OVER (ORDER BY id) AS pick
                  FROM {JOBS_TABLE}) j ON j.pick = s.pick
            JOIN {Queue._meta.db_table} q ON q.id = j.queue_id
            JOIN {QuotaNode._meta.db_table} n ON n.id = q.node_id
            """,
            {"spans": spans, "open": still_open, "now": timezone.now()},
        )
        cursor.execute(f"ANALYZE {HOLDS}")
