"""``caldera submit`` with the Kubernetes objects a team already has: a KubeRay RayJob, a
Kubeflow PyTorchJob and a Volcano Job with each plugin, as YAML files, against a live
server (tests/support/cli.py); a file of a job and its script's ConfigMap is one job."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from jobs.cluster import get_backend
from jobs.models import Job, State
from kube.quantity import format_resources

from ..api.test_native_manifests import NODES, REQUESTS, path_of
from ..support.cli import Cli, json_lines

pytestmark = pytest.mark.django_db(transaction=True)

# Short jobs in the video leaf (its namespace is video), each asking for a run of a second
# (Caldera's annotation: no Kubernetes object has a run time).
RAYJOB = """\
apiVersion: ray.io/v1
kind: RayJob
metadata:
  name: native-rayjob
  namespace: video
  annotations: {caldera.io/run-seconds: "1"}
spec:
  entrypoint: python /home/ray/samples/sample_code.py
  runtimeEnvYAML: |
    env_vars: {counter_name: test_counter}
  rayClusterSpec:
    headGroupSpec:
      rayStartParams: {}
      template:
        spec:
          containers:
            - name: ray-head
              image: rayproject/ray:2.36.1
              resources: {requests: {cpu: "1", memory: 1Gi}, limits: {cpu: "1", memory: 1Gi}}
              volumeMounts: [{mountPath: /home/ray/samples, name: code}]
          volumes:
            - name: code
              configMap:
                name: native-code
                items: [{key: sample_code.py, path: sample_code.py}]
    workerGroupSpecs:
      - groupName: small-group
        replicas: 1
        rayStartParams: {}
        template:
          spec:
            containers:
              - name: ray-worker
                image: rayproject/ray:2.36.1
                resources: {requests: {cpu: "1", memory: 1Gi}}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: native-code, namespace: video}
data:
  sample_code.py: |
    import ray
    ray.init()
"""
PYTORCHJOB = """\
apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata:
  name: native-pytorchjob
  labels: {kueue.x-k8s.io/queue-name: root-algorithm-video}
  annotations: {caldera.io/run-seconds: "1"}
spec:
  pytorchReplicaSpecs:
    Master:
      replicas: 1
      restartPolicy: OnFailure
      template:
        spec:
          containers:
            - name: pytorch
              image: pytorch/pytorch:2.4.0-cuda12.1-cudnn9-runtime
              command: [torchrun, train.py]
              resources: {limits: {cpu: "1", memory: 1Gi}}
    Worker:
      replicas: 1
      restartPolicy: OnFailure
      template:
        spec:
          containers:
            - name: pytorch
              image: pytorch/pytorch:2.4.0-cuda12.1-cudnn9-runtime
              command: [torchrun, train.py]
              resources: {limits: {cpu: "1", memory: 1Gi}}
"""
VOLCANO_RAY = """\
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata:
  name: native-volcano-ray
  annotations: {caldera.io/run-seconds: "1"}
spec:
  schedulerName: volcano
  queue: root-algorithm-video
  plugins: {ray: [], svc: []}
  tasks:
    - name: head
      replicas: 1
      template:
        spec:
          restartPolicy: OnFailure
          containers:
            - name: head
              image: rayproject/ray:2.36.1
              command: [/bin/sh, -c, python -c 'import ray; ray.init()']
              resources: {requests: {cpu: "1", memory: 1Gi}}
    - name: worker
      replicas: 1
      template:
        spec:
          restartPolicy: OnFailure
          containers:
            - name: worker
              image: rayproject/ray:2.36.1
              resources: {requests: {cpu: "1", memory: 1Gi}}
"""
VOLCANO_PYTORCH = """\
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata:
  name: native-volcano-pytorch
  labels: {volcano.sh/queue-name: root-algorithm-video}
  annotations: {caldera.io/run-seconds: "1"}
spec:
  plugins:
    pytorch: ["--master=master", "--worker=worker", "--port=23456"]
  tasks:
    - name: master
      replicas: 1
      policies: [{event: TaskCompleted, action: CompleteJob}]
      template:
        spec:
          containers:
            - name: master
              image: pytorch/pytorch:2.4.0-cuda12.1-cudnn9-runtime
              command: [python, train.py]
              resources: {requests: {cpu: "1", memory: 1Gi}}
    - name: worker
      replicas: 2
      template:
        spec:
          containers:
            - name: worker
              image: pytorch/pytorch:2.4.0-cuda12.1-cudnn9-runtime
              command: [python, train.py]
              resources: {requests: {cpu: "1", memory: 1Gi}}
