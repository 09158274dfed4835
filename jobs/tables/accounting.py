"""The raw statements of the accounting (``jobs/usage/accounting.py``): a period's figures
by UTC day, leaf, owner and runtime, computed from the ledger of holds, the job rows and
their Preempted events; and the same figures read back, added up, from the daily summary
(``AccountingDay``) that beat writes through the ORM.

Days are UTC days: every statement bins its times on midnight UTC (``date_bin`` from the
epoch, ``AT TIME ZONE 'UTC'``), whatever the session's zone.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, date, datetime, timedelta

from django.db import connection, transaction

from jobs.models import (
    ACCOUNTING_DAYS,
    ACCOUNTING_LEAF_DAYS,
    ACCOUNTING_MONTHS,
    HOLDS,
    JOB_EVENTS,
    JOBS,
    TERMINAL,
    WAIT_BOUNDS,
    WAIT_BUCKETS,
    JobEvent,
)
from queues.selectors import QUEUES, QUOTA_NODES

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

# A cell of the summary: (day, leaf path, owner id, runtime).
Cell = tuple[date, str, int, str]
# The figures of a summary row that add up as they are (``AccountingFigures``), beside
# ``held`` (resource -> seconds) and ``waits`` (the histogram, bucket by bucket).
COUNTS = ("succeeded", "failed", "cancelled", "preemptions", "admissions", "wait_seconds")
WAITS_SUMMED = ", ".join(f"SUM(a.waits[{i}])" for i in range(1, WAIT_BUCKETS + 1))


def _rows(sql: str, params: dict) -> list[tuple]:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


def held_by_day(*, since: datetime, until: datetime) -> list[tuple]:
    """Resource-seconds held from ``since`` to ``until`` by (day, leaf, owner, runtime,
    resource): each span's request times its overlap with each day, a span still open
    counted to ``until``. Spans are found by the index on their end (open ones too)."""
    return _rows(
        f"""
        SELECT (d.start AT TIME ZONE 'UTC')::date, h.path, j.owner_id, j.runtime, r.key,
            SUM(r.value::numeric * EXTRACT(EPOCH FROM
                LEAST(COALESCE(h.ended_at, %(until)s), d.start + interval '1 day', %(until)s)
                - GREATEST(h.started_at, d.start, %(since)s)))
        FROM {HOLDS} h
        JOIN {JOBS} j ON j.id = h.job_id
        CROSS JOIN LATERAL generate_series(
            date_bin('1 day', GREATEST(h.started_at, %(since)s), %(epoch)s),
            LEAST(COALESCE(h.ended_at, %(until)s), %(until)s),
            interval '1 day') AS d(start)
        CROSS JOIN LATERAL jsonb_each_text(h.request) AS r
        WHERE (h.ended_at > %(since)s OR h.ended_at IS NULL) AND h.started_at < %(until)s
            AND LEAST(COALESCE(h.ended_at, %(until)s), d.start + interval '1 day', %(until)s)
                > GREATEST(h.started_at, d.start, %(since)s)
        GROUP BY 1, 2, 3, 4, 5
        """,
        {"since": since, "until": until, "epoch": EPOCH},
    )


def finished_by_day(*, since: datetime, until: datetime) -> list[tuple]:
    """Jobs that reached a final state from ``since`` to ``until``, by (day of their finish,
    leaf of their queue, owner, runtime, state): count."""
    return _rows(
        f"""
        SELECT (j.finished_at AT TIME ZONE 'UTC')::date, n.path, j.owner_id, j.runtime,
            j.state, COUNT(*)
        FROM {JOBS} j
        JOIN {QUEUES} q ON q.id = j.queue_id
        JOIN {QUOTA_NODES} n ON n.id = q.node_id
        WHERE j.finished_at >= %(since)s AND j.finished_at < %(until)s
            AND j.state = ANY(%(terminal)s)
        GROUP BY 1, 2, 3, 4, 5
        """,
        {"since": since, "until": until, "terminal": [str(state) for state in TERMINAL]},
    )


def waits_by_day(*, since: datetime, until: datetime) -> list[tuple]:
    """The waits of the jobs first admitted from ``since`` to ``until`` (their first span's
    start less their enqueue time), by (day of that admission, its leaf, owner, runtime,
    histogram bucket): count and seconds added up. Bucket i (0-based) holds the waits below
    WAIT_BOUNDS[i] and at least the bound before it."""
    return _rows(
        f"""
        SELECT (h.started_at AT TIME ZONE 'UTC')::date, h.path, j.owner_id, j.runtime,
            width_bucket(w.seconds, %(bounds)s::float8[]), COUNT(*), SUM(w.seconds)
        FROM {HOLDS} h
        JOIN {JOBS} j ON j.id = h.job_id
        CROSS JOIN LATERAL (SELECT GREATEST(0, EXTRACT(EPOCH FROM h.started_at - j.enqueued_at))
            ::float8 AS seconds) w
        WHERE (h.ended_at >= %(since)s OR h.ended_at IS NULL)
            AND h.started_at >= %(since)s AND h.started_at < %(until)s
            AND NOT EXISTS (
                SELECT 1 FROM {HOLDS} e
                WHERE e.job_id = h.job_id AND (e.started_at, e.id) < (h.started_at, h.id))
        GROUP BY 1, 2, 3, 4, 5
        """,
        {"since": since, "until": until, "bounds": list(WAIT_BOUNDS)},
    )


def preemptions_by_day(*, since: datetime, until: datetime) -> list[tuple]:
    """Preemptions suffered from ``since`` to ``until``: the jobs' Preempted events (one per
    preemption, written by the cycle that decided it), by (day, leaf of the job's queue,
    owner, runtime): count. A preempted job held quota then, so its events are looked up
    through the spans of the period (the index on their end) and the events' index on job
    and time, never by reading every event."""
    return _rows(
        f"""
        SELECT (e.created_at AT TIME ZONE 'UTC')::date, n.path, j.owner_id, j.runtime, COUNT(*)
        FROM {JOB_EVENTS} e
        JOIN {JOBS} j ON j.id = e.job_id
        JOIN {QUEUES} q ON q.id = j.queue_id
        JOIN {QUOTA_NODES} n ON n.id = q.node_id
        WHERE e.reason = %(reason)s
            AND e.created_at >= %(since)s AND e.created_at < %(until)s
            AND e.job_id IN (
                SELECT h.job_id FROM {HOLDS} h
                WHERE (h.ended_at >= %(since)s OR h.ended_at IS NULL)
                    AND h.started_at < %(until)s)
        GROUP BY 1, 2, 3, 4
        """,
        {"since": since, "until": until, "reason": JobEvent.Reason.PREEMPTED},
    )


def month_rollup(month: date) -> None:
    """Write the ``AccountingMonth`` rows of the month starting on ``month`` again as the
    sums of its ``AccountingDay`` rows (one statement; in the caller's transaction, which
    writes those days under the accounting lock)."""
    counts = ", ".join(COUNTS)
    with connection.cursor() as cursor:
        _without_jit(cursor)
        cursor.execute(f"DELETE FROM {ACCOUNTING_MONTHS} WHERE month = %s", [month])
        cursor.execute(
            f"""
            INSERT INTO {ACCOUNTING_MONTHS} (month, path, owner_id, runtime, {counts}, waits, held)
            SELECT %(month)s, f.path, f.owner_id, f.runtime, {counts}, f.waits,
                COALESCE(h.held, '{{}}'::jsonb)
            FROM (
                SELECT a.path, a.owner_id, a.runtime,
                    {", ".join(f"SUM(a.{name}) AS {name}" for name in COUNTS)},
                    ARRAY[{WAITS_SUMMED}]::integer[] AS waits
                FROM {ACCOUNTING_DAYS} a
                WHERE a.day >= %(month)s AND a.day < %(next)s
                GROUP BY 1, 2, 3
            ) f
            LEFT JOIN (
                SELECT path, owner_id, runtime, jsonb_object_agg(key, seconds) AS held
                FROM (
                    SELECT a.path, a.owner_id, a.runtime, r.key, SUM(r.value::numeric) AS seconds
                    FROM {ACCOUNTING_DAYS} a
                    CROSS JOIN LATERAL jsonb_each_text(a.held) AS r
                    WHERE a.day >= %(month)s AND a.day < %(next)s
                    GROUP BY 1, 2, 3, 4
                ) by_resource
                GROUP BY 1, 2, 3
            ) h USING (path, owner_id, runtime)
            """,
            {"month": month, "next": next_month(month)},
        )


def _without_jit(cursor) -> None:
    """No JIT compiling for the rest of the transaction: the planner puts the summary's
    statements far above their real cost (it estimates a JSON object's entries at a
    hundred, not four), and compiling them took longer than running them."""
    cursor.execute("SET LOCAL jit = off")


def next_month(month: date) -> date:
    """The first day of the month after the one ``month`` is in."""
    return (month.replace(day=28) + timedelta(days=4)).replace(day=1)


def summary_read(
    *,
    first: date,
    last: date,
    bucket: str,
    by_path: bool,
    by_owner: bool,
    by_runtime: bool,
    managed: Sequence[str] | None,
    owner: int | None = None,
    own: Sequence[str] = (),
    not_under: Sequence[str] = (),
    within: str | None = None,
) -> tuple[list[str], list[tuple]]:
    """The summary rows of the days ``first`` to ``last`` (both in) added up by (bucket[,
    leaf][, owner][, runtime]): ``bucket`` is ``day`` or ``month`` (the first day of the
    bucket); a key not asked for is answered empty (NULL for the owner), so that only the
    groups asked for leave the database. With ``by_owner`` the rows per person are read
    (``AccountingDay``, and ``AccountingMonth`` for the whole months of a monthly read),
    else the rows per leaf (``AccountingLeafDay``), thirty times fewer for thirty people.

    Rows seen: those under ``within`` (a node: its subtree) if given; of those, all when
    ``managed`` is None; else those under one of ``managed`` (nodes: their subtrees), and,
    from the rows per person only, those of ``owner`` under one of ``own`` and under none
    of ``not_under``.

    Two statements: the names of the resources held in the period; then one pass adding
    up the figures of the jobs, the waits' histogram bucket by bucket and the
    resource-seconds resource by resource (one SUM each, nothing unnested). Returns
    (resources, rows): rows (bucket, path, owner, runtime, succeeded, failed, cancelled,
    preemptions, admissions, wait_seconds, *waits, *held), held in the order of
    ``resources``, None where no row held that resource."""
    if bucket not in ("day", "month"):
        raise ValueError(bucket)
    per_owner = by_owner or owner is not None
    params: dict = {"first": first, "last": last, "owner": owner}
    source = _source(per_owner=per_owner, bucket=bucket, first=first, last=last, params=params)
    keys = (
        f"date_trunc('{bucket}', a.day)::date, "
        + ("a.path, " if by_path else "''::text, ")
        + ("a.owner_id, " if by_owner else "NULL::integer, ")
        + ("a.runtime" if by_runtime else "''::text")
    )
    where = "TRUE"
    if within is not None:
        where += f" AND {_under('within')}"
    if managed is not None:
        seen = [_under("managed")]
        if owner is not None:
            seen.append(
                f"(a.owner_id = %(owner)s AND {_under('own')} AND NOT {_under('not_under')})"
            )
        where += f" AND ({' OR '.join(seen)})"
    for name, paths in (
        ("within", [within] if within is not None else []),
        ("managed", managed or ()),
        ("own", own),
        ("not_under", not_under),
    ):
        params[name] = list(paths)
        params[f"{name}_below"] = [_like_prefix(path) for path in paths]
    counts = ", ".join(f"SUM(a.{name})" for name in COUNTS)
    with transaction.atomic(), connection.cursor() as cursor:
        _without_jit(cursor)
        # The resources held in the period: a day's rows per leaf name every resource its
        # rows per person name, and the month rows add those up.
        cursor.execute(
            f"SELECT DISTINCT jsonb_object_keys(held) FROM {ACCOUNTING_LEAF_DAYS} "
            "WHERE day >= %(first)s AND day <= %(last)s",
            params,
        )
        resources = sorted(name for (name,) in cursor.fetchall())
        held = "".join(
            f", SUM((a.held ->> %(resource_{index})s)::float8)" for index in range(len(resources))
        )
        params.update((f"resource_{index}", name) for index, name in enumerate(resources))
        cursor.execute(
            f"""
            SELECT {keys}, {counts}, {WAITS_SUMMED}{held}
            FROM {source} a
            WHERE {where}
            GROUP BY 1, 2, 3, 4
            """,
            params,
        )
        return resources, cursor.fetchall()


def _source(*, per_owner: bool, bucket: str, first: date, last: date, params: dict) -> str:
    """The rows a summary read adds up, as a table or a subquery whose rows have a ``day``:
    the day rows of the period; for a monthly read per person, the month rows of its whole
    months (``month`` as their day) and the day rows of the parts of months at its ends.
    Sets the parameters it names in ``params``."""
    columns = f"path, owner_id, runtime, held, {', '.join(COUNTS)}, waits"
    days = ACCOUNTING_DAYS if per_owner else ACCOUNTING_LEAF_DAYS
    if not per_owner:
        columns = columns.replace("owner_id, ", "NULL::integer AS owner_id, ")
    whole_first = first if first.day == 1 else next_month(first)
    whole_end = (last + timedelta(days=1)).replace(day=1)  # the month after the last whole one
    if bucket == "day" or not per_owner or whole_first >= whole_end:
        return f"(SELECT day, {columns} FROM {days} WHERE day >= %(first)s AND day <= %(last)s)"
    params.update(whole_first=whole_first, whole_end=whole_end)
    return (
        f"(SELECT day, {columns} FROM {days} WHERE day >= %(first)s AND day < %(whole_first)s "
        f"UNION ALL SELECT month, {columns} FROM {ACCOUNTING_MONTHS} "
        "WHERE month >= %(whole_first)s AND month < %(whole_end)s "
        f"UNION ALL SELECT day, {columns} FROM {days} "
        "WHERE day >= %(whole_end)s AND day <= %(last)s)"
    )


def _under(name: str) -> str:
    """The row's leaf is one of the paths ``name`` or below one of them."""
    return f"(a.path = ANY(%({name})s) OR a.path LIKE ANY(%({name}_below)s))"


def _like_prefix(path: str) -> str:
    """``path/%`` with LIKE's own characters in the path escaped."""
    escaped = path.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"{escaped}/%"


def summary_lock() -> None:
    """Wait for the accounting's transaction-scoped lock: one summary writer at a time."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", [ACCOUNTING_DAYS])
