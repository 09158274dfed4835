"""The demo's first jobs (``manage.py demo``): the seed's two RayJobs, and one held, so a
newcomer sees a job keep its place until it is released."""

import pytest

from jobs.models import Job
from portal.management.commands.demo import Command

pytestmark = pytest.mark.django_db


def test_the_demo_seeds_two_jobs_and_one_held():
    Command().load_seed()
    jobs = list(Job.objects.order_by("id").values_list("name", "state", "held_by__username"))
    assert jobs == [
        ("rayjob-video", "queued", None),
        ("rayjob-video", "queued", None),
        ("sweep-held", "queued", "alice"),
    ]
