"""Node pools through the whole path: the tree declares an H100 pool and an A100 pool on a
simulated cluster of both kinds of node (the demo's nodes), the admission cycle places jobs
in the pools they accept, the created objects carry the pool's node selector and
tolerations, and the explanations name the pool."""

from __future__ import annotations

import copy
from datetime import timedelta

import pytest
from django.test import override_settings
from django.utils import timezone

from jobs.cluster import get_backend
from jobs.cluster.manifests import build_manifests
from jobs.document.validation import JobInvalid
from jobs.engine.admission.cycle import admission_cycle
from jobs.engine.objects import job_spec_full
from jobs.engine.reconcile import jobs_reconcile
from jobs.engine.sync import cluster_sync
from jobs.models import Hold, SimulatedPod
from jobs.reads.selectors import queue_usage
from jobs.reads.waiting import job_waiting
from jobs.services import job_cancel
from portal.management.commands.demo import DEMO_NODES
from portal.metrics import DatabaseCollector
from queues.exchange import tree_load, tree_yaml
from queues.services import tree_apply, tree_import, tree_published

from ..support.jobs import refresh, submit
from ..support.trees import A100, GPU, TOLERATION, pooled_tree_document

pytestmark = pytest.mark.django_db

# A small head and two workers of one GPU each, or of two.
HEAD = {"resources": {"cpu": "1", "memory": "1G"}}
TWO_GPUS = [{"name": "gpus", "replicas": 2, "resources": {"cpu": "1", "memory": "1G", GPU: "1"}}]
FOUR_GPUS = [{"name": "gpus", "replicas": 2, "resources": {"cpu": "1", "memory": "1G", GPU: "2"}}]


@pytest.fixture
def pools(tree):
    with override_settings(SIMULATED_CLUSTER_NODES=DEMO_NODES):
        get_backend.cache_clear()
        tree_apply(document=pooled_tree_document())
        yield
    get_backend.cache_clear()


@pytest.fixture
def now():
    return timezone.now().replace(microsecond=0)


def _run(job, now):
    jobs_reconcile([job.pk], now=now)
    cluster_sync(now=now)
    return refresh(job)


def test_with_its_h100_share_used_a_job_waits_for_h100_or_runs_on_a100_at_once(pools, member, now):
    first = submit(member, now, head=HEAD, workers=FOUR_GPUS, pools=["h100"], run_seconds=3600)
    assert admission_cycle(now=now).admitted == [first.pk]
    first = _run(first, now)
    assert first.pool == "h100" and first.state == "running"
    assert queue_usage(first.queue)[f"{GPU}@h100"] == 4
    # The figures name the pool as Kueue names a flavor.
    figures = {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in DatabaseCollector().collect()
        for sample in family.samples
    }
    labels = (("flavor", "h100"), ("node", "root/algorithm"), ("resource", GPU))
    assert figures["caldera_pool_quota_used", labels] == 4
    assert figures["caldera_pool_quota_max", labels] == 4
    assert figures["caldera_quota_used", (("node", "root/algorithm"), ("resource", GPU))] == 4
    # The ledger the accounting reads holds it in the pool too: resource-hours by pool.
    hold = Hold.objects.get(job=first)
    assert (hold.request[GPU], hold.request[f"{GPU}@h100"]) == (4, 4)

    # Only H100: algorithm's H100 share is used, and the A100s are idle.
    only_h100 = submit(member, now, head=HEAD, workers=TWO_GPUS, pools=["h100"])
    later = now + timedelta(seconds=1)
    assert admission_cycle(now=later).backed_off == [only_h100.pk]
    only_h100 = refresh(only_h100)
    assert only_h100.backoff_reason == (
        "No pool it accepts has room: Insufficient quota in root/algorithm/video: "
        "nvidia.com/gpu in pool h100 requested 2, free 0 (used 4 of max 4); "
        "pool a100 is not in its list"
    )
    told = job_waiting(only_h100, 1)
    assert told.summary.endswith(
        "tried now, it waits for nvidia.com/gpu in pool h100 of root/algorithm/video: used 4 "
        "of max 4; it asks for 2; pool a100 is not in its list"
    )
    assert {(row.where, row.resource) for row, blocks in told.rows() if blocks} == {
        ("root/algorithm/video", f"{GPU}@h100")
    }

    # H100 or A100: it runs on the A100s at once (the job asking for H100 alone withdrawn,
    # as its queue admits in order).
    job_cancel(user=member, job=only_h100, now=later)
    either = submit(member, later, head=HEAD, workers=TWO_GPUS, pools=["h100", "a100"], priority=0)
    assert admission_cycle(now=later + timedelta(seconds=1)).admitted == [either.pk]
    either = _run(either, later + timedelta(seconds=1))
    assert either.pool == "a100" and either.state == "running"
    job = next(m for m in build_manifests(job_spec_full(either)) if m["kind"] == "RayJob")
    cluster = job["spec"]["rayClusterSpec"]
    templates = [cluster["headGroupSpec"]["template"]] + [
        group["template"] for group in cluster["workerGroupSpecs"]
    ]
    for template in templates:
        assert template["spec"]["nodeSelector"] == {f"{GPU}.product": A100}
        assert template["spec"]["tolerations"] == [TOLERATION]
    nodes = dict(SimulatedPod.objects.filter(job_id=either.pk).values_list("name", "node"))
    a100_nodes = {"node-3", "node-4"}  # DEMO_NODES: two H100 nodes, then two A100 nodes
    assert nodes and set(nodes.values()) <= a100_nodes
    assert set(SimulatedPod.objects.filter(job_id=first.pk).values_list("node", flat=True)) <= {
        "node-1",
        "node-2",
    }


