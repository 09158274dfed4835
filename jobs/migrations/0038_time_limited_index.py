from django.conf import settings
from django.db import migrations, models

# The partial index of the running jobs with a time limit, which every sync reads
# (jobs.engine.lifecycle).


class Migration(migrations.Migration):

    dependencies = [
        ('access', '0003_preference'),
        ('jobs', '0037_log_tail'),
        ('queues', '0006_stop_and_limits'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddIndex(
            model_name='job',
            index=models.Index(condition=models.Q(('state', 'running'), ('time_limit__isnull', False)), fields=['started_at'], name='job_time_limited'),
        ),
    ]
