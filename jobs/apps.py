from django.apps import AppConfig


class JobsConfig(AppConfig):
    name = "jobs"

    def ready(self) -> None:
        # queues/ knows nothing of jobs; it asks through these two hooks whether a queue
        # still holds jobs, and tells when the tree changed.
        from django.conf import settings
        from django.db.models import Count
        from django.utils import timezone

        from queues import services as queue_services

        from .admission import capacity_changed
        from .models import LIVE, Job
        from .triggers import request_admission, request_quota_publish
        from .unrunnable import jobs_fail_unrunnable

        def live_jobs_counter(queue_ids):
            rows = (
                Job.objects.filter(queue_id__in=list(queue_ids), state__in=LIVE)
                .values_list("queue_id")
                .annotate(n=Count("id"))
            )
            return dict(rows)

        def on_tree_changed(sender, **kwargs):
            now = timezone.now()
            # A waiting job the new tree leaves with nowhere to run fails, not blocks.
            jobs_fail_unrunnable(now=now)
            capacity_changed(now=now)
            request_admission()
            if settings.CLUSTER_PUBLISH_QUOTA:
                request_quota_publish()

        queue_services.live_jobs_counter = live_jobs_counter
        # weak=False: the receiver is a local function, which would be collected at once.
        queue_services.tree_changed.connect(
            on_tree_changed, weak=False, dispatch_uid="jobs-tree-changed"
        )

        # The admin's tree shows each node's live usage, which only jobs/ can count.
        from queues import selectors as queue_selectors

        from .selectors import usage_by_path

        queue_selectors.usage_provider = usage_by_path
