"""Fewer indexes for a submission to write: the foreign keys of jobs and events are looked
up through the composite indexes that lead with them, and only cluster events, which
have a key, enter the unique index on it."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('jobs', '0019_namespace_health'),
        ('queues', '0002_queue_policies'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    # The unique constraint on cluster events' keys is in place before the field's own
    # unique index (and its LIKE twin) goes.
    operations = [
        migrations.AddConstraint(
            model_name='jobevent',
            constraint=models.UniqueConstraint(condition=models.Q(('dedup_key__isnull', False)), fields=('dedup_key',), name='event_dedup_key'),
        ),
        migrations.AlterField(
            model_name='job',
            name='owner',
            field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.PROTECT, related_name='jobs', to=settings.AUTH_USER_MODEL),
        ),
        migrations.AlterField(
            model_name='job',
            name='queue',
            field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.PROTECT, related_name='jobs', to='queues.queue'),
        ),
        migrations.AlterField(
            model_name='jobevent',
            name='dedup_key',
            field=models.CharField(blank=True, max_length=300, null=True),
        ),
        migrations.AlterField(
            model_name='jobevent',
            name='job',
            field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='events', to='jobs.job'),
        ),
    ]
