from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("jobs", "0018_event_series_leaving_since"),
    ]

    operations = [
        migrations.CreateModel(
            name="UnavailableNamespace",
            fields=[
                ("namespace", models.CharField(max_length=63, primary_key=True, serialize=False)),
                ("reason", models.TextField()),
                ("gone", models.BooleanField(default=False)),
                ("since", models.DateTimeField()),
                ("seen_at", models.DateTimeField()),
            ],
        ),
    ]
