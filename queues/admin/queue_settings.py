"""Queues in the admin: one per leaf, kept in step with the tree; their settings are edited
here, each change audited."""

from __future__ import annotations

from django.contrib import admin

from audit.models import AuditEntry

from .. import services
from ..models import Queue
from .history import AuditHistoryMixin


@admin.register(Queue)
class QueueAdmin(AuditHistoryMixin, admin.ModelAdmin):
    list_display = ["name", "node", "policy", "preemption", "priority_class", "active"]
    list_filter = ["policy", "preemption", "active"]
    list_editable = ["policy"]
    list_select_related = ["node"]
    search_fields = ["name"]
    fields = ["name", "node", *services.QUEUE_SETTINGS, "active"]
    readonly_fields = ["name", "node", "active"]

    def audit_filters(self, queue: Queue) -> dict[str, str]:
        return {"object_type__exact": AuditEntry.ObjectType.QUEUE, "object_key": queue.name}

    def save_model(self, request, obj, form, change) -> None:
        changes = {
            name: form.cleaned_data[name]
            for name in form.changed_data
            if name in services.QUEUE_SETTINGS
        }
        services.queue_update(
            queue=obj, changes=changes, actor=request.user, source=AuditEntry.Source.ADMIN
        )

    def has_add_permission(self, request) -> bool:
        return False  # one queue per leaf, kept in step with the tree

    def has_delete_permission(self, request, obj=None) -> bool:
        return False
