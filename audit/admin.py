"""The audit history in the admin site: read only, filtered by what, who and how."""

from __future__ import annotations

import yaml
from django.contrib import admin
from django.db.models import Q, QuerySet
from django.utils.html import format_html, format_html_join

from .models import AuditEntry
from .services import describe_changes


class WithinFilter(admin.SimpleListFilter):
    """An object and what belongs to it, by key: ``algorithm`` matches the department and
    its memberships (``algorithm/alice``); ``root/algorithm`` a node and its subtree.

    Its only choice is the value in use, so the sidebar says why the list is narrowed and
    offers "All" to widen it; the change pages link here.
    """

    title = "object and what it holds"
    parameter_name = "within"

    def lookups(self, request, model_admin):
        value = self.value()
        return [(value, value)] if value else []

    def queryset(self, request, queryset: QuerySet) -> QuerySet:
        value = self.value()
        if not value:
            return queryset
        return queryset.filter(Q(object_key=value) | Q(object_key__startswith=value + "/"))


def _snapshot(value: dict | None):
    if value is None:
        return "—"
    text = yaml.safe_dump(value, sort_keys=False, allow_unicode=True, default_flow_style=False)
    return format_html("<pre>{}</pre>", text)


class ReadOnly:
    """The admin of a record: written by the services as things happen, never by hand."""

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


@admin.register(AuditEntry)
class AuditEntryAdmin(ReadOnly, admin.ModelAdmin):
    list_display = ["at", "actor", "action", "object_type", "object_key", "source", "changes"]
    list_filter = ["object_type", "action", "source", ("actor", admin.RelatedOnlyFieldListFilter)]
    list_filter += [WithinFilter]
    search_fields = ["object_key"]
    list_select_related = ["actor"]
    date_hierarchy = "at"
    fields = (
        "at",
        "actor",
        "action",
        "object_type",
        "object_key",
        "source",
        "changes",
        "before_display",
        "after_display",
    )
    readonly_fields = fields

    @admin.display(description="what changed")
    def changes(self, entry: AuditEntry):
        lines = describe_changes(entry.before, entry.after)
        rows = ((line,) for line in lines)
        return format_html_join("", '<div style="white-space: nowrap">{}</div>', rows) or "—"

    @admin.display(description="before")
    def before_display(self, entry: AuditEntry):
        return _snapshot(entry.before)

    @admin.display(description="after")
    def after_display(self, entry: AuditEntry):
        return _snapshot(entry.after)
