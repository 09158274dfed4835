"""The raw statements on the job table: the reads of the jobs holding quota and of the
queues' heads, positions, loads and holds, the sync's reads of what the cluster listed,
the start clocks' resume, and the writes of a submission (one job with its event) and of
a batch (COPY).

The statements that change a job's state are not here: they are the state machine's
(``jobs.engine.admission.writes``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection
from datetime import datetime
from operator import attrgetter
from typing import NamedTuple

from django.db import connection, models, transaction
from django.db.models import NOT_PROVIDED, Value
from psycopg.types.json import Jsonb

from jobs.models import (
    HOLDING,
    IN_CLUSTER,
    JOBS,
    LEAVING,
    PENDING,
    PENDING_BLOCKS,
    TICKET_BLOCK,
    Job,
    JobEvent,
    State,
    queue_order_sql,
)
from kube.quantity import POOL_MARK, ResourceList
from queues.selectors import QUEUES, QUOTA_NODES


def placed_request(alias: str) -> str:
    """A lateral set of (key, value): the request of job ``alias`` as placed in its pool, its
    totals and, for a job placed in a pool, each again as the pool's share
    (``kube.quantity.in_pool``); what the cycle counts, summed in SQL."""
    return f"""
        CROSS JOIN LATERAL (
            SELECT e.key, e.value FROM jsonb_each_text({alias}.request) e
            UNION ALL
            SELECT e.key || '{POOL_MARK}' || {alias}.pool, e.value
            FROM jsonb_each_text({alias}.request) e WHERE {alias}.pool <> ''
        ) r"""


def leaf_holding() -> tuple[dict[str, ResourceList], dict[str, ResourceList]]:
    """Per leaf path and resource: what the jobs holding quota use, and how many of them
    hold some of it."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            SELECT n.path, r.key, SUM(r.value::bigint),
                   COUNT(*) FILTER (WHERE r.value::bigint > 0)
            FROM {JOBS} j
            JOIN {QUEUES} q ON q.id = j.queue_id
            JOIN {QUOTA_NODES} n ON n.id = q.node_id
            {placed_request("j")}
            WHERE j.state = ANY(%s)
            GROUP BY n.path, r.key
            """,
            [list(HOLDING)],
        )
        usage: dict[str, ResourceList] = {}
        jobs: dict[str, ResourceList] = {}
        for path, resource, amount, holders in cursor.fetchall():
            usage.setdefault(path, {})[resource] = int(amount)
            if holders:
                jobs.setdefault(path, {})[resource] = holders
    return usage, jobs


class HoldingRow(NamedTuple):
    id: int
    leaf: str
    request: ResourceList
    priority: int
    dequeued_at: datetime | None
    state: str
    queue_id: int
    run_seconds: float | None
    pool: str
    owner_id: int | None
    time_limit: int | None


def holding_rows() -> list[HoldingRow]:
    """Every job holding quota: admitted or running, and leaving (preempted or stopping)
    until its objects are gone. Their number is bounded by what the cluster runs, not by
    the number of pending jobs."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            SELECT j.id, n.path, j.request::text, j.priority, j.dequeued_at, j.state,
                   j.queue_id, j.run_seconds, j.pool, j.owner_id, j.time_limit
            FROM {JOBS} j
            JOIN {QUEUES} q ON q.id = j.queue_id
            JOIN {QUOTA_NODES} n ON n.id = q.node_id
            WHERE j.state = ANY(%s)
            """,
            [list(HOLDING)],
        )
        return [
            HoldingRow(row[0], row[1], request_units(row[2]), *row[3:]) for row in cursor.fetchall()
        ]


class PendingRow(NamedTuple):
    leaf: str
    policy: str
    preemption: bool
    queue_id: int
    id: int
    priority: int
    enqueued_at: datetime
    request: ResourceList
    state: str
    next_attempt_at: datetime | None
    last_tried_at: datetime | None
    run_seconds: float | None
    namespace: str
    pools: tuple[str, ...]
    owner_id: int | None
    time_limit: int | None


def pending_heads(limit: int) -> list[PendingRow]:
    """The first ``limit`` pending jobs of every active queue that are not held, in queue
    order, in one query (the admission cycle reads its candidates so, and the start estimate
    its waiting jobs)."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            SELECT n.path, q.policy, q.preemption, q.id, h.id, h.priority, h.enqueued_at,
                   h.request::text, h.state, h.next_attempt_at, h.last_tried_at, h.run_seconds,
                   h.namespace, h.pools::text, h.owner_id, h.time_limit
            FROM {QUEUES} q
            JOIN {QUOTA_NODES} n ON n.id = q.node_id
            CROSS JOIN LATERAL (
                SELECT j.id, j.priority, j.ticket, j.enqueued_at, j.request, j.state,
                       j.next_attempt_at, j.last_tried_at, j.run_seconds, j.namespace, j.pools,
                       j.owner_id, j.time_limit
                FROM {JOBS} j
                WHERE j.queue_id = q.id AND j.state = ANY(%s) AND j.held_at IS NULL
                ORDER BY {queue_order_sql("j")}
                LIMIT %s
            ) h
            WHERE q.active AND n.active
            ORDER BY n.path, {queue_order_sql("h")}
            """,
            [list(PENDING), limit],
        )
        return [
            PendingRow._make(
                (*row[:7], request_units(row[7]), *row[8:13], tuple(json.loads(row[13])), *row[14:])
            )
            for row in cursor.fetchall()
        ]


def request_units(request: str) -> ResourceList:
    """A job's ``request`` column read as text (``request::text``) as base units."""
    return {resource: int(amount) for resource, amount in json.loads(request).items()}


