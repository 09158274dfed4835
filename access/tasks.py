"""The credentials' background work: recording expiries (beat runs it)."""

from __future__ import annotations

from celery import shared_task

from .services import tokens_expire
from .task_names import TOKENS_EXPIRE_TASK


@shared_task(name=TOKENS_EXPIRE_TASK, ignore_result=True, acks_late=True)
def expire() -> int:
    """Record every token that expired since the last run; idempotent."""
    return tokens_expire()
