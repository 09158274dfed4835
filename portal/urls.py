from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.templatetags.static import static
from django.urls import include, path
from django.views.generic import RedirectView
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from access import api as access_api
from hooks import api as hooks_api
from jobs.usage import accounting_api
from jobs.usage import api as usage_api
from jobs.web import api as jobs_api
from queues import api as queues_api

from .health import healthz, livez, readyz
from .metrics import deployment_metrics, metrics
from .sign_in import LoginPage, ProviderCallback, ProviderSignIn, admin_login

api_v1 = [
    path("quota-tree/", queues_api.QuotaTreeView.as_view(), name="api-quota-tree"),
    path("quota-tree/history/", usage_api.QuotaHistoryView.as_view(), name="api-quota-history"),
    path("quota-tree/preview/", usage_api.QuotaPreviewView.as_view(), name="api-quota-preview"),
    path("accounting/", accounting_api.AccountingView.as_view(), name="api-accounting"),
    path("departments/", queues_api.DepartmentListView.as_view(), name="api-departments"),
    path(
        "departments/<slug:name>/members/",
        queues_api.DepartmentMembersView.as_view(),
        name="api-department-members",
    ),
    path(
        "departments/<slug:name>/members/<str:username>/",
        queues_api.DepartmentMemberView.as_view(),
        name="api-department-member",
    ),
    path(
        "departments/<slug:name>/webhooks/",
        hooks_api.DepartmentWebhooksView.as_view(),
        name="api-department-webhooks",
    ),
    path("webhooks/<int:pk>/", hooks_api.WebhookView.as_view(), name="api-webhook"),
    path(
        "webhooks/<int:pk>/deliveries/",
        hooks_api.WebhookDeliveriesView.as_view(),
        name="api-webhook-deliveries",
    ),
    path("webhooks/<int:pk>/test/", hooks_api.WebhookTestView.as_view(), name="api-webhook-test"),
    path("tokens/", access_api.TokenListView.as_view(), name="api-tokens"),
    path(
        "tokens/revoke-all/", access_api.TokenRevokeAllView.as_view(), name="api-tokens-revoke-all"
    ),
    path("tokens/<int:pk>/", access_api.TokenDetailView.as_view(), name="api-token"),
    path("auth/exchange/", access_api.ExchangeView.as_view(), name="api-auth-exchange"),
    path("trust-policies/", access_api.TrustPolicyListView.as_view(), name="api-trust-policies"),
    path(
        "trust-policies/<slug:name>/",
        access_api.TrustPolicyDetailView.as_view(),
        name="api-trust-policy",
    ),
    path("jobs/", jobs_api.JobListView.as_view(), name="api-jobs"),
    path("jobs/batch/", jobs_api.JobBatchView.as_view(), name="api-jobs-batch"),
    path("jobs/dry-run/", jobs_api.JobDryRunView.as_view(), name="api-jobs-dry-run"),
    path(
        "jobs/batch/dry-run/",
        jobs_api.JobBatchDryRunView.as_view(),
        name="api-jobs-batch-dry-run",
    ),
    path("jobs/bulk/", jobs_api.JobBulkView.as_view(), name="api-jobs-bulk"),
    path("jobs/<int:pk>/", jobs_api.JobDetailView.as_view(), name="api-job"),
    path("jobs/<int:pk>/cancel/", jobs_api.JobCancelView.as_view(), name="api-job-cancel"),
    path("jobs/<int:pk>/hold/", jobs_api.JobHoldView.as_view(), name="api-job-hold"),
    path("jobs/<int:pk>/release/", jobs_api.JobReleaseView.as_view(), name="api-job-release"),
    path(
        "jobs/<int:pk>/move-to-head/",
        jobs_api.JobMoveToHeadView.as_view(),
        name="api-job-move-to-head",
    ),
    path("jobs/<int:pk>/events/", jobs_api.JobEventsView.as_view(), name="api-job-events"),
    path("jobs/<int:pk>/manifest/", jobs_api.JobManifestView.as_view(), name="api-job-manifest"),
    path("jobs/<int:pk>/log/", jobs_api.JobLogView.as_view(), name="api-job-log"),
    path("jobs/<int:pk>/webhooks/", hooks_api.JobWebhooksView.as_view(), name="api-job-webhooks"),
    path("queues/", jobs_api.QueueListView.as_view(), name="api-queues"),
    path("queues/<path:name>/", jobs_api.QueueDetailView.as_view(), name="api-queue"),
]

urlpatterns = [
    # Where browsers look when a page names no icon (the admin's, the API docs').
    path("favicon.ico", RedirectView.as_view(url=static("favicon.svg"), permanent=True)),
    path("livez", livez, name="livez"),
    path("readyz", readyz, name="readyz"),
    path("healthz", healthz, name="healthz"),
    path("metrics", metrics, name="metrics"),
    path("metrics/deployment", deployment_metrics, name="metrics-deployment"),
    path("admin/login/", admin_login),
    path("admin/", admin.site.urls),
    path("accounts/login/", LoginPage.as_view(), name="login"),
    path("oidc/authenticate/", ProviderSignIn.as_view(), name="oidc_authentication_init"),
    path("oidc/callback/", ProviderCallback.as_view(), name="oidc_authentication_callback"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("api/v1/", include(api_v1)),
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("api/docs/", SpectacularSwaggerSplitView.as_view(url_name="api-schema"), name="api-docs"),
    path("", include("access.urls")),
    path("", include("hooks.urls")),
    path("", include("jobs.web.urls")),
]

# Errors raised outside the API's own handling: JSON under /api/, a page for a person.
handler400 = "portal.errors.bad_request_handler"
handler403 = "portal.errors.permission_denied_handler"
handler404 = "portal.errors.not_found_handler"
handler500 = "portal.errors.server_error_handler"
