"""A job's log through the Kubernetes backend, against the emulator's API server (real HTTP,
the official client). The test plays each runtime's operator, making the job's pods from
the pod templates of the manifests Caldera wrote, and the kubelet, writing their logs.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pytest
from kubernetes.client import ApiException

from jobs.cluster import ClusterUnavailable, LogUnavailable, ObjectRef
from jobs.cluster.kubernetes import log_window
from jobs.cluster.spec import JobSpec, PodGroup

from ..support.kube_emulator import status
from ..support.kubernetes import backend_for, play_operator
from ..support.specs import pytorch_spec, ray_spec, volcano_spec

NOW = datetime(2026, 11, 23, 10, 0, tzinfo=UTC)
TEN_LINES = "".join(f"step {n}\n" for n in range(10))


@pytest.fixture
def backend(kube):
    return backend_for(kube)


def ref_of(spec: JobSpec) -> ObjectRef:
    return ObjectRef(spec.object_name, spec.namespace, spec.runtime)


def read(backend, spec: JobSpec, *, tail_lines: int | None = None, limit_bytes: int = 10_000):
    return backend.pod_log(
        ref_of(spec),
        job_id=spec.id,
        head=spec.head.name,
        tail_lines=tail_lines,
        limit_bytes=limit_bytes,
        now=NOW,
    )


# -- finding the main pod -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "selector"),
    [
        (ray_spec(), "caldera.io/job-id=7,ray.io/node-type=head"),
        (
            pytorch_spec(),
            "caldera.io/job-id=9,training.kubeflow.org/job-name=resnet-ddp-9,"
            "training.kubeflow.org/replica-type=master",
        ),
        (
            volcano_spec(),
            "caldera.io/job-id=11,volcano.sh/job-name=rayjob-video-11,volcano.sh/task-spec=head",
        ),
        (
            pytorch_spec(id=12, object_name="resnet-ddp-12", runtime="volcano"),
            "caldera.io/job-id=12,volcano.sh/job-name=resnet-ddp-12,volcano.sh/task-spec=master",
        ),
    ],
    ids=["kuberay", "kubeflow", "volcano-ray", "volcano-pytorch"],
)
def test_the_head_or_master_pod_is_found_by_its_labels_and_its_log_read(
    kube, backend, spec, selector
):
    head = play_operator(kube, spec)
    play_operator(kube, replace_id(spec, 99), suffix="other")  # another job's pods beside

    log = read(backend, spec)

    assert (log.pod, log.text, log.truncated) == (head, f"I am {head}\n", False)
    [listing] = kube.requests("get", f"/api/v1/namespaces/{spec.namespace}/pods?")
    assert listing.params["labelSelector"] == selector


def replace_id(spec: JobSpec, job_id: int) -> JobSpec:
    name = spec.object_name.rsplit("-", 1)[0]
    return replace(spec, id=job_id, object_name=f"{name}-{job_id}")


def test_the_head_is_read_from_its_own_container_beside_kuberays_autoscaler(kube, backend):
    spec = ray_spec(workers=(PodGroup("small-group", 2, {"cpu": "4"}, max_replicas=6),))
    head = play_operator(kube, spec)
    kube.write_log("video", head, "the autoscaler's own words\n", container="autoscaler")

    assert read(backend, spec).text == f"I am {head}\n"

    [reading] = kube.requests("get", f"/pods/{head}/log")
    assert reading.params["container"] == "ray-head"


def test_a_pod_being_replaced_gives_way_to_its_replacement(kube, backend):
    spec = pytorch_spec()
    labels = {
        "caldera.io/job-id": "9",
        "training.kubeflow.org/job-name": "resnet-ddp-9",
        "training.kubeflow.org/replica-type": "master",
    }
    kube.add_pod("text", "resnet-ddp-9-master-0", labels=labels, created="2026-11-23T10:00:00Z")
    kube.write_log("text", "resnet-ddp-9-master-0", "the first try\n")
    # Terminating within its grace period (the finalizer only keeps kmock from dropping it).
    terminating = {"deletionTimestamp": "2026-11-23T10:05:00Z", "finalizers": ["grace"]}
    kube.core.patch_namespaced_pod("resnet-ddp-9-master-0", "text", {"metadata": terminating})
    kube.add_pod("text", "resnet-ddp-9-master-1", labels=labels, created="2026-11-23T10:05:01Z")
    kube.write_log("text", "resnet-ddp-9-master-1", "the second try\n")

    assert read(backend, spec).text == "the second try\n"


# -- how much of it ------------------------------------------------------------------------


def test_tail_lines_are_asked_for_and_honoured_with_one_more_to_know_the_log_goes_on(kube, backend):
    spec = ray_spec()
    head = play_operator(kube, spec)
    kube.write_log("video", head, TEN_LINES)

    last = read(backend, spec, tail_lines=3)
    everything = read(backend, spec, tail_lines=10)

    assert (last.text, last.truncated) == ("step 7\nstep 8\nstep 9\n", True)
    assert (everything.text, everything.truncated) == (TEN_LINES, False)
    asked = [r.params for r in kube.requests("get", f"/pods/{head}/log")]
    assert [(p["tailLines"], p["limitBytes"]) for p in asked] == [("4", "10001"), ("11", "10001")]


def test_limit_bytes_is_asked_for_and_honoured_and_says_when_it_cut(kube, backend):
    spec = ray_spec()
    head = play_operator(kube, spec)
    kube.write_log("video", head, TEN_LINES)  # 70 bytes

    cut = read(backend, spec, limit_bytes=16)
    whole = read(backend, spec, limit_bytes=70)

    assert (cut.text, cut.truncated) == ("step 0\nstep 1\nst", True)
    assert (whole.text, whole.truncated) == (TEN_LINES, False)
    asked = [r.params for r in kube.requests("get", f"/pods/{head}/log")]
    assert [p["limitBytes"] for p in asked] == ["17", "71"] and "tailLines" not in asked[0]


def test_lines_end_with_a_newline_alone_as_the_kubelet_counts_them(kube, backend):
    spec = ray_spec()
    head = play_operator(kube, spec)
    kube.write_log("video", head, "epoch 1: 10%\r50%\r100%\nsaved\nepoch 2: 10%")

    last_two = read(backend, spec, tail_lines=2)
    last = read(backend, spec, tail_lines=1)
    three = read(backend, spec, tail_lines=3)

    assert (last_two.text, last_two.truncated) == ("saved\nepoch 2: 10%", True)
    assert (last.text, last.truncated) == ("epoch 2: 10%", True)
    assert (three.text, three.truncated) == ("epoch 1: 10%\r50%\r100%\nsaved\nepoch 2: 10%", False)


def test_a_character_cut_in_two_at_the_limit_is_replaced_not_an_error():
    log = log_window("p", "naïve\n".encode(), tail_lines=None, limit_bytes=3)

    assert (log.text, log.truncated) == ("na\ufffd", True)


# -- when there is nothing to read ---------------------------------------------------------


def test_a_job_without_its_pod_is_told_plainly(kube, backend):
    with pytest.raises(LogUnavailable) as raised:
        read(backend, ray_spec())

    assert raised.value.missing
    assert str(raised.value) == "The head pod of rayjob-video-7 in video is not there."


def test_a_pod_deleted_since_it_was_listed_is_gone_in_the_servers_words(kube, backend):
    spec = pytorch_spec()
    master = play_operator(kube, spec)
    gone = status(404, "NotFound", f'pods "{master}" not found')
    kube.answer_next("get", f"/api/v1/namespaces/text/pods/{master}/log", gone)

    with pytest.raises(LogUnavailable) as raised:
        read(backend, spec)

    assert raised.value.missing
    assert str(raised.value) == f'Pod {master} is gone: pods "{master}" not found.'


def test_a_container_waiting_to_start_is_told_in_the_kubelets_words(kube, backend):
    spec = ray_spec()
    head = play_operator(kube, spec, waiting="ContainerCreating")

    with pytest.raises(LogUnavailable) as raised:
        read(backend, spec)

    assert not raised.value.missing
    assert str(raised.value) == (
        f'The log of pod {head} cannot be read: container "ray-head" in pod "{head}" is '
        "waiting to start: ContainerCreating."
    )


def test_a_pod_on_no_node_yet_is_told_so_rather_than_read_as_an_empty_log(kube, backend):
    spec = volcano_spec()
    head = play_operator(kube, spec, node="")

    with pytest.raises(LogUnavailable, match=f"Pod {head} has no log yet: it waits for the "):
        read(backend, spec)

    assert kube.requests("get", "/log") == []  # the server would answer with nothing at all


# -- when the cluster does not answer ------------------------------------------------------


def test_a_slow_log_times_out_after_the_log_timeout_and_is_not_tried_again(kube):
    backend = backend_for(kube, timeout_seconds=5.0, log_timeout_seconds=0.3)
    spec = ray_spec()
    head = play_operator(kube, spec)
    kube.pause_next("get", f"/api/v1/namespaces/video/pods/{head}/log", seconds=1.5)

    with pytest.raises(ClusterUnavailable, match=f"read the log of pod {head} in video"):
        read(backend, spec)

    assert len(kube.requests("get", f"/pods/{head}/log")) == 1


def test_a_server_error_makes_the_log_unavailable_after_one_try(kube, backend):
    spec = pytorch_spec()
    play_operator(kube, spec)
    kube.answer_next("get", "/api/v1/namespaces/text/pods", 503)

    with pytest.raises(ClusterUnavailable, match="HTTP 503"):
        read(backend, spec)

    assert len(kube.requests("get", "/api/v1/namespaces/text/pods?")) == 1


def test_a_failed_log_read_says_what_the_server_said(kube, backend):
    spec = ray_spec()
    head = play_operator(kube, spec)
    # A real server's answer when it has no address of the pod's node to reach its kubelet.
    failed = status(500, "InternalError", "no preferred addresses found; known addresses: []")
    kube.answer_next("get", f"/api/v1/namespaces/video/pods/{head}/log", failed)

    with pytest.raises(ClusterUnavailable) as raised:
        read(backend, spec)

    assert str(raised.value) == (
        f"read the log of pod {head} in video: HTTP 500: no preferred addresses found; "
        "known addresses: []"
    )


def test_a_cluster_that_refuses_connections_is_unavailable(kube):
    backend = backend_for(kube, host="http://127.0.0.1:9")  # nothing listens on port 9

    with pytest.raises(ClusterUnavailable, match="list the head pod of rayjob-video-7"):
        read(backend, ray_spec())


# -- the emulator, held to a real server's answers -----------------------------------------


def test_the_emulator_serves_a_pods_log_as_a_real_server_does(kube):
    kube.add_pod("video", "two", labels={}, containers=("ray-head", "autoscaler"))
    kube.write_log("video", "two", TEN_LINES)

    answers = []
    for name, params in [
        ("gone", {}),
        ("two", {}),
        ("two", {"container": "sidecar"}),
    ]:
        with pytest.raises(ApiException) as raised:
            kube.core.read_namespaced_pod_log(name, "video", **params)
        answers.append((raised.value.status, raised.value.body))
    text = kube.core.read_namespaced_pod_log(
        "two", "video", container="ray-head", tail_lines=4, limit_bytes=10
    )

    assert [status for status, _ in answers] == [404, 400, 400]
    assert '"message": "pods \\"gone\\" not found"' in answers[0][1]
    assert (
        "a container name must be specified for pod two, choose one of: [ray-head autoscaler]"
        in answers[1][1]
    )
    assert "container sidecar is not valid for pod two" in answers[2][1]
    assert text == "step 6\nste"  # the last 4 lines, then their first 10 bytes
