"""One interface, two backends: the behaviour they share, tested on both, and the portal's
whole path (admission, reconcile, sync) on the Kubernetes backend against the emulator."""

from __future__ import annotations

import logging
import re
import threading
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta

import pytest
import yaml
from django.test import override_settings
from django.utils import timezone

from jobs.bulk import jobs_bulk
from jobs.cluster import ClusterUnavailable, ObjectRef, get_backend
from jobs.cluster.access import rbac_documents
from jobs.cluster.kubernetes import KubernetesBackend, Settings
from jobs.cluster.manifests.common import ANNOTATION_DEQUEUED, kube_queue_timestamp
from jobs.cluster.simulated import SimulatedBackend, parse_nodes
from jobs.cluster.watch import Informer
from jobs.engine.admission.cycle import admission_cycle
from jobs.engine.reconcile import jobs_reconcile, quota_publish
from jobs.engine.sync import cluster_sync
from jobs.engine.transitions import backoff_delay
from jobs.models import JobEvent, UnavailableNamespace
from jobs.reads.selectors import cluster_trouble, queue_usage
from jobs.services import job_cancel

from ..support.jobs import UNPACKABLE, refresh, submit
from ..support.kube_emulator import emulator
from ..support.kubernetes import TREE_NAMESPACES, on_kubernetes, roles
from ..support.pages import login
from ..support.personas import client_for
from ..support.polling import wait_for
from ..support.specs import pytorch_spec, ray_spec

pytestmark = pytest.mark.django_db

NOW = datetime(2026, 11, 23, 10, 0, tzinfo=UTC)
WHERE = ("video", "text")  # the namespaces of the specs of tests/cluster/test_manifests.py
MICRO_TIME = "%Y-%m-%dT%H:%M:%S.%fZ"  # an event's eventTime and series.lastObservedTime


@pytest.fixture
def now():
    return timezone.now().replace(microsecond=0)


@pytest.fixture(params=["simulated", "kubernetes"])
def any_backend(request, db):
    if request.param == "simulated":
        yield SimulatedBackend(parse_nodes("4xcpu=16,memory=64Gi"), cycle_seconds=5)
        return
    with emulator() as kube:
        yield KubernetesBackend(
            Settings(runtimes=("kuberay", "kubeflow", "volcano"), host=kube.url, timeout_seconds=2)
        )


def listed(backend) -> dict[str, str]:
    return {s.object_name: s.phase for s in backend.observe(now=NOW, namespaces=WHERE).statuses}


# -- shared behaviour ------------------------------------------------------------------


def test_applying_twice_makes_one_object_of_the_job(any_backend):
    assert any_backend.apply([ray_spec()], now=NOW) == {}
    assert any_backend.apply([ray_spec()], now=NOW) == {}

    [status] = any_backend.observe(now=NOW, namespaces=WHERE).statuses
    assert (status.job_id, status.object_name) == (7, "rayjob-video-7")
    assert status.phase in ("Pending", "Running")


def test_a_suspended_object_waits_and_runs_once_released(any_backend):
    any_backend.apply([ray_spec(suspend=True), pytorch_spec(suspend=True)], now=NOW)
    assert listed(any_backend) == {"rayjob-video-7": "Suspended", "resnet-ddp-9": "Suspended"}

    any_backend.apply([ray_spec(suspend=False)], now=NOW)

    phases = listed(any_backend)
    assert phases["resnet-ddp-9"] == "Suspended"
    assert phases["rayjob-video-7"] in ("Pending", "Running")


def test_removing_takes_the_object_out_and_removing_what_is_gone_is_fine(any_backend):
    any_backend.apply([ray_spec(), pytorch_spec()], now=NOW)
    ref = ObjectRef("rayjob-video-7", "video", "kuberay")

    any_backend.remove([ref], now=NOW)
    any_backend.remove([ref, ObjectRef("never-created-3", "video", "kuberay")], now=NOW)

    assert set(listed(any_backend)) == {"resnet-ddp-9"}


# -- the portal on the Kubernetes backend ----------------------------------------------


def test_a_dequeued_job_runs_in_the_cluster_finishes_and_frees_its_quota(member, now):
    with on_kubernetes() as kube:
        job = submit(member, now)
        admission_cycle(now=now)
        jobs_reconcile([job.pk], now=now)
        rayjob = kube.get("kuberay", "video", f"rayjob-video-{job.pk}")
        assert rayjob["metadata"]["annotations"][ANNOTATION_DEQUEUED] == kube_queue_timestamp(
            refresh(job).dequeued_at
        )

        cluster_sync(now=now)
        assert refresh(job).state == "admitted"
        kube.set_status(
            "kuberay", "video", rayjob["metadata"]["name"], {"jobDeploymentStatus": "Running"}
        )
        assert cluster_sync(now=now + timedelta(seconds=1)).started == [job.pk]
        kube.set_status(
            "kuberay",
            "video",
            rayjob["metadata"]["name"],
            {"jobDeploymentStatus": "Complete", "jobStatus": "SUCCEEDED"},
        )
        assert cluster_sync(now=now + timedelta(seconds=2)).finished == [job.pk]

        assert kube.objects("kuberay") == []  # a finished job's object leaves the cluster
    assert refresh(job).state == "succeeded"
    assert queue_usage(job.queue) == {}


