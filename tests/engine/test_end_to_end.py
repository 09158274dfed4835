"""The seed scenario end to end: the REST API, Redis, a real Celery worker, the simulated
cluster (and, last, the emulated Kubernetes API server with its watches).

No beat runs here: every step must be driven by the triggers of submit, cancel and finish.
"""

import pytest

from jobs.models import Job

from ..support.jobs import INTERN_JOB, RAY_JOB
from ..support.kubernetes import on_kubernetes
from ..support.polling import wait_for
from ..support.trees import seed_tree_document

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_seed_scenario_through_the_api_with_a_real_worker(api, member, celery_worker):
    client = api(member)
    first = client.post("/api/v1/jobs/", RAY_JOB, format="json").json()["id"]
    second = client.post("/api/v1/jobs/", RAY_JOB, format="json").json()["id"]

    state = lambda job_id: client.get(f"/api/v1/jobs/{job_id}/").json()  # noqa: E731
    wait_for(lambda: state(first)["state"] == "running")
    waiting = wait_for(lambda: (s := state(second))["state"] == "backoff" and s)
    assert waiting["position"] == 1
    assert waiting["backoff_reason"] == (
        "Insufficient quota in root/algorithm/video: cpu requested 12, free 2 (used 12 of max 14)"
    )
    assert waiting["dequeued_at"] is None

    # Stopping: it holds its quota until the sync sees its objects gone, then is cancelled.
    assert client.post(f"/api/v1/jobs/{first}/cancel/").json()["state"] == "stopping"
    # No beat runs here: only the triggers that follow the cancel (reconcile, sync,
    # admission) can dequeue the second. How soon is measured by make bench (reaction).
    wait_for(lambda: state(second)["state"] in ("admitted", "running"), timeout=10)
    assert state(first)["state"] == "cancelled"
    assert state(second)["dequeued_at"] is not None
    wait_for(lambda: Job.objects.get(pk=second).state == "running")


def test_a_finish_frees_the_quota_for_the_next_job(api, member, celery_worker):
    client = api(member)
    first = client.post("/api/v1/jobs/", {**RAY_JOB, "run_seconds": 1.5}, format="json").json()
    second = client.post("/api/v1/jobs/", RAY_JOB, format="json").json()["id"]
    wait_for(lambda: Job.objects.get(pk=first["id"]).state == "running")
    # No beat runs: the simulated cluster asked for a sync at the moment the first job
    # ends, and that finish triggers the admission of the second.
    wait_for(lambda: Job.objects.get(pk=second).state in ("admitted", "running"), timeout=10)
    finished = Job.objects.get(pk=first["id"])
    assert finished.state == "succeeded"
    held = (finished.finished_at - finished.dequeued_at).total_seconds()
    assert held >= 1.5  # its whole run time (how much more is make bench's to measure)
    waited = Job.objects.get(pk=second)
    assert waited.dequeued_at >= finished.finished_at  # into the quota the finish freed


def test_a_job_whose_pods_exit_non_zero_fails_with_the_reason_and_frees_its_quota(
    api, member, celery_worker
):
    client = api(member)
    failing = {**RAY_JOB, "run_seconds": 1, "env": {"CALDERA_SIMULATED_EXIT_CODE": "3"}}
    first = client.post("/api/v1/jobs/", failing, format="json").json()["id"]
    second = client.post("/api/v1/jobs/", RAY_JOB, format="json").json()["id"]

    wait_for(lambda: Job.objects.get(pk=first).state == "failed", timeout=15)

    events = client.get(f"/api/v1/jobs/{first}/events/").json()
    assert any(e["reason"] == "Failed" and "exited with code 3" in e["message"] for e in events), (
        events
    )
    wait_for(lambda: Job.objects.get(pk=second).state in ("admitted", "running"), timeout=10)


def test_the_intern_story_video_reclaims_its_guarantee_by_its_triggers_alone(
    api, member, intern, celery_worker
):
    interns = [
        api(intern).post("/api/v1/jobs/", INTERN_JOB, format="json").json()["id"] for _ in range(4)
    ]
    wait_for(lambda: all(Job.objects.get(pk=pk).state == "running" for pk in interns))

    # No beat runs: the submit's trigger reclaims, and the victim's leaving admits video.
    video = api(member).post("/api/v1/jobs/", RAY_JOB, format="json").json()["id"]
    wait_for(lambda: Job.objects.get(pk=video).state in ("admitted", "running"), timeout=10)

    victims = [pk for pk in interns if Job.objects.get(pk=pk).preemption_count]
    assert victims == [interns[-1]]  # only as many as needed: the newest
    wait_for(lambda: Job.objects.get(pk=victims[0]).state in ("queued", "backoff"))
    events = api(intern).get(f"/api/v1/jobs/{victims[0]}/events/").json()
    preempted = next(e for e in events if e["reason"] == "Preempted")
    assert "root/algorithm/video reclaimed its guaranteed quota" in preempted["message"]
    wait_for(lambda: Job.objects.get(pk=video).state == "running")


def test_lowering_the_interns_quota_reclaims_without_waiting_for_a_beat(
    api, intern, staff, celery_worker
):
    interns = [
        api(intern).post("/api/v1/jobs/", INTERN_JOB, format="json").json()["id"] for _ in range(4)
    ]
    wait_for(lambda: all(Job.objects.get(pk=pk).state == "running" for pk in interns))

    document = seed_tree_document()
    interns_node = document["spec"]["root"]["children"][2]
    for node in [interns_node, *interns_node["children"]]:
        node["max"]["cpu"] = 32
    response = api(staff).put("/api/v1/quota-tree/", document, format="json")
    assert response.status_code == 200, response.json()

    preempted = lambda: [pk for pk in interns if Job.objects.get(pk=pk).preemption_count]  # noqa: E731
    assert sorted(wait_for(lambda: len(preempted()) == 2 and preempted(), timeout=10)) == sorted(
        interns[2:]
    )


def test_on_a_cluster_the_watch_sees_a_finish_and_the_next_job_is_admitted_without_beat(
    api, member, celery_worker
):
    """A real cluster does not say when a job will end: its watch sees it. No beat runs,
    so nothing polls: the sync the reconcile asks for once it created the objects starts
    the watch, the watch's events ask for the syncs that see the first job run and end,
    and that end admits the second."""
    with on_kubernetes(KUBERNETES_WATCH=True) as kube:
        client = api(member)
        first = client.post("/api/v1/jobs/", RAY_JOB, format="json").json()["id"]
        second = client.post("/api/v1/jobs/", RAY_JOB, format="json").json()["id"]
        name = f"rayjob-video-{first}"
        wait_for(lambda: any(o["metadata"]["name"] == name for o in kube.objects("kuberay")))
        wait_for(lambda: Job.objects.get(pk=second).state == "backoff")  # no quota left
        # The emulator's watch starts at its opening (a real server's would replay what
        # changed since the listing's version): the changes come once it streams.
        wait_for(lambda: kube.watch_streams("kuberay"), timeout=30)

        kube.set_status("kuberay", "video", name, {"jobDeploymentStatus": "Running"})
        wait_for(lambda: Job.objects.get(pk=first).state == "running", timeout=30)
        done = {"jobDeploymentStatus": "Complete", "jobStatus": "SUCCEEDED"}
        kube.set_status("kuberay", "video", name, done)

        wait_for(lambda: Job.objects.get(pk=second).state == "admitted", timeout=30)
        assert Job.objects.get(pk=first).state == "succeeded"
        wait_for(
            lambda: any(
                o["metadata"]["name"] == f"rayjob-video-{second}" for o in kube.objects("kuberay")
            )
        )
