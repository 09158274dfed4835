from django.db import migrations

# The ledger's trigger (migration 0025), the same rule, planned for each statement's own
# rows. A PL/pgSQL statement without parameters keeps the plan of its first run for the
# life of the connection: a worker whose first update moved one job joined the two
# transition tables of every later statement in a nested loop, 20,800 x 20,800 rows for
# one cycle's backoffs (139 s). Past PLANNED_ONCE rows the joins now run through EXECUTE,
# planned each time with the tables' real sizes, and only when the statement moved a job
# into or out of the states that hold quota (a backoff or a priority change moves none).
HOLDING = "('admitted', 'running', 'preempted', 'stopping')"
# Up to this many rows a statement's joins run as planned once (any plan is quick on them,
# and a cancel or a finish is not planned again); past it they are planned afresh.
PLANNED_ONCE = 64

RELEASE = f"""
    UPDATE jobs_hold h SET ended_at = GREATEST(h.started_at,
        CASE WHEN n.finished_at IS DISTINCT FROM o.finished_at AND n.finished_at IS NOT NULL
             THEN n.finished_at ELSE now() END)
    FROM new_jobs n JOIN old_jobs o ON o.id = n.id
    WHERE h.job_id = n.id AND h.ended_at IS NULL
        AND o.state IN {HOLDING} AND n.state NOT IN {HOLDING}
"""
OPEN = f"""
    INSERT INTO jobs_hold (job_id, path, request, started_at)
    SELECT n.id, node.path, n.request,
        CASE WHEN n.dequeued_at IS DISTINCT FROM o.dequeued_at AND n.dequeued_at IS NOT NULL
             THEN n.dequeued_at ELSE now() END
    FROM new_jobs n JOIN old_jobs o ON o.id = n.id
    JOIN queues_queue q ON q.id = n.queue_id
    JOIN queues_quotanode node ON node.id = q.node_id
    WHERE o.state NOT IN {HOLDING} AND n.state IN {HOLDING}
"""

HOLDS = f"""
CREATE OR REPLACE FUNCTION jobs_holds() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    few boolean;
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO jobs_hold (job_id, path, request, started_at)
        SELECT n.id, node.path, n.request, COALESCE(n.dequeued_at, now())
        FROM new_jobs n
        JOIN queues_queue q ON q.id = n.queue_id
        JOIN queues_quotanode node ON node.id = q.node_id
        WHERE n.state IN {HOLDING};
        RETURN NULL;
    END IF;
    few := (SELECT count(*) <= {PLANNED_ONCE} FROM old_jobs);
    IF EXISTS (SELECT 1 FROM old_jobs WHERE state IN {HOLDING}) THEN
        IF few THEN {RELEASE};
        ELSE EXECUTE $q$ {RELEASE} $q$;
        END IF;
    END IF;
    IF EXISTS (SELECT 1 FROM new_jobs WHERE state IN {HOLDING}) THEN
        IF few THEN {OPEN};
        ELSE EXECUTE $q$ {OPEN} $q$;
        END IF;
    END IF;
    RETURN NULL;
END $$;
"""


class Migration(migrations.Migration):
    dependencies = [("jobs", "0027_accounting_months")]

    # Backwards the function stays as it is: it keeps 0025's rule exactly.
    operations = [migrations.RunSQL(HOLDS, migrations.RunSQL.noop)]
