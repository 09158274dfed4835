"""Waiting jobs that can never run: failed with the reason, so they block nobody.

Submit refuses a job whose pod fits no node (``queues.placement``, called by
``jobs.services``); this module owns the same rule for jobs already waiting when the quota
tree or the cluster's nodes change. ``jobs.apps`` calls it when the tree changes, the
cluster sync when the nodes change.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from django.db import transaction
from django.db.models import Q

from jobs.cluster import get_backend
from jobs.document.validation import job_placements, job_pods
from jobs.engine import transitions
from jobs.engine.triggers import request_admission
from jobs.models import PENDING, Job, JobEvent, State
from kube.scheduling import ClusterNode
from queues import phrases
from queues import selectors as queue_selectors
from queues.phrases import Phrase
from queues.placement import unplaceable
from queues.quota import Node, path_to_root


def jobs_fail_unrunnable(*, now: datetime, nodes: list[ClusterNode] | None = None) -> list[int]:
    """Fail the waiting (queued and backoff) jobs that can never run any more.

    Submit refuses a job whose pod fits no node (``queues.placement``); a job already
    waiting when the quota tree or the cluster's nodes change would otherwise block its
    queue for ever, so it fails with the same reason. Called when the tree changed and by
    the sync when the nodes changed. ``nodes`` are the node shapes the caller just read,
    else the backend's; unknown shapes fail nothing. Admitted jobs are not touched, and
    pending jobs hold no quota, so nothing is freed. Pending jobs are read by their
    distinct shapes, so a deep queue of identical jobs costs one check.
    """
    nodes = get_backend().nodes() if nodes is None else nodes
    refused = unrunnable_shapes(queue_selectors.tree_nodes(), nodes)
    failed: list[int] = []
    if not refused:
        return failed
    with transaction.atomic():
        for shape, reason in refused:
            moved = transitions.move(
                State.FAILED, Q(**shape), among=PENDING, finished_at=now, next_attempt_at=None
            )
            JobEvent.objects.record(
                (
                    (pk, "Unrunnable", Phrase(phrases.CAN_NEVER_RUN, {"reason": reason.as_json()}))
                    for pk in moved
                ),
                at=now,
                warning=True,
            )
            failed += moved
        if failed:
            # The jobs behind them in their queues may go now.
            transaction.on_commit(request_admission)
    return failed


def unrunnable_shapes(
    tree: Mapping[str, Node], nodes: list[ClusterNode] | None
) -> list[tuple[dict, Phrase]]:
    """The shapes of waiting jobs (leaf, kind, runtime, head and workers, as a filter of
    ``Job``) that can never run under ``tree`` on ``nodes``, each with why; none while the
    node shapes are unknown. What a tree change fails, and what its preview names."""
    if not nodes:
        return []
    shapes = (
        Job.objects.filter(state__in=PENDING)
        .order_by()  # DISTINCT over the shapes alone, not the default ordering's id too
        .values_list("queue__node__path", "kind", "runtime", "head", "workers", "request")
        .distinct()
    )
    refused = []
    for leaf, kind, runtime, head, workers, request in shapes:
        pods = job_pods(kind=kind, runtime=runtime, head=head, workers=workers)
        placements = job_placements(kind=kind, head=head, workers=workers)
        path_nodes = [tree[path] for path in path_to_root(leaf) if path in tree]
        nowhere = unplaceable(
            pods=pods, nodes=nodes, path_nodes=path_nodes, request=request, placements=placements
        )
        if nowhere is not None:
            shape = dict(queue__node__path=leaf, kind=kind, runtime=runtime, head=head)
            refused.append((shape | {"workers": workers}, nowhere.phrase))
    return refused