def pending_positions(ids: list[int]) -> dict[int, int]:
    """Positions of several pending jobs in one query, whatever the depth of their queue:
    the sum over the pending blocks ahead of each plus a count inside its own block."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            SELECT j.id, 1 + COALESCE((
                SELECT SUM(b.jobs) FROM {PENDING_BLOCKS} b
                WHERE b.queue_id = j.queue_id AND (b.priority > j.priority
                   OR (b.priority = j.priority AND b.block < j.ticket / %(block)s))
            ), 0) + (
                SELECT COUNT(*) FROM {JOBS} o
                WHERE o.queue_id = j.queue_id AND o.state = ANY(%(pending)s)
                  AND o.priority = j.priority
                  AND o.ticket >= j.ticket / %(block)s * %(block)s AND o.ticket < j.ticket
            )
            FROM {JOBS} j WHERE j.id = ANY(%(ids)s) AND j.state = ANY(%(pending)s)
            """,
            {"ids": ids, "block": TICKET_BLOCK, "pending": list(PENDING)},
        )
        return dict(cursor.fetchall())


def leaf_pending_demand(resources: list[str]) -> dict[str, ResourceList]:
    """Per leaf path, what its pending jobs ask for of each of ``resources``.

    Pending jobs may be 100,000: their demand is summed only for ``resources``, one column
    each, rather than expanding every request with jsonb_each_text, a row per resource of
    every pending job.
    """
    columns = ", ".join("SUM((j.request ->> %s)::bigint)" for _ in resources) or "NULL"
    pending: dict[str, ResourceList] = {}
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            WITH per_queue AS (
                SELECT j.queue_id, {columns} FROM {JOBS} j
                WHERE j.state = ANY(%s) GROUP BY j.queue_id
            )
            SELECT n.path, per_queue.* FROM per_queue
            JOIN {QUEUES} q ON q.id = per_queue.queue_id
            JOIN {QUOTA_NODES} n ON n.id = q.node_id
            """,
            [*resources, list(PENDING)],
        )
        for path, _queue, *amounts in cursor.fetchall():
            for resource, amount in zip(resources, amounts, strict=True):
                if amount:
                    pending.setdefault(path, {})[resource] = int(amount)
    return pending


def queue_holding(queue_id: int) -> ResourceList:
    """What the jobs of one queue holding quota use, per resource."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            SELECT r.key, SUM(r.value::bigint) FROM {JOBS} j
            {placed_request("j")}
            WHERE j.queue_id = %s AND j.state = ANY(%s)
            GROUP BY r.key
            """,
            [queue_id, list(HOLDING)],
        )
        return {key: int(amount) for key, amount in cursor.fetchall()}


def queue_recent_holds(recent: int) -> list[tuple[int, float | None, float | None]]:
    """For each queue, over its last ``recent`` jobs that ran to the end (succeeded): the
    median time from their dequeue to their finish, and the median of that time beyond the
    run time they declared. As (queue id, median, median beyond declared)."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            SELECT q.id,
                   percentile_cont(0.5) WITHIN GROUP (ORDER BY r.hold),
                   percentile_cont(0.5) WITHIN GROUP (ORDER BY r.hold - r.run_seconds)
            FROM {QUEUES} q
            CROSS JOIN LATERAL (
                SELECT EXTRACT(EPOCH FROM j.finished_at - j.dequeued_at)::float AS hold,
                       j.run_seconds
                FROM {JOBS} j
                WHERE j.queue_id = q.id AND j.state = %s AND j.dequeued_at IS NOT NULL
                ORDER BY j.id DESC LIMIT %s
            ) r
            GROUP BY q.id
            """,
            [State.SUCCEEDED, recent],
        )
        return cursor.fetchall()


HELD = "held"  # queue_pending_counts' state of a held job


def queue_pending_counts() -> list[tuple[str, str | None, int]]:
    """Pending jobs by queue name and state, as (queue, state, count), held jobs counted
    apart under HELD whatever their state: every active queue, with a row of state None and
    count 0 where nothing waits, and a retired queue only while jobs still wait in it."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            SELECT q.name, CASE WHEN j.held_at IS NULL THEN j.state ELSE %s END, COUNT(j.id)
            FROM {QUEUES} q
            LEFT JOIN {JOBS} j ON j.queue_id = q.id AND j.state = ANY(%s)
            WHERE q.active OR j.id IS NOT NULL
            GROUP BY 1, 2
            """,
            [HELD, list(PENDING)],
        )
        return cursor.fetchall()


# The sync compares a listing of every live job with the database. Its ids go to
# PostgreSQL as one array, not as one parameter each: at 10,000 live jobs, building and
# sending 10,000 parameters cost more than the queries.


def jobs_known(ids: list[int]) -> list[tuple[int, str, str, datetime | None, bool, str]]:
    """What the database holds of the listed jobs: (id, state, runtime, leaving_since,
    whether the end of its log was kept, its RayCluster's name) of those it has."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            SELECT id, state, runtime, leaving_since, log_tail_at IS NOT NULL, ray_cluster
            FROM {JOBS} WHERE id = ANY(%s)
            """,
            [ids],
        )
        return cursor.fetchall()


class MapHolder(NamedTuple):
    """A live job keeping a ConfigMap of a name, and what that ConfigMap holds."""

    job_id: int
    content: dict  # its data and binaryData, as sent


def live_config_maps(names: Collection[str]) -> dict[tuple[str, str], list[MapHolder]]:
    """(namespace, ConfigMap name) -> the live jobs (waiting or holding quota, by id) whose
    objects include a ConfigMap of one of these names: one query for a submission, a batch
    or a removal, the names as one array. Only jobs sent as objects name their ConfigMaps."""
    if not names:
        return {}
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            SELECT j.namespace, kept->'metadata'->>'name', j.id,
                   jsonb_build_object('data', kept->'data', 'binaryData', kept->'binaryData')
            FROM {JOBS} j, jsonb_array_elements(j.manifest->'objects') AS kept
            WHERE j.manifest IS NOT NULL AND j.state = ANY(%s)
              AND kept->>'kind' = 'ConfigMap' AND kept->'metadata'->>'name' = ANY(%s)
            ORDER BY j.id
            """,
            [list(PENDING + HOLDING), sorted(set(names))],
        )
        holders: dict[tuple[str, str], list[MapHolder]] = {}
        for namespace, name, pk, content in cursor.fetchall():
            content = json.loads(content) if isinstance(content, str) else content
            holders.setdefault((namespace, name), []).append(MapHolder(pk, content))
        return holders


