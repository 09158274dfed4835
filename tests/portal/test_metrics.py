"""GET /metrics after a small scenario: every figure matches the database."""

from __future__ import annotations

import copy
import json
import os
import re
import subprocess
import sys
from datetime import timedelta

import prometheus_client
import pytest
import requests
import yaml
from django.urls import resolve
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from jobs.document.schema import job_parse
from jobs.engine.admission.cycle import admission_cycle
from jobs.engine.reconcile import jobs_reconcile
from jobs.engine.retention import jobs_archive
from jobs.engine.sync import cluster_sync
from jobs.models import AccountingDone, Job, JobEvent, State
from jobs.services import job_cancel, job_submit
from portal.metrics import DatabaseCollector, deployment_metrics
from portal.process_metrics import serve_process_metrics
from queues.models import Queue
from queues.services import tree_apply

from ..support.jobs import INTERN_JOB, RAY_JOB
from ..support.kubernetes import backend_for
from ..support.paths import REPO
from ..support.specs import pytorch_spec, ray_spec
from ..support.trees import pooled_tree_document

pytestmark = pytest.mark.django_db
QUEUE = "root-interns-intern-video"  # INTERN_JOB's


def scrape(client, *, paths=("/metrics/deployment", "/metrics"), **headers):
    """{sample name: {sorted label items: value}} of one scrape of each of ``paths`` (the
    deployment's figures, scraped once through the Service, and the pod's own)."""
    samples: dict[str, dict[tuple, float]] = {}
    for path in paths:
        response = client.get(path, **headers)
        assert response.status_code == 200, response.content
        for family in text_string_to_metric_families(response.content.decode()):
            for sample in family.samples:
                labels = tuple(sorted(sample.labels.items()))
                samples.setdefault(sample.name, {})[labels] = sample.value
    return samples


def test_the_deployment_s_figures_and_the_pod_s_are_apart(client, member):
    """Two web replicas give one set of the database's figures (scraped through the
    Service), and each its own HTTP figures: no address gives both."""
    admission_cycle(now=timezone.now())
    client.get("/queues/")
    deployment = scrape(client, paths=["/metrics/deployment"])
    pod = scrape(client, paths=["/metrics"])

    assert "caldera_quota_max" in deployment and "caldera_quota_max" not in pod
    assert "caldera_http_requests_total" in pod and "caldera_http_requests_total" not in deployment
    assert set(deployment["caldera_last_success_timestamp_seconds"]) == {(("work", "admission"),)}


def test_the_counters_keep_what_retention_deleted(client, member, settings, tmp_path):
    settings.JOB_RETENTION_DAYS, settings.JOB_ARCHIVE_DIR = 180, tmp_path
    AccountingDone.objects.create(day=timezone.now().date(), summarised_at=timezone.now())
    job = job_submit(user=member, draft=job_parse(copy.deepcopy(RAY_JOB)))
    admission_cycle()
    Job.objects.filter(pk=job.pk).update(
        state=State.SUCCEEDED, finished_at=timezone.now() - timedelta(days=200)
    )
    before = scrape(client, paths=["/metrics/deployment"])

    assert jobs_archive().jobs == 1
    after = scrape(client, paths=["/metrics/deployment"])

    for name in ("caldera_admitted_jobs_total", "caldera_admission_wait_time_seconds_count"):
        assert after[name] == before[name] != {}
    assert after["caldera_admission_wait_time_seconds_sum"] == pytest.approx(
        before["caldera_admission_wait_time_seconds_sum"]
    )


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
    assert {key: count for key, count in pending.items() if count} == expected
    assert sum(expected.values()) == 3  # video's three wait
    assert pending[("root-algorithm-text", "active")] == 0  # an empty queue, not a missing one
    admitted = {
        labels[0][1]: value for labels, value in figures["caldera_admitted_jobs_total"].items()
    }
    assert admitted == {"root-interns-intern-video": 4.0}
    assert JobEvent.objects.filter(reason="Dequeued").count() == 4
    assert figures["caldera_preempted_jobs_total"] == {
        (("queue", "root-interns-intern-video"),): 1.0
    }
    assert figures["caldera_evicted_jobs_total"] == {
        (("queue", "root-interns-intern-video"), ("reason", "Preempted")): 1.0
    }
    waits = figures["caldera_admission_wait_time_seconds_bucket"]
    assert waits[(("le", "2.5"), ("queue", "root-interns-intern-video"))] == 0.0
    assert waits[(("le", "5.0"), ("queue", "root-interns-intern-video"))] == 4.0  # le: <=
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


