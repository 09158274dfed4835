"""Credentials in the admin site, for staff: anyone's tokens (found by prefix, name, person,
or a leaked token pasted whole), made and revoked; trust policies; the exchanges made;
service identities. Every change goes through the services, so it is checked and audited
as the pages' and the API's are."""

from __future__ import annotations

from django import forms
from django.contrib import admin, messages
from django.shortcuts import render
from django.utils.translation import gettext_lazy as _
from django.utils.translation import ngettext

from audit.admin import ReadOnly
from audit.models import AuditEntry

from . import keys, services
from .exchange import PolicyIn, policy_delete, policy_errors, policy_save
from .models import AccessToken, Exchange, ServiceIdentity, TrustPolicy

ADMIN = AuditEntry.Source.ADMIN


class TokenAddForm(forms.ModelForm):
    """A token staff make for anyone: the service checks it as it checks a person's own."""

    expires_in_days = forms.IntegerField(
        min_value=1, required=False, help_text=_("empty: the settings' default")
    )

    class Meta:
        model = AccessToken
        fields = ["user", "name", "right", "all_departments", "departments"]

    def clean(self):
        data = super().clean() or {}
        if not data.get("all_departments") and not data.get("departments"):
            self.add_error("departments", _("choose departments, or tick all departments"))
        return data


@admin.action(description=_("Revoke the chosen tokens"))
def revoke(modeladmin, request, queryset):
    count = 0
    for token in queryset.select_related("user").order_by("id"):
        count += services.token_revoke(token=token, actor=request.user, source=ADMIN)
    messages.success(
        request,
        ngettext("Revoked %(count)d token.", "Revoked %(count)d tokens.", count) % {"count": count},
    )


@admin.register(AccessToken)
class AccessTokenAdmin(admin.ModelAdmin):
    list_display = [
        "prefix", "name", "user", "kind", "right", "state", "created_at", "expires_at",
        "last_used_at", "last_used_from",
    ]  # fmt: skip
    list_filter = ["kind", "right", ("revoked_at", admin.EmptyFieldListFilter)]
    search_fields = ["prefix", "name", "user__username"]
    search_help_text = _("prefix, name or person; or paste a leaked token whole to find it")
    list_select_related = ["user"]
    actions = [revoke]
    readonly_fields = [
        "user", "kind", "name", "prefix", "right", "all_departments", "departments",
        "created_at", "created_by", "expires_at", "revoked_at", "revoked_by", "last_used_at",
        "last_used_from", "addresses", "policy",
    ]  # fmt: skip
    exclude = ["digest", "expiry_recorded"]

    @admin.display(description=_("state"))
    def state(self, token: AccessToken) -> str:
        return token.state()

    def get_search_results(self, request, queryset, search_term):
        term = search_term.strip()
        if term and keys.key_refusal(term) is None and len(term) >= 40:
            return queryset.filter(digest=keys.digest(term)), False
        return super().get_search_results(request, queryset, search_term)

    def get_form(self, request, obj=None, change=False, **kwargs):
        if obj is None:
            return TokenAddForm
        return super().get_form(request, obj, change, **kwargs)

    def get_readonly_fields(self, request, obj=None):
        return self.readonly_fields if obj is not None else []

    def get_fields(self, request, obj=None):
        if obj is None:
            return [*TokenAddForm.Meta.fields, "expires_in_days"]
        return super().get_fields(request, obj)

    def has_change_permission(self, request, obj=None) -> bool:
        return False if obj is not None else super().has_change_permission(request, obj)

    def has_delete_permission(self, request, obj=None) -> bool:
        return False  # revoked, never deleted: jobs and exchanges name them

    def add_view(self, request, form_url="", extra_context=None):
        """Made through the service; the answer shows the secret, once, and nothing else
        keeps it (no message, no redirect)."""
        if request.method != "POST":
            return super().add_view(request, form_url, extra_context)
        form = TokenAddForm(request.POST)
        if form.is_valid():
            data = form.cleaned_data
            departments = None if data["all_departments"] else [d.name for d in data["departments"]]
            days = data["expires_in_days"] if data["expires_in_days"] else -1
            asked = services.Asked(
                name=data["name"],
                right=data["right"],
                departments=departments,
                expires_in_days=days,
            )
            try:
                token, key = services.token_create(
                    user=data["user"], asked=asked, actor=request.user, source=ADMIN
                )
            except services.TokenInvalid as invalid:
                for field, reasons in invalid.errors.items():
                    for reason in reasons:
                        form.add_error(field if field in form.fields else None, reason)
            else:
                context = {**self.admin_site.each_context(request), "token": token, "key": key,
                           "opts": self.model._meta, "title": "Token made"}  # fmt: skip
                page = render(request, "admin/access/token_made.html", context)
                page["Cache-Control"] = "no-store"
                return page
        return super().add_view(request, form_url, extra_context)


