"""A repeating cluster event is one row: its count and first time beside its last
(``created_at``), keyed by the event's uid alone. Rows stored before, one per count a sync
saw (``k8s/<uid>/<count>``), are folded into the one of the highest count; its first time
is known only when the sync saw the event's first occurrence (count 1).

A job leaving the cluster records since when (``leaving_since``); jobs already leaving
count from this migration, so a warning about them comes at most that late."""

from django.db import migrations, models
from django.db.models.functions import Now


def fold_repeats(apps, schema_editor):
    table = schema_editor.quote_name(apps.get_model("jobs", "JobEvent")._meta.db_table)
    schema_editor.execute(
        f"""
        WITH parsed AS (
            SELECT id, created_at,
                   substring(dedup_key FROM '^(k8s/.*)/[0-9]+$') AS key,
                   substring(dedup_key FROM '/([0-9]+)$')::int AS count
            FROM {table} WHERE dedup_key ~ '^k8s/.*/[0-9]+$'
        ), ranked AS (
            SELECT id, key, count,
                   MIN(created_at) FILTER (WHERE count = 1) OVER (PARTITION BY key) AS first_at,
                   ROW_NUMBER() OVER (PARTITION BY key ORDER BY count DESC, id DESC) AS rank
            FROM parsed
        ), folded AS (
            DELETE FROM {table} e USING ranked r WHERE e.id = r.id AND r.rank > 1
        )
        UPDATE {table} e
        SET dedup_key = r.key, count = r.count,
            first_at = CASE WHEN r.count > 1 THEN r.first_at END
        FROM ranked r WHERE e.id = r.id AND r.rank = 1
        """
    )


def leaving_from_now(apps, schema_editor):
    Job = apps.get_model("jobs", "Job")
    Job.objects.filter(state__in=["preempted", "stopping"]).update(leaving_since=Now())


class Migration(migrations.Migration):
    dependencies = [
        ("jobs", "0017_request_counts_pods"),
    ]

    operations = [
        migrations.AddField(
            model_name="job",
            name="leaving_since",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="jobevent",
            name="count",
            field=models.PositiveIntegerField(db_default=1, default=1),
        ),
        migrations.AddField(
            model_name="jobevent",
            name="first_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.RunPython(fold_repeats, migrations.RunPython.noop, elidable=True),
        migrations.RunPython(leaving_from_now, migrations.RunPython.noop, elidable=True),
    ]
