"""Retention: finished jobs older than JOB_RETENTION_DAYS leave the database for the
archive, so that the jobs table does not grow for ever.

Beat runs ``jobs_archive`` every ARCHIVE_SECONDS. In batches of JOB_ARCHIVE_BATCH, each in
one transaction: the oldest jobs in a final state (succeeded, failed, cancelled) that
finished before the cutoff are locked, written whole (the row, its events, its spans of
held quota) as compressed JSON lines to a new file in JOB_ARCHIVE_DIR, flushed to disk,
and only then deleted with everything that belongs to them. Nothing pending or holding
quota is ever touched: only final states are read. Nor is a job the usage accounting has
not summarised yet: only jobs that finished before the end of the last day it summarised
(``AccountingDone``, contiguous from the first job's day) go, so its figures survive them.

Nothing is lost: a file that cannot be written rolls the batch back, and a batch whose
deletion fails after its file was written leaves that file behind, so the jobs are
archived twice, never zero times (a line's ``job.id`` tells duplicates apart). The usage
accounting keeps its own summaries; the ledger of holds goes with its jobs, long after
fair sharing stopped reading it (20 half-lives).
"""

from __future__ import annotations

import gzip
import os
from dataclasses import dataclass
from datetime import UTC, datetime, time, timedelta
from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from jobs.models import AccountingDone, Job
from jobs.tables.events import events_retire
from jobs.tables.retention import archive_candidates, archived_rows
from sql.rows import chunks


@dataclass(frozen=True)
class Archived:
    jobs: int
    files: list[Path]


def jobs_archive(*, now: datetime | None = None, batches: int | None = None) -> Archived:
    """Archive and delete every finished job past retention (at most ``batches`` batches
    in this run; None: until none is left). Off while JOB_RETENTION_DAYS is 0."""
    if settings.JOB_RETENTION_DAYS <= 0:
        return Archived(0, [])
    now = now or timezone.now()
    summarised = AccountingDone.objects.order_by("-day").values_list("day", flat=True).first()
    if summarised is None:
        return Archived(0, [])
    cutoff = min(
        now - timedelta(days=settings.JOB_RETENTION_DAYS),
        datetime.combine(summarised + timedelta(days=1), time.min, tzinfo=UTC),
    )
    directory = Path(settings.JOB_ARCHIVE_DIR)
    directory.mkdir(parents=True, exist_ok=True)
    count, files = 0, list[Path]()
    while batches is None or len(files) < batches:
        with transaction.atomic():
            ids = archive_candidates(finished_before=cutoff, limit=settings.JOB_ARCHIVE_BATCH)
            if not ids:
                break
            path = directory / f"jobs-{now:%Y%m%dT%H%M%SZ}-{ids[0]}-{ids[-1]}.jsonl.gz"
            _write(path, archived_rows(ids))
            events_retire(ids)  # the counters of their events stay as they were
            for part in chunks(ids):  # Django names each cascaded row: bounded
                Job.objects.filter(pk__any=part).delete()  # with its events, holds, hooks
        count += len(ids)
        files.append(path)
    return Archived(count, files)


def _write(path: Path, lines: list[str]) -> None:
    """The lines, gzipped, in a file that appears whole or not at all (written beside it,
    flushed to disk, then renamed)."""
    partial = path.with_name(path.name + ".partial")
    with open(partial, "wb") as raw:
        with gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as archive:
            for line in lines:
                archive.write(line.encode() + b"\n")
        raw.flush()
        os.fsync(raw.fileno())
    os.replace(partial, path)
