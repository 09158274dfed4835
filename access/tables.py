"""The statements of the token check, which every API request makes: the token with its
person and its departments in one round trip, and the record of its use."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.contrib.auth import get_user_model
from django.db import connection

from .models import AccessToken

TOKENS = AccessToken._meta.db_table
TOKEN_DEPARTMENTS = AccessToken.departments.through._meta.db_table
ADDRESSES_KEPT = 20
USE_RECORDED_EVERY = timedelta(minutes=1)

TOKEN_FIELDS = (
    "id", "user_id", "kind", "name", "prefix", "right", "all_departments", "expires_at",
    "revoked_at", "last_used_at", "policy_id",
)  # fmt: skip


@dataclass
class Found:
    token: AccessToken
    user: Any
    departments: frozenset[int]
    address_known: bool


@functools.cache
def _find() -> tuple[str, list[str]]:
    """The token check's statement, and the attribute names of the user's columns in it."""
    users = get_user_model()
    through = AccessToken.departments.through._meta
    user_fields = list(users._meta.concrete_fields)
    quote = connection.ops.quote_name
    user_columns = ", ".join(f"u.{quote(str(f.column))}" for f in user_fields)
    token_columns = ", ".join(f"t.{quote(name)}" for name in TOKEN_FIELDS)
    token_id = quote(str(through.get_field("accesstoken").column))
    department_id = quote(str(through.get_field("department").column))
    statement = f"""
        SELECT {token_columns}, {user_columns},
               ARRAY(SELECT d.{department_id} FROM {TOKEN_DEPARTMENTS} d
                     WHERE d.{token_id} = t.id),
               %(address)s::inet = ANY(t.addresses)
        FROM {TOKENS} t JOIN {users._meta.db_table} u ON u.id = t.user_id
        WHERE t.digest = %(digest)s
        """
    return statement, [f.attname for f in user_fields]


def token_find(digest: str, address: str | None) -> Found | None:
    """The token with this digest, its user, the ids of its departments and whether it was
    used from ``address`` before, or None: one round trip, on every API request."""
    statement, user_attributes = _find()
    with connection.cursor() as cursor:
        cursor.execute(statement, {"digest": digest, "address": address})
        row = cursor.fetchone()
    if row is None:
        return None
    split = len(TOKEN_FIELDS)
    token = AccessToken.from_db("default", list(TOKEN_FIELDS), row[:split])
    user = get_user_model().from_db("default", user_attributes, row[split:-2])
    departments, known = row[-2], row[-1]
    return Found(token, user, frozenset(departments), bool(known))


def token_use(token_id: int, address: str, now: datetime) -> bool:
    """Record a use at ``now`` from ``address``, at most once every USE_RECORDED_EVERY but at
    once from an address not seen before. True when the address is new to the token: the
    row is locked before it is read, so two requests at once cannot both count it new."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            WITH old AS (
                SELECT id, %(address)s::inet = ANY(addresses) AS known
                FROM {TOKENS} WHERE id = %(id)s FOR NO KEY UPDATE
            )
            UPDATE {TOKENS} t SET
                last_used_at = %(now)s,
                last_used_from = %(address)s,
                addresses = CASE WHEN old.known THEN t.addresses
                                 ELSE (t.addresses || %(address)s::inet)[
                                     greatest(1, cardinality(t.addresses) + 2 - %(kept)s):]
                            END
            FROM old
            WHERE t.id = old.id
              AND (t.last_used_at IS NULL OR t.last_used_at < %(due)s OR NOT old.known)
            RETURNING NOT old.known
            """,
            {
                "id": token_id,
                "address": address,
                "now": now,
                "due": now - USE_RECORDED_EVERY,
                "kept": ADDRESSES_KEPT,
            },
        )
        row = cursor.fetchone()
    return bool(row and row[0])
