"""Logs a platform ingests: with LOG_FORMAT=json, one JSON object per line, each with the
request id, the person, the job id where there is one, and the Celery task; the default
(LOG_FORMAT=plain) stays a readable line.

What a line is about is kept in context variables while a request or a task runs:
``RequestContext`` (a middleware) sets the request id (the caller's ``X-Request-ID`` when
it is a sane one, else a new one, sent back in the answer) and the job of the URL; the
person is read from the request at the moment of the line, so an API token authenticated
inside the view counts. ``task_started`` / ``task_ended`` (Celery's signals, connected in
portal/celery.py) set the task and the jobs it was given. This module imports nothing of
Django's models, so the settings, gunicorn's arbiter and Celery can use it.
"""

from __future__ import annotations

import json
import logging
import re
import time
import traceback
import uuid
from collections.abc import Callable
from contextvars import ContextVar
from typing import Any

from django.utils.functional import LazyObject, empty

REQUEST: ContextVar[Any] = ContextVar("caldera_request", default=None)
REQUEST_ID: ContextVar[str] = ContextVar("caldera_request_id", default="")
JOB_ID: ContextVar[int | None] = ContextVar("caldera_job_id", default=None)
TASK: ContextVar[str] = ContextVar("caldera_task", default="")
TASK_ID: ContextVar[str] = ContextVar("caldera_task_id", default="")

# A caller's request id is kept only if it is this (a proxy's, a pipeline's run id).
SANE_REQUEST_ID = re.compile(r"[A-Za-z0-9._:-]{1,64}")
# The URL names of the pages and API calls about one job, whose ``pk`` is the job's id.
JOB_VIEWS = re.compile(r"(^|-)job($|-)")


class Context(logging.Filter):
    """Adds the context to every record, for the formatters (and any handler) to use."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.request_id = REQUEST_ID.get()
        record.person = _person(REQUEST.get())
        record.job_id = JOB_ID.get()
        record.task = TASK.get()
        record.task_id = TASK_ID.get()
        return True


def _person(request) -> str:
    """The request's person, if it is known already: a line never loads the session (a
    line about the database being down would need the database)."""
    user = request.__dict__.get("user") if request is not None else None
    if user is None or (isinstance(user, LazyObject) and user._wrapped is empty):
        return ""
    try:
        return user.get_username() if user.is_authenticated else ""
    except Exception:  # noqa: BLE001 - a log line never fails for its context
        return ""


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time (UTC, ISO 8601), level, logger, message, and the
    context that is set (request_id, person, job_id, task, task_id), with the traceback of
    an exception as one string."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key in ("request_id", "person", "job_id", "task", "task_id"):
            value = getattr(record, key, None)
            if value not in (None, ""):
                line[key] = value
        if record.exc_info:
            line["exception"] = "".join(traceback.format_exception(*record.exc_info))
        return json.dumps(line, ensure_ascii=False, default=str)


def logging_config(log_format: str, level: str) -> dict:
    """Django's LOGGING for ``log_format`` (plain or json)."""
    if log_format not in ("plain", "json"):
        raise ValueError(f"LOG_FORMAT must be plain or json, got {log_format!r}")
    formatters = {
        "plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"},
        "json": {"()": JsonFormatter},
    }
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "filters": {"context": {"()": Context}},
        "formatters": {log_format: formatters[log_format]},
        "handlers": {
            "console": {
                "class": "logging.StreamHandler",
                "formatter": log_format,
                "filters": ["context"],
            }
        },
        "root": {"handlers": ["console"], "level": level},
        "loggers": {"django.db.backends": {"level": "INFO"}},
    }


class RequestContext:
    """The middleware that sets the context of a request's lines (after the session and
    authentication middleware, so that the person is known)."""

    def __init__(self, get_response: Callable):
        self.get_response = get_response

    def __call__(self, request):
        asked = request.headers.get("X-Request-ID", "")
        request_id = asked if SANE_REQUEST_ID.fullmatch(asked) else uuid.uuid4().hex
        # Set for the thread until its next request, not reset on the way out: Django logs
        # a 4xx or 5xx answer (django.request) once every middleware has returned.
        REQUEST.set(request)
        REQUEST_ID.set(request_id)
        JOB_ID.set(None)
        response = self.get_response(request)
        response["X-Request-ID"] = request_id
        return response

    def process_view(self, request, view, args, kwargs):
        match = request.resolver_match
        if match is not None and JOB_VIEWS.search(match.url_name or "") and "pk" in kwargs:
            JOB_ID.set(int(kwargs["pk"]))
        return None


def task_started(task_id: str = "", task=None, args=(), kwargs=None, **_) -> None:
    """Celery's task_prerun: the task's lines name it, and the job it is about."""
    TASK.set(getattr(task, "name", "") or "")
    TASK_ID.set(task_id or "")
    given = (kwargs or {}).get("job_ids") or (args[0] if args else None)
    JOB_ID.set(given[0] if isinstance(given, list) and len(given) == 1 else None)


def task_ended(**_) -> None:
    """Celery's task_postrun: the next lines of the process are no task's."""
    TASK.set("")
    TASK_ID.set("")
    JOB_ID.set(None)