# The jobs whose state wants an object in the cluster by now.
_WANTING_OBJECTS = "(state = ANY(%(in_cluster)s) AND dequeued_at <= %(dequeued_by)s)"
_WAITING_SUSPENDED = "(state = ANY(%(pending)s) AND runtime = ANY(%(suspendable)s))"


def jobs_unlisted_wanting_objects(
    listed: list[int],
    *,
    dequeued_by: datetime,
    suspendable: Collection[str] | None,
    unknown: list[str],
) -> list[int]:
    """The ids of the jobs whose state wants an object in the cluster and that were
    dequeued by ``dequeued_by`` (a later one is having its objects created by the admission
    that dequeued it), whose objects the listing did not show, but in the ``unknown``
    namespaces, which it could not list. With ``suspendable`` runtimes (jobs wait in the
    cluster suspended), the pending jobs of those runtimes too."""
    condition = _WANTING_OBJECTS
    if suspendable is not None:
        condition = f"({_WANTING_OBJECTS} OR {_WAITING_SUSPENDED})"
    return _unlisted(
        condition,
        listed,
        unknown=unknown,
        dequeued_by=dequeued_by,
        suspendable=suspendable or (),
    )


def jobs_unlisted_leaving(listed: list[int], *, unknown: list[str]) -> list[int]:
    """The ids of the leaving jobs (preempted or stopping) whose objects the listing did
    not show, but in the ``unknown`` namespaces, which it could not list."""
    return _unlisted(
        "state = ANY(%(leaving)s)", listed, unknown=unknown, dequeued_by=None, suspendable=()
    )


