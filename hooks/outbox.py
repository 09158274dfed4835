"""The outbox trigger: a change of a job's state and the deliveries it owes commit together.

Every statement that inserts jobs or changes their state, whichever way it is written
(``jobs.engine.transitions``' raw SQL over a cycle's jobs, its ORM ``move``, a page's
``save``, a batch's COPY), fires ``hooks_job_events`` once, after the statement, with its
rows as transition tables. It writes one ``Delivery`` per change and per active hook that
applies: the job's own hooks, and those of every department whose node is the job's
queue's or above it. A hold and a release are changes too (``job.held``, ``job.released``:
the job's state stays), and so is a failed attempt stopping for its next (``job.retrying``).
A backoff that repeats (the job tried again) is a change too, sent at most once per
BACKOFF_EVENT_SECONDS per job and hook.

When no hook is active anywhere, the statement pays one look at an empty index
(``webhook_active``) and nothing else: the admission cycle's cost stays where it was.

The SQL is made here from the models' table names and installed by a migration
(``hooks/migrations/0002``); a rename of one of these tables needs a migration that runs
INSTALL again (CREATE OR REPLACE).
"""

from __future__ import annotations

from jobs.models import ENDS_RETRY, JOBS, State
from queues.models import Department, QuotaNode
from queues.selectors import QUEUES

from .models import (
    BACKOFF_EVENT_SECONDS,
    DELIVERIES,
    HELD,
    JOB_EVENT_PREFIX,
    RELEASED,
    RETRYING,
    WEBHOOKS,
    Delivery,
)

DEPARTMENTS = Department._meta.db_table
NODES = QuotaNode._meta.db_table

# The deliveries owed for the changes in ``changes`` (id, queue_id, state, before,
# backoff_reason, event: the state, or held or released), one per change and active hook
# that applies. A statement of the
# admission cycle changes many jobs of a few queues: the departments' hooks are found once
# per queue (``owned``), not once per job.
_OWED = f"""
    owned AS (
        SELECT DISTINCT c.queue_id, h.id AS hook_id
        FROM (SELECT DISTINCT queue_id FROM changes) c
        JOIN {QUEUES} q ON q.id = c.queue_id
        JOIN {NODES} qn ON qn.id = q.node_id
        JOIN {NODES} dn ON dn.path = qn.path
            OR left(qn.path, length(dn.path) + 1) = dn.path || '/'
        JOIN {DEPARTMENTS} d ON d.quota_node_id = dn.id
        JOIN {WEBHOOKS} h ON h.department_id = d.id AND h.paused_at IS NULL
    ),
    targets AS (
        SELECT c.*, o.hook_id FROM changes c JOIN owned o ON o.queue_id = c.queue_id
        UNION ALL
        SELECT c.*, h.id FROM changes c
        JOIN {WEBHOOKS} h ON h.job_id = c.id AND h.paused_at IS NULL
    )
    INSERT INTO {DELIVERIES} (hook_id, job_id, event, job_state_before, job_state, reason,
                              created_at, status, attempts, next_attempt_at, body)
    SELECT t.hook_id, t.id, '{JOB_EVENT_PREFIX}' || t.event, t.before, t.state,
           CASE WHEN t.event = '{State.BACKOFF}' THEN t.backoff_reason ELSE '' END,
           now(), '{Delivery.Status.PENDING}', 0, now(), ''
    FROM targets t
    WHERE t.event <> '{State.BACKOFF}' OR NOT EXISTS (
        SELECT 1 FROM {DELIVERIES} p
        WHERE p.hook_id = t.hook_id AND p.job_id = t.id
          AND p.event = '{JOB_EVENT_PREFIX}{State.BACKOFF}'
          AND p.created_at > now() - interval '{BACKOFF_EVENT_SECONDS} seconds'
    )
    ORDER BY t.id, t.hook_id
"""

# The deliveries owed for an insert's jobs, and for an update's changes of state.
_INSERTED = f"""
        WITH changes AS (
            SELECT n.id, n.queue_id, n.state, ''::varchar AS before, n.backoff_reason,
                   n.state::text AS event
            FROM new_jobs n
        ),
        {_OWED}
"""
_UPDATED = f"""
        WITH changes AS (
            SELECT n.id, n.queue_id, n.state, o.state AS before, n.backoff_reason,
                   CASE WHEN n.state = o.state AND n.held_at IS DISTINCT FROM o.held_at
                        THEN CASE WHEN n.held_at IS NULL THEN '{RELEASED}' ELSE '{HELD}' END
                        WHEN n.state = '{State.STOPPING}' AND n.ends_as = '{ENDS_RETRY}'
                        THEN '{RETRYING}'
                        ELSE n.state::text END AS event
            FROM new_jobs n JOIN old_jobs o ON o.id = n.id
            WHERE n.state <> o.state
               OR (n.state = '{State.BACKOFF}' AND n.backoff_count <> o.backoff_count)
               OR n.held_at IS DISTINCT FROM o.held_at
        ),
        {_OWED}
"""
# Up to this many jobs a statement's deliveries are found as planned once; past it, through
# EXECUTE, planned for its own rows: a statement without parameters would keep the plan of
# its first run, made for one job, for the life of the connection (migration jobs 0028
# says what that cost).
PLANNED_ONCE = 64

INSTALL = f"""
CREATE OR REPLACE FUNCTION hooks_job_events() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM {WEBHOOKS} WHERE paused_at IS NULL) THEN
        RETURN NULL;
    END IF;
    IF TG_OP = 'INSERT' THEN
        IF (SELECT count(*) <= {PLANNED_ONCE} FROM new_jobs) THEN {_INSERTED};
        ELSE EXECUTE $q$ {_INSERTED} $q$;
        END IF;
    ELSIF (SELECT count(*) <= {PLANNED_ONCE} FROM new_jobs) THEN {_UPDATED};
    ELSE EXECUTE $q$ {_UPDATED} $q$;
    END IF;
    RETURN NULL;
END $$;
DROP TRIGGER IF EXISTS hooks_job_inserted ON {JOBS};
DROP TRIGGER IF EXISTS hooks_job_updated ON {JOBS};
CREATE TRIGGER hooks_job_inserted AFTER INSERT ON {JOBS}
    REFERENCING NEW TABLE AS new_jobs
    FOR EACH STATEMENT EXECUTE FUNCTION hooks_job_events();
CREATE TRIGGER hooks_job_updated AFTER UPDATE ON {JOBS}
    REFERENCING OLD TABLE AS old_jobs NEW TABLE AS new_jobs
    FOR EACH STATEMENT EXECUTE FUNCTION hooks_job_events();
"""

UNINSTALL = f"""
DROP TRIGGER IF EXISTS hooks_job_inserted ON {JOBS};
DROP TRIGGER IF EXISTS hooks_job_updated ON {JOBS};
DROP FUNCTION IF EXISTS hooks_job_events();
"""
