"""Plain data that describes a job to the manifests and the cluster backends.

Manifests and backends take these, never ORM objects, so they are tested without a
database and swapped by settings.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from kube.quantity import add, format_resources, parse_resources
from kube.scheduling import Placement

# KubeRay's autoscaler runs as a container beside the Ray head of a cluster that
# autoscales; Caldera sets its resources (KubeRay's defaults) so that the quota request
# and the pod the scheduler places count the same.
AUTOSCALER_RESOURCES = {"cpu": "500m", "memory": "512Mi"}
# How long the simulated cluster runs a job that declares no expected run time.
DEFAULT_RUN_SECONDS = 60.0


@dataclass(frozen=True)
class PodGroup:
    """A set of identical pods: the head (or master) or one worker group.

    ``resources`` holds Kubernetes quantity strings as the user gave them
    (``{"cpu": "4", "memory": "4G", "nvidia.com/gpu": "1"}``); they are the pod's
    requests, and its limits but where ``limits`` says more.

    A Ray worker group whose ``max_replicas`` is above ``replicas`` autoscales (KubeRay's
    in-tree autoscaler): it starts with ``replicas`` pods, never has fewer, and may grow to
    ``max_replicas``. None means a fixed number of pods.
    """

    name: str
    replicas: int
    resources: dict[str, str]
    max_replicas: int | None = None
    # What each pod may use beyond ``resources`` (its requests), by resource; a resource
    # not named here is limited at its request.
    limits: dict[str, str] = field(default_factory=dict)
    # Where its pods may run, as the team's template says (a document's pods: anywhere).
    placement: Placement = Placement()

    @property
    def autoscales(self) -> bool:
        return self.max_replicas is not None and self.max_replicas > self.replicas


@dataclass(frozen=True)
class JobSpec:
    id: int
    name: str
    object_name: str
    namespace: str
    kind: str  # "ray" or "pytorch"
    runtime: str  # "kuberay", "kubeflow" or "volcano"
    image: str
    head: PodGroup
    workers: tuple[PodGroup, ...]
    queue_name: str  # "root-algorithm-video"
    queue_path: str  # "root/algorithm/video"
    department: str
    owner: str
    priority: int = 0
    entrypoint: str = ""
    command: tuple[str, ...] = ()
    script: str = ""
    script_filename: str = "main.py"
    priority_class: str = ""
    run_seconds: float = DEFAULT_RUN_SECONDS
    pip: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    # Mounted and read by every pod: claims ({"claim", "path", "read_only"}), a
    # memory-backed /dev/shm of this size, variables from Secrets ({"NAME": "secret/key"}).
    claims: tuple[dict[str, Any], ...] = ()
    shm: str = ""
    secret_env: dict[str, str] = field(default_factory=dict)
    suspend: bool = False
    enqueued_at: datetime | None = None
    dequeued_at: datetime | None = None
    extra_labels: dict[str, str] = field(default_factory=dict)
    # "volcano" when the cluster schedules gangs with Volcano: a RayJob then names its
    # Volcano queue (the label KubeRay's Volcano integration reads).
    batch_scheduler: str = ""
    # The objects the team sent, the job's first, when it sent them: Caldera creates these
    # with its own additions (jobs.cluster.manifests.objects) instead of making its own.
    objects: tuple[dict[str, Any], ...] = ()
    # The node pool the admission cycle placed it in ("" for none), and what the pool adds
    # to every pod: its node labels and tolerations (queues.pools).
    pool: str = ""
    pool_placement: Placement = Placement()

    @property
    def autoscales(self) -> bool:
        """KubeRay runs its autoscaler for this job (Ray on KubeRay only)."""
        return self.runtime == "kuberay" and any(group.autoscales for group in self.workers)

    @property
    def pods(self) -> list[tuple[str, dict[str, str]]]:
        """Every pod of the gang as (pod name, resources), head first (``placed_pods``)."""
        return [(name, resources) for name, resources, _ in self.placed_pods]

    @property
    def placed_pods(self) -> list[tuple[str, dict[str, str], Placement]]:
        """Every pod of the gang as (pod name, resources, where it may run), head first.

        Names follow the operators: ``<job>-master-0`` and ``<job>-worker-1`` for a
        PyTorchJob and for a Volcano Job (``<job>-<task>-<n>``), ``<group>-worker-<n>``
        inside a KubeRay cluster. An autoscaling group counts at its ``replicas``, the
        pods it starts with (the simulated cluster does not autoscale), and the head then
        carries KubeRay's autoscaler container too.
        """
        head = self.head.resources
        if self.autoscales:
            head = format_resources(
                add(
                    parse_resources("head", head),
                    parse_resources("autoscaler", AUTOSCALER_RESOURCES),
                )
            )
        pool = self.pool_placement
        pods = [(f"{self.object_name}-{self.head.name}-0", head, self.head.placement.joined(pool))]
        for group in self.workers:
            flat = self.kind == "pytorch" or self.runtime == "volcano"
            prefix = "" if flat else f"{group.name}-"
            for index in range(group.replicas):
                pods.append(
                    (
                        f"{self.object_name}-{prefix}worker-{index}",
                        group.resources,
                        group.placement.joined(pool),
                    )
                )
        return pods
