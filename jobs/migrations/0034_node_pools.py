from django.db import migrations, models

# A job placed in a node pool (queues.pools) holds its request in the pool too: the ledger
# of holds (migration 0028's trigger, the same rule) opens its span with the request as
# placed, each resource again under its pooled key (nvidia.com/gpu@h100), so the
# accounting counts resource-hours by pool and fair sharing reads each pool's share.
HOLDING = "('admitted', 'running', 'preempted', 'stopping')"
PLANNED_ONCE = 64
PLACED = """n.request || COALESCE((
        SELECT jsonb_object_agg(e.key || '@' || n.pool, e.value)
        FROM jsonb_each(n.request) e WHERE n.pool <> ''), '{}'::jsonb)"""


def _holds(request: str) -> str:
    release = f"""
    UPDATE jobs_hold h SET ended_at = GREATEST(h.started_at,
        CASE WHEN n.finished_at IS DISTINCT FROM o.finished_at AND n.finished_at IS NOT NULL
             THEN n.finished_at ELSE now() END)
    FROM new_jobs n JOIN old_jobs o ON o.id = n.id
    WHERE h.job_id = n.id AND h.ended_at IS NULL
        AND o.state IN {HOLDING} AND n.state NOT IN {HOLDING}
"""
    opened = f"""
    INSERT INTO jobs_hold (job_id, path, request, started_at)
    SELECT n.id, node.path, {request},
        CASE WHEN n.dequeued_at IS DISTINCT FROM o.dequeued_at AND n.dequeued_at IS NOT NULL
             THEN n.dequeued_at ELSE now() END
    FROM new_jobs n JOIN old_jobs o ON o.id = n.id
    JOIN queues_queue q ON q.id = n.queue_id
    JOIN queues_quotanode node ON node.id = q.node_id
    WHERE o.state NOT IN {HOLDING} AND n.state IN {HOLDING}
"""
    return f"""
CREATE OR REPLACE FUNCTION jobs_holds() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    few boolean;
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO jobs_hold (job_id, path, request, started_at)
        SELECT n.id, node.path, {request}, COALESCE(n.dequeued_at, now())
        FROM new_jobs n
        JOIN queues_queue q ON q.id = n.queue_id
        JOIN queues_quotanode node ON node.id = q.node_id
        WHERE n.state IN {HOLDING};
        RETURN NULL;
    END IF;
    few := (SELECT count(*) <= {PLANNED_ONCE} FROM old_jobs);
    IF EXISTS (SELECT 1 FROM old_jobs WHERE state IN {HOLDING}) THEN
        IF few THEN {release};
        ELSE EXECUTE $q$ {release} $q$;
        END IF;
    END IF;
    IF EXISTS (SELECT 1 FROM new_jobs WHERE state IN {HOLDING}) THEN
        IF few THEN {opened};
        ELSE EXECUTE $q$ {opened} $q$;
        END IF;
    END IF;
    RETURN NULL;
END $$;
"""


class Migration(migrations.Migration):
    dependencies = [
        ("jobs", "0033_retired_events"),
    ]

    operations = [
        migrations.AddField(
            model_name="job",
            name="pool",
            field=models.CharField(blank=True, db_default="", default="", max_length=32),
        ),
        migrations.AddField(
            model_name="job",
            name="pools",
            field=models.JSONField(blank=True, db_default=[], default=list),
        ),
        # Backwards: 0028's function, the request as it is.
        migrations.RunSQL(_holds(PLACED), _holds("n.request")),
    ]
