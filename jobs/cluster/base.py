"""The one interface every cluster backend implements (docs/architecture.md section 8)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from jobs.cluster.spec import JobSpec
from kube.scheduling import ClusterNode

# The Warning events that say why a job's pods are not running (docs/architecture.md
# section 8): the scheduler's failures, which the start timeout quotes, and evictions.
SCHEDULING_FAILURES = ("GangFailedScheduling", "FailedScheduling", "Unschedulable")
WATCHED_REASONS = frozenset({*SCHEDULING_FAILURES, "Evicted"})


class ClusterUnavailable(Exception):
    """The cluster could not be reached or answered with a transient error; retry later."""


@dataclass(frozen=True)
class NamespaceTrouble:
    """Why a namespace takes none of Caldera's objects, in the server's words and what
    Caldera found: the namespace is not found (``gone``: nothing of Caldera's is left in
    it either), is being deleted, or Caldera's identity has no Role there."""

    reason: str
    gone: bool = False


class NamespaceUnavailable(ClusterUnavailable):
    """The cluster answers, but takes nothing of Caldera's in these namespaces for now:
    only their jobs wait; every other namespace goes on as before."""

    def __init__(self, troubles: dict[str, NamespaceTrouble]):
        super().__init__("; ".join(t.reason for _, t in sorted(troubles.items())))
        self.troubles = troubles


class LogUnavailable(Exception):
    """A pod's log cannot be read: the pod is not there, has not started, or the API server
    refused to read it. The message is a plain sentence for the person looking at the job.

    ``missing``: no such pod exists (not created yet, or gone), which the caller can word
    from what it knows of the job (``jobs.reads.logs``)."""

    def __init__(self, reason: str, *, missing: bool = False):
        super().__init__(reason)
        self.missing = missing


class Rejected(Exception):
    """The API server refused a request (400, 404 on create, 422, an admission 403...).

    ``retry``: the refusal is about the cluster's state, not the object, and may pass
    later (a full ResourceQuota): the job waits in its queue again instead of failing.
    ``namespace``: the refusal is that namespace's trouble (not found, being deleted, no
    Role for Caldera there), not the job's: the job waits while the namespace may come back.
    """

    def __init__(self, status: int, message: str, *, retry: bool = False, namespace: str = ""):
        super().__init__(f"{status}: {message}")
        self.status = status
        self.message = message
        self.retry = retry or bool(namespace)
        self.namespace = namespace


@dataclass(frozen=True)
class Refusal:
    """Why the cluster did not take a job's objects; ``retry`` and ``namespace`` as on
    Rejected."""

    reason: str
    retry: bool = False
    namespace: str = ""


@dataclass(frozen=True)
class ObjectRef:
    """Where a job's object is: its name, and on a real cluster its namespace and runtime."""

    name: str
    namespace: str = ""
    runtime: str = ""
    # The ConfigMaps that go with it: those the team sent with its object; None for the
    # one Caldera makes for a document's script (named after the object).
    config_maps: tuple[str, ...] | None = None


class Phase(StrEnum):
    """Where a job's object stands in the cluster, whatever its runtime says."""

    SUSPENDED = "Suspended"  # created suspended, waiting for its dequeue
    PENDING = "Pending"  # not all pods running
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"


FINISHED_PHASES = (Phase.SUCCEEDED, Phase.FAILED)


@dataclass(frozen=True)
class ObjectStatus:
    """What the cluster says about one job's object. A job whose object is not in the
    cluster is simply absent from the listing."""

    job_id: int
    object_name: str
    phase: Phase
    message: str = ""
    namespace: str = ""
    runtime: str = ""
    # Being deleted: it stays listed until the cluster lets it go (its pods terminate).
    deleting: bool = False
    # A RayJob's RayCluster, as KubeRay names it (``status.rayClusterName``): its head
    # Service, ``<ray_cluster>-head-svc``, serves the Ray dashboard. "" for other kinds.
    ray_cluster: str = ""

    @property
    def ref(self) -> ObjectRef:
        return ObjectRef(self.object_name, self.namespace, self.runtime)


@dataclass(frozen=True)
class ClusterEvent:
    """A Kubernetes event about one of the job's objects or pods.

    ``uid`` is the cluster's own identity of the event, the same at every sync while it
    repeats: a repeat raises ``count`` and moves ``at`` (its last time) on, and
    ``first_at`` (set once it has repeated) keeps its first time."""

    job_id: int
    type: str
    reason: str
    message: str
    involved: str
    at: datetime
    uid: str
    cycle: int | None = None
    count: int = 1
    first_at: datetime | None = None


@dataclass(frozen=True)
class Observation:
    statuses: list[ObjectStatus]
    events: list[ClusterEvent]
    # When the cluster will change by itself next (a simulated pod finishes). A real
    # cluster does not know; its changes arrive through the watch.
    next_change_at: datetime | None = None
    # The namespaces that could not be listed for their own trouble: the statuses say
    # nothing of their jobs (but of a namespace that is gone, whose objects went with it).
    troubled: dict[str, NamespaceTrouble] = field(default_factory=dict)


