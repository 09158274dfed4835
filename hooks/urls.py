"""The webhooks' pages (hooks.views); their API is in portal/urls.py."""

from django.urls import path

from . import views

urlpatterns = [
    path(
        "departments/<slug:name>/webhooks/",
        views.department_webhooks,
        name="department-webhooks",
    ),
    path(
        "departments/<slug:name>/webhooks/<int:pk>/<slug:action>/",
        views.webhook_act,
        name="department-webhook-act",
    ),
]
