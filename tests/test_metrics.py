"""GET /metrics after a small scenario: every figure matches the database."""

from __future__ import annotations

import copy
from datetime import timedelta

import pytest
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from jobs.admission import admission_cycle
from jobs.models import Job, JobEvent, State
from jobs.reconcile import jobs_reconcile
from jobs.schema import job_parse
from jobs.services import job_submit
from jobs.sync import cluster_sync

from .conftest import RAY_JOB
from .test_reclaim_cycle import INTERN_JOB

pytestmark = pytest.mark.django_db


def scrape(client, **headers) -> dict[str, dict[tuple, float]]:
    """{sample name: {sorted label items: value}} of one scrape."""
    response = client.get("/metrics", **headers)
    assert response.status_code == 200, response.content
    samples: dict[str, dict[tuple, float]] = {}
    for family in text_string_to_metric_families(response.content.decode()):
        for sample in family.samples:
            samples.setdefault(sample.name, {})[tuple(sorted(sample.labels.items()))] = sample.value
    return samples


def test_the_metrics_match_the_database_after_a_reclaim(client, member, intern):
    now = timezone.now()
    interns = [
        job_submit(user=intern, draft=job_parse(copy.deepcopy(INTERN_JOB)), now=now)
        for _ in range(4)
    ]
    admission_cycle(now=now + timedelta(seconds=5))
    jobs_reconcile([job.pk for job in interns], now=now + timedelta(seconds=5))
    cluster_sync(now=now + timedelta(seconds=5))
    for _ in range(3):
        job_submit(user=member, draft=job_parse(copy.deepcopy(RAY_JOB)), now=now)
    admission_cycle(now=now + timedelta(seconds=10))  # one intern job preempted for video

    figures = scrape(client)

    pending = {
        (queue, status): count
        for ((_, queue), (_, status)), count in figures["caldera_pending_jobs"].items()
    }
    expected: dict = {}
    for job in Job.objects.filter(state__in=[State.QUEUED, State.BACKOFF]).select_related("queue"):
        key = (job.queue.name, "active" if job.state == State.QUEUED else "inadmissible")
        expected[key] = expected.get(key, 0) + 1
    assert pending == expected and sum(expected.values()) == 3  # video's three wait
    admitted = {
        labels[0][1]: value for labels, value in figures["caldera_admitted_jobs_total"].items()
    }
    assert admitted == {"root-interns-intern-video": 4.0}
    assert JobEvent.objects.filter(reason="Dequeued").count() == 4
    assert figures["caldera_preempted_jobs_total"] == {
        (("queue", "root-interns-intern-video"),): 1.0
    }
    waits = figures["caldera_admission_wait_time_seconds_bucket"]
    assert waits[(("le", "2.5"), ("queue", "root-interns-intern-video"))] == 0.0
    assert waits[(("le", "10.0"), ("queue", "root-interns-intern-video"))] == 4.0  # 5 s each
    assert figures["caldera_admission_wait_time_seconds_sum"][
        (("queue", "root-interns-intern-video"),)
    ] == pytest.approx(20.0)
    used = figures["caldera_quota_used"]
    # Four 16-cpu intern jobs hold 64 cpu: the preempted one until it has left.
    assert used[(("node", "root/interns"), ("resource", "cpu"))] == 64.0
    assert used[(("node", "root"), ("resource", "memory"))] == 64 * 10**9
    assert (
        figures["caldera_quota_max"][(("node", "root/algorithm/video"), ("resource", "cpu"))] == 14
    )
    assert (
        figures["caldera_quota_min"][(("node", "root/algorithm/video"), ("resource", "cpu"))] == 12
    )


def test_the_metrics_need_the_token_from_another_machine(client, settings, tree):
    far = {"REMOTE_ADDR": "10.1.2.3"}
    assert client.get("/metrics", **far).status_code == 403
    settings.METRICS_TOKEN = "s3cret-token"
    assert client.get("/metrics", **far).status_code == 401
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer wrong", **far).status_code == 401
    figures = scrape(client, HTTP_AUTHORIZATION="Bearer s3cret-token", **far)
    assert figures["caldera_quota_max"][(("node", "root"), ("resource", "cpu"))] == 64
