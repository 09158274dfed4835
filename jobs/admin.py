"""Jobs in the admin site, to look at: every change to a job goes through its services
(the API and the pages), which record events and trigger admission."""

from __future__ import annotations

from django.contrib import admin

from jobs.models import Job, JobEvent


class ReadOnlyAdmin(admin.ModelAdmin):
    def has_add_permission(self, request, obj=None) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


class JobEventInline(admin.TabularInline):
    model = JobEvent
    fields = ("created_at", "type", "reason", "said", "actor")
    readonly_fields = fields
    extra = 0
    can_delete = False

    @admin.display(description="message")
    def said(self, event: JobEvent) -> str:
        """The message in the reader's language (its stored text when it has no code)."""
        return event.said

    def has_add_permission(self, request, obj=None) -> bool:
        return False


@admin.register(Job)
class JobAdmin(ReadOnlyAdmin):
    list_display = ["id", "name", "queue", "state", "priority", "owner", "enqueued_at"]
    list_filter = ["state", "kind", "queue"]
    search_fields = ["name", "owner__username"]
    list_select_related = ["queue", "owner"]
    date_hierarchy = "enqueued_at"
    inlines = [JobEventInline]