def test_a_cancelled_job_holds_its_quota_until_the_cluster_has_let_go_of_its_objects(member, now):
    """What a real server showed: during an authorization outage a cancelled job's quota
    was freed at once and more jobs were admitted while its RayJob kept running."""
    with on_kubernetes() as kube:
        first, second = submit(member, now), submit(member, now)  # 12 cpu each, video max 14
        admission_cycle(now=now)
        jobs_reconcile([first.pk], now=now)
        name = f"rayjob-video-{first.pk}"
        kube.runs_pods("kuberay", "video", name)
        path = f"/apis/ray.io/v1/namespaces/video/rayjobs/{name}"
        kube.deny("delete", "kuberay", "video", times=1)

        job_cancel(user=member, job=refresh(first), now=now + timedelta(seconds=1))
        with pytest.raises(ClusterUnavailable, match="cannot delete resource"):
            jobs_reconcile([first.pk], now=now + timedelta(seconds=1))
        assert "deletionTimestamp" not in kube.get("kuberay", "video", name)["metadata"]
        assert refresh(first).state == "stopping"
        assert admission_cycle(now=now + timedelta(seconds=2)).admitted == []

        # Authorized again: deleted in the foreground, it stays while its pods terminate.
        jobs_reconcile([first.pk], now=now + timedelta(seconds=3))
        assert kube.get("kuberay", "video", name)["metadata"]["deletionTimestamp"]
        deletes = len(kube.requests("delete", path))
        assert cluster_sync(now=now + timedelta(seconds=4)).left == []
        assert len(kube.requests("delete", path)) == deletes  # not asked again
        assert refresh(first).state == "stopping"
        assert queue_usage(first.queue)["cpu"] == 12000
        assert admission_cycle(now=now + timedelta(seconds=4)).admitted == []

        kube.pods_gone("kuberay", "video", name)
        assert cluster_sync(now=now + timedelta(seconds=5)).left == [first.pk]
        assert refresh(first).state == "cancelled"
        assert admission_cycle(now=now + timedelta(seconds=6)).admitted == [second.pk]


def test_with_a_watch_the_sync_follows_the_cluster_without_listing_again(member, now):
    with on_kubernetes(KUBERNETES_WATCH=True) as kube:
        job = submit(member, now)
        admission_cycle(now=now)
        jobs_reconcile([job.pk], now=now)
        name = f"rayjob-video-{job.pk}"
        cluster_sync(now=now)  # lists, and starts the watch of each namespace
        listings = wait_for(lambda: listed_in_step(kube))

        kube.set_status("kuberay", "video", name, {"jobDeploymentStatus": "Running"})
        assert wait_for(lambda: cluster_sync(now=now + timedelta(seconds=1)).started) == [job.pk]
        kube.set_status(
            "kuberay", "video", name, {"jobDeploymentStatus": "Complete", "jobStatus": "SUCCEEDED"}
        )
        assert wait_for(lambda: cluster_sync(now=now + timedelta(seconds=2)).finished) == [job.pk]

        assert listings == listed_in_step(kube)  # read from the watch, not listed again
        assert wait_for(lambda: not kube.objects("kuberay"))  # its object was removed
    assert refresh(job).state == "succeeded"


def listed_in_step(kube) -> int:
    """How many times video's RayJobs were listed, once its informer is in step."""
    backend = get_backend()
    informer = backend._informers.get(("kuberay", "video"))
    if informer is None or informer.items() is None:
        return 0
    return len(
        [r for r in kube.requests("get", "/namespaces/video/rayjobs") if "watch" not in r.params]
    )


def test_with_a_watch_the_warnings_come_from_it_and_are_not_listed_at_each_sync(
    member, now, caplog
):
    """Events were listed once per namespace per sync (300 lists a minute at 5 namespaces on
    a real server): watched, a sync reads them from memory. The informers list and watch
    through clients of their own, so the sync's pool of connections is never crowded
    ("Connection pool is full" at each start and restart)."""
    caplog.set_level(logging.WARNING, logger="urllib3")
    with on_kubernetes(KUBERNETES_WATCH=True) as kube:
        job = submit(member, now)
        admission_cycle(now=now)
        jobs_reconcile([job.pk], now=now)
        cluster_sync(now=now)
        backend = get_backend()
        wait_for(lambda: all(i.items() is not None for i in backend._informers.values()))
        assert sorted(key for key in backend._informers if key[1] == "video") == [
            ("events", "video"), ("kubeflow", "video"), ("kuberay", "video"), ("volcano", "video")
        ]  # fmt: skip
        wait_for(lambda: kube.watch_streams("events"))
        listed = event_listings(kube)
        head = f"rayjob-video-{job.pk}-x7k2p-head-h4v9q"
        kube.warn("video", f"{head}.pulled", reason="Pulled", message="pulled",
                  involved=("Pod", head), uid="uid-0", type="Normal")  # fmt: skip
        kube.warn(
            "video",
            f"{head}.1",
            reason="GangFailedScheduling",
            message=f"{head} in gang failed to be scheduled in cycle 1: 0/2 nodes are "
            "available: 2 Insufficient cpu.",
            involved=("Pod", head),
            uid="uid-1",
            at=(now + timedelta(seconds=1)).isoformat(),
        )
        assert wait_for(lambda: cluster_sync(now=now + timedelta(seconds=1)).events) == 1
        for second in (2, 3, 4):
            assert cluster_sync(now=now + timedelta(seconds=second)).events == 0
        assert event_listings(kube) == listed
    reasons = [e.reason for e in JobEvent.objects.filter(job=job)]
    assert reasons.count("GangFailedScheduling") == 1 and "Pulled" not in reasons
    assert not [r for r in caplog.records if "Connection pool is full" in r.getMessage()]


def event_listings(kube) -> int:
    return len([r for r in kube.requests("get", "/events") if "watch" not in r.params])


