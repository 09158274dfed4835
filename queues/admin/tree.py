"""The quota tree in the admin: the tree with live usage, a node with its children, YAML in
and out.

Every write goes through ``queues.services.tree_apply``, the same path as
``PUT /api/v1/quota-tree/``, so the invariants of the tree are checked the same way
everywhere, a refused change writes nothing and each change is audited.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import ClassVar

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import HttpResponse
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import mark_safe
from django.utils.translation import gettext_lazy as _

from audit.models import AuditEntry
from kube.quantity import format_quantity, human

from .. import exchange, selectors, services, signals
from ..models import QuotaNode
from ..quota import shown_resources
from .history import AuditHistoryMixin, audit_url
from .tree_forms import (
    PREVIEW_CODE,
    ChildForm,
    ChildrenFormSet,
    QuotaNodeForm,
    previewed_ids,
)

MAX_UPLOAD_BYTES = 1_000_000  # a tree of thousands of nodes; anything larger is a mistake
NONE = "—"
UNAVAILABLE = mark_safe(' <strong class="namespace-trouble">unavailable</strong>')

# The deepest a node is indented in the admin's list (caldera-admin.css has a rule each).
MAX_INDENT = 8


def _may_edit(request, node: QuotaNode | None) -> bool:
    """Staff with the right to change nodes edit active ones; a retired node is history,
    shown read-only, and comes back by naming it again in the tree's YAML."""
    active = node is None or node.active
    return active and request.user.has_perm("queues.change_quotanode")


def _lines(resources: list[str], values: Mapping[str, int], spell: Callable) -> str:
    """One line per resource, in the same order in every column, so a row reads across."""
    return format_html_join(
        "",
        '<div class="resource-line">{} {}</div>',  # caldera-admin.css: no wrap
        ((r, spell(r, values[r]) if r in values else NONE) for r in resources),
    )


