"""Asking before an action on jobs: nothing is destroyed by one click.

The jobs page's bulk form and a job page's "Cancel job" and "Move to head" post once and are
asked what they would do (``jobs.bulk.BulkPlan``); the answer posts again, confirming.
"""

from __future__ import annotations

from django.http import HttpResponse
from django.shortcuts import render
from django.utils.translation import gettext as _

from jobs.bulk import BulkPlan
from jobs.document.params import HtmxHttpRequest

# What the confirmation's form sends again besides the form's own fields.
CONFIRMING = ("csrfmiddlewaretoken", "confirm", "typed")


def ask_first(request: HtmxHttpRequest, plan: BulkPlan, *, back: str) -> HttpResponse | None:
    """The question (``jobs/confirm.html``) unless the POST confirms ``plan``; None when it does.

    The question is a page of its own without JavaScript, and its part alone (htmx) for the
    dialog that ``static/confirm.js`` opens; either way its form posts the same fields again
    to the same URL with ``confirm`` (the plan's fingerprint) and, past the threshold, the
    typed number. A confirmation of other jobs than the plan's (the filter matches more by
    now) is asked again (409); a wrong typed number is refused, naming the field (400).
    """
    confirm, typed = request.POST.get("confirm", ""), request.POST.get("typed", "").strip()
    errors: dict[str, list[str]] = {}
    status = 200
    if confirm == plan.fingerprint:
        if not plan.typed_word or typed == plan.typed_word:
            return None
        status = 400
        words = {"number": plan.typed_word, "typed": repr(typed[:40])}
        errors["typed"] = [
            _("type %(number)s, the number of jobs, to confirm; %(typed)s is not it") % words
            if typed
            else _("type %(number)s, the number of jobs, to confirm") % words
        ]
    elif confirm:
        status = 409
    context = {
        "plan": plan,
        "errors": errors,
        "changed": status == 409,
        "url": request.path,
        "back": back,
        "fields": [
            (name, value)
            for name, values in request.POST.lists()
            if name not in CONFIRMING
            for value in values
        ],
    }
    if request.htmx:  # the dialog's part; htmx swaps only a 2xx answer
        return render(request, "jobs/confirm.html#confirm", context)
    return render(request, "jobs/confirm.html", context, status=status)