def test_with_the_cluster_scope_one_watch_per_kind_serves_every_namespace(member, now):
    """KUBERNETES_WATCH_SCOPE=cluster: a watch of each runtime's objects and one of the
    events for every namespace, read per namespace the tree binds; an object labelled so
    in a namespace the tree does not bind is none of Caldera's business."""
    with on_kubernetes(KUBERNETES_WATCH=True, KUBERNETES_WATCH_SCOPE="cluster") as kube:
        kube.add_namespace("elsewhere")
        kube.custom.create_namespaced_custom_object(
            "ray.io", "v1", "elsewhere", "rayjobs",
            {"apiVersion": "ray.io/v1", "kind": "RayJob",
             "metadata": {"name": "stray", "labels": {"caldera.io/job-id": "999999"}},
             "spec": {}},
        )  # fmt: skip
        job = submit(member, now)
        admission_cycle(now=now)
        jobs_reconcile([job.pk], now=now)
        cluster_sync(now=now)
        backend = get_backend()
        assert sorted(backend._informers) == [
            ("events", ""), ("kubeflow", ""), ("kuberay", ""), ("volcano", "")
        ]  # fmt: skip
        wait_for(lambda: all(i.items() is not None for i in backend._informers.values()))
        wait_for(lambda: kube.watch_streams("kuberay") and kube.watch_streams("events"))
        listings = len([r for r in kube.requests("get", "/rayjobs") if "watch" not in r.params])

        name = f"rayjob-video-{job.pk}"
        kube.set_status("kuberay", "video", name, {"jobDeploymentStatus": "Running"})
        assert wait_for(lambda: cluster_sync(now=now + timedelta(seconds=1)).started) == [job.pk]
        head = f"{name}-x7k2p-head-h4v9q"
        kube.warn("video", f"{head}.1", reason="Evicted", message="The node was low on memory.",
                  involved=("Pod", head), uid="uid-1")  # fmt: skip
        assert wait_for(lambda: cluster_sync(now=now + timedelta(seconds=2)).events) == 1
        kube.set_status(
            "kuberay", "video", name, {"jobDeploymentStatus": "Complete", "jobStatus": "SUCCEEDED"}
        )
        assert wait_for(lambda: cluster_sync(now=now + timedelta(seconds=3)).finished) == [job.pk]

        watches = {r.url.path for r in kube.requests("get") if "watch" in r.params}
        assert watches == {
            "/api/v1/events", "/apis/kubeflow.org/v1/pytorchjobs",
            "/apis/ray.io/v1/rayjobs", "/apis/batch.volcano.sh/v1alpha1/jobs",
        }  # fmt: skip
        assert listings == len(
            [r for r in kube.requests("get", "/rayjobs") if "watch" not in r.params]
        )
        assert [o["metadata"]["name"] for o in kube.objects("kuberay")] == ["stray"]
    assert refresh(job).state == "succeeded"


def test_a_job_the_cluster_cannot_place_shows_its_cycles_and_is_requeued_after_the_timeout(
    member, now
):
    with on_kubernetes(START_TIMEOUT_SECONDS=30) as kube:
        job = submit(member, now)
        admission_cycle(now=now)
        jobs_reconcile([job.pk], now=now)
        head = f"rayjob-video-{job.pk}-x7k2p-head-h4v9q"
        for cycle in (1, 2):
            kube.warn(
                "video",
                f"{head}.{cycle}",
                reason="GangFailedScheduling",
                message=f"{head} in gang failed to be scheduled in cycle {cycle}: "
                "0/2 nodes are available: 2 Insufficient cpu.",
                involved=("Pod", head),
                uid=f"uid-{cycle}",
                at=(now + timedelta(seconds=cycle)).isoformat(),
            )
            assert cluster_sync(now=now + timedelta(seconds=cycle)).events == 1
        assert refresh(job).state == "admitted"
        # Both events are still listed by the cluster: none is new, none stored twice.
        assert cluster_sync(now=now + timedelta(seconds=3)).events == 0

        result = cluster_sync(now=now + timedelta(seconds=30))

        assert result.timed_out == [job.pk]
        assert kube.objects("kuberay") == []
    job = refresh(job)
    assert job.state == "backoff"
    assert job.backoff_reason == (
        "Its pods were not all running 30s after its objects were created, so it left the "
        f"cluster; last scheduling failure: {head} in gang failed to be scheduled in cycle 2: "
        "0/2 nodes are "
        "available: 2 Insufficient cpu."
    )
    answer = client_for(member).get(f"/api/v1/jobs/{job.pk}/events/")
    gang = [e for e in answer.json() if e["reason"] == "GangFailedScheduling"]
    assert sorted(e["cycle"] for e in gang) == [1, 2]
    assert JobEvent.objects.filter(job=job, reason="GangFailedScheduling").count() == 2


def test_a_scheduling_failure_the_cluster_repeats_is_one_row_with_its_count_and_times(
    client, member, now
):
    with on_kubernetes() as kube:
        job = submit(member, now)
        admission_cycle(now=now)
        jobs_reconcile([job.pk], now=now)
        head = f"rayjob-video-{job.pk}-x7k2p-head-h4v9q"
        # The scheduler's own times for the event: first 10:00:10, then repeats.
        first = NOW + timedelta(seconds=10)
        series = dict(
            reason="FailedScheduling",
            message="0/2 nodes are available: 2 Insufficient cpu.",
            involved=("Pod", head),
            uid="series-1",
            first=f"{first:{MICRO_TIME}}",
        )
        last = NOW + timedelta(seconds=40)
        kube.warn_series("video", f"{head}.1", count=3, last=f"{last:{MICRO_TIME}}", **series)
        assert cluster_sync(now=now + timedelta(seconds=1)).events == 1
        last = NOW + timedelta(minutes=4, seconds=30)
        kube.warn_series("video", f"{head}.1", count=5, last=f"{last:{MICRO_TIME}}", **series)
        assert cluster_sync(now=now + timedelta(seconds=2)).events == 1  # its row, again
        assert cluster_sync(now=now + timedelta(seconds=3)).events == 0

    [row] = JobEvent.objects.filter(job=job, reason="FailedScheduling")
    assert (row.count, row.first_at, row.created_at) == (5, first, last)
    answer = client_for(member).get(f"/api/v1/jobs/{job.pk}/events/")
    [event] = [e for e in answer.json() if e["reason"] == "FailedScheduling"]
    assert (event["count"], event["first_at"], event["at"]) == (
        5,
        first.isoformat(),
        last.isoformat(),
    )
    client.force_login(member)
    page = client.get(f"/jobs/{job.pk}/").content.decode()
    assert page.count('<tr class="event warning">') == 1
    assert "5 times, first 10:00:10, last 10:04:30" in re.sub(r"<[^>]+>", "", page)


@contextmanager
def on_simulated(**settings):
    with override_settings(CLUSTER_BACKEND="simulated", **settings):
        get_backend.cache_clear()
        try:
            yield
        finally:
            get_backend.cache_clear()