def _download(text: str, filename: str) -> HttpResponse:
    response = HttpResponse(text, content_type="application/yaml; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response


class ChildrenInline(admin.TabularInline):
    """A node's children, edited with it and applied with it as one tree."""

    model = QuotaNode
    fk_name = "parent"
    form = ChildForm
    formset = ChildrenFormSet
    fields = ["name", "min_text", "max_text", "namespaces_text", "weight"]
    extra = 1
    verbose_name = "child"
    verbose_name_plural = "children"
    show_change_link = True

    def get_queryset(self, request):
        return super().get_queryset(request).filter(active=True).order_by("path")

    def get_formset(self, request, obj=None, **kwargs):
        formset = super().get_formset(request, obj, **kwargs)

        class RetiringChildForm(formset.form):  # type: ignore[name-defined]  # made at run time
            def hand_clean_DELETE(self) -> None:
                """A deleted child is retired, never deleted: the admin's check for protected
                rows (its queue) does not apply; the tree's check for live jobs does."""

        formset.form = RetiringChildForm
        return formset

    # Adding, changing and retiring a child all edit the tree, like the node's own values.
    def has_add_permission(self, request, obj=None) -> bool:
        return _may_edit(request, obj)

    def has_change_permission(self, request, obj=None) -> bool:
        return _may_edit(request, obj)

    def has_delete_permission(self, request, obj=None) -> bool:
        return _may_edit(request, obj)


@admin.register(QuotaNode)
class QuotaNodeAdmin(AuditHistoryMixin, admin.ModelAdmin):
    form = QuotaNodeForm
    inlines = [ChildrenInline]
    # get_list_display adds the usage, counted once per page.
    list_display = ["tree_name", "namespaces_display", "active"]
    list_display_links = ["tree_name"]
    list_filter = ["active"]
    search_fields = ["path"]
    ordering = ["path"]
    sortable_by: ClassVar[list[str]] = []  # ordered by path, the list reads as the tree
    list_per_page = 1000
    readonly_fields = [
        "path",
        "parent_link",
        "min_display",
        "max_display",
        "namespaces_display",
        "usage",
        "active",
    ]
    fieldsets = [
        (
            None,
            {
                "fields": [
                    "path",
                    "parent_link",
                    "min_text",
                    "max_text",
                    "namespaces_text",
                    "weight",
                    "stop_policy",
                    "limits_text",
                    "usage",
                    "active",
                ]
            },
        )
    ]
    change_list_template = "admin/queues/quotanode/change_list.html"
    change_form_template = "admin/queues/quotanode/change_form.html"

    def get_fieldsets(self, request, obj=None):
        if self.has_change_permission(request, obj):
            if obj is not None and obj.parent_id is None:
                # The root: the tree's half-life instead of a weight, as it has no siblings.
                fields = list(self.fieldsets[0][1]["fields"])
                fields[fields.index("weight")] = "half_life_text"
                return [(None, {"fields": fields})]
            return self.fieldsets
        # Read only (a retired node): the values as text, not as empty inputs.
        fields = ["path", "parent_link", "min_display", "max_display", "namespaces_display"]
        return [(None, {"fields": [*fields, "active"]})]

    def audit_filters(self, node: QuotaNode) -> dict[str, str]:
        return {"object_type__exact": AuditEntry.ObjectType.QUOTA_NODE, "object_key": node.path}

    def get_list_display(self, request):
        usage = selectors.node_usage()

        def resources(node: QuotaNode) -> list[str]:
            return sorted(shown_resources(node, usage.get(node.path, {})))

        @admin.display(description=_("min (guaranteed)"))
        def min_column(node: QuotaNode) -> str:
            return _lines(resources(node), node.min, format_quantity)

        @admin.display(description=_("max (ceiling)"))
        def max_column(node: QuotaNode) -> str:
            return _lines(resources(node), node.max, format_quantity)

        @admin.display(description=_("used now"))
        def used_column(node: QuotaNode) -> str:
            used = usage.get(node.path, {})
            return _lines(resources(node), {r: used.get(r, 0) for r in resources(node)}, human)

        trouble = selectors.namespace_trouble()

        @admin.display(description=_("namespaces"))
        def namespaces_column(node: QuotaNode) -> str:
            return format_html_join(
                ", ",
                "{}{}",
                ((name, UNAVAILABLE if name in trouble else "") for name in node.namespaces),
            )

        return ["tree_name", min_column, max_column, used_column, namespaces_column, "active"]

    @admin.display(description=_("node"))
    def tree_name(self, node: QuotaNode) -> str:
        # Indented by caldera-admin.css from data-depth: the Content-Security-Policy
        # refuses a style attribute.
        return format_html(
            '<span class="quota-node" data-depth="{}" title="{}">{}</span>{}',
            min(node.depth, MAX_INDENT),
            node.path,
            node.name,
            "" if node.active else _(" (retired)"),
        )

    @admin.display(description=_("namespaces"))
    def namespaces_display(self, node: QuotaNode) -> str:
        return ", ".join(node.namespaces)

    @admin.display(description=_("min (guaranteed)"))
    def min_display(self, node: QuotaNode) -> str:
        return _lines(sorted(node.min), node.min, format_quantity) or NONE

    @admin.display(description=_("max (ceiling)"))
    def max_display(self, node: QuotaNode) -> str:
        return _lines(sorted(node.max), node.max, format_quantity) or NONE

    @admin.display(description=_("parent"))
    def parent_link(self, node: QuotaNode) -> str:
        if node.parent is None:
            return str(_("— (the root)"))
        url = reverse("admin:queues_quotanode_change", args=[node.parent_id])
        return format_html('<a href="{}">{}</a>', url, node.parent.path)

    @admin.display(description=_("used now (admitted and running jobs)"))
    def usage(self, node: QuotaNode) -> str:
        used = selectors.node_usage().get(node.path, {})
        rows = [
            (
                resource,
                human(resource, used.get(resource, 0)),
                human(resource, node.max[resource]) if resource in node.max else NONE,
                human(resource, node.min[resource]) if resource in node.min else NONE,
            )
            for resource in sorted(shown_resources(node, used))
        ]
        return format_html_join("", "<div>{}: {} of max {} (min {})</div>", rows) or NONE

    def has_add_permission(self, request) -> bool:
        # New nodes are added as children on their parent's page, or in the YAML.
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return _may_edit(request, obj)

    def has_delete_permission(self, request, obj=None) -> bool:
        # Nodes leave by being dropped from the tree: retired, kept for the jobs' history.
        return False

    def save_model(self, request, obj, form, change) -> None:
        """Nothing here: the node is written with its children in ``save_related``."""

    def save_related(self, request, form, formsets, change) -> None:
        (children,) = [fs for fs in formsets if isinstance(fs, ChildrenFormSet)]
        children.applied = []
        try:
            # Under the admission cycle's lock, as the person previewed it (or saw nothing
            # preempted), unless a cycle moved jobs since the form's own check.
            applied = signals.tree_apply_previewed(
                QuotaNode, document=children.document,
                previewed=previewed_ids(request.POST.getlist("previewed")),
                actor=request.user, source=AuditEntry.Source.ADMIN,
            )  # fmt: skip
            if applied is None:  # no receiver: applied at once
                children.applied = services.tree_import(
                    document=children.document, actor=request.user, source=AuditEntry.Source.ADMIN
                )
            elif applied["changes"] is None:
                jobs = ", ".join(f"#{job['job']}" for job in applied["grown"])
                messages.error(
                    request,
                    _("Not saved: since the check, it would also preempt %(jobs)s; look again.")
                    % {"jobs": jobs},
                )
                return
            else:
                children.applied = applied["changes"]
        except services.TreeError as error:
            # Another admin changed the tree between the form's check and this save.
            messages.error(request, _("Not saved: %(error)s") % {"error": error})
            return
        for change in children.applied:
            messages.info(request, change.describe())

    def render_change_form(self, request, context, add=False, change=False, form_url="", obj=None):
        """A page that shows the preview of its change: the preview, and not as an error
        when it is all that stopped the save."""
        for inline in context.get("inline_admin_formsets", []):
            children = inline.formset
            if isinstance(children, ChildrenFormSet) and children.preview is not None:
                context["preview"], context["grown"] = children.preview, children.grown
                if _only_the_preview(context["adminform"].form, children):
                    context["errors"] = []  # its own line says nothing was saved yet
        return super().render_change_form(request, context, add, change, form_url, obj)

    # The log entry takes a plain message as well as Django's structured one.
    def construct_change_message(self, request, form, formsets, add=False) -> str:  # type: ignore[override]
        applied = [c for fs in formsets for c in getattr(fs, "applied", [])]
        return "; ".join(change.describe() for change in applied) or "No change."

    def get_urls(self):
        own = [
            path("tree/", self.admin_site.admin_view(self.tree_view), name="queues_quotanode_tree"),
            path(
                "export/",
                self.admin_site.admin_view(self.export_view),
                name="queues_quotanode_export",
            ),
            path(
                "export-volcano/",
                self.admin_site.admin_view(self.export_volcano_view),
                name="queues_quotanode_export_volcano",
            ),
        ]
        return own + super().get_urls()

    def changelist_view(self, request, extra_context=None):
        trouble = sorted(selectors.namespace_trouble().items())
        extra_context = {
            **(extra_context or {}),
            "audit_url": audit_url(),
            "namespace_trouble": trouble,
        }
        return super().changelist_view(request, extra_context)

    def export_view(self, request):
        """The active tree as an ElasticQuotaTree YAML file, the seed's format."""
        if not self.has_view_permission(request):
            raise PermissionDenied
        return _download(exchange.tree_yaml(), "elasticquotatree.yaml")

    def export_volcano_view(self, request):
        """A Volcano Queue per leaf, for clusters that schedule with Volcano."""
        if not self.has_view_permission(request):
            raise PermissionDenied
        return _download(exchange.volcano_queues_yaml(), "volcano-queues.yaml")

    def tree_view(self, request):
        """The whole tree as ElasticQuotaTree YAML: edit or upload, then apply like
        ``kubectl apply``."""
        if not self.has_change_permission(request):
            raise PermissionDenied
        errors: dict[str, list[str]] = {}
        preview, grown = None, []
        if request.method == "POST":
            text = request.POST.get("document", "")
            upload = request.FILES.get("file")
            if upload is not None:
                text, errors = _read_upload(upload)
            action = request.POST.get("action", "")
            if not errors:
                try:
                    document = exchange.tree_load(text)
                    changes = None
                    if action == PREVIEW:
                        preview = signals.tree_preview(QuotaNode, document)
                        raise _Shown
                    if action == APPLY:
                        # Under the admission cycle's lock, unless it would now preempt
                        # jobs the person was not shown: then the new preview, again.
                        applied = signals.tree_apply_previewed(
                            QuotaNode, document=document,
                            previewed=previewed_ids(request.POST.getlist("previewed")),
                            actor=request.user, source=AuditEntry.Source.YAML_IMPORT,
                        )  # fmt: skip
                        if applied is not None:
                            changes, preview, grown = (
                                applied["changes"],
                                applied["preview"],
                                applied["grown"],
                            )
                            if changes is None:
                                raise _Shown
                    if changes is None:  # a script's POST, or no receiver: at once
                        changes = services.tree_import(
                            document=document,
                            actor=request.user,
                            source=AuditEntry.Source.YAML_IMPORT,
                        )
                except services.TreeError as error:
                    errors, preview = error.errors, None
                except _Shown:
                    pass
                else:
                    _report(request, changes)
                    return redirect(reverse("admin:queues_quotanode_changelist"))
        else:
            text = exchange.tree_yaml()
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "title": "Edit the quota tree (ElasticQuotaTree YAML)",
            "document": text,
            "errors": errors,
            "preview": preview,
            "grown": grown,
        }
        return TemplateResponse(request, "admin/queues/quotanode/tree.html", context)