"""
OBJECTS = {
    "rayjob.yaml": RAYJOB,
    "pytorchjob.yaml": PYTORCHJOB,
    "volcano-ray.yaml": VOLCANO_RAY,
    "volcano-pytorch.yaml": VOLCANO_PYTORCH,
}


def files(tmp_path, objects: dict[str, str]) -> list[str]:
    for name, text in objects.items():
        (tmp_path / name).write_text(text)
    return [str(tmp_path / name) for name in objects]


def test_each_kind_of_object_runs_with_wait_and_exits_0(cli: Cli, tmp_path, celery_worker):
    done = cli.run("submit", *files(tmp_path, OBJECTS), "--wait", "--output", "json")

    assert done.returncode == 0, done.stderr
    ended = [line for line in json_lines(done.stdout) if line["event"] == "ended"]
    assert sorted(line["state"] for line in ended) == [State.SUCCEEDED] * 4
    jobs = {job.name: job for job in Job.objects.select_related("queue")}
    assert {(job.kind, job.runtime) for job in jobs.values()} == {
        ("ray", "kuberay"), ("pytorch", "kubeflow"), ("ray", "volcano"), ("pytorch", "volcano")
    }  # fmt: skip
    assert {job.queue.name for job in jobs.values()} == {"root-algorithm-video"}
    rayjob = jobs["native-rayjob"]
    (_, config_map) = rayjob.manifest["objects"]  # the job and its ConfigMap, kept as sent
    assert config_map["data"] == {"sample_code.py": "import ray\nray.init()\n"}
    assert rayjob.run_seconds == 1
    assert jobs["native-volcano-ray"].entrypoint == "/bin/sh -c python -c 'import ray; ray.init()'"


def test_the_command_line_names_the_queue_of_an_object_that_names_none(cli: Cli, tmp_path):
    text = VOLCANO_RAY.replace("  queue: root-algorithm-video\n", "")
    (path,) = files(tmp_path, {"ray.yaml": text})

    nowhere = cli.run("submit", path)
    sent = cli.run("submit", path, "--queue", "root/algorithm/text", "--output", "json")

    assert (
        nowhere.returncode == 2 and "ray.yaml: queue: the object names no queue" in nowhere.stderr
    )
    assert sent.returncode == 0, sent.stderr
    assert json.loads(sent.stdout.splitlines()[0])["queue"] == "root-algorithm-text"


def test_what_no_tenant_may_get_exits_2_with_its_paths(cli: Cli, tmp_path):
    text = PYTORCHJOB.replace("              command: [torchrun, train.py]\n", (
        "              command: [torchrun, train.py]\n"
        "              securityContext: {privileged: true}\n"
    ), 1)  # fmt: skip
    (path,) = files(tmp_path, {"train.yaml": text})

    refused = cli.run("submit", path)

    assert refused.returncode == 2
    assert (
        "train.yaml: spec.pytorchReplicaSpecs.Master.template.spec.containers[0].securityContext"
        ".privileged: not allowed by the Pod Security Standards' baseline profile (Privileged "
        "Containers): a privileged container has the node's devices"
    ) in refused.stderr
    assert not Job.objects.exists()


def test_a_job_no_node_of_the_demo_takes_exits_2_naming_its_selector(cli: Cli, tmp_path):
    """The README's example, on the default nodes (an A100 on each, by its product label)."""
    h100 = "nvidia.com/gpu.product: NVIDIA-H100-80GB-HBM3"
    text = PYTORCHJOB.replace("        spec:\n          containers:\n", (
        f"        spec:\n          nodeSelector: {{{h100}}}\n          containers:\n"
    ))  # fmt: skip
    (path,) = files(tmp_path, {"train.yaml": text})

    refused = cli.run("submit", path)

    said = (
        "can never run: master asks for nodes with nodeSelector "
        "nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3; no node has those labels"
    )
    assert refused.returncode == 2
    assert f"train.yaml: spec.pytorchReplicaSpecs.Master.template.spec.nodeSelector: {said}" in (
        refused.stderr
    )
    readme = " ".join((Path(__file__).parents[2] / "README.md").read_text().split())
    assert f"`{said}`" in readme
    assert not Job.objects.exists()
    sent = cli.run("submit", files(tmp_path, {"a100.yaml": text.replace("H100-80GB-HBM3", (
        "A100-SXM4-80GB"))})[0], "--output", "json")  # fmt: skip
    assert sent.returncode == 0, sent.stderr


def test_a_file_s_volcano_queue_is_the_queue_s_own_once_the_queue_is_named(cli: Cli, tmp_path):
    queue = "apiVersion: scheduling.volcano.sh/v1beta1\nkind: Queue\nmetadata: {name: q}\n"
    (path,) = files(tmp_path, {"both.yaml": queue + "---\n" + VOLCANO_RAY})

    refused = cli.run("submit", path)
    sent = cli.run("submit", path, "--queue", "root/algorithm/video", "--output", "json")

    assert refused.returncode == 2
    assert "both.yaml: items[0]: a Volcano Queue is the quota tree's" in refused.stderr
    assert sent.returncode == 0, sent.stderr
    assert Job.objects.get().manifest["replaced"]["items[0]"]["to"] is None


def test_the_rayjob_docs_ci_md_shows_would_run_as_it_is(cli: Cli, tmp_path):
    guide = (Path(__file__).parents[2] / "docs" / "ci.md").read_text()
    section = guide.split("## The RayJob you already have", 1)[1]
    example = section.split("```yaml\n", 1)[1].split("```", 1)[0]
    (path,) = files(tmp_path, {"rayjob.yaml": example})

    checked = cli.run("submit", path, "--dry-run")

    assert checked.returncode == 0, checked.stderr
    assert "rayjob.yaml: fits now (position 1 in root-algorithm-video)" in checked.stdout


@pytest.mark.parametrize("name", sorted(REQUESTS))
def test_every_sample_and_seed_file_is_queued_as_it_is(cli: Cli, settings, name):
    settings.SIMULATED_CLUSTER_NODES = NODES  # seed 002's MetaX GPU nodes too
    get_backend.cache_clear()

    sent = cli.run(
        "submit", str(path_of(name)), "--queue", "root/algorithm/text", "--output", "json"
    )

    assert sent.returncode == 0, sent.stderr
    job = Job.objects.get(pk=json_lines(sent.stdout)[0]["id"])
    assert format_resources(job.request) == REQUESTS[name]
    assert job.manifest["objects"][0]["kind"] in ("RayJob", "PyTorchJob", "Job")
