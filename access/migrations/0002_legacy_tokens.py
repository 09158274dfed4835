"""Tokens from before scoped tokens (DRF's, one per person, kept in clear in
``authtoken_token``) become access tokens named "legacy": hashed, with the person's full
rights in all their departments, expiring ACCESS_TOKEN_LEGACY_DAYS from now. Then the old
table is dropped, so no token in the database can be read back. The keys keep working.
"""

import hashlib
from datetime import timedelta

from django.conf import settings
from django.db import migrations
from django.utils import timezone

OLD_TABLE = "authtoken_token"


def move_legacy_tokens(apps, schema_editor):
    connection = schema_editor.connection
    if OLD_TABLE not in connection.introspection.table_names():
        return  # a database that never had them
    AccessToken = apps.get_model("access", "AccessToken")
    User = apps.get_model(*settings.AUTH_USER_MODEL.split("."))
    expires_at = timezone.now() + timedelta(days=settings.ACCESS_TOKEN_LEGACY_DAYS)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT key, user_id, created FROM {OLD_TABLE} ORDER BY created")
        rows = cursor.fetchall()
    staff = set(User.objects.filter(is_staff=True).values_list("pk", flat=True))
    AccessToken.objects.bulk_create(
        AccessToken(
            user_id=user_id,
            kind="legacy",
            name="legacy",
            prefix=key[:8],
            digest=hashlib.sha256(key.encode()).hexdigest(),
            right="admin" if user_id in staff else "manage",
            all_departments=True,
            created_at=created,
            expires_at=expires_at,
        )
        for key, user_id, created in rows
    )
    schema_editor.execute(f"DROP TABLE {OLD_TABLE}")


class Migration(migrations.Migration):
    dependencies = [("access", "0001_initial")]

    operations = [migrations.RunPython(move_legacy_tokens, migrations.RunPython.noop)]