def _unlisted(
    condition: str,
    listed: list[int],
    *,
    unknown: list[str],
    dequeued_by: datetime | None,
    suspendable: Collection[str],
) -> list[int]:
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT id FROM {JOBS} WHERE {condition}"
            " AND NOT namespace = ANY(%(unknown)s::text[])"
            " AND id NOT IN (SELECT unnest(%(listed)s::bigint[]))",  # a hashed anti-join
            {
                "unknown": unknown,
                "listed": listed,
                "in_cluster": list(IN_CLUSTER),
                "pending": list(PENDING),
                "leaving": list(LEAVING),
                "suspendable": list(suspendable),
                "dequeued_by": dequeued_by,
            },
        )
        return [row[0] for row in cursor.fetchall()]


def start_clocks_resume(*, outage_since: datetime, now: datetime) -> int:
    """The cluster answers again after not answering since ``outage_since``: the start
    clocks of admitted jobs move on by the part of the outage they had counted, so that
    no job times out for time the cluster could not be asked. Returns the jobs moved."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            UPDATE {JOBS} SET start_clock_at = start_clock_at
                + (%(now)s - GREATEST(start_clock_at, %(since)s))
            WHERE id IN (
                SELECT id FROM {JOBS}
                WHERE state = %(admitted)s AND start_clock_at < %(now)s
                ORDER BY id FOR NO KEY UPDATE
            )
            """,
            {"now": now, "since": outage_since, "admitted": State.ADMITTED},
        )
        return cursor.rowcount


def job_insert_with_event(job: Job, event: JobEvent) -> None:
    """INSERT the job and its first event in one statement (one round trip, atomic)."""
    job_columns, job_values = _columns(job, skip={"id"})
    event_columns, event_values = _columns(event, skip={"id", "job"})
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            WITH job AS (
                INSERT INTO {Job._meta.db_table} ({", ".join(job_columns)})
                VALUES ({", ".join(["%s"] * len(job_values))})
                RETURNING id
            )
            INSERT INTO {JobEvent._meta.db_table} (job_id, {", ".join(event_columns)})
            SELECT job.id, {", ".join(["%s"] * len(event_values))} FROM job
            RETURNING job_id, id
            """,
            [*job_values, *event_values],
        )
        job.pk, event.pk = cursor.fetchone()
    job._state.adding = event._state.adding = False
    event.job = job


def jobs_copy(jobs: list[Job]) -> None:
    """Write many jobs with COPY: two round trips, however many jobs. Their ids come from
    the table's sequence first, so that their events can name them."""
    db = transaction.get_connection()
    with db.cursor() as cursor:
        cursor.execute(
            "SELECT nextval(pg_get_serial_sequence(%s, 'id')) FROM generate_series(1, %s)",
            [Job._meta.db_table, len(jobs)],
        )
        for job, (pk,) in zip(jobs, cursor.fetchall(), strict=True):
            job.pk = pk
        fields = _written(Job._meta.concrete_fields, jobs)
        values = [_copy_value(f) for f in fields]
        columns = ", ".join(db.ops.quote_name(f.column) for f in fields)
        with cursor.cursor.copy(f"COPY {Job._meta.db_table} ({columns}) FROM STDIN") as copy:
            for job in jobs:
                copy.write_row([value(job) for value in values])
    for job in jobs:
        job._state.adding = False


