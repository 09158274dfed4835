"""What the quota tree tells, and asks, the layers above it: the one place where ``queues``
meets ``jobs`` without importing it. ``jobs.receivers`` answers all three.

- ``tree_changed`` (sender ``QuotaNode``): sent once a change to the tree has committed.
  The jobs app fails waiting jobs that can no longer run anywhere, wakes backed-off jobs,
  starts an admission cycle and republishes the tree to the cluster.
- ``live_jobs_wanted`` (sender ``Queue``, ``queue_ids``): asked before leaves are retired;
  each receiver answers ``{queue_id: live jobs}`` (queued, backing off or holding quota),
  and a queue with any is not retired.
- ``usage_wanted`` (sender ``QuotaNode``): asked by the admin's tree page; a receiver
  answers every node's usage by path (its subtree's admitted and running jobs).
- ``namespace_trouble_wanted`` (sender ``QuotaNode``): asked by the admin's tree page; a
  receiver answers the bound namespaces the cluster takes no jobs in now (missing, being
  deleted, without Caldera's Role), each with why and what fixes it.
- ``tree_preview_wanted`` (sender ``QuotaNode``, ``document``): asked by the admin's tree
  editor before it applies a tree; a receiver answers what applying it would do now
  (``jobs.reads.quota_preview``, as plain data: ``changes``, ``preempted``, ``admitted``),
  or raises the TreeError the save would.
- ``tree_apply_previewed_wanted`` (sender ``QuotaNode``, ``document``, ``previewed``,
  ``actor``, ``source``): asked by the tree editor to apply a tree the person previewed;
  a receiver applies it under the admission cycle's lock unless it would now preempt a
  job of the change's doing that is not in ``previewed`` (job ids), and answers
  ``{"changes": [NodeChange] or None, "preview": ..., "grown": [the jobs not shown]}``.

Without receivers (``queues`` alone) no queue holds jobs and nothing is in use.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.dispatch import Signal

from kube.quantity import ResourceList, add

tree_changed = Signal()
live_jobs_wanted = Signal()
usage_wanted = Signal()
namespace_trouble_wanted = Signal()
tree_preview_wanted = Signal()
tree_apply_previewed_wanted = Signal()


def _answers(signal: Signal, sender: type, **named: object) -> list[Any]:
    """What each receiver answered (django-stubs types an answer as ``str | None``)."""
    return [answer for _receiver, answer in signal.send(sender=sender, **named)]


def live_jobs(sender: type, queue_ids: Iterable[int]) -> dict[int, int]:
    """Live jobs per queue id, summed over every receiver's answer."""
    counts: dict[int, int] = {}
    for answer in _answers(live_jobs_wanted, sender, queue_ids=list(queue_ids)):
        for queue_id, count in answer.items():
            counts[queue_id] = counts.get(queue_id, 0) + count
    return counts


def namespace_trouble(sender: type) -> dict[str, str]:
    """Why each namespace in trouble takes no jobs, by namespace, from every receiver."""
    trouble: dict[str, str] = {}
    for answer in _answers(namespace_trouble_wanted, sender):
        trouble.update(answer)
    return trouble


def usage(sender: type) -> dict[str, ResourceList]:
    """Usage by node path, summed over every receiver's answer."""
    used: dict[str, ResourceList] = {}
    for answer in _answers(usage_wanted, sender):
        for path, resources in answer.items():
            used[path] = add(used.get(path, {}), resources)
    return used


def tree_preview(sender: type, document: object) -> dict | None:
    """What applying ``document`` would do, from the first receiver; None without one."""
    for answer in _answers(tree_preview_wanted, sender, document=document):
        return answer
    return None


def tree_apply_previewed(
    sender: type, *, document: object, previewed: Iterable[int], actor, source: str
) -> dict | None:
    """Apply a previewed tree through the first receiver (see the module doc); None
    without one."""
    for answer in _answers(
        tree_apply_previewed_wanted, sender, document=document, previewed=set(previewed),
        actor=actor, source=source,
    ):  # fmt: skip
        return answer
    return None
