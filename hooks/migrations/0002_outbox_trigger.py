from django.db import migrations

from hooks.outbox import INSTALL, UNINSTALL


class Migration(migrations.Migration):
    dependencies = [("hooks", "0001_webhooks"), ("jobs", "0023_submission_keys")]

    operations = [migrations.RunSQL(INSTALL, UNINSTALL)]
