"""``manage.py usage_audit``: is every node within its limits, is every pending count right?"""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from jobs.engine.usage_audit import usage_audit


class Command(BaseCommand):
    help = (
        "Recompute every quota node's usage and every queue's pending count from the jobs; "
        "print each node above its max (or the cluster above its allocatable) and each "
        "count that drifted, and fail if there is any."
    )

    def handle(self, *args, **options) -> None:
        report = usage_audit()
        for line in report.lines():
            self.stdout.write(f"FAIL {line}")
        if not report.clean:
            raise CommandError(f"{len(report.lines())} findings")
        self.stdout.write("ok   every node within its limits; every pending count matches")
