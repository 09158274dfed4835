"""The History button of the quota admin pages opens the audit trail, filtered to the object.

Django's own history lists only what was done in the admin; the audit trail also holds the
changes made through the API, YAML imports and commands.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from django.contrib.admin.utils import unquote
from django.core.exceptions import PermissionDenied
from django.shortcuts import redirect
from django.urls import reverse
from django.utils.http import urlencode


def audit_url(**filters: str) -> str:
    """The audit changelist with these admin filters (``object_type__exact``, ``within``)."""
    return reverse("admin:audit_auditentry_changelist") + "?" + urlencode(filters)


if TYPE_CHECKING:
    from django.contrib.admin import ModelAdmin

    _Admin = ModelAdmin[Any]
else:
    _Admin = object


class AuditHistoryMixin(_Admin):
    """For a ModelAdmin that defines ``audit_filters(obj)``: the admin filters (a dict) that
    select the object's entries in the audit trail."""

    audit_filters: Callable[[Any], dict[str, str]]

    def history_view(self, request, object_id, extra_context=None):
        obj = self.get_object(request, unquote(object_id))
        if obj is None:
            # ModelAdmin's own answer to a missing object, which the stub leaves out.
            return self._get_obj_does_not_exist_redirect(request, self.opts, object_id)  # type: ignore[attr-defined]
        if not self.has_view_or_change_permission(request, obj):
            raise PermissionDenied
        return redirect(audit_url(**self.audit_filters(obj)))