def test_every_active_queue_reports_its_pending_jobs_with_0_where_none_wait(client, member):
    job_submit(user=member, draft=job_parse(copy.deepcopy(RAY_JOB)), now=timezone.now())
    held = job_parse(copy.deepcopy(RAY_JOB))
    held.held = True
    job_submit(user=member, draft=held, now=timezone.now())
    Queue.objects.filter(name="root-interns-intern-video").update(active=False)  # retired

    figures = scrape(client)["caldera_pending_jobs"]

    pending = {(labels[0][1], labels[1][1]): count for labels, count in figures.items()}
    active = set(Queue.objects.filter(active=True).values_list("name", flat=True))
    assert {queue for queue, _ in pending} == active
    assert {status for _, status in pending} == {"active", "inadmissible", "held"}
    assert len(pending) == 3 * len(active)
    assert pending.pop(("root-algorithm-video", "active")) == 1
    assert pending.pop(("root-algorithm-video", "held")) == 1  # counted apart, not as active
    assert set(pending.values()) == {0}


def test_jobs_leaving_longer_than_the_setting_are_counted_as_stuck_by_queue(
    client, member, intern, settings
):
    now = timezone.now()
    interns = [
        job_submit(user=intern, draft=job_parse(copy.deepcopy(INTERN_JOB)), now=now)
        for _ in range(4)
    ]
    admission_cycle(now=now)
    jobs_reconcile([job.pk for job in interns], now=now)
    job_submit(user=member, draft=job_parse(copy.deepcopy(RAY_JOB)), now=now)
    admission_cycle(now=now)  # one intern job preempted for video
    [preempted] = Job.objects.filter(state=State.PREEMPTED)
    stopping = job_cancel(user=intern, job=Job.objects.filter(state=State.ADMITTED)[0], now=now)
    assert scrape(client)["caldera_leaving_jobs_stuck"][(("queue", QUEUE),)] == 0

    late = timezone.now() - timedelta(seconds=settings.LEAVING_WARN_SECONDS + 1)
    Job.objects.filter(pk=preempted.pk).update(leaving_since=late)
    once = scrape(client)["caldera_leaving_jobs_stuck"]
    Job.objects.filter(pk=stopping.pk).update(leaving_since=late)
    twice = scrape(client)["caldera_leaving_jobs_stuck"]

    assert once[(("queue", QUEUE),)] == 1 and twice[(("queue", QUEUE),)] == 2
    assert twice[(("queue", "root-algorithm-video"),)] == 0  # every active queue, 0 or more
    assert {labels[0][1] for labels in twice} == set(
        Queue.objects.filter(active=True).values_list("name", flat=True)
    )


def test_the_metrics_need_the_token_from_another_machine(client, settings, tree):
    far = {"REMOTE_ADDR": "10.1.2.3"}
    assert client.get("/metrics", **far).status_code == 403
    settings.METRICS_TOKEN = "s3cret-token"
    assert client.get("/metrics", **far).status_code == 401
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer wrong", **far).status_code == 401
    figures = scrape(client, HTTP_AUTHORIZATION="Bearer s3cret-token", **far)
    assert figures["caldera_quota_max"][(("node", "root"), ("resource", "cpu"))] == 64


def delta(before: dict, after: dict, name: str, **labels) -> float:
    key = tuple(sorted(labels.items()))
    return after.get(name, {}).get(key, 0.0) - before.get(name, {}).get(key, 0.0)


def test_the_processes_count_requests_admission_cycles_and_cluster_calls(client, member, kube):
    before = scrape(client)
    admission_cycle(now=timezone.now())
    client.force_login(member)
    assert client.get("/queues/").status_code == 200
    assert client.get("/no-such-page/").status_code == 404
    backend = backend_for(kube)
    assert backend.apply([ray_spec()], now=timezone.now()) == {}
    kube.deny("create", "kubeflow", "text", times=1)
    # Refused in one namespace: that namespace's trouble, the job's refusal.
    assert list(backend.apply([pytorch_spec()], now=timezone.now())) == [pytorch_spec().id]

    after = scrape(client)

    assert delta(before, after, "caldera_admission_cycle_duration_seconds_count") == 1
    answered = "caldera_http_requests_total"
    assert delta(before, after, answered, method="GET", view="queue-list", status="200") == 1
    assert delta(before, after, answered, method="GET", view="unmatched", status="404") == 1
    assert delta(before, after, answered, method="GET", view="metrics", status="200") == 1
    calls = "caldera_cluster_requests_total"
    create = "create_namespaced_custom_object"
    assert delta(before, after, calls, operation=create, result="ok") == 1
    assert delta(before, after, calls, operation=create, result="error") == 1  # RBAC refused
    assert (
        delta(before, after, "caldera_cluster_request_duration_seconds_count", operation=create)
        == 2
    )


