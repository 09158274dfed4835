from django.db import migrations

from hooks.outbox import INSTALL

# The outbox trigger again, its statements now planned for each statement's own rows
# (hooks/outbox.py); backwards it stays: the rule it keeps is the same.


class Migration(migrations.Migration):
    dependencies = [("hooks", "0002_outbox_trigger")]

    operations = [migrations.RunSQL(INSTALL, migrations.RunSQL.noop)]
