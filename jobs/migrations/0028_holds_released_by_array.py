from django.db import migrations

# The ledger's trigger (migration 0025), the same rule planned so that its cost follows the
# jobs the statement moved, not the open spans times those jobs: the jobs that stop holding
# are found first (a hash join of the statement's two transition tables) and their spans
# closed by the open-span index, one lookup each. Joined in one statement, the planner
# scanned the transition table once per open span (2,600 spans x 20,800 jobs backing off:
# 13.6 s).
HOLDING = "('admitted', 'running', 'preempted', 'stopping')"

HOLDS = f"""
CREATE OR REPLACE FUNCTION jobs_holds() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    released bigint[];
    released_at timestamptz[];
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
    SELECT array_agg(n.id),
           array_agg(CASE WHEN n.finished_at IS DISTINCT FROM o.finished_at
                               AND n.finished_at IS NOT NULL
                          THEN n.finished_at ELSE now() END)
    INTO released, released_at
    FROM new_jobs n JOIN old_jobs o ON o.id = n.id
    WHERE o.state IN {HOLDING} AND n.state NOT IN {HOLDING};
    IF released IS NOT NULL THEN
        UPDATE jobs_hold h SET ended_at = GREATEST(h.started_at, r.at)
        FROM unnest(released, released_at) AS r(id, at)
        WHERE h.job_id = r.id AND h.ended_at IS NULL;
    END IF;
    INSERT INTO jobs_hold (job_id, path, request, started_at)
    SELECT n.id, node.path, n.request,
        CASE WHEN n.dequeued_at IS DISTINCT FROM o.dequeued_at AND n.dequeued_at IS NOT NULL
             THEN n.dequeued_at ELSE now() END
    FROM new_jobs n JOIN old_jobs o ON o.id = n.id
    JOIN queues_queue q ON q.id = n.queue_id
    JOIN queues_quotanode node ON node.id = q.node_id
    WHERE o.state NOT IN {HOLDING} AND n.state IN {HOLDING};
    RETURN NULL;
END $$;
"""


class Migration(migrations.Migration):
    dependencies = [("jobs", "0027_accounting_months")]

    # Backwards the function stays as it is: it keeps 0025's rule exactly.
    operations = [migrations.RunSQL(HOLDS, migrations.RunSQL.noop)]
