from django.db import migrations, models

# A node's stopPolicy and the limits of its leaves' jobs (queues.limits).


class Migration(migrations.Migration):

    dependencies = [
        ('queues', '0005_node_pools'),
    ]

    operations = [
        migrations.AddField(
            model_name='quotanode',
            name='limits',
            field=models.JSONField(blank=True, db_default={}, default=dict),
        ),
        migrations.AddField(
            model_name='quotanode',
            name='stop_policy',
            field=models.CharField(blank=True, db_default='', default='', max_length=20),
        ),
    ]
