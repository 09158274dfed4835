"""What every page needs to know: whether the cluster is answering."""

from __future__ import annotations

from jobs.reads.selectors import cluster_trouble


def cluster_health(request) -> dict:
    if not getattr(request, "user", None) or not request.user.is_authenticated:
        return {}
    return {"cluster_trouble": cluster_trouble()}