class PolicyForm(forms.ModelForm):
    issuer = forms.URLField(
        max_length=500,
        assume_scheme="https",
        help_text="e.g. https://token.actions.githubusercontent.com",
    )

    class Meta:
        model = TrustPolicy
        fields = [
            "name", "issuer", "audience", "conditions", "acts_as", "right", "departments",
            "lifetime_seconds", "active",
        ]  # fmt: skip

    def clean(self):
        data = super().clean() or {}
        if self.errors:
            return data
        asked = _policy_in(data)
        for field, reason in policy_errors(asked).items():
            self.add_error(field if field in self.fields else None, reason)
        return data


def _policy_in(data) -> PolicyIn:
    departments = [d.name for d in data.get("departments") or []] or None
    return PolicyIn(
        name=data["name"],
        issuer=data["issuer"],
        audience=data["audience"],
        conditions=data.get("conditions") or {},
        acts_as=data["acts_as"],
        right=data["right"],
        departments=departments,
        lifetime_seconds=data["lifetime_seconds"],
        active=data["active"],
    )


@admin.register(TrustPolicy)
class TrustPolicyAdmin(admin.ModelAdmin):
    form = PolicyForm
    list_display = ["name", "issuer", "audience", "acts_as", "right", "lifetime_seconds", "active"]
    list_filter = ["active", "right"]
    search_fields = ["name", "issuer", "acts_as__username"]
    list_select_related = ["acts_as"]

    def save_model(self, request, obj, form, change):
        saved = policy_save(
            _policy_in(form.cleaned_data),
            actor=request.user,
            source=ADMIN,
            policy=TrustPolicy.objects.get(pk=obj.pk) if change else None,
        )
        obj.pk = saved.pk

    def save_related(self, request, form, formsets, change):
        pass  # policy_save set the departments

    def delete_model(self, request, obj):
        policy_delete(obj, actor=request.user, source=ADMIN)

    def delete_queryset(self, request, queryset):
        for policy in queryset:
            policy_delete(policy, actor=request.user, source=ADMIN)


@admin.register(Exchange)
class ExchangeAdmin(ReadOnly, admin.ModelAdmin):
    list_display = ["at", "policy", "subject", "token", "address"]
    list_filter = [("policy", admin.RelatedOnlyFieldListFilter)]
    search_fields = ["subject", "token__prefix"]
    list_select_related = ["policy", "token"]
    date_hierarchy = "at"


@admin.register(ServiceIdentity)
class ServiceIdentityAdmin(admin.ModelAdmin):
    list_display = ["user", "department", "description", "created_at", "created_by"]
    list_filter = [("department", admin.RelatedOnlyFieldListFilter)]
    search_fields = ["user__username", "description"]
    list_select_related = ["user", "department", "created_by"]

    def has_add_permission(self, request) -> bool:
        return False  # made on the department's page, by its managers or staff

    def has_change_permission(self, request, obj=None) -> bool:
        return False
