"""A URL of the test database's server, for a process or connection of a test's own."""

from __future__ import annotations

from django.conf import settings as django_settings


def server_url(database: str) -> str:
    """The URL of ``database`` on the server of Django's default connection."""
    db = django_settings.DATABASES["default"]
    password = f":{db['PASSWORD']}" if db.get("PASSWORD") else ""
    return f"postgresql://{db['USER']}{password}@{db['HOST']}:{db['PORT']}/{database}"