@pytest.mark.parametrize(
    "portal_on", [on_simulated, on_kubernetes], ids=["simulated", "kubernetes"]
)
def test_with_the_suspend_gate_a_queued_job_waits_suspended_and_is_released_at_dequeue(
    member, now, portal_on
):
    with portal_on(CLUSTER_GATE="suspend"):
        first = submit(member, now)
        second = submit(member, now + timedelta(seconds=1))
        names = {job.pk: f"rayjob-video-{job.pk}" for job in (first, second)}
        cluster_sync(now=now + timedelta(seconds=1))  # the queued jobs' objects are created
        assert listed(get_backend()) == {
            names[first.pk]: "Suspended",
            names[second.pk]: "Suspended",
        }

        result = admission_cycle(now=now + timedelta(seconds=2))
        assert result.admitted == [first.pk]  # the second does not fit the queue's quota
        jobs_reconcile(result.admitted, now=now + timedelta(seconds=2))

        phases = listed(get_backend())
        assert phases[names[first.pk]] in ("Pending", "Running")
        assert phases[names[second.pk]] == "Suspended"
        assert refresh(second).state == "backoff"
        job_cancel(user=member, job=refresh(second), now=now + timedelta(seconds=3))
        jobs_reconcile([second.pk], now=now + timedelta(seconds=3))
        assert set(listed(get_backend())) == {names[first.pk]}


@pytest.mark.parametrize(
    "portal_on", [on_simulated, on_kubernetes], ids=["simulated", "kubernetes"]
)
def test_with_the_suspend_gate_a_job_that_did_not_start_in_time_waits_suspended_again(
    member, now, portal_on
):
    nodes = "2xcpu=8,memory=64Gi"  # too small for the gang
    with portal_on(CLUSTER_GATE="suspend", START_TIMEOUT_SECONDS=30, SIMULATED_CLUSTER_NODES=nodes):
        job = submit(member, now, **UNPACKABLE)
        admission_cycle(now=now)
        jobs_reconcile([job.pk], now=now)

        assert cluster_sync(now=now + timedelta(seconds=30)).timed_out == [job.pk]

        assert refresh(job).state == "backoff"
        assert listed(get_backend()) == {f"rayjob-video-{job.pk}": "Suspended"}


def gang_failed(kube, job, cycle: int, *, at: datetime) -> str:
    """Play the emulated cluster's scheduler: a GangFailedScheduling warning on the job's
    head pod (the simulated cluster writes its own). Returns its message."""
    head = f"rayjob-video-{job.pk}-x7k2p-head-h4v9q"
    message = (
        f"{head} in gang failed to be scheduled in cycle {cycle}: "
        "0/2 nodes are available: 2 Insufficient cpu."
    )
    kube.warn(
        "video",
        f"{head}.{cycle}",
        reason="GangFailedScheduling",
        message=message,
        involved=("Pod", head),
        uid=f"uid-{job.pk}-{cycle}",
        at=at.isoformat(),
    )
    return message


@pytest.mark.parametrize(
    "portal_on", [on_simulated, on_kubernetes], ids=["simulated", "kubernetes"]
)
def test_a_job_that_keeps_not_starting_waits_longer_each_time_then_fails_with_the_last_failure(
    member, now, portal_on
):
    nodes = "2xcpu=8,memory=64Gi"  # the simulated cluster cannot place the gang
    with portal_on(
        START_TIMEOUT_SECONDS=30, START_TIMEOUT_ATTEMPTS=3, SIMULATED_CLUSTER_NODES=nodes
    ) as kube:
        job = submit(member, now, **UNPACKABLE)
        tried, waits = now, []
        for attempt in (1, 2, 3):
            assert admission_cycle(now=tried).admitted == [job.pk]
            jobs_reconcile([job.pk], now=tried)
            if kube is not None:
                last = gang_failed(kube, job, attempt, at=tried + timedelta(seconds=1))
            cluster_sync(now=tried + timedelta(seconds=1))
            timed_out_at = tried + timedelta(seconds=30)
            result = cluster_sync(now=timed_out_at)
            job = refresh(job)
            assert job.start_timeouts == attempt
            if attempt < 3:
                assert result.timed_out == [job.pk] and result.start_failed == []
                assert job.state == "backoff" and result.freed
                waits.append(job.next_attempt_at - timed_out_at)
                tried = job.next_attempt_at
        assert result.start_failed == [job.pk] and result.timed_out == [] and result.freed
        left = listed(get_backend())
    if kube is None:  # the last attempt's own scheduling cycles, not the first attempt's
        last = (
            f"rayjob-video-{job.pk}-small-group-worker-1 in gang failed to be scheduled in "
            "cycle 2: 0/2 nodes are available: 2 Insufficient cpu."
        )
        assert job.events.filter(reason="GangFailedScheduling", cycle=1).count() == 3 * 3
    assert waits == [backoff_delay(1), backoff_delay(2)] and waits[1] == 2 * waits[0]
    assert job.state == "failed" and job.finished_at == timed_out_at
    assert left == {} and queue_usage(job.queue) == {}
    first, second = job.events.filter(reason="StartTimeout").order_by("created_at")
    assert "; start attempt 1 of 3; next try at" in first.message
    assert "; start attempt 2 of 3; next try at" in second.message
    failed = job.events.get(reason="StartAttemptsExceeded")
    assert failed.type == "Warning"
    assert failed.message == (
        "Its pods were not all running 30s after its objects were created, 3 of 3 times, so "
        f"it left the cluster and failed; last scheduling failure: {last}"
    )


