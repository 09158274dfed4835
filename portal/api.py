"""API plumbing shared by the apps: one error shape, whatever went wrong.

Errors are ``{"field": ["reason", ...]}`` for bad input (400) and ``{"detail": "..."}``
otherwise (a 429 adds the limit it names, portal/throttling.py), so a CI pipeline can
print them as they are.
"""

from __future__ import annotations

from rest_framework import exceptions, status
from rest_framework.views import exception_handler as drf_exception_handler

from access.services import TokenInvalid
from jobs.document.validation import JobInvalid
from jobs.services import JobConflict, JobPermissionDenied, SubmissionKeyConflict
from kube.quantity import QuantityError
from queues.phrases import in_language
from queues.services import TreeError

from .throttling import LimitReached


class Conflict(exceptions.APIException):
    status_code = status.HTTP_409_CONFLICT
    default_detail = "the object is not in a state that allows this"
    default_code = "conflict"


def exception_handler(exc, context):
    if isinstance(exc, (JobInvalid, TreeError, TokenInvalid)):
        exc = exceptions.ValidationError(exc.errors)
    elif isinstance(exc, QuantityError):
        exc = exceptions.ValidationError({exc.field or "body": [in_language(exc.reason)]})
    elif isinstance(exc, JobPermissionDenied):
        exc = exceptions.PermissionDenied(str(exc))
    elif isinstance(exc, (JobConflict, SubmissionKeyConflict)):
        exc = Conflict(str(exc))
    response = drf_exception_handler(exc, context)
    if response is None:
        return None
    if isinstance(exc, LimitReached):  # the limit named beside the detail
        response.data = exc.body
    if isinstance(response.data, list):
        response.data = {"body": response.data}
    return response
