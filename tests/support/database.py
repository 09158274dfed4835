"""A URL of the test database's server, for a process or connection of a test's own."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
from django.conf import settings as django_settings

from jobs.models import LEASES


def server_url(database: str) -> str:
    """The URL of ``database`` on the server of Django's default connection."""
    db = django_settings.DATABASES["default"]
    password = f":{db['PASSWORD']}" if db.get("PASSWORD") else ""
    return f"postgresql://{db['USER']}{password}@{db['HOST']}:{db['PORT']}/{database}"


@contextmanager
def lease_held_elsewhere(name: str, seconds: float = 60) -> Iterator[None]:
    """The lease ``name`` (jobs.engine.locks) held by another worker for the block: taken
    and given back by a connection of its own, committed, so that a test's transaction sees
    it; the row is gone afterwards."""
    from django.db import connection

    with psycopg.connect(server_url(connection.settings_dict["NAME"]), autocommit=True) as other:
        other.execute(
            f"INSERT INTO {LEASES} (name, holder, taken_at, expires_at)"
            " VALUES (%s, 'another worker', now(), now() + make_interval(secs => %s))"
            " ON CONFLICT (name) DO UPDATE SET holder = EXCLUDED.holder,"
            " expires_at = EXCLUDED.expires_at",
            [name, seconds],
        )
        try:
            yield
        finally:
            other.execute(f"DELETE FROM {LEASES} WHERE name = %s", [name])
