import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

# A pending job held by a person (jobs.services.job_hold): who and since when, and the
# partial index of the few held jobs, which a waiting job's explanation counts ahead of it.


class Migration(migrations.Migration):

    dependencies = [
        ('access', '0003_preference'),
        ('jobs', '0034_node_pools'),
        ('queues', '0005_node_pools'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name='job',
            name='held_at',
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='job',
            name='held_by',
            field=models.ForeignKey(blank=True, db_index=False, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL),
        ),
        migrations.AddIndex(
            model_name='job',
            index=models.Index(condition=models.Q(('held_at__isnull', False), ('state__in', ['queued', 'backoff'])), fields=['queue'], name='job_held'),
        ),
    ]
