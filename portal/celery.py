"""The Celery app; tasks live in each app's tasks.py."""

import os

from celery import Celery

from .heartbeat import WorkerHeartbeat

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")

app = Celery("portal")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
# Every worker beats in Redis while it runs; /healthz counts the beats (portal/heartbeat.py).
app.steps["worker"].add(WorkerHeartbeat)
