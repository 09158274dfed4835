"""Who may see and change which hooks, and the reads of the pages and the API.

A department's hooks are its managers' (and staff's), as its page is: a member, a reader or
another department's manager gets 404, never a hint that they exist. A job's hooks are its
owner's, and those of whoever manages its queue. A token acts within its scope: its
departments only, and a change needs ``manage`` for a department's hook, ``submit`` for a
job's own.
"""

from __future__ import annotations

from django.db.models import QuerySet
from django.http import Http404
from django.shortcuts import get_object_or_404
from rest_framework.exceptions import PermissionDenied

from access.identities import may_manage
from jobs.models import Job
from jobs.reads.selectors import job_get_for_user
from queues.models import Department
from queues.scope import Right, scope_of
from queues.selectors import MANAGER, STAFF, queue_role

from .models import Attempt, Delivery, Webhook

DELIVERIES_SHOWN = 100


def _scope_has(user, department_id: int | None) -> bool:
    scope = scope_of(user)
    return scope is None or scope.departments is None or department_id in scope.departments


def department_managed(user, name: str) -> Department:
    """The department ``name`` if ``user`` manages it (or is staff); 404 otherwise."""
    department = get_object_or_404(Department.objects.select_related("quota_node"), name=name)
    if not may_manage(user, department) or not _scope_has(user, department.pk):
        raise Http404("no such department")
    return department


def job_hooks_allowed(user, pk: object) -> Job:
    """The job if ``user`` may name its hooks (its owner, its queue's managers, staff)."""
    job = job_get_for_user(user, pk)
    if job.owner_id != user.pk and queue_role(user, job.queue) not in (MANAGER, STAFF):
        raise Http404("no such job")
    return job


def webhook_get(user, pk: object) -> Webhook:
    """A hook ``user`` may see; 404 otherwise."""
    try:
        hook = Webhook.objects.select_related("department", "job__queue__node").get(pk=int(pk))  # type: ignore[call-overload]
    except (Webhook.DoesNotExist, ValueError, TypeError):
        raise Http404("no such webhook") from None
    if hook.department is not None:
        department_managed(user, hook.department.name)
    else:
        job_hooks_allowed(user, hook.job_id)
    return hook


def change_right(hook: Webhook) -> str:
    """What a token needs to change ``hook``."""
    return Right.MANAGE if hook.department_id else Right.SUBMIT


def check_may_change(user, hook: Webhook) -> None:
    """403 when the request's token may read ``hook`` but not change it."""
    scope = scope_of(user)
    needed = change_right(hook)
    if scope is not None and not scope.allows(needed):
        raise PermissionDenied(scope.lacks(needed))


def department_webhooks(department: Department) -> QuerySet[Webhook]:
    return Webhook.objects.filter(department=department).order_by("id")


def job_webhooks(job: Job) -> QuerySet[Webhook]:
    return Webhook.objects.filter(job=job).order_by("id")


def webhook_deliveries(hook: Webhook) -> list[Delivery]:
    """The hook's latest deliveries, newest first, each with its attempts."""
    deliveries = list(Delivery.objects.filter(hook=hook).order_by("-id")[:DELIVERIES_SHOWN])
    tries: dict[int, list[Attempt]] = {d.pk: [] for d in deliveries}
    for attempt in Attempt.objects.filter(delivery_id__in=tries).order_by("id"):
        tries[attempt.delivery_id].append(attempt)
    for delivery in deliveries:
        delivery.attempt_list = tries[delivery.pk]  # type: ignore[attr-defined]
    return deliveries
