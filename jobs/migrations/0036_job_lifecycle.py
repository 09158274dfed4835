from django.db import migrations, models

# A job's time limit, the retries it asks for, its attempt and its failed attempts, and how
# a stopping job ends (jobs.engine.lifecycle).


class Migration(migrations.Migration):

    dependencies = [
        ('jobs', '0035_held'),
    ]

    operations = [
        migrations.AddField(
            model_name='job',
            name='attempt',
            field=models.PositiveSmallIntegerField(db_default=1, default=1),
        ),
        migrations.AddField(
            model_name='job',
            name='attempts',
            field=models.JSONField(blank=True, db_default=[], default=list),
        ),
        migrations.AddField(
            model_name='job',
            name='ends_as',
            field=models.CharField(blank=True, db_default='', default='', max_length=10),
        ),
        migrations.AddField(
            model_name='job',
            name='retries',
            field=models.PositiveSmallIntegerField(db_default=0, default=0),
        ),
        migrations.AddField(
            model_name='job',
            name='time_limit',
            field=models.PositiveIntegerField(blank=True, null=True),
        ),
    ]