@pytest.mark.parametrize(
    "portal_on", [on_simulated, on_kubernetes], ids=["simulated", "kubernetes"]
)
def test_a_waiting_job_no_node_can_hold_any_more_fails_when_the_sync_sees_the_nodes_change(
    member, now, portal_on
):
    with portal_on() as kube:
        admitted = submit(member, now, head={"resources": {"cpu": "10"}}, workers=[])
        assert admission_cycle(now=now).admitted == [admitted.pk]
        jobs_reconcile([admitted.pk], now=now)
        text = {"queue": "root/algorithm/text", "workers": []}
        waiting = submit(member, now, head={"resources": {"cpu": "12"}}, **text)
        small = submit(member, now, head={"resources": {"cpu": "2"}}, **text)
        assert cluster_sync(now=now).unrunnable == []  # 16-cpu nodes: everything fits

        # The nodes are replaced by 8-cpu ones; the backend reads them again.
        if kube is None:
            shrunk = override_settings(SIMULATED_CLUSTER_NODES="4xcpu=8,memory=64Gi")
        else:
            kube.core.delete_node("node-1")
            kube.core.delete_node("node-2")
            kube.add_node("node-3", {"cpu": "8", "memory": "64Gi", "pods": "110"})
            shrunk = override_settings()
        with shrunk:
            get_backend.cache_clear()
            result = cluster_sync(now=now + timedelta(seconds=1))
            again = cluster_sync(now=now + timedelta(seconds=2))

    assert result.unrunnable == [waiting.pk] and again.unrunnable == []
    waiting = refresh(waiting)
    assert waiting.state == "failed" and waiting.finished_at == now + timedelta(seconds=1)
    event = waiting.events.get(reason="Unrunnable")
    assert event.type == "Warning"
    assert event.message == "Can never run: head asks for cpu 12; the largest node has 8"
    assert refresh(small).state == "queued"  # fits a node: waits as before
    assert refresh(admitted).state in ("admitted", "running")  # admitted: not touched


@pytest.mark.parametrize(
    "portal_on", [on_simulated, on_kubernetes], ids=["simulated", "kubernetes"]
)
def test_an_admitted_job_whose_object_vanished_is_created_again(member, now, portal_on):
    with portal_on():
        job = submit(member, now)
        admission_cycle(now=now)
        jobs_reconcile([job.pk], now=now)
        name = f"rayjob-video-{job.pk}"
        get_backend().remove([ObjectRef(name, "video", "kuberay")], now=now)  # behind our back

        cluster_sync(now=now + timedelta(seconds=1))  # its admission may still be creating it
        assert listed(get_backend()) == {}

        cluster_sync(now=now + timedelta(seconds=10))

        assert set(listed(get_backend())) == {name}
        assert refresh(job).state in ("admitted", "running")


def test_a_job_whose_object_the_cluster_refuses_fails_with_the_reason_and_frees_its_quota(
    member, now
):
    with on_kubernetes() as kube:
        job = submit(member, now)
        admission_cycle(now=now)
        kube.answer_next("post", "/apis/ray.io/v1/namespaces/video/rayjobs", 422)

        jobs_reconcile([job.pk], now=now)

        assert kube.objects("kuberay") == [] and kube.configmaps("video") == []
    job = refresh(job)
    assert job.state == "failed"
    refused = job.events.get(reason="Refused")
    assert refused.type == "Warning" and "422" in refused.message
    assert queue_usage(job.queue) == {}


def test_while_the_cluster_cannot_be_listed_nothing_is_concluded(member, now):
    with on_kubernetes() as kube:
        job = submit(member, now)
        admission_cycle(now=now)
        jobs_reconcile([job.pk], now=now)
        kube.answer_next("get", "/apis/ray.io/v1/namespaces/video/rayjobs", 503, times=2)

        with pytest.raises(ClusterUnavailable):
            cluster_sync(now=now + timedelta(seconds=1))

        assert refresh(job).state == "admitted"
        assert len(kube.requests("post", "/rayjobs")) == 1  # not created again
        cluster_sync(now=now + timedelta(seconds=2))
        assert len(kube.requests("post", "/rayjobs")) == 1
    assert refresh(job).state == "admitted"


def test_the_start_timeout_does_not_count_the_time_the_cluster_did_not_answer(member, now):
    with on_kubernetes(START_TIMEOUT_SECONDS=30) as kube:
        job = submit(member, now)
        admission_cycle(now=now)
        jobs_reconcile([job.pk], now=now + timedelta(seconds=2))
        assert refresh(job).start_clock_at == now + timedelta(seconds=2)
        cluster_sync(now=now + timedelta(seconds=10))
        kube.answer_next("get", "/apis/ray.io/v1/namespaces/video/rayjobs", 503, times=4)
        for at in (20, 40):  # 10 s counted, then 40 s of an unreachable cluster
            with pytest.raises(ClusterUnavailable):
                cluster_sync(now=now + timedelta(seconds=at))

        assert cluster_sync(now=now + timedelta(seconds=60)).timed_out == []
        # 18 s counted before the outage began at 20 s, none during it: its clock moved on.
        assert refresh(job).start_clock_at == now + timedelta(seconds=42)
        assert cluster_sync(now=now + timedelta(seconds=71)).timed_out == []
        assert cluster_sync(now=now + timedelta(seconds=72)).timed_out == [job.pk]
    assert refresh(job).state == "backoff"


def test_a_job_whose_objects_were_never_created_does_not_time_out(member, now):
    with on_kubernetes(START_TIMEOUT_SECONDS=30) as kube:
        job = submit(member, now)
        admission_cycle(now=now)
        kube.server.restart(unready=0, refusing=1000)  # the authorizer refuses everything
        with pytest.raises(ClusterUnavailable):
            jobs_reconcile([job.pk], now=now)
        with pytest.raises(ClusterUnavailable):
            cluster_sync(now=now + timedelta(seconds=45))
        kube.server.restart(unready=0, refusing=0)
        assert refresh(job).state == "admitted" and refresh(job).start_clock_at is None
        assert not job.events.filter(reason="StartTimeout").exists()

        assert cluster_sync(now=now + timedelta(seconds=50)).timed_out == []  # created now
        assert refresh(job).start_clock_at == now + timedelta(seconds=50)
        assert cluster_sync(now=now + timedelta(seconds=80)).timed_out == [job.pk]


# -- the quota tree, written for the cluster's own scheduler ---------------------------


def stored_tree(kube) -> dict:
    return kube.custom.get_namespaced_custom_object(
        "scheduling.sigs.k8s.io", "v1beta1", "kube-system", "elasticquotatrees", "elasticquotatree"
    )


def stored_queues(kube) -> dict[str, dict]:
    listed = kube.custom.list_cluster_custom_object("scheduling.volcano.sh", "v1beta1", "queues")
    return {queue["metadata"]["name"]: queue["spec"] for queue in listed["items"]}


