from django.db import migrations

from hooks.outbox import INSTALL

# The outbox trigger again: a failed attempt stopping for its next one is job.retrying
# (hooks/outbox.py); backwards it stays, as the column it reads stays.


class Migration(migrations.Migration):
    dependencies = [("hooks", "0004_outbox_holds"), ("jobs", "0036_job_lifecycle")]

    operations = [migrations.RunSQL(INSTALL, migrations.RunSQL.noop)]
