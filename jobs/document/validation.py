"""The limits a job and a request must keep, and the refusal that names what broke them.

``jobs.document.schema`` declares the job document with these limits; the services, the pages
and the API raise JobInvalid with each field's path (``workers[0].resources.cpu``) and
the reason.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from django.conf import settings

from jobs.cluster.spec import AUTOSCALER_RESOURCES
from jobs.models import KINDS, Job, kind_shape
from kube.quantity import PODS, ResourceList, add, parse_resources
from kube.scheduling import Placement

NAME_MAX = 40  # leaves room for "-<id>" within Kubernetes' 63 characters
# A job's name and a worker group's: a DNS-1123 label, as Kubernetes names its objects.
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
FILE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")  # a script's, as its ConfigMap key
MAX_REPLICAS = 1000
MIN_RUN_SECONDS = 0.01
MAX_RUN_SECONDS = 7 * 24 * 3600
MAX_SCRIPT_BYTES = 1024 * 1024  # a ConfigMap holds at most 1 MiB
PRIORITY_RANGE = (-1000, 1000)
MAX_PIP = 100
MAX_ENV = 100
MAX_INTEGER_DIGITS = 18  # every integer field fits far inside; a bigint holds 18 digits
PAGE_MAX = 500  # the most entries one page of a list holds
OFFSET_MAX = 10_000_000  # far past the deepest queue; a larger OFFSET overflowed a bigint
# An OCI image reference, as the distribution project's reference grammar (the one
# containerd and the kubelet parse) reads it: [registry[:port]/]path[:tag][@digest].
_DOMAIN_PART = r"[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?"
_REGISTRY = rf"(?:{_DOMAIN_PART}(?:\.{_DOMAIN_PART})*|\[[0-9a-fA-F:]+\])(?::[0-9]+)?"
_PATH_PART = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_TAG = r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}"
_DIGEST = r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}"
IMAGE_PATTERN = rf"^(?:{_REGISTRY}/)?{_PATH_PART}(?:/{_PATH_PART})*(?::{_TAG})?(?:@{_DIGEST})?$"
# What the schema declares of it: the characters a reference is made of. The grammar above
# is more than an OpenAPI pattern can carry for the tools that read it; the rest of it is a
# declared refusal of ``image``.
IMAGE_CHARACTERS = r"^[A-Za-z0-9\[][A-Za-z0-9._/:@\[\]+-]*$"
IMAGE_MAX = 500  # a name of 255, a tag of 128 and a digest, with room to spare
IMAGE_EXAMPLE = "rayproject/ray:2.36.1, or registry.example.com:5000/team/train@sha256:<hex>"

# The runtimes each kind can run on; a cluster offers some of them (settings.CLUSTER_RUNTIMES).
RUNTIMES: dict[str, tuple[str, ...]] = {kind: shape.runtimes for kind, shape in KINDS.items()}


def runtimes_offered(kind: str) -> list[str]:
    """The runtimes this cluster offers for ``kind``, the default first."""
    return [r for r in settings.CLUSTER_RUNTIMES if r in RUNTIMES.get(kind, ())]


class JobInvalid(ValueError):
    """A job document or request refused: ``errors`` maps each field's path to its reasons."""

    def __init__(self, errors: Mapping[str, str | list[str]]):
        self.errors = {k: v if isinstance(v, list) else [v] for k, v in errors.items()}
        super().__init__("; ".join(f"{k}: {m}" for k, ms in self.errors.items() for m in ms))


def autoscales(runtime: str, workers: Sequence[Mapping]) -> bool:
    """KubeRay runs its autoscaler beside the head: a group may grow past its replicas."""
    return runtime == Job.Runtime.KUBERAY and any(
        (g.get("max_replicas") or 0) > g.get("replicas", 0) for g in workers
    )


def pod_count(workers: Sequence[Mapping], *, most: bool = False) -> int:
    """A job's pods: its head or master and every worker. An autoscaling group counts at
    its replicas, the gang that starts (what quota holds), or with ``most`` at its
    max_replicas, the most it can run (what JOB_MAX_PODS bounds)."""
    return 1 + sum(
        max(group.get("replicas", 0), group.get("max_replicas") or 0)
        if most
        else group.get("replicas", 0)
        for group in workers
    )


def pods_request(workers: Sequence[Mapping]) -> ResourceList:
    """The part of a job's request that counts its pods (``pods``, as a ResourceQuota)."""
    return {PODS: pod_count(workers)}


def job_pods(
    *, kind: str, runtime: str, head: Mapping, workers: Sequence[Mapping]
) -> dict[str, ResourceList]:
    """Each kind of pod of a job, named by its field: ``head`` (``master`` for PyTorch),
    with KubeRay's autoscaler container when a group autoscales, and ``workers[i]`` for
    every group that can have pods (an autoscaling group at zero replicas too: the pods
    it adds must fit a node as well). ``head`` and ``workers`` are as a draft or a job
    holds them, already checked; the node check (``queues.placement``) reads these."""
    head_field = kind_shape(kind).head
    head_request = parse_resources(head_field, head.get("resources"))
    if autoscales(runtime, workers):
        head_request = add(head_request, parse_resources("autoscaler", AUTOSCALER_RESOURCES))
    pods = {head_field: head_request}
    for index, group in enumerate(workers):
        if group.get("replicas", 0) or group.get("max_replicas"):
            pods[f"workers[{index}]"] = parse_resources(f"workers[{index}]", group.get("resources"))
    return pods


def job_placements(*, kind: str, head: Mapping, workers: Sequence[Mapping]) -> dict[str, Placement]:
    """Where each kind of pod of ``job_pods`` may run, for those that say (a team's object
    with a ``nodeSelector``, required node affinity or tolerations), named as there."""
    placements = {}
    for field_name, group in [(kind_shape(kind).head, head)] + [
        (f"workers[{index}]", group) for index, group in enumerate(workers)
    ]:
        if group.get("placement"):
            placements[field_name] = Placement.from_json(group["placement"])
    return placements
