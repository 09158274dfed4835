"""The jobs list and a job page with a million finished jobs, before and after retention:
``python -m bench.retention [FINISHED]``.

Run inside ``python -m portal.embedded run --`` (or with DATABASE_URL and REDIS_URL set).
It loads the Kueue baseline scenario's tree into a fresh bench database, queues 1,000 of
its jobs (a researcher's recent work, which stays), then writes FINISHED (default
1,000,000) jobs that finished a year ago, copies of those jobs with two events each,
spread over the same queues, in one statement. Then, in-process with Django's test client
signed in as the scenario's submitter (staff, so every job is theirs to see):

- the jobs list (``/jobs/``, its first page, newest first) and a recent job's page,
  best and median of ROUNDS, with the finished jobs present;
- ``jobs_archive``: how long retention takes to write and delete them all, and the bytes
  it wrote;
- the same two pages again.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

from .services import baseline_in_process

ROUNDS = 10
RECENT = 1000


def main(argv: list[str]) -> int:
    finished = int(argv[0]) if argv else 1_000_000
    _scenario, user, _bodies = baseline_in_process(queued=RECENT)
    from django.conf import settings
    from django.db import connection
    from django.test import Client
    from django.utils import timezone

    from jobs.engine.retention import jobs_archive
    from jobs.models import JOB_EVENTS, JOBS, AccountingDone, Job, State

    recent = Job.objects.order_by("-id").values_list("pk", flat=True).first()
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
    started = time.perf_counter()
    with connection.cursor() as cursor:
        # Copies of the queued jobs (their queues, owners and shapes), finished a year ago;
        # the ticket trigger numbers them, and in a final state they hold no quota.
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
    print(f"{finished:,} finished jobs written in {time.perf_counter() - started:.1f} s "
          f"beside {RECENT:,} queued")  # fmt: skip

    client = Client(SERVER_NAME="127.0.0.1")
    client.force_login(user)

    def timed(path: str) -> tuple[float, float]:
        costs = []
        for _ in range(ROUNDS):
            start = time.perf_counter()
            answer = client.get(path)
            costs.append((time.perf_counter() - start) * 1000)
            if answer.status_code != 200:
                raise SystemExit(f"{path} answered {answer.status_code}")
        return min(costs), statistics.median(costs)

    def pages(when: str) -> None:
        for label, path in (("jobs list", "/jobs/"), ("a job's page", f"/jobs/{recent}/")):
            best, median = timed(path)
            print(f"{label:<14} {when:<16} best {best:8.1f} ms  median {median:8.1f} ms")

    pages("with them")
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
    print(f"archived {archived.jobs:,} jobs in {len(archived.files)} files, {size / 1e6:,.1f} MB, "
          f"in {seconds:.1f} s ({archived.jobs / seconds:,.0f} jobs/s)")  # fmt: skip
    pages("after archiving")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
