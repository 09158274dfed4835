"""What fair sharing over time costs: ``python -m bench.fair_share [SPANS]``.

Run inside ``python -m portal.embedded run --`` (or with DATABASE_URL and REDIS_URL set).
It loads the Kueue baseline scenario's tree with a half-life of 7 days into a fresh bench
database, queues 1,000 of its jobs, and writes SPANS spans of held quota (default
1,000,000) over the last 20 half-lives (140 days: older ones weigh nothing and are not
read), spread over the tree's leaves, a thousand of them still open. Then it times:

- beat's ``fair_share_record`` (every FAIR_SHARE_SECONDS): the decayed usage of every node
  from all those spans, best and median of five;
- what the admission cycle reads besides the queue heads (``read_holding``), with the
  half-life on and off: the shares used cost one more query per cycle.
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable

from .services import baseline_in_process

ROUNDS = 5
JOBS = 1000


def main(argv: list[str]) -> int:
    spans = int(argv[0]) if argv else 1_000_000
    baseline_in_process(half_life="7d", queued=JOBS)
    from django.db import connection
    from django.utils import timezone

    from jobs.engine.admission.inputs import read_holding
    from jobs.engine.fair_share import fair_share_record
    from jobs.models import HOLDS
    from jobs.models import JOBS as JOBS_TABLE
    from queues.models import Queue, QuotaNode

    with connection.cursor() as cursor:
        # Each span: one of the queued jobs' requests, in its leaf, from a moment in the
        # last 140 days, held ten minutes to two days; the last thousand still held.
        cursor.execute(
            f"""
            INSERT INTO {HOLDS} (job_id, path, request, started_at, ended_at)
            SELECT j.id, n.path, j.request, s.started,
                CASE WHEN g > %(spans)s - 1000 THEN NULL
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
            {"spans": spans, "now": timezone.now()},
        )
        cursor.execute(f"ANALYZE {HOLDS}")
    print(f"{spans:,} spans of held quota over {JOBS:,} jobs and "
          f"{QuotaNode.objects.filter(active=True).count()} nodes")  # fmt: skip

    def timed(step: Callable[[], object], rounds: int = ROUNDS) -> tuple[float, float]:
        costs = []
        for _ in range(rounds):
            start = time.perf_counter()
            step()
            costs.append((time.perf_counter() - start) * 1000)
        return min(costs), statistics.median(costs)

    best, median = timed(fair_share_record)
    print(f"fair_share_record (beat):               best {best:9.1f} ms  median {median:9.1f} ms")
    best, median = timed(read_holding, 20)
    print(f"read_holding, half-life on (cycle):     best {best:9.1f} ms  median {median:9.1f} ms")
    QuotaNode.objects.filter(parent=None).update(half_life=None)
    best, median = timed(read_holding, 20)
    print(f"read_holding, half-life off (cycle):    best {best:9.1f} ms  median {median:9.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
