"""What the apps' APIs share (jobs.web.api builds on queues, so it lives here): bodies that take
no field they do not declare, JSON-only operations, and the refusals an operation declares
beyond its schema.

Apart from ``queues.api`` because the schema class (``portal.schema``) reads it, and that
class is loaded while the views are being defined: it cannot import a module of views.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import cast

from django.conf import settings
from django.utils.module_loading import import_string
from django.utils.translation import gettext as _
from rest_framework import serializers
from rest_framework.parsers import BaseParser
from rest_framework.permissions import SAFE_METHODS, BasePermission, IsAdminUser, IsAuthenticated
from rest_framework.settings import api_settings

from .scope import Right, scope_of

# An operation's refusals that no schema can state, however well formed the request: those
# that depend on what is stored (a queue that does not exist, a name already taken) or on
# several fields at once (an entrypoint or a script). {field: why}; ``jobs[].queue`` names
# the field in every item of a list, ``spec.root.*`` a field and every field inside it.
# portal.schema writes them into the operation's 400, and the tests' schemathesis run takes
# any other 400 of a request valid by the schema for a disagreement of schema and server.
REFUSALS = "x-refusals"


def refusals(reasons: Mapping[str, str]) -> dict:
    """``extend_schema(extensions=...)`` of an operation that refuses ``reasons``."""
    return {REFUSALS: dict(reasons)}


def json_parsers() -> list:
    """The settings' JSON parser alone (portal.input's, which the apps cannot import), for
    an operation whose body nests objects in lists, which a form cannot carry."""
    # The setting names the classes by import path; api_settings gives the classes.
    parsers = cast(Sequence[type[BaseParser]], api_settings.DEFAULT_PARSER_CLASSES)
    return [p for p in parsers if p.media_type == "application/json"]


def manifest_parsers() -> list:
    """The JSON parser and the YAML ones (``MANIFEST_PARSER_CLASSES``), for an operation
    that takes a job's Kubernetes manifest as a team writes it."""
    return json_parsers() + [import_string(name) for name in settings.MANIFEST_PARSER_CLASSES]


class Body(serializers.Serializer):
    """A request body that takes its fields and no other: a misspelt field is refused, not
    ignored (the schema says so with ``additionalProperties: false``)."""

    def to_internal_value(self, data):
        if isinstance(data, Mapping):
            unknown = sorted(str(name) for name in data if name not in self.fields)
            if unknown:
                raise serializers.ValidationError({name: [_("unknown field")] for name in unknown})
        return super().to_internal_value(data)


def required_right(request, view) -> str:
    """The right a request needs of its token: the view's ``required_right`` (one, or one per
    method), else ``read`` to read and ``submit`` to change anything."""
    declared = getattr(view, "required_right", None)
    if isinstance(declared, Mapping):
        declared = declared.get(request.method)
    if declared:
        return declared
    return Right.READ if request.method in SAFE_METHODS else Right.SUBMIT


class WithinScope(BasePermission):
    """Refuses (403) a request whose token lacks the right its view needs, naming both.
    In the settings' default permissions, and in every view's that sets its own."""

    def has_permission(self, request, view) -> bool:
        scope = scope_of(request.user)
        if scope is None:
            return True
        needed = required_right(request, view)
        if scope.allows(needed):
            return True
        self.message = scope.lacks(needed)
        return False


# A staff-only operation, whose token must name admin (required_right = Right.ADMIN).
STAFF_ONLY = [IsAuthenticated, WithinScope, IsAdminUser]
SIGNED_IN = [IsAuthenticated, WithinScope]
