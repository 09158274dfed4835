"""The background tasks, by the names they are registered under (``jobs/tasks.py``).

A trigger sends a task by name and never imports the module that defines it; beat's
schedule (``portal/settings.py``) names the same tasks. Plain strings, importing nothing,
so the settings can read them.
"""

ADMIT_TASK = "jobs.tasks.admit"
SYNC_TASK = "jobs.tasks.sync"
RECONCILE_TASK = "jobs.tasks.reconcile"
PUBLISH_QUOTA_TASK = "jobs.tasks.publish_quota"
USAGE_AUDIT_TASK = "jobs.tasks.usage_audit"
USAGE_HISTORY_TASK = "jobs.tasks.usage_history"
FAIR_SHARE_TASK = "jobs.tasks.fair_share"
ARCHIVE_TASK = "jobs.tasks.archive"
ESTIMATES_TASK = "jobs.tasks.estimates"
SUBMISSION_KEYS_PRUNE_TASK = "jobs.tasks.submission_keys_prune"
ACCOUNTING_TASK = "jobs.tasks.accounting"