def test_a_cpu_job_is_placed_in_the_tree_s_first_pool_and_tolerates_its_taint(pools, member, now):
    """Every node carries the GPU taint: a job asking for no GPU runs only because its pool
    adds the toleration, on the first pool in the tree's order that has room."""
    job = submit(member, now)
    assert admission_cycle(now=now).admitted == [job.pk]
    job = _run(job, now)
    assert job.pool == "h100" and job.state == "running"


def test_a_tree_without_pools_places_no_job_and_adds_nothing(tree, member, now):
    job = submit(member, now)
    admission_cycle(now=now)
    job = refresh(job)
    assert job.pool == ""
    manifest = next(m for m in build_manifests(job_spec_full(job)) if m["kind"] == "RayJob")
    head = manifest["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]
    assert "nodeSelector" not in head and "tolerations" not in head


def test_naming_a_pool_the_tree_does_not_declare_is_refused_by_position(pools, member, now):
    with pytest.raises(JobInvalid) as refused:
        submit(member, now, workers=TWO_GPUS, pools=["a100", "h200"])
    assert refused.value.errors == {
        "pools[1]": ["'h200' is not a node pool of the quota tree (its pools: h100, a100)"]
    }


def test_naming_pools_where_the_tree_has_none_is_refused(tree, member, now):
    with pytest.raises(JobInvalid) as refused:
        submit(member, now, pools=["h100"])
    assert refused.value.errors == {
        "pools": ["the quota tree declares no node pools; leave it out"]
    }


def test_the_published_tree_has_totals_alone_and_caldera_s_yaml_keeps_the_pools(pools):
    published = tree_published()
    assert "nodePools" not in published["spec"]
    assert "pools" not in str(published["spec"]["root"])
    text = tree_yaml()
    assert tree_import(document=tree_load(text)) == []  # importing it changes nothing
    assert tree_yaml() == text
    document = tree_load(text)
    assert [p["name"] for p in document["spec"]["nodePools"]] == ["h100", "a100"]
    assert copy.deepcopy(document["spec"]["root"]["pools"]) == {
        "h100": {"min": {GPU: 8}, "max": {GPU: 8}},
        "a100": {"min": {GPU: 8}, "max": {GPU: 8}},
    }