def test_the_quota_tree_is_written_as_an_elasticquotatree_and_volcano_queues(tree):
    from queues import services

    with on_kubernetes(CLUSTER_PUBLISH_QUOTA=["elasticquotatree", "volcano"]) as kube:
        kube.server.resources["scheduling.sigs.k8s.io/v1beta1/elasticquotatrees"] = {}
        kube.server.resources["scheduling.volcano.sh/v1beta1/queues"] = {}

        assert quota_publish() == ["elasticquotatree", "volcano"]

        stored = stored_tree(kube)
        assert stored["spec"] == services.tree_export()["spec"]
        queues = stored_queues(kube)
        assert set(queues) == {
            "root-algorithm-video",
            "root-algorithm-text",
            "root-infrastructure-devops",
            "root-interns-intern-text",
            "root-interns-intern-video",
        }
        assert queues["root-algorithm-video"] == {
            "capability": {"cpu": "14", "memory": "14Gi", "nvidia.com/gpu": "4"},
            "guarantee": {"resource": {"cpu": "12", "memory": "12Gi", "nvidia.com/gpu": "2"}},
            "reclaimable": True,
        }

        # The video leaf's max grows and the intern-video leaf goes: both are written over.
        document = services.tree_export()
        children = {kid["name"]: kid for kid in document["spec"]["root"]["children"]}
        video = next(kid for kid in children["algorithm"]["children"] if kid["name"] == "video")
        video["max"]["cpu"] = "20"
        interns = children["interns"]
        interns["children"] = [k for k in interns["children"] if k["name"] != "intern-video"]
        services.tree_apply(document=document)
        quota_publish()

        stored = stored_tree(kube)
        queues = stored_queues(kube)
        assert stored["spec"] == services.tree_export()["spec"]
        assert queues["root-algorithm-video"]["capability"]["cpu"] == "20"
        assert "root-interns-intern-video" not in queues


def test_without_publishing_nothing_of_the_tree_is_written(tree):
    with on_kubernetes() as kube:
        assert quota_publish() == []
        assert kube.requests("post", "/apis/") == [] and kube.requests("patch") == []


# -- when the cluster does not answer, the pages say so --------------------------------


def test_a_cluster_that_stops_answering_is_named_on_every_page_until_it_answers(
    member, now, client
):
    with on_kubernetes() as kube:
        job = submit(member, now)
        admission_cycle(now=now)
        jobs_reconcile([job.pk], now=now)
        cluster_sync(now=now)
        login(client, member)
        assert "cluster-trouble" not in client.get("/").content.decode()

        kube.answer_next("get", "/apis/ray.io/v1/namespaces/video/rayjobs", 503, times=4)
        for later in (5, 10):
            with pytest.raises(ClusterUnavailable):
                cluster_sync(now=now + timedelta(seconds=later))

        page = client.get(f"/jobs/{job.pk}/").content.decode()
        banner = page[page.index('class="message error cluster-trouble"') :]
        banner = banner[: banner.index("</p>")]
        since = (now + timedelta(seconds=5)).strftime("%Y-%m-%d %H:%M:%S")
        assert "The cluster has not answered since <time " in banner
        assert f">{since}</time>" in banner
        assert "list rayjobs in video: HTTP 503" in banner
        health = client.get("/healthz").json()
        assert health["cluster"].startswith("unavailable since") and "HTTP 503" in health["cluster"]

        cluster_sync(now=now + timedelta(seconds=15))

        assert "cluster-trouble" not in client.get("/").content.decode()
        assert client.get("/healthz").json()["cluster"] == "ok"
    assert refresh(job).state == "admitted"  # nothing was concluded meanwhile


# -- manage.py cluster_check -----------------------------------------------------------


def run_cluster_check() -> tuple[str, str]:
    from io import StringIO

    from django.core.management import CommandError, call_command

    out = StringIO()
    try:
        call_command("cluster_check", stdout=out)
    except CommandError as error:
        return out.getvalue(), str(error)
    return out.getvalue(), ""


def test_cluster_check_names_every_missing_crd_permission_and_namespace(tree):
    with on_kubernetes(namespaces=(), CLUSTER_RUNTIMES=["kuberay", "kubeflow"]) as kube:
        kube.without_crd("kubeflow")
        kube.rbac(roles(without=("text", "configmaps"), runtimes=("kuberay", "kubeflow")))
        for namespace in ("video", "text", "devops", "intern-text"):
            kube.add_namespace(namespace)

        out, error = run_cluster_check()

    lines = out.splitlines()
    assert "ok   kuberay: RayJob (ray.io/v1) is served" in lines
    assert (
        "FAIL kubeflow: PyTorchJob (kubeflow.org/v1) is served: its CRD is not installed" in lines
    )
    assert (
        "ok   may list, watch, create, delete, patch rayjobs.ray.io; list, watch, create, delete, "
        "patch pytorchjobs.kubeflow.org; create, delete configmaps; list, watch events; list pods; "
        "get pods/log in video"
    ) in lines
    assert (
        "FAIL may list, watch, create, delete, patch rayjobs.ray.io; list, watch, create, delete, "
        "patch pytorchjobs.kubeflow.org; create, delete configmaps; list, watch events; list pods; "
        "get pods/log in text: not "
        "allowed: create configmaps, delete configmaps; manage.py cluster_rbac | kubectl apply -f -"
    ) in lines
    assert not any("volcano" in line for line in lines)  # not a runtime of this cluster
    assert "ok   namespace video exists" in lines
    assert (
        "FAIL namespace intern-video exists: not found: jobs of its queue wait, then fail; "
        "create it, then manage.py cluster_rbac | kubectl apply -f -"
    ) in lines
    assert (
        "ok   the nodes' allocatable resources can be read: cpu 32, memory 128Gi, pods 220" in lines
    )
    assert error == f"3 of {len(lines)} checks failed"


