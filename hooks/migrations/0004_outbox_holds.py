from django.db import migrations

from hooks.outbox import INSTALL

# The outbox trigger again: a hold and a release of a pending job are events too
# (hooks/outbox.py); backwards it stays, as the column it reads stays.


class Migration(migrations.Migration):
    dependencies = [("hooks", "0003_outbox_planned_per_statement"), ("jobs", "0035_held")]

    operations = [migrations.RunSQL(INSTALL, migrations.RunSQL.noop)]
