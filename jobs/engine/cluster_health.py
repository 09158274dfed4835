"""Cluster health: whether the cluster answered the last sync or reconcile, and if not, since
when and with what error (the single ``ClusterHealth`` row that every page's banner and
``/healthz`` read).

The error is written, and the cluster named unavailable, only once it has failed for
CLUSTER_UNAVAILABLE_GRACE_SECONDS: an API server that restarts answers 503 and refuses
every request for about a second, which is not an outage of its RBAC. A namespace's own
trouble is never the cluster's (``jobs.engine.namespace_health``).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings

from jobs.tables.cluster_health import health_answered, health_failing

ANSWER_RECORDED_EVERY = timedelta(seconds=10)  # a cluster that keeps answering: few writes


def cluster_answered(*, now: datetime) -> datetime | None:
    """The cluster answered a sync's listing: clear its error (and note the time, now and
    then). Returns since when it had not answered, when this ends such a time."""
    return health_answered(now=now, every=ANSWER_RECORDED_EVERY)


def cluster_unavailable(*, now: datetime, error: str) -> None:
    """The cluster did not answer: keep since when it has been failing, and its error once
    that is longer ago than the grace."""
    grace = timedelta(seconds=settings.CLUSTER_UNAVAILABLE_GRACE_SECONDS)
    health_failing(now=now, grace=grace, error=error[:2000])
