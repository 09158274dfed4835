"""Recording changes, and saying in words what a recorded change did."""

from __future__ import annotations

from collections.abc import Mapping

from django.db import transaction
from django.db.transaction import TransactionManagementError

from .models import AuditEntry

NOTHING = "—"


def audit_record(
    *,
    action: str,
    object_type: str,
    object_key: str,
    source: str,
    before: Mapping | None = None,
    after: Mapping | None = None,
    actor=None,
) -> AuditEntry | None:
    """Record one change in the caller's transaction; None for an update that changed nothing.

    Refusing to run outside a transaction keeps the promise that a change and its entry
    commit together, or neither does.
    """
    if not transaction.get_connection().in_atomic_block:
        raise TransactionManagementError(
            "audit_record must run inside the transaction of the change it records"
        )
    if action == AuditEntry.Action.UPDATED and before == after:
        return None
    if actor is not None and not actor.is_authenticated:
        actor = None
    return AuditEntry.objects.create(
        action=action,
        object_type=object_type,
        object_key=object_key,
        before=dict(before) if before is not None else None,
        after=dict(after) if after is not None else None,
        actor=actor,
        source=source,
    )


def _flatten(snapshot: Mapping | None, prefix: str = "") -> dict[str, str]:
    """{"max": {"cpu": "14"}} -> {"max cpu": "14"}, so nested quotas read as one line each."""
    flat: dict[str, str] = {}
    for key, value in (snapshot or {}).items():
        name = f"{prefix} {key}".strip()
        if isinstance(value, Mapping):
            flat.update(_flatten(value, name))
        elif isinstance(value, list):
            flat[name] = ", ".join(map(str, value)) or NOTHING
        elif isinstance(value, bool):
            flat[name] = "yes" if value else "no"
        elif value is None or value == "":
            flat[name] = NOTHING
        else:
            flat[name] = str(value)
    return flat


def describe_changes(before: Mapping | None, after: Mapping | None) -> list[str]:
    """One line per value: ``max cpu: 14 → 20`` for an update, ``max cpu: 14`` otherwise."""
    old, new = _flatten(before), _flatten(after)
    if before is None or after is None:
        return [f"{key}: {value}" for key, value in (new if before is None else old).items()]
    keys = [*old, *(key for key in new if key not in old)]
    return [
        f"{key}: {old.get(key, NOTHING)} → {new.get(key, NOTHING)}"
        for key in keys
        if old.get(key, NOTHING) != new.get(key, NOTHING)
    ]
