"""The HTML pages (the REST API lives under /api/v1/, wired in portal/urls.py)."""

from django.urls import path

from jobs.usage import accounting_page
from jobs.usage import views as usage_views

from . import views

urlpatterns = [
    path("", views.dashboard, name="dashboard"),
    path("jobs/", views.job_list, name="job-list"),
    path("jobs/bulk/", views.job_bulk, name="job-bulk"),
    path("jobs/new/", views.job_submit, name="job-submit"),
    path("jobs/new/preview/", views.job_submit_preview, name="job-submit-preview"),
    path("jobs/new/objects/", views.job_submit_objects, name="job-submit-objects"),
    path("jobs/<int:pk>/", views.job_detail, name="job-detail"),
    path("jobs/<int:pk>/cancel/", views.job_cancel, name="job-cancel"),
    path("jobs/<int:pk>/hold/", views.job_hold, name="job-hold"),
    path("jobs/<int:pk>/release/", views.job_release, name="job-release"),
    path("jobs/<int:pk>/priority/", views.job_priority, name="job-priority"),
    path("jobs/<int:pk>/move-to-head/", views.job_move_to_head, name="job-move-to-head"),
    path("jobs/<int:pk>/log/", views.job_log, name="job-log"),
    path("jobs/<int:pk>/log/download/", views.job_log_download, name="job-log-download"),
    path("queues/", views.queue_list, name="queue-list"),
    path("queues/<str:name>/", views.queue_detail, name="queue-detail"),
    path("quota/", usage_views.quota_tree, name="quota-tree"),
    path("accounting/", accounting_page.accounting, name="accounting"),
    path("quota/history.csv", usage_views.quota_history_csv, name="quota-history-csv"),
]