# The tree editor's buttons: see what the tree would do, then apply what was seen. A POST
# that names neither (a script's) applies at once, as before the preview existed.
PREVIEW, APPLY = "preview", "apply"


class _Shown(Exception):
    """The tree is shown with its preview rather than applied."""


def _only_the_preview(form, children: ChildrenFormSet) -> bool:
    """Whether the preview is the one thing that stopped the save (no field is wrong)."""
    codes = [error.code for error in children.non_form_errors().as_data()]
    return (
        codes == [PREVIEW_CODE]
        and not form.errors
        and not any(row.errors for row in children.forms)
    )


def _read_upload(upload) -> tuple[str, dict[str, list[str]]]:
    if upload.size > MAX_UPLOAD_BYTES:
        return "", {"file": [f"{upload.name} is larger than {MAX_UPLOAD_BYTES} bytes"]}
    try:
        return upload.read().decode("utf-8"), {}
    except UnicodeDecodeError:
        return "", {"file": [f"{upload.name} is not UTF-8 text"]}


def _report(request, changes: list[services.NodeChange]) -> None:
    if not changes:
        messages.info(request, _("The quota tree already matched the YAML: nothing changed."))
        return
    messages.success(
        request,
        _("The quota tree was applied: %(nodes)s.") % {"nodes": services.count_nodes(changes)},
    )
    for change in changes:
        messages.info(request, change.describe())
