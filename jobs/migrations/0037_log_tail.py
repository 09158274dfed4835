from django.db import migrations, models

# The end of a finished job's log, kept as its objects are removed (jobs.engine.log_tails),
# with its exit code; and the RayCluster of a RayJob, whose head Service serves its dashboard.


class Migration(migrations.Migration):

    dependencies = [
        ('jobs', '0036_job_lifecycle'),
    ]

    operations = [
        migrations.AddField(
            model_name='job',
            name='exit_code',
            field=models.IntegerField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='job',
            name='log_tail',
            field=models.TextField(blank=True, db_default='', default=''),
        ),
        migrations.AddField(
            model_name='job',
            name='log_tail_at',
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='job',
            name='log_tail_missing',
            field=models.TextField(blank=True, db_default='', default=''),
        ),
        migrations.AddField(
            model_name='job',
            name='log_tail_pod',
            field=models.CharField(blank=True, db_default='', default='', max_length=253),
        ),
        migrations.AddField(
            model_name='job',
            name='log_tail_truncated',
            field=models.BooleanField(db_default=False, default=False),
        ),
        migrations.AddField(
            model_name='job',
            name='ray_cluster',
            field=models.CharField(blank=True, db_default='', default='', max_length=253),
        ),
    ]
