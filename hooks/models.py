"""Webhooks: the callback URLs a department or a job names, the deliveries owed to each
(the outbox, written by a database trigger in the transaction of the state change), and
every attempt at one with the receiver's answer.

A hook's secret signs its deliveries (HMAC-SHA256, ``hooks.signing``), so it is stored in
clear: a digest could not sign. It is shown once, when the hook is made, like a token's.

A delivery's ``status``:

    pending   -> delivered (a 2xx answer), failed (WEBHOOK_MAX_ATTEMPTS attempts failed,
                 or a test event's one attempt)
    pending   stays pending while its hook is paused, and goes on when it is resumed.
"""

from __future__ import annotations

from django.conf import settings
from django.contrib.postgres.functions import RandomUUID
from django.contrib.postgres.indexes import BrinIndex
from django.db import models
from django.db.models import Q

from jobs.models import Job
from queues.models import Department

TEST_EVENT = "test"  # the event of "Send a test event"
JOB_EVENT_PREFIX = "job."  # job.queued, job.admitted, ... job.<state>, job.held, job.released
HELD, RELEASED = "held", "released"  # a pending job held, or released, in its state
RETRYING = "retrying"  # a failed attempt stops for the next one (its state: stopping)
# A backoff event is sent at most once this often per job and hook (the trigger's
# interval, migration 0002: a change here needs a migration that installs it again).
BACKOFF_EVENT_SECONDS = 60


class Webhook(models.Model):
    """A callback URL of a department (every job in the queues below its node) or of one
    job: exactly one of the two."""

    department = models.ForeignKey(
        Department, null=True, blank=True, on_delete=models.CASCADE, related_name="webhooks"
    )
    job = models.ForeignKey(
        Job, null=True, blank=True, on_delete=models.CASCADE, related_name="webhooks"
    )
    url = models.URLField(max_length=2000)
    secret = models.CharField(max_length=100)  # whsec_..., in clear: it signs
    description = models.CharField(max_length=200, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField()
    # Failed attempts since the last success; at WEBHOOK_PAUSE_AFTER_FAILURES it is paused.
    failures = models.PositiveIntegerField(default=0)
    paused_at = models.DateTimeField(null=True, blank=True)
    pause_reason = models.TextField(blank=True)

    class Meta:
        ordering = ["id"]
        constraints = [
            models.CheckConstraint(
                condition=Q(department__isnull=True) ^ Q(job__isnull=True),
                name="webhook_department_or_job",
            )
        ]
        indexes = [
            # The trigger's first question on every statement that changes jobs: is any
            # hook active at all? With none, this is all a state change pays.
            models.Index(fields=["id"], name="webhook_active", condition=Q(paused_at=None)),
        ]

    def __str__(self) -> str:
        return self.url


class Delivery(models.Model):
    """One event owed to one hook: written by the trigger on the job table (or by "Send a
    test event"), claimed and sent by ``hooks.tasks.deliver``, tried again with exponential
    backoff until it is delivered or has failed WEBHOOK_MAX_ATTEMPTS times."""

    class Status(models.TextChoices):
        PENDING = "pending"
        DELIVERED = "delivered"
        FAILED = "failed"

    uuid = models.UUIDField(db_default=RandomUUID(), editable=False, unique=True)
    hook = models.ForeignKey(Webhook, on_delete=models.CASCADE, related_name="deliveries")
    job = models.ForeignKey(
        Job, null=True, blank=True, on_delete=models.CASCADE, related_name="+", db_index=False
    )  # None: a test event
    event = models.CharField(max_length=30)  # job.<state>, or test
    # The job's state before and after, and its backoff reason, as the change left them.
    job_state_before = models.CharField(max_length=10, blank=True)
    job_state = models.CharField(max_length=10, blank=True)
    reason = models.TextField(blank=True)
    created_at = models.DateTimeField()
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    # When it may be claimed: its next try, or, while claimed, when the claim lapses.
    next_attempt_at = models.DateTimeField()
    # The JSON sent, made at its first attempt and sent again as it was at every retry.
    body = models.TextField(blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-id"]
        indexes = [
            models.Index(
                fields=["next_attempt_at"],
                name="delivery_due",
                condition=Q(status="pending"),
            ),
            models.Index(fields=["hook", "-id"], name="delivery_hook"),
            # The hourly prune of old deliveries; rows arrive in time order.
            BrinIndex(fields=["created_at"], name="delivery_created"),
            # The trigger's once-a-minute rule for backoff events.
            models.Index(
                fields=["hook", "job", "created_at"],
                name="delivery_backoff",
                condition=Q(event="job.backoff"),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.event} to hook #{self.hook_id} ({self.status})"


class Attempt(models.Model):
    """One POST of a delivery and what came of it: the receiver's status and the start of
    its answer, or why there was none (refused address, timeout, TLS, a redirect)."""

    delivery = models.ForeignKey(Delivery, on_delete=models.CASCADE, related_name="tries")
    at = models.DateTimeField()
    status_code = models.PositiveSmallIntegerField(null=True, blank=True)
    answer = models.TextField(blank=True)  # at most WEBHOOK_ANSWER_CHARS of the body
    error = models.TextField(blank=True)
    duration_ms = models.PositiveIntegerField(default=0)
    ok = models.BooleanField(default=False)

    class Meta:
        ordering = ["id"]
        indexes = [models.Index(fields=["delivery", "id"], name="attempt_delivery")]

    def __str__(self) -> str:
        return f"attempt of delivery #{self.delivery_id}: {self.status_code or self.error}"


# Table names for raw SQL, from the models, so that a rename cannot leave a query behind.
WEBHOOKS = Webhook._meta.db_table
DELIVERIES = Delivery._meta.db_table
