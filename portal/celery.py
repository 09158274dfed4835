"""The Celery app; tasks live in each app's tasks.py."""

import os

from celery import Celery
from celery.signals import (
    task_postrun,
    task_prerun,
    worker_init,
    worker_process_init,
    worker_process_shutdown,
)
from django.conf import settings

from .heartbeat import WorkerHeartbeat
from .logs import task_ended, task_started
from .memory import freeze_loaded_objects
from .process_metrics import forget_dead_processes, process_exited, serve_process_metrics

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")

app = Celery("portal")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
# Every worker beats in Redis while it runs; /healthz counts the beats (portal/heartbeat.py).
app.steps["worker"].add(WorkerHeartbeat)
# Each log line of a task names it, and the job it is about (portal/logs.py).
task_prerun.connect(task_started, weak=False)
task_postrun.connect(task_ended, weak=False)


@worker_init.connect
def _serve_figures(**kwargs) -> None:
    """The worker's main process, before its pool starts: the pool's shared figures start
    clean, and are served at WORKER_METRICS_PORT when it is set."""
    forget_dead_processes()
    if settings.WORKER_METRICS_PORT:
        serve_process_metrics(
            settings.WORKER_METRICS_HOST, settings.WORKER_METRICS_PORT, settings.METRICS_TOKEN
        )


@worker_process_init.connect
def _pool_process_loaded(**kwargs) -> None:
    """A pool process, forked with the worker's Django and tasks loaded, before its first
    task: the admission cycle and the sync make many objects a pass."""
    freeze_loaded_objects()


@worker_process_shutdown.connect
def _pool_process_gone(pid=None, **kwargs) -> None:
    process_exited(pid or os.getpid())