@dataclass(frozen=True)
class PodLog:
    """The end of one pod's log as the cluster gave it.

    ``truncated``: the text is not the whole log, because lines before the last
    ``tail_lines`` were left out or the text was cut at ``limit_bytes`` (then its last line
    may be cut short too)."""

    pod: str
    text: str
    truncated: bool = False
    # The exit code of its main container once it has ended, as the pod says (None: it
    # runs, or the cluster does not say).
    exit_code: int | None = None
    # Not read from the cluster now: the tail Caldera kept as the job ended, at this time
    # (its pods are gone since; ``jobs.engine.log_tails``).
    kept_at: datetime | None = None


@dataclass(frozen=True)
class LogAsked:
    """One job's main pod whose log ``ClusterBackend.pod_logs`` reads: where its object is,
    and its pod group's name (``head`` as ``pod_log`` takes it)."""

    job_id: int
    ref: ObjectRef
    head: str


@dataclass(frozen=True)
class Check:
    """One readiness check of ``ClusterBackend.checks``: what was asked, and the answer.
    A ``warning`` is worth an admin's look but does not stop Caldera from working."""

    what: str
    ok: bool
    detail: str = ""
    warning: bool = False


class ClusterBackend(ABC):
    """Creates, deletes and observes the objects of jobs. Every call is idempotent."""

    @abstractmethod
    def allocatable(self) -> dict[str, int] | None:
        """Total allocatable resources in base units, or None when unknown."""

    @abstractmethod
    def nodes(self) -> list[ClusterNode] | None:
        """Each node that takes new pods: its allocatable resources in base units, its
        labels and taints; None when unknown. Cheap enough for the submit path: read from
        memory or a cache, never raising because the cluster is away (None then, or the
        last nodes read). A job whose pod fits none of them, or that no node's labels and
        taints let run, can never run (``queues.placement``)."""

    @abstractmethod
    def apply(self, specs: Sequence[JobSpec], *, now: datetime) -> dict[int, Refusal]:
        """Make sure the objects of these jobs exist, suspended or not as each spec says
        (creating what exists is fine: an existing object is brought to the spec's suspend
        flag). Returns the jobs the cluster refused for good, with the reason."""

    @abstractmethod
    def remove(self, refs: Sequence[ObjectRef], *, now: datetime) -> None:
        """Make sure these objects are gone (deleting what is gone is fine)."""

    @abstractmethod
    def observe(
        self,
        *,
        now: datetime,
        namespaces: Collection[str],
        on_change: Callable[[], None] | None = None,
    ) -> Observation:
        """The status of every job object in these namespaces (those the tree binds, and
        those where jobs still hold quota), and their new events. ``on_change`` is called
        (from another thread) when a watch sees one of these objects start, finish, fail
        or go: the caller syncs again then, rather than at its next poll."""

    @abstractmethod
    def namespace_troubles(self, namespaces: Collection[str]) -> dict[str, NamespaceTrouble]:
        """Which of these namespaces cannot take jobs now, and why (not found, being
        deleted); the sync asks again about those in trouble that listed fine."""

    @abstractmethod
    def pod_log(
        self,
        ref: ObjectRef,
        *,
        job_id: int,
        head: str,
        tail_lines: int | None,
        limit_bytes: int,
        now: datetime,
    ) -> PodLog:
        """The log of the job's main pod: the Ray head or the PyTorch master, whose pod
        group the job names ``head`` ("head" or "master"). Its last ``tail_lines`` lines
        (None: from the start), at most ``limit_bytes`` bytes of them, as the API server's
        ``tailLines`` and ``limitBytes`` read them: the tail first, then the bytes from
        its start. LogUnavailable with a plain reason when the pod has not started, is
        gone or its log cannot be read; ClusterUnavailable when the cluster does not
        answer."""

    def pod_logs(
        self,
        asked: Sequence[LogAsked],
        *,
        tail_lines: int,
        limit_bytes: int,
        now: datetime,
    ) -> dict[int, PodLog | LogUnavailable | ClusterUnavailable]:
        """The end of each of these jobs' main pods' logs, by job id, as ``pod_log`` reads
        one: what the cluster sync keeps of jobs that ended. Each job's failure is its own
        answer, never raised, so one pod that is gone loses no other's log. A backend reads
        them together where it can (the Kubernetes backend's calls go out in parallel, the
        simulated one reads its pods in one query)."""
        answers: dict[int, PodLog | LogUnavailable | ClusterUnavailable] = {}
        for one in asked:
            try:
                answers[one.job_id] = self.pod_log(
                    one.ref,
                    job_id=one.job_id,
                    head=one.head,
                    tail_lines=tail_lines,
                    limit_bytes=limit_bytes,
                    now=now,
                )
            except (LogUnavailable, ClusterUnavailable) as error:
                answers[one.job_id] = error
        return answers

    @abstractmethod
    def publish_quota(
        self, *, tree: dict[str, Any] | None, queues: list[dict[str, Any]] | None
    ) -> None:
        """Write the quota tree for the cluster's own schedulers: the ElasticQuotaTree
        document and/or one Volcano Queue per leaf (None: leave that kind alone)."""

    @abstractmethod
    def close(self) -> None:
        """Let go of what the backend keeps open (the Kubernetes backend's watches)."""

    @abstractmethod
    def checks(self, *, namespaces: Iterable[str], publish: Sequence[str]) -> list[Check]:
        """Whether the cluster is ready for Caldera (``manage.py cluster_check``): its
        runtimes, permissions, the namespaces the tree binds, its nodes."""
