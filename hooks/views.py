"""The webhooks page of a department, for its managers and staff: its hooks, a new one with
its secret shown once, each hook's latest deliveries and their answers, "Send a test event",
pause and resume, delete.

A page of its own beside the department page (``access``), which links to it: ``access``
sits below ``hooks`` in the layers and cannot render their rows.
"""

from __future__ import annotations

from django import forms
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.translation import gettext_lazy as _
from django.views.decorators.http import require_http_methods, require_POST

from . import selectors, services
from .models import Webhook

DELIVERIES_ON_PAGE = 20


class WebhookForm(forms.Form):
    url = forms.CharField(
        label=_("URL"), max_length=2000, help_text=_("https://…, where each event is POSTed")
    )
    description = forms.CharField(label=_("Description"), max_length=200, required=False)


def _page(request, department, *, form=None, made=None, status=200) -> HttpResponse:
    hooks = list(selectors.department_webhooks(department))
    rows = [
        {"hook": hook, "deliveries": selectors.webhook_deliveries(hook)[:DELIVERIES_ON_PAGE]}
        for hook in hooks
    ]
    context = {
        "department": department,
        "rows": rows,
        "form": form or WebhookForm(),
        "made": made,
    }
    response = render(request, "hooks/department.html", context, status=status)
    if made is not None:
        response["Cache-Control"] = "no-store"  # the secret is in it
    return response


@login_required
@require_http_methods(["GET", "POST"])
def department_webhooks(request: HttpRequest, name: str) -> HttpResponse:
    department = selectors.department_managed(request.user, name)
    if request.method == "GET":
        return _page(request, department)
    form = WebhookForm(request.POST)
    if form.is_valid():
        try:
            made = services.webhook_create(
                department=department, actor=request.user, **form.cleaned_data
            )
        except services.WebhookInvalid as invalid:
            for field, why in invalid.errors.items():
                form.add_error(field, why)
        else:
            return _page(request, department, made=made)
    return _page(request, department, form=form, status=400)


ACTIONS = ("test", "pause", "resume", "delete")


@login_required
@require_POST
def webhook_act(request: HttpRequest, name: str, pk: int, action: str) -> HttpResponse:
    department = selectors.department_managed(request.user, name)
    hook = Webhook.objects.filter(pk=pk, department=department).first()
    if hook is None or action not in ACTIONS:
        raise Http404("no such webhook")
    if action == "test":
        services.webhook_test(hook=hook)
    elif action == "pause":
        services.webhook_pause(hook=hook, reason=f"paused by {request.user}")
    elif action == "resume":
        services.webhook_resume(hook=hook)
    else:
        services.webhook_delete(hook=hook)
    return redirect("department-webhooks", department.name)
