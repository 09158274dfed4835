import django.db.models.deletion
from django.db import migrations, models

# Every statement that moves jobs into or out of the states that hold quota (admitted,
# running, preempted, stopping) opens or closes their spans in the ledger, whoever wrote
# it. A span opens at the job's dequeue time when the statement set one (the cycle's
# admission), else now; it closes at the finish time the statement set, else now, never
# before it opened. Inserts too: a job written straight into a holding state (an import,
# a restore) holds from its dequeue time. Statement triggers over the transition tables,
# as the pending blocks' (migration 0004): a cycle that admits a thousand jobs runs one
# INSERT here, not a thousand.
HOLDING = "('admitted', 'running', 'preempted', 'stopping')"

HOLDS = f"""
CREATE FUNCTION jobs_holds() RETURNS trigger LANGUAGE plpgsql AS $$
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
    UPDATE jobs_hold h SET ended_at = GREATEST(h.started_at,
        CASE WHEN n.finished_at IS DISTINCT FROM o.finished_at AND n.finished_at IS NOT NULL
             THEN n.finished_at ELSE now() END)
    FROM new_jobs n JOIN old_jobs o ON o.id = n.id
    WHERE h.job_id = n.id AND h.ended_at IS NULL
        AND o.state IN {HOLDING} AND n.state NOT IN {HOLDING};
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
CREATE TRIGGER job_holds_insert AFTER INSERT ON jobs_job
    REFERENCING NEW TABLE AS new_jobs
    FOR EACH STATEMENT EXECUTE FUNCTION jobs_holds();
CREATE TRIGGER job_holds_update AFTER UPDATE ON jobs_job
    REFERENCING OLD TABLE AS old_jobs NEW TABLE AS new_jobs
    FOR EACH STATEMENT EXECUTE FUNCTION jobs_holds();
"""

# The jobs holding quota now: their spans from their dequeue. Jobs that held quota before
# the ledger existed and no longer do are read from their own times (admitted, finished).
BACKFILL = f"""
INSERT INTO jobs_hold (job_id, path, request, started_at, ended_at)
SELECT j.id, node.path, j.request, COALESCE(j.dequeued_at, j.enqueued_at),
    CASE WHEN j.state IN {HOLDING} THEN NULL
         ELSE GREATEST(COALESCE(j.dequeued_at, j.enqueued_at), j.finished_at) END
FROM jobs_job j
JOIN queues_queue q ON q.id = j.queue_id
JOIN queues_quotanode node ON node.id = q.node_id
WHERE j.state IN {HOLDING} OR (j.dequeued_at IS NOT NULL AND j.finished_at IS NOT NULL);
"""

UNDO = """
DROP TRIGGER IF EXISTS job_holds_insert ON jobs_job;
DROP TRIGGER IF EXISTS job_holds_update ON jobs_job;
DROP FUNCTION IF EXISTS jobs_holds();
"""


class Migration(migrations.Migration):
    dependencies = [
        ("jobs", "0024_phrase_codes"),
        ("queues", "0002_queue_policies"),
    ]

    operations = [
        migrations.CreateModel(
            name="Hold",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("path", models.CharField(max_length=500)),
                ("request", models.JSONField()),
                ("started_at", models.DateTimeField()),
                ("ended_at", models.DateTimeField(blank=True, null=True)),
                ("job", models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name="holds", to="jobs.job")),
            ],
            options={
                "indexes": [
                    models.Index(condition=models.Q(("ended_at__isnull", True)), fields=["job"], name="hold_open"),
                    models.Index(fields=["ended_at"], name="hold_ended"),
                ],
            },
        ),
        migrations.RunSQL(HOLDS + BACKFILL, UNDO),
    ]
