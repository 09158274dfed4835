"""The demo's first jobs (``manage.py demo``): the seed's two RayJobs, one held, so a
newcomer sees a job keep its place until it is released, and one that retries its failed
attempt; the interns' limits."""

import pytest

from jobs.models import Job
from portal.management.commands.demo import Command
from queues.models import QuotaNode

pytestmark = pytest.mark.django_db


def test_the_demo_seeds_two_jobs_one_held_and_one_that_retries():
    Command().load_seed()
    jobs = list(
        Job.objects.order_by("id").values_list("name", "state", "held_by__username", "retries")
    )
    assert jobs == [
        ("rayjob-video", "queued", None, 0),
        ("rayjob-video", "queued", None, 0),
        ("sweep-held", "queued", "alice", 0),
        ("sweep-flaky", "queued", None, 1),
    ]
    interns = QuotaNode.objects.get(path="root/interns")
    assert interns.limits["perPerson"] == {"jobs": 2} and interns.limits["defaultTime"] == 3600
