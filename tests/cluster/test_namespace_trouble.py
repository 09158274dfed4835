"""A namespace's trouble stays in that namespace (docs/architecture.md section 8): on the emulator
with Caldera's least-privilege roles enforced, a tree namespace is deleted (its Role goes
with it, so the server refuses before it looks the namespace up); only its own jobs wait
and say why, and every other namespace syncs, admits and cancels as before. And an API
server's restart, which answers 503 and refuses everything for a moment, is no outage.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from jobs.cluster import ClusterUnavailable, NamespaceTrouble, get_backend
from jobs.engine.admission.cycle import admission_cycle
from jobs.engine.namespace_health import namespaces_troubled
from jobs.engine.objects import object_ref
from jobs.engine.reconcile import jobs_reconcile
from jobs.engine.sync import cluster_sync
from jobs.models import Job, State, UnavailableNamespace
from jobs.reads.selectors import cluster_trouble, queue_usage
from jobs.services import job_cancel
from queues.services import tree_apply

from ..support.jobs import refresh, submit
from ..support.kubernetes import TREE_NAMESPACES, on_kubernetes, roles
from ..support.specs import ray_spec
from ..support.trees import seed_tree_document

pytestmark = pytest.mark.django_db

SMALL = {
    "head": {"resources": {"cpu": "1", "memory": "1G"}},
    "workers": [{"name": "small-group", "replicas": 1, "resources": {"cpu": "1", "memory": "1G"}}],
}


@pytest.fixture
def now():
    return timezone.now().replace(microsecond=0)


def rayjobs(kube) -> set[tuple[str, str]]:
    """(namespace, name) of the RayJobs the server stores, read past its RBAC."""
    return {
        (namespace, name)
        for (resource, namespace, name), obj in kube.server._objects.items()
        if resource.plural == "rayjobs" and not obj.deleted
    }


def running(kube, job) -> None:
    ref = object_ref(job)
    kube.set_status("kuberay", ref.namespace, ref.name, {"jobDeploymentStatus": "Running"})


def test_a_deleted_namespace_holds_only_its_own_jobs_until_it_is_back(
    member, intern, outsider, now
):
    later = lambda seconds: now + timedelta(seconds=seconds)  # noqa: E731
    with on_kubernetes(CLUSTER_RUNTIMES=["kuberay"], NAMESPACE_GRACE_SECONDS=600) as kube:
        kube.rbac(roles())
        video = submit(member, now, **SMALL)
        text = submit(member, now, queue="root/algorithm/text", **SMALL)
        ops = submit(outsider, now, queue="root/infrastructure/devops", **SMALL)
        assert sorted(admission_cycle(now=now).admitted) == sorted([video.pk, text.pk, ops.pk])
        jobs_reconcile([video.pk, text.pk, ops.pk], now=now)
        cluster_sync(now=now)

        kube.delete_namespace("intern-text")
        held = submit(intern, later(1), queue="root/interns/intern-text", **SMALL)
        assert admission_cycle(now=later(1)).admitted == [held.pk]  # not known to be gone yet
        jobs_reconcile([held.pk], now=later(1))

        held = refresh(held)
        assert held.state == "backoff" and queue_usage(held.queue) == {}  # its quota is free
        assert 'cannot create resource "rayjobs"' in held.backoff_reason  # the server's words
        assert "namespace intern-text is not found" in held.backoff_reason
        assert "manage.py cluster_rbac" in held.backoff_reason
        assert cluster_trouble() is None

        # Every other namespace goes on: statuses, a cancel, admissions.
        running(kube, video)
        synced = cluster_sync(now=later(2))
        assert synced.started == [video.pk] and synced.troubled == ["intern-text"]
        job_cancel(user=outsider, job=refresh(ops), now=later(3))
        jobs_reconcile([ops.pk], now=later(3))
        assert cluster_sync(now=later(4)).left == [ops.pk]
        assert refresh(ops).state == "cancelled"
        more = submit(member, later(5), queue="root/algorithm/text", **SMALL)
        assert admission_cycle(now=later(5)).admitted == [more.pk]  # held stays held
        assert refresh(held).state == "backoff"
        assert cluster_trouble() is None
        assert UnavailableNamespace.objects.get().namespace == "intern-text"

        # Recreated, and its Role applied again (manage.py cluster_rbac): its job goes in.
        kube.add_namespace("intern-text")
        kube.apply_roles(roles())
        assert cluster_sync(now=later(6)).back == ["intern-text"]
        assert admission_cycle(now=later(7)).admitted == [held.pk]
        jobs_reconcile([held.pk], now=later(7))
        assert ("intern-text", object_ref(held).name) in rayjobs(kube)
    assert refresh(held).state == "admitted" and refresh(text).state == "admitted"
    assert not UnavailableNamespace.objects.exists()


def with_leaf(name: str, namespace: str) -> dict:
    """The seed tree with a leaf under algorithm that binds ``namespace``."""
    document = seed_tree_document()
    algorithm = next(c for c in document["spec"]["root"]["children"] if c["name"] == "algorithm")
    algorithm["children"].append(
        {"name": name, "min": {"cpu": 0}, "max": {"cpu": 8}, "namespaces": [namespace]}
    )
    return document


def test_a_leaf_added_before_its_roles_troubles_only_its_own_namespace(member, now):
    """The admin adds a leaf; nobody has applied ``manage.py cluster_rbac`` since. The
    server refuses Caldera the new namespace and even the namespace itself (the tree's
    ClusterRole names the old tree's namespaces): that namespace waits with the fix named,
    and every other namespace syncs and admits as before."""
    later = lambda seconds: now + timedelta(seconds=seconds)  # noqa: E731
    with on_kubernetes(CLUSTER_RUNTIMES=["kuberay"], NAMESPACE_GRACE_SECONDS=600) as kube:
        kube.rbac(roles())
        video = submit(member, now, **SMALL)
        assert admission_cycle(now=now).admitted == [video.pk]
        jobs_reconcile([video.pk], now=now)
        cluster_sync(now=now)

        kube.add_namespace("audio")
        tree_apply(document=with_leaf("audio", "audio"))
        audio = submit(member, later(1), queue="root/algorithm/audio", **SMALL)
        assert admission_cycle(now=later(1)).admitted == [audio.pk]  # not known refused yet
        jobs_reconcile([audio.pk], now=later(1))  # its create is refused: it goes back
        audio = refresh(audio)
        assert audio.state == "backoff" and queue_usage(audio.queue) == {}
        assert "manage.py cluster_rbac | kubectl apply -f -" in audio.backoff_reason
        assert cluster_trouble() is None

        running(kube, video)
        synced = cluster_sync(now=later(2))
        assert synced.started == [video.pk] and synced.troubled == ["audio"]
        assert cluster_trouble() is None
        reason = UnavailableNamespace.objects.get(namespace="audio").reason
        assert 'cannot get resource "namespaces"' in reason  # the server's words
        assert "manage.py cluster_rbac | kubectl apply -f -" in reason
        assert admission_cycle(now=later(3)).admitted == []
        assert refresh(audio).state == "backoff"
        other = submit(member, later(4), queue="root/algorithm/text", **SMALL)
        assert admission_cycle(now=later(4)).admitted == [other.pk]  # the others go on

        kube.apply_roles(roles(namespaces=(*TREE_NAMESPACES, "audio")))
        assert cluster_sync(now=later(5)).back == ["audio"]
        assert admission_cycle(now=later(6)).admitted == [audio.pk]
        jobs_reconcile([audio.pk], now=later(6))
        assert ("audio", object_ref(audio).name) in rayjobs(kube)
    assert refresh(video).state == "running"


def test_jobs_of_a_namespace_that_stays_gone_fail_after_the_grace(intern, now):
    with on_kubernetes(CLUSTER_RUNTIMES=["kuberay"], NAMESPACE_GRACE_SECONDS=600) as kube:
        kube.rbac(roles())
        kube.delete_namespace("intern-text")
        assert cluster_sync(now=now).troubled == ["intern-text"]
        job = submit(intern, now, queue="root/interns/intern-text", **SMALL)

        assert admission_cycle(now=now + timedelta(seconds=1)).admitted == []
        job = refresh(job)
        assert job.state == "backoff" and "namespace intern-text is not found" in job.backoff_reason

        cluster_sync(now=now + timedelta(seconds=599))
        assert admission_cycle(now=now + timedelta(seconds=599)).admitted == []
        assert refresh(job).state == "backoff"
        cluster_sync(now=now + timedelta(seconds=601))
        admission_cycle(now=now + timedelta(seconds=601))

        assert rayjobs(kube) == set()
    job = refresh(job)
    assert job.state == "failed"
    assert "NAMESPACE_GRACE_SECONDS=600" in job.events.get(reason="Refused").message
    assert cluster_trouble() is None


def test_an_api_server_restart_does_not_name_the_cluster_unavailable(member, now):
    with on_kubernetes(CLUSTER_RUNTIMES=["kuberay"], CLUSTER_UNAVAILABLE_GRACE_SECONDS=5) as kube:
        kube.rbac(roles())
        job = submit(member, now)
        admission_cycle(now=now)
        jobs_reconcile([job.pk], now=now)
        cluster_sync(now=now)

        kube.server.restart(unready=3, refusing=1000)  # 503s, then RBAC refuses everywhere
        with pytest.raises(ClusterUnavailable):
            cluster_sync(now=now + timedelta(seconds=1))
        assert cluster_trouble() is None and not UnavailableNamespace.objects.exists()
        kube.server.restart(unready=0, refusing=0)  # up, its RBAC caches filled
        cluster_sync(now=now + timedelta(seconds=2))
        assert cluster_trouble() is None

        # A refusal everywhere that outlasts the grace is an outage, named with its words.
        kube.server.restart(unready=0, refusing=1000)
        for later in (3, 8):
            with pytest.raises(ClusterUnavailable):
                cluster_sync(now=now + timedelta(seconds=later))
        trouble = cluster_trouble()
        assert trouble is not None and "cannot list resource" in trouble.error
        assert trouble.failing_since == now + timedelta(seconds=3)
        assert not UnavailableNamespace.objects.exists()
    assert refresh(job).state == "admitted"


def test_the_admins_tree_page_names_a_namespace_in_trouble_and_its_fix(client, tree, staff, now):
    namespaces_troubled(
        {"text": NamespaceTrouble('namespaces "text" not found', gone=True)}, now=now
    )
    client.force_login(staff)

    page = client.get("/admin/queues/quotanode/").content.decode()

    assert "<code>text</code>: Its namespace is unavailable since" in page
    assert "namespaces &quot;text&quot; not found" in page
    assert "manage.py cluster_rbac" in page
    assert 'text <strong class="namespace-trouble">unavailable</strong>' in page
    assert 'video <strong class="namespace-trouble">' not in page


def test_a_running_jobs_page_says_its_namespace_takes_nothing_of_it_now(client, member, now):
    job = submit(member, now, queue="root/algorithm/text", **SMALL)
    Job.objects.filter(pk=job.pk).update(state=State.RUNNING, dequeued_at=now)
    namespaces_troubled(
        {"text": NamespaceTrouble("Caldera has no Role in namespace text")}, now=now
    )
    client.force_login(member)

    page = client.get(f"/jobs/{job.pk}/").content.decode()

    assert "The cluster takes nothing of it now:" in page
    assert "Caldera has no Role in namespace text" in page
    assert "manage.py cluster_rbac | kubectl apply -f -" in page
    UnavailableNamespace.objects.all().delete()
    assert (
        "The cluster takes nothing of it now:"
        not in client.get(f"/jobs/{job.pk}/").content.decode()
    )


def without_create(namespace: str, resource: str) -> list[dict]:
    """The roles, but the namespace's Role lets Caldera do all but create ``resource``."""
    documents = roles()
    for doc in documents:
        if doc["kind"] == "Role" and doc["metadata"]["namespace"] == namespace:
            for rule in doc["rules"]:
                if resource in rule["resources"]:
                    rule["verbs"] = [verb for verb in rule["verbs"] if verb != "create"]
    return documents


def test_a_namespace_that_lists_but_refuses_creates_stays_unavailable_until_its_role_is_fixed(
    intern, now
):
    later = lambda seconds: now + timedelta(seconds=seconds)  # noqa: E731
    with on_kubernetes(CLUSTER_RUNTIMES=["kuberay"], NAMESPACE_GRACE_SECONDS=600) as kube:
        kube.rbac(without_create("intern-text", "rayjobs"))
        job = submit(intern, now, queue="root/interns/intern-text", **SMALL)
        assert admission_cycle(now=now).admitted == [job.pk]
        jobs_reconcile([job.pk], now=now)
        assert refresh(job).state == "backoff"

        # It lists fine, but it still may not create: it stays unavailable, since the first
        # refusal, and its job is held, then fails after the grace.
        synced = cluster_sync(now=later(1))
        assert synced.back == [] and synced.troubled == ["intern-text"]
        row = UnavailableNamespace.objects.get()
        assert row.since == now and "may not create rayjobs.ray.io" in row.reason
        assert admission_cycle(now=later(2)).admitted == []

        # Its Role fixed (manage.py cluster_rbac): the next sync finds it back.
        kube.apply_roles(roles())
        assert cluster_sync(now=later(3)).back == ["intern-text"]
        assert not UnavailableNamespace.objects.exists()


def test_a_release_its_role_does_not_allow_is_its_namespaces_trouble(now):
    documents = roles()
    for doc in documents:
        if doc["kind"] == "Role" and doc["metadata"]["namespace"] == "video":
            for rule in doc["rules"]:
                rule["verbs"] = [verb for verb in rule["verbs"] if verb != "patch"]
    with on_kubernetes(CLUSTER_RUNTIMES=["kuberay"]) as kube:
        kube.rbac(documents)
        backend = get_backend()
        assert backend.apply([ray_spec(suspend=True)], now=now) == {}

        refused = backend.apply([ray_spec(suspend=False)], now=now)  # the release: a patch

        assert refused[7].namespace == "video"  # held with its namespace, not failed
        assert 'cannot patch resource "rayjobs"' in refused[7].reason
        assert "Caldera has no Role in namespace video" in refused[7].reason
