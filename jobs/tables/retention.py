"""The raw statements of retention (``jobs.engine.retention``): which finished jobs are
old enough to archive, and each of them whole, as JSON, for the archive file."""

from __future__ import annotations

from datetime import datetime

from django.db import connection

from jobs.models import HOLDS, JOB_EVENTS, JOBS, TERMINAL


def archive_candidates(*, finished_before: datetime, limit: int) -> list[int]:
    """The ids of up to ``limit`` jobs in a final state that finished before
    ``finished_before``, oldest id first, locked (``SKIP LOCKED``: another archiver's, or a
    job someone is acting on, is left for the next run). Read in id order, which follows
    age: old jobs are found at the start of the table without an index of their own."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            SELECT id FROM {JOBS}
            WHERE state = ANY(%s) AND finished_at < %s
            ORDER BY id LIMIT %s
            FOR UPDATE SKIP LOCKED
            """,
            [list(TERMINAL), finished_before, limit],
        )
        return [row[0] for row in cursor.fetchall()]


def archived_rows(ids: list[int]) -> list[str]:
    """Each job of ``ids`` as one line of JSON: its row (``job``), its events and its spans
    of held quota, every column as the table holds it, in id order."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            SELECT json_build_object(
                'job', row_to_json(j),
                'events', COALESCE((SELECT json_agg(row_to_json(e) ORDER BY e.id)
                                    FROM {JOB_EVENTS} e WHERE e.job_id = j.id), '[]'),
                'holds', COALESCE((SELECT json_agg(row_to_json(h) ORDER BY h.id)
                                   FROM {HOLDS} h WHERE h.job_id = j.id), '[]')
            )::text
            FROM {JOBS} j WHERE j.id = ANY(%s) ORDER BY j.id
            """,
            [ids],
        )
        return [row[0] for row in cursor.fetchall()]
