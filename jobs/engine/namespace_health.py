"""Namespaces in trouble: a namespace the cluster takes none of Caldera's objects in (not
found, being deleted, without Caldera's Role) while it answers elsewhere is marked
unavailable by itself (``UnavailableNamespace``), so that only its own jobs wait and say why.

The sync records what it found at each listing (``namespaces_checked``: those it could not
list, and those it found back); a reconcile whose creates were refused for the namespace
records it too (``namespaces_troubled``). The admission cycle holds the jobs of such a
namespace in backoff with its reason, and fails them once it has been unavailable for
NAMESPACE_GRACE_SECONDS (``held_reason``, ``past_grace``).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta

from django.conf import settings

from jobs.cluster import NamespaceTrouble, access
from jobs.models import HOLDING, UnavailableNamespace
from queues import phrases
from queues.phrases import Phrase

# What fixes a namespace in trouble, as the job pages, cluster_check and the admin's tree
# page say it.
FIX = Phrase(phrases.NAMESPACE_FIX, {"command": access.RBAC_FIX})


def namespaces_troubled(
    troubles: Mapping[str, NamespaceTrouble], *, now: datetime
) -> dict[str, datetime]:
    """Mark these namespaces unavailable with their reason; returns since when each has
    been (kept from an earlier finding while the trouble lasts)."""
    if not troubles:
        return {}
    UnavailableNamespace.objects.bulk_create(
        [
            UnavailableNamespace(
                namespace=namespace, reason=t.reason[:2000], gone=t.gone, since=now, seen_at=now
            )
            for namespace, t in sorted(troubles.items())
        ],
        update_conflicts=True,
        unique_fields=["namespace"],
        update_fields=["reason", "gone", "seen_at"],
    )
    return dict(
        UnavailableNamespace.objects.filter(namespace__any=list(troubles)).values_list(
            "namespace", "since"
        )
    )


def namespaces_checked(troubles: Mapping[str, NamespaceTrouble], *, now: datetime) -> list[str]:
    """A sync's finding over every namespace it observed: these are unavailable, every
    other is fine. Returns the namespaces that are back."""
    namespaces_troubled(troubles, now=now)
    back = UnavailableNamespace.objects.exclude(namespace__any=list(troubles))
    cleared = sorted(back.values_list("namespace", flat=True))
    if cleared:
        UnavailableNamespace.objects.filter(namespace__any=cleared).delete()
    return cleared


def unavailable_namespaces() -> dict[str, UnavailableNamespace]:
    """The namespaces in trouble now, by name."""
    return {row.namespace: row for row in UnavailableNamespace.objects.all()}


def namespace_trouble(job) -> Phrase | None:
    """Why the cluster takes nothing of a job in its namespace now, for a job the cluster
    holds (a pending one says so as its backoff reason), or None."""
    if job.state not in HOLDING:
        return None
    row = UnavailableNamespace.objects.filter(namespace=job.namespace).first()
    return None if row is None else held_reason(row)


def past_grace(row: UnavailableNamespace, *, now: datetime) -> bool:
    """The namespace has been unavailable for NAMESPACE_GRACE_SECONDS: its jobs that are
    not in the cluster yet fail instead of waiting for it."""
    return row.since <= now - timedelta(seconds=settings.NAMESPACE_GRACE_SECONDS)


def held_reason(row: UnavailableNamespace) -> Phrase:
    """Why a job of the namespace waits: the server's words, since when, and the fix."""
    return Phrase(
        phrases.NAMESPACE_HELD,
        {"since": phrases.moment(row.since), "reason": row.reason,
         "fix": phrases.nested(FIX)},
    )  # fmt: skip


def failed_reason(row: UnavailableNamespace) -> Phrase:
    return Phrase(
        phrases.NAMESPACE_FAILED,
        {"since": phrases.moment(row.since), "reason": row.reason,
         "grace": f"{settings.NAMESPACE_GRACE_SECONDS:g}"},
    )  # fmt: skip