def test_cluster_check_passes_on_a_ready_cluster_with_the_generated_roles(tree):
    publish = ["elasticquotatree", "volcano"]
    with on_kubernetes(CLUSTER_PUBLISH_QUOTA=publish, CLUSTER_RUNTIMES=["kuberay"]) as kube:
        kube.rbac(roles(publish=publish))
        for namespace in TREE_NAMESPACES:
            kube.add_namespace(namespace)

        out, error = run_cluster_check()

    lines = out.splitlines()
    assert error == "" and lines[-1].startswith("all ") and "FAIL" not in out
    assert "WARN" not in out
    assert (
        "ok   may list nodes; create selfsubjectaccessreviews.authorization.k8s.io; create "
        "selfsubjectrulesreviews.authorization.k8s.io; get namespaces; list, create, patch, "
        "delete queues.scheduling.volcano.sh at the cluster scope"
    ) in lines
    assert "ok   may create, patch elasticquotatrees.scheduling.sigs.k8s.io in kube-system" in lines
    assert "ok   nothing granted in default beyond what Caldera uses" in lines


def test_cluster_check_warns_of_what_a_cluster_wide_role_grants_beyond_what_caldera_uses(tree):
    everywhere = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": "caldera-everywhere"},
        "rules": [
            {"apiGroups": ["ray.io"], "resources": ["rayjobs"], "verbs": ["list", "create"]},
            {"apiGroups": [""], "resources": ["configmaps", "secrets"], "verbs": ["*"]},
        ],
    }
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": "caldera-everywhere"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                    "name": "caldera-everywhere"},
        "subjects": [{"kind": "ServiceAccount", "name": "caldera",
                      "namespace": "caldera-system"}],
    }  # fmt: skip
    with on_kubernetes(CLUSTER_RUNTIMES=["kuberay"]) as kube:
        kube.rbac([*roles(), everywhere, binding])
        for namespace in TREE_NAMESPACES:
            kube.add_namespace(namespace)

        out, error = run_cluster_check()

    lines = out.splitlines()
    assert error == ""  # a warning: Caldera works, with more than it needs
    assert (
        "WARN nothing granted in default beyond what Caldera uses: also granted: * "
        "configmaps, * secrets, create rayjobs.ray.io, list rayjobs.ray.io"
    ) in lines
    assert (
        "WARN nothing granted in video beyond what Caldera uses: also granted: * configmaps, "
        "* secrets"
    ) in lines
    assert any(line.startswith("WARN nothing granted in kube-system") for line in lines)


def test_cluster_check_does_not_warn_of_what_every_signed_in_identity_may_do(tree):
    # Reviewing another identity's access is no grant of system:basic-user's: a real extra.
    others = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": "caldera-reviews"},
        "rules": [
            {
                "apiGroups": ["authorization.k8s.io"],
                "resources": ["subjectaccessreviews"],
                "verbs": ["create"],
            }
        ],
    }
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": "caldera-reviews"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                    "name": "caldera-reviews"},
        "subjects": [{"kind": "ServiceAccount", "name": "caldera",
                      "namespace": "caldera-system"}],
    }  # fmt: skip
    with on_kubernetes(CLUSTER_RUNTIMES=["kuberay"]) as kube:
        kube.rbac([*roles(), others, binding])
        for namespace in TREE_NAMESPACES:
            kube.add_namespace(namespace)

        out, error = run_cluster_check()

    warnings = [line for line in out.splitlines() if line.startswith("WARN")]
    assert error == "" and len(warnings) == len(TREE_NAMESPACES) + 2  # kube-system, default
    assert all(
        line.endswith(
            "beyond what Caldera uses: also granted: create "
            "subjectaccessreviews.authorization.k8s.io"
        )
        for line in warnings
    )


def test_cluster_rbac_prints_the_roles_of_the_trees_namespaces(tree):
    from io import StringIO

    from django.core.management import call_command

    out = StringIO()
    with override_settings(
        CLUSTER_RUNTIMES=["kuberay"], CLUSTER_PUBLISH_QUOTA=["elasticquotatree"]
    ):
        call_command("cluster_rbac", stdout=out)
    documents = list(yaml.safe_load_all(out.getvalue()))
    assert documents == rbac_documents(
        namespaces=TREE_NAMESPACES, runtimes=["kuberay"], publish=["elasticquotatree"]
    )
    names = [(d["kind"], d["metadata"].get("namespace"), d["metadata"]["name"]) for d in documents]
    assert ("Role", "video", "caldera-jobs") in names and (
        "RoleBinding",
        "video",
        "caldera-jobs",
    ) in names
    assert ("Role", "kube-system", "caldera-quota") in names
    assert ("ClusterRole", None, "caldera-tree") in names
    [video] = [
        d for d in documents if d["kind"] == "Role" and d["metadata"]["namespace"] == "video"
    ]
    assert video["rules"] == [
        {
            "apiGroups": ["ray.io"],
            "resources": ["rayjobs"],
            "verbs": ["list", "watch", "create", "delete", "patch"],
        },
        {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["create", "delete"]},
        {"apiGroups": [""], "resources": ["events"], "verbs": ["list", "watch"]},
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]},
        {"apiGroups": [""], "resources": ["pods/log"], "verbs": ["get"]},
    ]
    assert ("ClusterRole", None, "caldera-watch") not in names


def test_with_the_cluster_scope_cluster_rbac_adds_the_role_to_watch_every_namespace(tree):
    from io import StringIO

    from django.core.management import call_command

    out = StringIO()
    with override_settings(CLUSTER_RUNTIMES=["kuberay"], KUBERNETES_WATCH_SCOPE="cluster"):
        call_command("cluster_rbac", stdout=out)
    documents = {
        (d["kind"], d["metadata"]["name"]): d
        for d in yaml.safe_load_all(out.getvalue())
        if "namespace" not in d["metadata"]
    }
    assert documents[("ClusterRole", "caldera-watch")]["rules"] == [
        {"apiGroups": ["ray.io"], "resources": ["rayjobs"], "verbs": ["list", "watch"]},
        {"apiGroups": [""], "resources": ["events"], "verbs": ["list", "watch"]},
    ]
    binding = documents[("ClusterRoleBinding", "caldera-watch")]
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "caldera", "namespace": "caldera-system"}
    ]