def test_the_worker_serves_its_own_figures_under_the_same_token(settings):
    server = serve_process_metrics("127.0.0.1", 0, "s3cret-token")
    url = f"http://127.0.0.1:{server.server_port}/metrics"
    try:
        assert requests.get(url, timeout=5).status_code == 401
        answer = requests.get(url, headers={"Authorization": "Bearer s3cret-token"}, timeout=5)
        assert answer.status_code == 200
        assert "caldera_admission_cycle_duration_seconds_bucket" in answer.text
    finally:
        server.shutdown()


COUNT = """
from jobs.telemetry import CLUSTER_REQUESTS
CLUSTER_REQUESTS.labels("list_namespaced_custom_object", "ok").inc({n})
"""
READ = """
from prometheus_client import generate_latest
from portal.process_metrics import forget_dead_processes, process_registry
{forget}
print(generate_latest(process_registry()).decode())
"""


def test_the_figures_of_a_machines_processes_add_up(tmp_path):
    environment = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(tmp_path)}

    def run(code: str) -> str:
        done = subprocess.run(
            [sys.executable, "-c", code], env=environment, cwd=REPO, capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    run(COUNT.format(n=2))
    run(COUNT.format(n=5))  # two processes of a pool, both gone now
    sample = 'caldera_cluster_requests_total{operation="list_namespaced_custom_object",result="ok"}'
    assert f"{sample} 7.0" in run(READ.format(forget=""))
    # A new start forgets the files of processes that no longer run.
    assert sample not in run(READ.format(forget="forget_dead_processes()"))


def sample_names(families) -> set[str]:
    suffixes = {"counter": ["_total"], "histogram": ["_bucket", "_sum", "_count"]}
    return {
        family.name + suffix
        for family in families
        if family.name.startswith("caldera_")
        for suffix in suffixes.get(family.type, [""])
    }


def test_the_dashboard_and_the_alerts_read_only_figures_caldera_sends(tree):
    tree_apply(document=pooled_tree_document())  # a tree with node pools sends their figures too
    sent = sample_names(DatabaseCollector().collect()) | sample_names(
        prometheus_client.REGISTRY.collect()
    )
    monitoring = REPO / "deploy" / "monitoring"
    dashboard = (monitoring / "grafana-dashboard.json").read_text()
    rules = (monitoring / "rules.yaml").read_text()
    read = set(re.findall(r"caldera_[a-z_]+", dashboard + rules))
    assert read - sent == set()
    assert len(read) >= 10
    panels = json.loads(dashboard)["panels"]
    assert all(target["expr"] for panel in panels for target in panel["targets"])
    # The scrapes name ports the manifests declare.
    deploy = REPO / "deploy" / "kubernetes"
    web = [d for d in yaml.safe_load_all((deploy / "web.yaml").read_text()) if d]
    service = next(d for d in web if d["kind"] == "Service")
    monitor = yaml.safe_load((monitoring / "servicemonitor.yaml").read_text())
    assert monitor["spec"]["endpoints"][0]["port"] in [p["name"] for p in service["spec"]["ports"]]
    # The deployment's figures: once, through the Service, at the address that serves them.
    scrape_config = yaml.safe_load((monitoring / "scrapeconfig.yaml").read_text())
    [target] = scrape_config["spec"]["staticConfigs"][0]["targets"]
    host, port = target.rsplit(":", 1)
    namespace = yaml.safe_load((deploy / "kustomization.yaml").read_text())["namespace"]
    assert host == f"{service['metadata']['name']}.{namespace}.svc"
    assert int(port) in [p["port"] for p in service["spec"]["ports"]]
    assert resolve(scrape_config["spec"]["metricsPath"]).func is deployment_metrics
    resources = yaml.safe_load((monitoring / "kustomization.yaml").read_text())["resources"]
    assert "scrapeconfig.yaml" in resources
    worker = yaml.safe_load((deploy / "worker.yaml").read_text())
    [container] = worker["spec"]["template"]["spec"]["containers"]
    pods = yaml.safe_load((monitoring / "podmonitor.yaml").read_text())
    assert pods["spec"]["podMetricsEndpoints"][0]["port"] in [p["name"] for p in container["ports"]]
