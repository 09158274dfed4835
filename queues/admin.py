"""The admin site for quotas: nodes, the whole tree as YAML, queues, departments.

Every write goes through ``queues.services.tree_apply``, the same path as
``PUT /api/v1/quota-tree/``, so the invariants of the tree are checked the same way
everywhere and a refused change writes nothing.
"""

from __future__ import annotations

import yaml
from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.urls import path, reverse

from . import services
from .models import Department, Membership, Queue, QuotaNode
from .quantity import format_resources

RESOURCE_HELP = "One resource per line, as in the tree's YAML: 'cpu: 12', 'memory: 12Gi'."


def _resources_text(resources: dict) -> str:
    return "\n".join(f"{name}: {value}" for name, value in format_resources(resources).items())


def _parse_resources_text(text: str) -> dict[str, str]:
    """'cpu: 12' lines into {"cpu": "12"}; quantities are checked by the tree's parser."""
    result: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        name, sep, value = line.partition(":")
        if not sep or not name.strip() or not value.strip():
            raise forms.ValidationError(f"line {number}: write 'resource: quantity', got {line!r}")
        result[name.strip()] = value.strip()
    return result


def _field_for(error_key: str) -> str | None:
    """Which form field a TreeError key belongs to (``spec.root.children[0].max.cpu``)."""
    for field in ("min", "max", "namespaces"):
        if f".{field}" in error_key or error_key == field:
            return field
    return None


class QuotaNodeForm(forms.ModelForm):
    min_text = forms.CharField(
        label="Min (guaranteed)", widget=forms.Textarea(attrs={"rows": 4}), required=False,
        help_text=RESOURCE_HELP,
    )  # fmt: skip
    max_text = forms.CharField(
        label="Max (ceiling)", widget=forms.Textarea(attrs={"rows": 4}), required=False,
        help_text=RESOURCE_HELP,
    )  # fmt: skip
    namespaces_text = forms.CharField(
        label="Namespaces", required=False,
        help_text="Leaves only: the Kubernetes namespaces bound to this node, comma-separated.",
    )  # fmt: skip

    class Meta:
        model = QuotaNode
        fields: list[str] = []

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        node = self.instance
        self.fields["min_text"].initial = _resources_text(node.min)
        self.fields["max_text"].initial = _resources_text(node.max)
        self.fields["namespaces_text"].initial = ", ".join(node.namespaces)
        self.document: dict | None = None

    def clean(self):
        cleaned = super().clean()
        parsed = {}
        for field in ("min_text", "max_text"):
            try:
                parsed[field] = _parse_resources_text(cleaned.get(field, ""))
            except forms.ValidationError as error:
                self.add_error(field, error)
        if self.errors:
            return cleaned
        minimum, maximum = parsed["min_text"], parsed["max_text"]
        namespaces = [ns.strip() for ns in cleaned.get("namespaces_text", "").split(",")]
        try:
            document = services.tree_with_node_changed(
                path=self.instance.path,
                min=minimum,
                max=maximum,
                namespaces=[ns for ns in namespaces if ns],
            )
            services.tree_parse(document)
        except services.TreeError as error:
            for key, reasons in error.errors.items():
                field = _field_for(key)
                self.add_error(f"{field}_text" if field else None, reasons)
            return cleaned
        self.document = document
        return cleaned


@admin.register(QuotaNode)
class QuotaNodeAdmin(admin.ModelAdmin):
    form = QuotaNodeForm
    list_display = ["path", "min_display", "max_display", "namespaces_display", "active"]
    list_filter = ["active"]
    search_fields = ["path"]
    readonly_fields = ["path", "active"]
    fieldsets = [(None, {"fields": ["path", "min_text", "max_text", "namespaces_text", "active"]})]
    change_list_template = "admin/queues/quotanode/change_list.html"

    @admin.display(description="min")
    def min_display(self, node: QuotaNode) -> str:
        return ", ".join(f"{k} {v}" for k, v in format_resources(node.min).items())

    @admin.display(description="max")
    def max_display(self, node: QuotaNode) -> str:
        return ", ".join(f"{k} {v}" for k, v in format_resources(node.max).items())

    @admin.display(description="namespaces")
    def namespaces_display(self, node: QuotaNode) -> str:
        return ", ".join(node.namespaces)

    def has_add_permission(self, request) -> bool:
        # New nodes are added in the whole-tree editor, where their parent is visible.
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        # Nodes leave by being dropped from the tree: retired, kept for the jobs' history.
        return False

    def save_model(self, request, obj, form, change):
        try:
            services.tree_apply(document=form.document)
        except services.TreeError as error:
            # Another admin changed the tree between the form's check and this save.
            messages.error(request, f"Not saved: {error}")

    def get_urls(self):
        own = [
            path(
                "tree/",
                self.admin_site.admin_view(self.tree_view),
                name="queues_quotanode_tree",
            )
        ]
        return own + super().get_urls()

    def tree_view(self, request):
        """The whole tree as ElasticQuotaTree YAML: edit, then apply like ``kubectl apply``."""
        if not self.has_change_permission(request):
            raise PermissionDenied
        errors: dict[str, list[str]] = {}
        if request.method == "POST":
            text = request.POST.get("document", "")
            try:
                document = yaml.safe_load(text)
                services.tree_apply(document=document)
            except yaml.YAMLError as error:
                errors = {"document": [f"not valid YAML: {error}"]}
            except services.TreeError as error:
                errors = error.errors
            else:
                messages.success(request, "The quota tree was applied.")
                return redirect(reverse("admin:queues_quotanode_changelist"))
        else:
            text = yaml.safe_dump(services.tree_export(), sort_keys=False)
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "title": "Edit the quota tree (ElasticQuotaTree YAML)",
            "document": text,
            "errors": errors,
        }
        return TemplateResponse(request, "admin/queues/quotanode/tree.html", context)


@admin.register(Queue)
class QueueAdmin(admin.ModelAdmin):
    list_display = ["name", "node", "policy", "active"]
    list_filter = ["policy", "active"]
    list_editable = ["policy"]
    search_fields = ["name"]
    fields = ["name", "node", "policy", "active"]
    readonly_fields = ["name", "node", "active"]

    def has_add_permission(self, request) -> bool:
        return False  # one queue per leaf, kept in step with the tree

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 1
    autocomplete_fields = ["user"]


@admin.register(Department)
class DepartmentAdmin(admin.ModelAdmin):
    list_display = ["name", "quota_node"]
    search_fields = ["name"]
    inlines = [MembershipInline]

    def formfield_for_foreignkey(self, db_field, request, **kwargs):
        if db_field.name == "quota_node":
            kwargs["queryset"] = QuotaNode.objects.filter(active=True)
        return super().formfield_for_foreignkey(db_field, request, **kwargs)
