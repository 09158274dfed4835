"""The jobs list and a job page with a million finished jobs, before and after retention
(the ``retention`` part of ``make bench``).

Into a fresh bench database it loads the Kueue baseline scenario's tree, queues RECENT of
its jobs (a researcher's recent work, which stays), then writes FINISHED (1,000,000 times
``--scale``) jobs that finished a year ago, copies of those jobs with two events each,
spread over the same queues, in one statement. Then, in-process with Django's test client
signed in as the scenario's submitter (staff, so every job is theirs to see):

- the jobs list (``/jobs/``, its first page, newest first) and a recent job's page,
  best and median of ROUNDS, with the finished jobs present;
- ``jobs_archive``: how long retention takes to write and delete them all, and the bytes
  it wrote;
- the same two pages again, once the tables are vacuumed and analysed as autovacuum would
  within a minute.

Imported by bench/__main__.py once Django is set up.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path

from .services import baseline_loaded

FINISHED = 1_000_000
ROUNDS = 10
RECENT = 1000


def measure(*, finished: int = FINISHED) -> dict:
    from django.conf import settings
    from django.test import Client
    from django.utils import timezone

    from jobs.engine.retention import jobs_archive
    from jobs.models import AccountingDone, Job

    _scenario, user, _bodies = baseline_loaded(queued=RECENT)
    recent = Job.objects.order_by("-id").values_list("pk", flat=True).first()
    started = time.perf_counter()
    write_finished(finished)
    write_seconds = time.perf_counter() - started

    client = Client(SERVER_NAME="127.0.0.1")
    client.force_login(user)

    def timed(path: str) -> dict:
        costs = []
        for _ in range(ROUNDS):
            start = time.perf_counter()
            answer = client.get(path)
            costs.append((time.perf_counter() - start) * 1000)
            if answer.status_code != 200:
                raise SystemExit(f"{path} answered {answer.status_code}")
        return {"best_ms": min(costs), "median_ms": statistics.median(costs)}

    def pages() -> dict:
        return {"jobs list": timed("/jobs/"), "a job's page": timed(f"/jobs/{recent}/")}

    before = pages()
    # Retention archives only the days the accounting has summarised: mark them so, as
    # beat's accounting task would have over the year.
    AccountingDone.objects.create(
        day=timezone.now().date() - timezone.timedelta(days=1), summarised_at=timezone.now()
    )
    with tempfile.TemporaryDirectory() as scratch:
        settings.JOB_ARCHIVE_DIR = Path(scratch)
        start = time.perf_counter()
        archived = jobs_archive()
        seconds = time.perf_counter() - start
        size = sum(path.stat().st_size for path in archived.files)
    settle()
    return {
        "finished": finished,
        "recent": RECENT,
        "rounds": ROUNDS,
        "write_seconds": write_seconds,
        "before": before,
        "archived": {
            "jobs": archived.jobs,
            "files": len(archived.files),
            "bytes": size,
            "seconds": seconds,
            "jobs_per_second": archived.jobs / seconds if seconds else None,
        },
        "after": pages(),
        "remaining": Job.objects.count(),
    }


def settle() -> None:
    """What autovacuum does within a minute of the deletes (a fifth of a table's rows dead
    starts it): the dead rows' space marked free and the planner's counts renewed, so the
    pages after archiving are timed as they run from then on, not in the minute between."""
    from django.db import connection

    from jobs.models import JOB_EVENTS, JOBS

    with connection.cursor() as cursor:
        cursor.execute(f"VACUUM (ANALYZE) {JOBS}, {JOB_EVENTS}")


def write_finished(finished: int) -> None:
    """``finished`` copies of the queued jobs (their queues, owners and shapes), finished a
    year ago, with an Enqueued and a Succeeded event each; the ticket trigger numbers them,
    and in a final state they hold no quota."""
    from django.db import connection
    from django.utils import timezone

    from jobs.models import JOB_EVENTS, JOBS, Job, State

    columns = [f.column for f in Job._meta.concrete_fields if f.column != "id"]
    copied = ", ".join(
        {
            "state": "%(state)s",
            "finished_at": "%(year_ago)s",
            "dequeued_at": "%(year_ago)s",
            "enqueued_at": "%(year_ago)s",
            "created_at": "%(year_ago)s",
            "name": "j.name || '-' || g",
        }.get(column, f"j.{column}")
        for column in columns
    )
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            WITH made AS (
                INSERT INTO {JOBS} ({", ".join(columns)})
                SELECT {copied}
                FROM generate_series(1, %(finished)s) g
                JOIN (SELECT *, row_number() OVER (ORDER BY id) AS pick FROM {JOBS}) j
                  ON j.pick = 1 + g %% {RECENT}
                RETURNING id
            )
            INSERT INTO {JOB_EVENTS} (job_id, created_at, type, reason, message, code, args,
                                      involved, count)
            SELECT made.id, %(year_ago)s, 'Normal', r.reason, r.reason, '', '{{}}', '', 1
            FROM made CROSS JOIN (VALUES ('Enqueued'), ('Succeeded')) r(reason)
            """,
            {
                "finished": finished,
                "state": State.SUCCEEDED,
                "year_ago": timezone.now() - timezone.timedelta(days=365),
            },
        )
        cursor.execute(f"ANALYZE {JOBS}")
        cursor.execute(f"ANALYZE {JOB_EVENTS}")
