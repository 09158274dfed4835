"""Departments and their people in the admin: who belongs where, with which role.

Memberships change through ``queues.services`` here too (the department's inline, deleting
a department or a user), so each change is audited like one made through the API.
"""

from __future__ import annotations

from django.contrib import admin
from django.contrib.auth import get_user_model
from django.contrib.auth.admin import UserAdmin
from django.db import transaction
from django.db.models import Prefetch
from django.utils.translation import gettext_lazy as _

from audit.models import AuditEntry

from .. import departments
from ..models import Department, Membership, QuotaNode
from .history import AuditHistoryMixin

ADMIN = AuditEntry.Source.ADMIN
User = get_user_model()

# What each role may do; shown on the department's page.
ROLE_RIGHTS = [
    (
        _("Members"),
        _(
            "submit jobs to the department's queues, follow them, cancel their own jobs and "
            "lower their own jobs' priority."
        ),
    ),
    (
        _("Managers"),
        _(
            "do what members do, and also raise a job's priority (jump it ahead in its queue) "
            "and cancel any job of the department."
        ),
    ),
    (_("Staff"), _("may do everything in every department, and edit the quota tree here.")),
]


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 1
    autocomplete_fields = ["user"]
    verbose_name = _("member or manager")
    verbose_name_plural = _("members and managers")

    def get_queryset(self, request):
        # Managers first ("manager" < "member"), then by name.
        return (
            super().get_queryset(request).select_related("user").order_by("role", "user__username")
        )


@admin.register(Department)
class DepartmentAdmin(AuditHistoryMixin, admin.ModelAdmin):
    list_display = ["name", "quota_node", "managers_list", "members_list"]
    search_fields = ["name"]
    inlines = [MembershipInline]
    change_form_template = "admin/queues/department/change_form.html"

    def audit_filters(self, department: Department) -> dict[str, str]:
        # The department and its memberships (``algorithm/alice``).
        types = [AuditEntry.ObjectType.DEPARTMENT, AuditEntry.ObjectType.MEMBERSHIP]
        return {"object_type__in": ",".join(types), "within": department.name}

    def get_queryset(self, request):
        people = Membership.objects.select_related("user").order_by("user__username")
        return (
            super()
            .get_queryset(request)
            .select_related("quota_node")
            .prefetch_related(Prefetch("membership_set", queryset=people))
        )

    def _people(self, department: Department, role: str) -> str:
        names = [m.user.username for m in department.membership_set.all() if m.role == role]
        return ", ".join(names) or "—"

    @admin.display(description=_("managers"))
    def managers_list(self, department: Department) -> str:
        return self._people(department, Membership.Role.MANAGER)

    @admin.display(description=_("members"))
    def members_list(self, department: Department) -> str:
        return self._people(department, Membership.Role.MEMBER)

    def formfield_for_foreignkey(self, db_field, request, **kwargs):
        if db_field.name == "quota_node":
            kwargs["queryset"] = QuotaNode.objects.filter(active=True)
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    def render_change_form(self, request, context, *args, **kwargs):
        context["role_rights"] = ROLE_RIGHTS
        return super().render_change_form(request, context, *args, **kwargs)

    def save_model(self, request, obj, form, change) -> None:
        if change:
            departments.department_update(
                department=obj,
                name=obj.name,
                quota_node=obj.quota_node,
                actor=request.user,
                source=ADMIN,
            )
            return
        created = departments.department_create(
            name=obj.name, quota_node=obj.quota_node, actor=request.user, source=ADMIN
        )
        # The inline's memberships hang on this very instance: give it the new row's key.
        obj.pk, obj._state.adding = created.pk, False

    def save_formset(self, request, form, formset, change) -> None:
        """Memberships through the services: a new row adds the person, a changed role is
        a role change, a changed person is one removed and one added, a deleted row a
        removal."""
        formset.save(commit=False)  # sorts the rows into new, changed and deleted; no writes
        department = form.instance
        for membership in formset.deleted_objects:
            departments.membership_delete(membership=membership, actor=request.user, source=ADMIN)
        for membership, changed in formset.changed_objects:
            if "user" in changed:
                departments.membership_delete(
                    membership=membership, actor=request.user, source=ADMIN
                )
        for membership in [*formset.new_objects, *(m for m, _fields in formset.changed_objects)]:
            departments.membership_set(
                department=department,
                username=membership.user.username,
                role=membership.role,
                actor=request.user,
                source=ADMIN,
            )

    def delete_model(self, request, obj) -> None:
        departments.department_delete(department=obj, actor=request.user, source=ADMIN)

    def delete_queryset(self, request, queryset) -> None:
        with transaction.atomic():
            for department in queryset:
                departments.department_delete(
                    department=department, actor=request.user, source=ADMIN
                )


class UserMembershipInline(admin.TabularInline):
    """A person's departments and roles, to read: they change on the department's page."""

    model = Membership
    fk_name = "user"
    fields = ("department", "role")
    readonly_fields = fields
    extra = 0
    can_delete = False
    verbose_name = "department and role (edit them on the department's page)"
    verbose_name_plural = "departments and roles (edit them on the department's page)"

    def get_queryset(self, request):
        return super().get_queryset(request).select_related("department").order_by("department")

    def has_add_permission(self, request, obj=None) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False


admin.site.unregister(User)


@admin.register(User)
class CalderaUserAdmin(UserAdmin):
    inlines = [*UserAdmin.inlines, UserMembershipInline]

    def delete_model(self, request, obj) -> None:
        # Deleting a person removes their memberships: audit each removal first.
        with transaction.atomic():
            for membership in Membership.objects.filter(user=obj):
                departments.membership_delete(
                    membership=membership, actor=request.user, source=ADMIN
                )
            super().delete_model(request, obj)

    def delete_queryset(self, request, queryset) -> None:
        with transaction.atomic():
            for membership in Membership.objects.filter(user__in=queryset):
                departments.membership_delete(
                    membership=membership, actor=request.user, source=ADMIN
                )
            super().delete_queryset(request, queryset)
