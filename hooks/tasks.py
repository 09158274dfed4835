"""The webhooks' background work: a delivery pass, asked for by a test event, a resume, a
retry's time, and beat every WEBHOOK_BEAT_SECONDS (which also picks up the deliveries the
outbox trigger wrote: a job's state change sends no task of its own), and the hourly prune
of old deliveries."""

from __future__ import annotations

from celery import shared_task

from .services import deliveries_prune, deliveries_send
from .task_names import DELIVER_TASK, PRUNE_TASK


@shared_task(name=DELIVER_TASK, ignore_result=True)
def deliver() -> int:
    """Send what is due; safe to run in several workers at once (claims skip each other's)."""
    return deliveries_send()


@shared_task(name=PRUNE_TASK, ignore_result=True)
def prune() -> int:
    """Delete the deliveries older than WEBHOOK_DELIVERIES_DAYS that are done with."""
    return deliveries_prune()
