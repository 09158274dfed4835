"""Every job's request counts its pods (``pods``: the head or master and every worker, an
autoscaling group at its replicas), as a job submitted from now on does, so that the quota
tree may limit pods and the admission cycle counts them for jobs that were already there."""

from django.db import migrations


def _statement(apps, schema_editor, sql: str) -> None:
    table = schema_editor.quote_name(apps.get_model("jobs", "Job")._meta.db_table)
    schema_editor.execute(sql.format(table=table))


def count_pods(apps, schema_editor):
    _statement(
        apps,
        schema_editor,
        """
        UPDATE {table} SET request = request || jsonb_build_object(
            'pods',
            1 + COALESCE(
                (SELECT SUM((g->>'replicas')::bigint) FROM jsonb_array_elements(workers) g), 0
            )
        )
        WHERE NOT request ? 'pods'
        """,
    )


def forget_pods(apps, schema_editor):
    _statement(apps, schema_editor, "UPDATE {table} SET request = request - 'pods'")


class Migration(migrations.Migration):
    dependencies = [
        ("jobs", "0016_start_estimates"),
    ]

    operations = [migrations.RunPython(count_pods, forget_pods, elidable=False)]