def _copy_value(field) -> Callable:
    """How an INSERT or COPY takes a field's value from an instance, without the ORM's
    per-field preparation (the field types jobs and events use)."""
    if isinstance(field, models.JSONField):
        if field.null:  # None is SQL's NULL, not JSON's null
            return lambda instance: (
                None if (value := getattr(instance, field.attname)) is None else Jsonb(value)
            )
        return lambda instance: Jsonb(getattr(instance, field.attname))
    if getattr(field, "auto_now", False) or getattr(field, "auto_now_add", False):
        return lambda instance: field.pre_save(instance, add=True)
    return attrgetter(field.attname)


_UNSET = object()


def _database_default(field) -> object:
    """The value the database itself writes into the field's column when a row leaves it
    out: its ``db_default``, or NULL for a nullable field with none; _UNSET otherwise."""
    if isinstance(field.db_default, Value):
        return field.db_default.value
    if field.db_default is NOT_PROVIDED and field.null and field.default in (None, NOT_PROVIDED):
        return None
    return _UNSET


def _written(fields, rows: list) -> list:
    """The fields an INSERT or COPY of ``rows`` names: every one but those where each row
    holds the database's own default (a job written as Caldera's document sends no object,
    no claims, no Secret's variables): the database writes those without their text being
    encoded and sent for every row."""
    kept = []
    for field in fields:
        default = _database_default(field)
        if default is _UNSET or any(getattr(row, field.attname) != default for row in rows):
            kept.append(field)
    return kept


def _columns(instance, *, skip: set[str]) -> tuple[list[str], list]:
    """The concrete columns of a model instance (but those the database defaults alike,
    ``_written``) with their values as the database takes them."""
    fields = _written([f for f in instance._meta.concrete_fields if f.name not in skip], [instance])
    values = [_copy_value(f)(instance) for f in fields]
    return [connection.ops.quote_name(f.column) for f in fields], values


def next_time_limit_at() -> datetime | None:
    """When the next running job reaches its time limit (None: no running job has one)."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT MIN(started_at + time_limit * interval '1 second') FROM {JOBS}"
            " WHERE state = %s AND time_limit IS NOT NULL",
            [State.RUNNING],
        )
        return cursor.fetchone()[0]


_LOG_TAIL_COLUMNS = (
    "log_tail", "log_tail_pod", "log_tail_truncated", "log_tail_missing", "exit_code",
    "log_tail_at",
)  # fmt: skip


def log_tails_write(
    now: datetime,
    ids: list[int],
    texts: list[str],
    pods: list[str],
    truncated: list[bool],
    missing: list[str],
    codes: list[int | None],
) -> int:
    """Keep the ends of these jobs' logs (``jobs.engine.log_tails``), each column as one
    array, on the jobs that have none kept yet; the number of jobs written."""
    column = {f.name: f.column for f in Job._meta.concrete_fields if f.name in _LOG_TAIL_COLUMNS}
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            UPDATE {JOBS} t
            SET {column["log_tail"]} = v.text, {column["log_tail_pod"]} = v.pod,
                {column["log_tail_truncated"]} = v.truncated,
                {column["log_tail_missing"]} = v.missing, {column["exit_code"]} = v.code,
                {column["log_tail_at"]} = %s
            FROM unnest(%s::bigint[], %s::text[], %s::text[], %s::boolean[], %s::text[],
                        %s::integer[]) AS v(id, text, pod, truncated, missing, code)
            WHERE t.{Job._meta.pk.column} = v.id AND t.{column["log_tail_at"]} IS NULL
            """,
            [now, ids, texts, pods, truncated, missing, codes],
        )
        return cursor.rowcount
