"""The pages of credentials: a person's own (their tokens), and a department's for its
managers (its members, its service identities and their tokens).

A new token's secret is in the answer to the POST that made it, and nowhere else: not in
a URL, a session or a log, and the answer is not cached.
"""

from __future__ import annotations

from typing import cast

from django import forms
from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import User
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import translation
from django.utils.translation import gettext_lazy as _
from django.utils.translation import ngettext
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from audit.models import AuditEntry
from queues.models import Department, Membership
from queues.scope import Right

from . import identities, services
from .models import AccessToken, Preference, ServiceIdentity
from .preferences import preference_of, zone_names

PAGE = AuditEntry.Source.PAGE
ALL, CHOSEN = "all", "chosen"
NEVER = "never"


def _days_label(days: int | None) -> str:
    if days is None:
        return str(_("never"))
    if days == 366:
        return str(_("1 year"))
    return ngettext("%(days)d day", "%(days)d days", days) % {"days": days}


class TokenForm(forms.Form):
    """A token as a person asks for it on a page; ``asked()`` hands it to the service,
    which checks it (``services.token_create``) as it checks the API's."""

    name = forms.CharField(max_length=services.NAME_LENGTH, help_text=_("what it is for"))
    right = forms.ChoiceField(widget=forms.RadioSelect)
    scope = forms.ChoiceField(
        choices=[(ALL, _("All my departments, and later ones")), (CHOSEN, _("Only these:"))],
        initial=ALL,
        widget=forms.RadioSelect,
    )
    departments = forms.MultipleChoiceField(required=False, widget=forms.CheckboxSelectMultiple)
    expires = forms.ChoiceField(label=_("Expires after"))

    def __init__(self, *args, user, departments: list[Department] | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        rights = [Right.READ, Right.SUBMIT]
        if not identities.is_service(user):
            rights.append(Right.MANAGE)
            if user.is_staff:
                rights.append(Right.ADMIN)
        cast(forms.ChoiceField, self.fields["right"]).choices = [
            (r, Right(r).label) for r in rights
        ]
        self.fields["right"].initial = Right.SUBMIT
        if departments is None:  # a service identity's: its one department
            del self.fields["scope"], self.fields["departments"]
        else:
            chosen = cast(forms.MultipleChoiceField, self.fields["departments"])
            chosen.choices = [(d.name, d.name) for d in departments]
        choices = services.expiry_choices()
        cast(forms.ChoiceField, self.fields["expires"]).choices = [
            (NEVER if days is None else str(days), _days_label(days)) for days in choices
        ]
        self.fields["expires"].initial = str(services.default_days())

    def asked(self) -> services.Asked:
        data = self.cleaned_data
        departments = None
        if data.get("scope") == CHOSEN:
            departments = data["departments"]
        expires = None if data["expires"] == NEVER else int(data["expires"])
        return services.Asked(
            name=data["name"], right=data["right"], departments=departments, expires_in_days=expires
        )

    def refused(self, invalid: services.TokenInvalid) -> None:
        for field, reasons in invalid.errors.items():
            field = {"expires_in_days": "expires"}.get(field, field)
            for reason in reasons:
                self.add_error(field if field in self.fields else None, reason)


def _tokens(user):
    return (
        AccessToken.objects.filter(user=user)
        .exclude(kind=AccessToken.Kind.EXCHANGED)
        .prefetch_related("departments")
        .order_by("revoked_at", "-created_at")[:200]
    )


def _made(request, form: TokenForm, user) -> tuple[AccessToken, str] | None:
    """The token the form asks for, made for ``user`` by the request's person; None with
    the form's errors when it cannot be."""
    if not form.is_valid():
        return None
    try:
        return services.token_create(user=user, asked=form.asked(), actor=request.user, source=PAGE)
    except services.TokenInvalid as invalid:
        form.refused(invalid)
        return None


def _zone_choices() -> list[tuple[str, object]]:
    return [("", _("As my browser says")), *((zone, zone) for zone in sorted(zone_names()))]


class PreferenceForm(forms.ModelForm):
    """How the person reads the pages; blank is "as my browser says"."""

    language = forms.ChoiceField(
        label=_("Language"),
        required=False,
        choices=[("", _("As my browser says")), *settings.LANGUAGES],
    )
    time_zone = forms.ChoiceField(label=_("Time zone"), required=False, choices=_zone_choices)
    theme = forms.ChoiceField(
        label=_("Theme"), required=False, choices=Preference.Theme.choices, widget=forms.RadioSelect
    )

    class Meta:
        model = Preference
        fields = ["language", "time_zone", "theme"]


def _preference_form(request: HttpRequest) -> PreferenceForm:
    preference = preference_of(request.user)
    return PreferenceForm(instance=preference or Preference(user=cast(User, request.user)))


def _secret_answer(response: HttpResponse) -> HttpResponse:
    response["Cache-Control"] = "no-store"
    return response


@login_required
@require_http_methods(["GET", "POST"])
def account(request: HttpRequest) -> HttpResponse:
    """Your page: your tokens, made, listed and revoked here."""
    departments = services.person_departments(request.user)
    form = TokenForm(request.POST or None, user=request.user, departments=departments)
    made = _made(request, form, request.user) if request.method == "POST" else None
    if made is not None:
        form = TokenForm(user=request.user, departments=departments)
    managed = Department.objects.filter(
        membership__user=request.user.pk, membership__role=Membership.Role.MANAGER
    )
    if request.user.is_staff:
        managed = Department.objects.all()
    context = {
        "form": form,
        "preference_form": _preference_form(request),
        "tokens": _tokens(request.user),
        "made": made,
        "managed": managed.order_by("name"),
        "departments": departments,
    }
    status = 400 if form.errors else 200
    return _secret_answer(render(request, "access/account.html", context, status=status))


@login_required
@require_POST
def preferences(request: HttpRequest) -> HttpResponse:
    """Saves how the person reads the pages; the next page is in its language and zone."""
    form = PreferenceForm(request.POST, instance=_preference_form(request).instance)
    if not form.is_valid():
        messages.error(request, _("Nothing was changed: %(errors)s") % {"errors": _errors(form)})
        return redirect("account")
    form.save()
    if form.cleaned_data["language"]:
        translation.activate(form.cleaned_data["language"])
    messages.success(request, _("Saved. Pages now follow these settings."))
    return redirect("account")


def _errors(form: forms.BaseForm) -> str:
    said = []
    for name, errors in form.errors.items():
        label = form.fields[name].label if name in form.fields else name
        said.append(f"{label}: {' '.join(str(error) for error in errors)}")
    return "; ".join(said)


@login_required
@require_POST
def token_revoke(request: HttpRequest, pk: int) -> HttpResponse:
    token = get_object_or_404(AccessToken.objects.select_related("user"), pk=pk)
    owner = getattr(token.user, "service_identity", None)
    if token.user != request.user and not (
        owner is not None and identities.may_manage(request.user, owner.department)
    ):
        raise Http404("no such token")
    services.token_revoke(token=token, actor=request.user, source=PAGE)
    messages.success(
        request, _("Revoked %(prefix)s… (%(name)s).") % {"prefix": token.prefix, "name": token.name}
    )
    if owner is not None and token.user != request.user:
        return redirect("department", owner.department.name)
    return redirect("account")


@login_required
@require_POST
def tokens_revoke_all(request: HttpRequest) -> HttpResponse:
    count = services.tokens_revoke_all(user=request.user, actor=request.user, source=PAGE)
    messages.success(
        request,
        ngettext("Revoked %(count)d token.", "Revoked %(count)d tokens.", count) % {"count": count},
    )
    return redirect("account")


class IdentityForm(forms.Form):
    name = forms.CharField(
        max_length=40,
        label=_("Name"),
        help_text=_("lowercase letters, digits and -; it becomes svc-<department>-<name>"),
    )
    description = forms.CharField(
        label=_("Description"),
        max_length=identities.DESCRIPTION,
        required=False,
        help_text=_("what its pipelines do"),
    )


def _managed(request: HttpRequest, name: str) -> Department:
    department = get_object_or_404(Department.objects.select_related("quota_node"), name=name)
    if not identities.may_manage(request.user, department):
        raise Http404("no such department")
    return department


def _department_page(request, department, *, identity_form=None, token_forms=None, made=None):
    members = (
        Membership.objects.filter(department=department)
        .exclude(user__service_identity__isnull=False)
        .select_related("user")
        .order_by("-role", "user__username")
    )
    pipelines = ServiceIdentity.objects.filter(department=department).select_related("user")
    token_forms = token_forms or {}
    rows = [
        {
            "identity": identity,
            "tokens": _tokens(identity.user),
            "form": token_forms.get(identity.pk) or TokenForm(user=identity.user),
        }
        for identity in pipelines
    ]
    context = {
        "department": department,
        "members": members,
        "rows": rows,
        "identity_form": identity_form or IdentityForm(),
        "made": made,
    }
    invalid = (identity_form and identity_form.errors) or any(
        f.errors for f in token_forms.values()
    )
    page = render(request, "access/department.html", context, status=400 if invalid else 200)
    return _secret_answer(page)


@login_required
@require_GET
def department(request: HttpRequest, name: str) -> HttpResponse:
    """A department's page, for its managers and staff."""
    return _department_page(request, _managed(request, name))


@login_required
@require_POST
def identity_create(request: HttpRequest, name: str) -> HttpResponse:
    department = _managed(request, name)
    form = IdentityForm(request.POST)
    if form.is_valid():
        try:
            identity = identities.service_identity_create(
                department=department,
                name=form.cleaned_data["name"],
                description=form.cleaned_data["description"],
                actor=request.user,
                source=PAGE,
            )
        except services.TokenInvalid as invalid:
            for field, reasons in invalid.errors.items():
                for reason in reasons:
                    form.add_error(field, reason)
        else:
            messages.success(request, _("Created %(name)s.") % {"name": identity.user.username})
            return redirect("department", department.name)
    return _department_page(request, department, identity_form=form)


@login_required
@require_POST
def identity_token_create(request: HttpRequest, name: str, username: str) -> HttpResponse:
    department = _managed(request, name)
    identity = get_object_or_404(
        ServiceIdentity.objects.select_related("user"),
        department=department,
        user__username=username,
    )
    form = TokenForm(request.POST, user=identity.user)
    made = _made(request, form, identity.user)
    if made is not None:
        return _department_page(request, department, made=made)
    return _department_page(request, department, token_forms={identity.pk: form})