def test_cluster_check_fails_a_namespace_that_is_being_deleted(tree):
    with on_kubernetes(namespaces=()) as kube:
        kube.authorize()
        for namespace in ("video", "text", "devops", "intern-video"):
            kube.add_namespace(namespace)
        kube.add_namespace("intern-text", phase="Terminating")

        out, error = run_cluster_check()

    assert (
        "FAIL namespace intern-text exists: it is being deleted (Terminating): jobs of its "
        "queue would be refused" in out.splitlines()
    )
    assert error.startswith("1 of ")


def test_cluster_check_refuses_to_run_on_the_simulated_cluster(tree):
    with on_simulated():
        out, error = run_cluster_check()

    assert error.startswith("CLUSTER_BACKEND is simulated: set CLUSTER_BACKEND=kubernetes")


def test_a_job_the_clusters_resource_quota_has_no_room_for_waits_in_backoff_and_frees_its_quota(
    member, now
):
    with on_kubernetes() as kube:
        kube.resource_quota("video", "rayjob-count", "kuberay", limit=0)
        job = submit(member, now)
        admission_cycle(now=now)

        jobs_reconcile([job.pk], now=now)
        jobs_reconcile([job.pk], now=now)  # the reconcile its backoff asks for

        assert kube.objects("kuberay") == [] and kube.configmaps("video") == []
    job = refresh(job)
    assert job.state == "backoff" and "exceeded quota: rayjob-count" in job.backoff_reason
    assert job.next_attempt_at > now and job.dequeued_at is None
    assert job.events.get(reason="Deferred").type == "Warning"
    assert queue_usage(job.queue) == {}


def test_a_job_whose_namespace_is_being_deleted_waits_and_the_cluster_stays_available(member, now):
    with on_kubernetes() as kube:
        kube.terminating("video")
        job = submit(member, now)
        admission_cycle(now=now)

        jobs_reconcile([job.pk], now=now)

        assert kube.objects("kuberay") == []
        assert cluster_trouble() is None
    job = refresh(job)
    assert job.state == "backoff" and queue_usage(job.queue) == {}
    assert "because it is being terminated" in job.backoff_reason
    assert "manage.py cluster_rbac" in job.backoff_reason
    assert UnavailableNamespace.objects.get().namespace == "video"


def _without_gpu_on_video(services) -> None:
    document = services.tree_export()
    children = {kid["name"]: kid for kid in document["spec"]["root"]["children"]}
    video = next(kid for kid in children["algorithm"]["children"] if kid["name"] == "video")
    for limits in (video["min"], video["max"]):
        limits.pop("nvidia.com/gpu")
    services.tree_apply(document=document)


@pytest.mark.parametrize("first_written_by", ["caldera", "a plain create"])
def test_a_resource_taken_out_of_the_tree_leaves_the_volcano_queue(tree, first_written_by):
    from queues import exchange, services

    with on_kubernetes(CLUSTER_PUBLISH_QUOTA=["volcano"]) as kube:
        kube.server.resources["scheduling.volcano.sh/v1beta1/queues"] = {}
        if first_written_by == "caldera":
            quota_publish()
        else:  # as Caldera wrote queues before it applied them from the start
            for queue in exchange.volcano_queues():
                kube.custom.create_cluster_custom_object(
                    "scheduling.volcano.sh", "v1beta1", "queues", queue
                )
        assert "nvidia.com/gpu" in stored_queues(kube)["root-algorithm-video"]["capability"]

        _without_gpu_on_video(services)
        quota_publish()

        video = stored_queues(kube)["root-algorithm-video"]
    assert video["capability"] == {"cpu": "14", "memory": "14Gi"}
    assert video["guarantee"] == {"resource": {"cpu": "12", "memory": "12Gi"}}


SMALL = {
    "head": {"resources": {"cpu": "1", "memory": "1G"}},
    "workers": [{"name": "small-group", "replicas": 1, "resources": {"cpu": "1", "memory": "1G"}}],
}


def test_a_bulk_cancel_sends_one_delete_per_object_and_none_for_configmaps_never_made(
    member, now, monkeypatch
):
    """What a real server showed: cancelling 200 jobs sent 207 deletes, 188 more 14 s later
    (all 404), and deletes of script ConfigMaps the jobs never had. The sync that follows
    the cancel reads its informers, whose watch has not brought the deletions yet (held
    here until that sync is done)."""
    arrived = threading.Event()
    arrived.set()
    apply = Informer._apply

    def late(informer, event):
        arrived.wait(10)
        apply(informer, event)

    monkeypatch.setattr(Informer, "_apply", late)
    with on_kubernetes(KUBERNETES_WATCH=True) as kube:
        jobs = [submit(member, now, **SMALL) for _ in range(6)]  # 2 cpu each, video max 14
        scripted = submit(member, now, **SMALL, script="print('hello')")
        everyone = [*jobs, scripted]
        assert sorted(admission_cycle(now=now).admitted) == [job.pk for job in everyone]
        jobs_reconcile([job.pk for job in everyone], now=now)
        cluster_sync(now=now)
        backend = get_backend()
        wait_for(lambda: backend._informers[("kuberay", "video")].items() is not None)
        wait_for(lambda: kube.watch_streams("kuberay"))

        arrived.clear()  # the watch's events come late from here
        later = now + timedelta(seconds=1)
        cancelled = [refresh(job) for job in everyone]
        outcome = jobs_bulk(user=member, action="cancel", jobs=cancelled, now=later)
        assert sorted(outcome.done) == [job.pk for job in everyone]
        jobs_reconcile([job.pk for job in everyone], now=later)
        cluster_sync(now=later)  # its informer still lists every object, not deleted
        arrived.set()
        wait_for(lambda: backend._informers[("kuberay", "video")].items() == [])
        assert sorted(cluster_sync(now=later + timedelta(seconds=14)).left) == [
            job.pk for job in everyone
        ]

        for job in everyone:
            path = f"/namespaces/video/rayjobs/rayjob-video-{job.pk}"
            assert len(kube.requests("delete", path)) == 1, job.pk
        deleted_maps = kube.requests("delete", "/configmaps/")
        assert [r.url.path.rsplit("/", 1)[1] for r in deleted_maps] == [
            f"rayjob-video-{scripted.pk}-script"
        ]
