"""The embedded simulated cluster: nodes, gang placement, pod phases and real event formats.

``SimulatedCluster`` is a pure, deterministic engine over plain data and an explicit clock.
``SimulatedBackend`` keeps the engine's pods in the database (``SimulatedPod``) so that every
worker process sees the same cluster, and serialises changes behind an advisory lock.
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from functools import lru_cache

from django.db import connection, transaction

from jobs.cluster.spec import JobSpec
from jobs.models import SimulatedPod
from kube.quantity import KUBELET_MAX_PODS, PODS, ResourceList, parse_resources, total
from kube.scheduling import ClusterNode, Placement, Taint, parse_labels, parse_taints

from .base import (
    Check,
    ClusterBackend,
    ClusterEvent,
    ClusterUnavailable,
    LogAsked,
    LogUnavailable,
    NamespaceTrouble,
    ObjectRef,
    ObjectStatus,
    Observation,
    Phase,
    PodLog,
    Refusal,
    Rejected,
)
from .simulated_log import Timeline, simulated_log

PodPhase = SimulatedPod.Phase

_SIM_LOCK = 0x5EED_C1A5  # advisory lock id guarding the simulated cluster's rows

# A job whose env sets this to a number other than 0 has its pods exit with it at the end
# of their run: the simulated cluster's way to fail a job, for demos and tests of failure.
SIMULATED_EXIT_CODE = "CALDERA_SIMULATED_EXIT_CODE"


def parse_nodes(text: str) -> list[ClusterNode]:
    """``"4xcpu=16,memory=64Gi,nvidia.com/gpu=4 labels:pool=a100 taints:gpu=yes:NoSchedule"``
    -> nodes ``node-1`` ... ``node-4``, each with those resources, labels and taints.

    Groups are separated by ";"; a group without "COUNTx" is one node. After its resources,
    a group may give ``labels:`` (kubectl label's ``key=value`` pairs) and ``taints:``
    (kubectl taint's ``key[=value]:Effect``), each a comma-separated list, apart by a space.
    A node that names no ``pods`` holds a kubelet's default, 110, as a real node's
    allocatable says.
    """
    nodes: list[ClusterNode] = []
    for group in filter(None, (part.strip() for part in text.split(";"))):
        match = re.match(r"^(\d+)x(.*)$", group)
        count, body = (int(match[1]), match[2]) if match else (1, group)
        resources_text, *parts = body.split()
        pairs = dict(pair.split("=", 1) for pair in resources_text.split(",") if "=" in pair)
        resources = {PODS: KUBELET_MAX_PODS} | parse_resources("SIMULATED_CLUSTER_NODES", pairs)
        labels: dict[str, str] = {}
        taints: tuple[Taint, ...] = ()
        for part in parts:
            name, colon, rest = part.partition(":")
            if name == "labels" and colon:
                labels = parse_labels(rest)
            elif name == "taints" and colon:
                taints = parse_taints(rest)
            else:
                raise ValueError(
                    f"SIMULATED_CLUSTER_NODES: after a node's resources come labels:... and "
                    f"taints:..., got {part!r}"
                )
        for _ in range(count):
            name = f"node-{len(nodes) + 1}"
            labels_here = {"kubernetes.io/hostname": name} | labels
            nodes.append(ClusterNode(name, resources, labels_here, taints))
    if not nodes:
        raise ValueError(f"SIMULATED_CLUSTER_NODES describes no node: {text!r}")
    return nodes


@dataclass(frozen=True)
class Pod:
    name: str
    object_name: str
    job_id: int
    index: int
    requests: ResourceList
    run_seconds: float
    created_at: datetime
    phase: str = PodPhase.PENDING
    node: str = ""
    started_at: datetime | None = None
    cycle: int = 0
    last_cycle_at: datetime | None = None
    exit_code: int = 0
    placement: Placement = Placement()


def ray_cluster_name(object_name: str) -> str:
    """The RayCluster a RayJob of this name would run in, named as KubeRay names it (the
    job's name and five characters of its own), but the same at every sync. The simulated
    cluster does not know its objects' kinds: the sync keeps the name for RayJobs only."""
    suffix = hashlib.sha256(object_name.encode()).hexdigest()[:5]
    return f"{object_name[:57]}-{suffix}"


def exit_code(env: dict[str, str]) -> int:
    """The code a job's pods exit with: SIMULATED_EXIT_CODE's number, else 0."""
    try:
        return int(env.get(SIMULATED_EXIT_CODE, "0"))
    except ValueError:
        return 1  # asked to fail, in words the shell would not take either


class SimulatedCluster:
    """Places each job's pods all or none; runs them for ``run_seconds``; reports events."""

    def __init__(
        self,
        nodes: Sequence[ClusterNode],
        pods: Iterable[Pod] = (),
        *,
        cycle_seconds: float = 5.0,
    ):
        self.nodes = {node.name: node.allocatable for node in nodes}
        self.node_of = {node.name: node for node in nodes}
        self.pods: dict[str, Pod] = {pod.name: pod for pod in pods}
        self.cycle_seconds = cycle_seconds
        # Kept as pods change, so that creating thousands of objects in one session does not
        # rescan every pod for each: each object's pods, the objects still pending, and what
        # the running pods leave free.
        self._by_object: dict[str, list[str]] = {}
        for pod in sorted(self.pods.values(), key=lambda p: p.index):
            self._by_object.setdefault(pod.object_name, []).append(pod.name)
        self._pending = {p.object_name for p in self.pods.values() if p.phase == PodPhase.PENDING}
        self._free = {name: dict(resources) for name, resources in self.nodes.items()}
        for pod in self.pods.values():
            if pod.phase == PodPhase.RUNNING:
                self._take(pod)

    def allocatable(self) -> ResourceList:
        return total(self.nodes.values())

    def objects(self) -> dict[str, list[Pod]]:
        grouped: dict[str, list[Pod]] = {}
        for pod in sorted(self.pods.values(), key=lambda p: (p.created_at, p.object_name, p.index)):
            grouped.setdefault(pod.object_name, []).append(pod)
        return grouped

    def create(self, spec: JobSpec, *, now: datetime) -> None:
        """Create the job's pods, or bring existing ones to the spec's suspend flag.

        A suspended object's pods wait outside the scheduler, like the operators', which
        create no pods (or delete them) while ``suspend`` is true.
        """
        if spec.object_name in self._by_object:
            self._set_suspended(spec.object_name, spec.suspend, now)
            return
        names = self._by_object[spec.object_name] = []
        for index, (name, resources, placement) in enumerate(spec.placed_pods):
            self.pods[name] = Pod(
                name=name,
                object_name=spec.object_name,
                job_id=spec.id,
                index=index,
                requests=parse_resources("resources", resources) | {PODS: 1},
                run_seconds=spec.run_seconds,
                created_at=now,
                phase=PodPhase.SUSPENDED if spec.suspend else PodPhase.PENDING,
                exit_code=exit_code(spec.env),
                placement=placement,
            )
            names.append(name)
        if names and not spec.suspend:
            self._pending.add(spec.object_name)
            self._bind_on_arrival(spec.object_name, now)

    def _set_suspended(self, object_name: str, suspend: bool, now: datetime) -> None:
        pods = [self.pods[name] for name in self._by_object[object_name]]
        if suspend == all(pod.phase == PodPhase.SUSPENDED for pod in pods):
            return
        for pod in pods:
            if pod.phase == PodPhase.RUNNING:
                self._give_back(pod)
            self.pods[pod.name] = replace(
                pod,
                phase=PodPhase.SUSPENDED if suspend else PodPhase.PENDING,
                node="",
                started_at=None,
                created_at=now,
                cycle=0,
                last_cycle_at=None,
            )
        if suspend:
            self._pending.discard(object_name)
        else:
            self._pending.add(object_name)
            self._bind_on_arrival(object_name, now)

    def _bind_on_arrival(self, object_name: str, now: datetime) -> None:
        """Like the scheduler, bind a gang that fits as it arrives, unless older ones wait.

        Its run time starts now, not at the next observation; a gang that does not fit
        waits for the next tick, which reports why.
        """
        if self._pending != {object_name}:
            return
        gang = [self.pods[name] for name in self._by_object[object_name]]
        placement = _place(gang, self._free, self.node_of)
        if placement is not None:
            for pod in gang:
                self.pods[pod.name] = replace(
                    pod, phase=PodPhase.RUNNING, node=placement[pod.name], started_at=now
                )
            self._pending.discard(object_name)

    def delete(self, object_name: str) -> None:
        for name in self._by_object.pop(object_name, []):
            pod = self.pods.pop(name)
            if pod.phase == PodPhase.RUNNING:
                self._give_back(pod)
        self._pending.discard(object_name)

    def free(self) -> dict[str, ResourceList]:
        return {name: dict(resources) for name, resources in self._free.items()}

    def _take(self, pod: Pod) -> None:
        for resource, amount in pod.requests.items():
            self._free[pod.node][resource] = self._free[pod.node].get(resource, 0) - amount

    def _give_back(self, pod: Pod) -> None:
        for resource, amount in pod.requests.items():
            self._free[pod.node][resource] = self._free[pod.node].get(resource, 0) + amount

    def tick(self, *, now: datetime) -> Observation:
        """Advance the cluster to ``now``: finish pods, place gangs, emit events."""
        events: list[ClusterEvent] = []
        for name, pod in list(self.pods.items()):
            if (
                pod.phase == PodPhase.RUNNING
                and pod.started_at is not None
                and pod.started_at + timedelta(seconds=pod.run_seconds) <= now
            ):
                ended = PodPhase.FAILED if pod.exit_code else PodPhase.SUCCEEDED
                self.pods[name] = replace(pod, phase=ended)
                self._give_back(pod)
        free = self._free
        waiting = sorted(
            self._pending,
            key=lambda o: (self.pods[self._by_object[o][0]].created_at, o),
        )
        for object_name in waiting:
            pods = [self.pods[name] for name in self._by_object[object_name]]
            placement = _place(pods, free, self.node_of)
            if placement is not None:
                for pod in pods:
                    self.pods[pod.name] = replace(
                        pod, phase=PodPhase.RUNNING, node=placement[pod.name], started_at=now
                    )
                self._pending.discard(object_name)
                continue
            first = pods[0]
            due = first.last_cycle_at is None or now - first.last_cycle_at >= timedelta(
                seconds=self.cycle_seconds
            )
            if not due:
                continue
            cycle = first.cycle + 1
            messages = _gang_messages(pods, free, self.node_of)
            for pod, message in zip(pods, messages, strict=True):
                self.pods[pod.name] = replace(pod, cycle=cycle, last_cycle_at=now)
                events.append(
                    ClusterEvent(
                        job_id=pod.job_id,
                        type="Warning",
                        reason="GangFailedScheduling",
                        message=(
                            f"{pod.name} in gang failed to be scheduled in cycle {cycle}: {message}"
                        ),
                        involved=f"pod/{pod.name}",
                        at=now,
                        # A pod made again (the job is admitted again after a start
                        # timeout) starts its cycles anew: its events are new ones.
                        uid=f"sim/{pod.name}/{pod.created_at.timestamp():.6f}/{cycle}",
                        cycle=cycle,
                    )
                )
        return Observation(
            statuses=self.statuses(), events=events, next_change_at=self.next_change_at()
        )

    def next_change_at(self) -> datetime | None:
        """When a pod will finish or a waiting gang will be tried again, if ever."""
        moments = []
        for pods in self.objects().values():
            first = pods[0]
            if first.phase == PodPhase.PENDING and first.last_cycle_at is not None:
                moments.append(first.last_cycle_at + timedelta(seconds=self.cycle_seconds))
            moments.extend(
                pod.started_at + timedelta(seconds=pod.run_seconds)
                for pod in pods
                if pod.phase == PodPhase.RUNNING and pod.started_at is not None
            )
        return min(moments, default=None)

    def statuses(self) -> list[ObjectStatus]:
        statuses = []
        for object_name, pods in self.objects().items():
            phases = {pod.phase for pod in pods}
            failed = next((pod for pod in pods if pod.phase == PodPhase.FAILED), None)
            message = ""
            if failed is not None:
                phase = Phase.FAILED
                message = f"Pod {failed.name} exited with code {failed.exit_code}"
            elif phases == {PodPhase.SUSPENDED}:
                phase = Phase.SUSPENDED
            elif phases == {PodPhase.SUCCEEDED}:
                phase = Phase.SUCCEEDED
            elif phases <= {PodPhase.RUNNING, PodPhase.SUCCEEDED}:
                phase = Phase.RUNNING
            else:
                phase = Phase.PENDING
            statuses.append(
                ObjectStatus(
                    job_id=pods[0].job_id,
                    object_name=object_name,
                    phase=phase,
                    message=message,
                    ray_cluster=ray_cluster_name(object_name),
                )
            )
        return statuses


def _fits(requests: ResourceList, free: ResourceList) -> bool:
    return all(free.get(resource, 0) >= amount for resource, amount in requests.items())


def _allows(pod: Pod, node: ClusterNode) -> bool:
    return not pod.placement or pod.placement.allows(node, pod.requests)


def _place(
    pods: Sequence[Pod], free: dict[str, ResourceList], node_of: Mapping[str, ClusterNode]
) -> dict[str, str] | None:
    """Best-fit placement of a whole gang, each pod on a node its placement allows; on
    success ``free`` is updated, else untouched."""
    trial = {node: dict(resources) for node, resources in free.items()}
    placement: dict[str, str] = {}
    for pod in sorted(pods, key=lambda p: (-p.requests.get("cpu", 0), p.index)):
        fitting = [
            node
            for node in sorted(trial)
            if _allows(pod, node_of[node]) and _fits(pod.requests, trial[node])
        ]
        if not fitting:
            return None
        node = min(fitting, key=lambda n: (trial[n].get("cpu", 0), n))
        for resource, amount in pod.requests.items():
            trial[node][resource] = trial[node].get(resource, 0) - amount
        placement[pod.name] = node
    free.update(trial)
    return placement


def _insufficient(resource: str) -> str:
    """kube-scheduler's words for nodes short of a resource (its NodeResourcesFit plugin)."""
    return "Too many pods" if resource == PODS else f"Insufficient {resource}"


def _gang_messages(
    pods: Sequence[Pod], free: dict[str, ResourceList], node_of: Mapping[str, ClusterNode]
) -> list[str]:
    """kube-scheduler's summary for each pod: ``0/4 nodes are available: 4 Insufficient cpu.``

    Pods are tried in order against what the earlier pods of the gang would take, so a
    gang that is too large as a whole shows which of its pods find no node. A node the
    pod's placement keeps it from is counted as the NodeAffinity and TaintToleration
    filters say, and not for its resources.
    """
    trial = {node: dict(resources) for node, resources in free.items()}
    messages = []
    for pod in pods:
        short: dict[str, int] = {}
        fitting = []
        for node in sorted(trial):
            filtered = _filtered(pod, node_of[node])
            if filtered:
                short[filtered] = short.get(filtered, 0) + 1
                continue
            lacking = [r for r, amount in pod.requests.items() if trial[node].get(r, 0) < amount]
            for resource in lacking:
                why = _insufficient(resource)
                short[why] = short.get(why, 0) + 1
            if not lacking:
                fitting.append(node)
        if fitting:
            node = fitting[0]
            for resource, amount in pod.requests.items():
                trial[node][resource] = trial[node].get(resource, 0) - amount
        reasons = ", ".join(f"{count} {why}" for why, count in sorted(short.items()))
        if not reasons:
            reasons = f"{len(fitting)} node(s) fit the pod but not the whole gang"
        messages.append(f"0/{len(trial)} nodes are available: {reasons}.")
    return messages


def _filtered(pod: Pod, node: ClusterNode) -> str:
    """kube-scheduler's words when its node filters refuse the pod this node; "" if not."""
    if not pod.placement:
        return ""
    if not pod.placement.selects(node):
        return "node(s) didn't match Pod's node affinity/selector"
    taint = pod.placement.untolerated(node, pod.requests)
    return f"node(s) had untolerated taint {taint}" if taint is not None else ""


class SimulatedBackend(ClusterBackend):
    """The simulated cluster with its pods kept in the database."""

    def __init__(self, nodes: Sequence[ClusterNode], *, cycle_seconds: float):
        self.named_nodes = tuple(nodes)
        self.cycle_seconds = cycle_seconds

    def allocatable(self) -> ResourceList:
        return total(node.allocatable for node in self.named_nodes)

    def nodes(self) -> list[ClusterNode]:
        """The configured nodes (SIMULATED_CLUSTER_NODES), all of them schedulable."""
        return list(self.named_nodes)

    def apply(self, specs: Sequence[JobSpec], *, now: datetime) -> dict[int, Refusal]:
        with self._cluster() as cluster:
            for spec in specs:
                cluster.create(spec, now=now)
        return {}  # the simulated cluster takes every object the manifests describe

    def remove(self, refs: Sequence[ObjectRef], *, now: datetime) -> None:
        with self._cluster() as cluster:
            for ref in refs:
                cluster.delete(ref.name)

    def observe(
        self,
        *,
        now: datetime,
        namespaces: Collection[str] = (),
        on_change: Callable[[], None] | None = None,
    ) -> Observation:
        """Every job's pods: the simulated cluster has no namespaces to tell apart, and says
        when it changes next instead of calling ``on_change``."""
        with self._cluster() as cluster:
            return cluster.tick(now=now)

    def namespace_troubles(self, namespaces: Collection[str]) -> dict[str, NamespaceTrouble]:
        """None: the simulated cluster takes jobs in every namespace."""
        return {}

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
        """The log the job's first pod (its head or master) has written by ``now``
        (``jobs.cluster.simulated_log``), read without the cluster's lock: it changes
        nothing."""
        pod = SimulatedPod.objects.filter(object_name=ref.name, index=0).first()
        return _pod_log(
            pod, ref, head=head, now=now, tail_lines=tail_lines, limit_bytes=limit_bytes
        )

    def pod_logs(
        self,
        asked: Sequence[LogAsked],
        *,
        tail_lines: int,
        limit_bytes: int,
        now: datetime,
    ) -> dict[int, PodLog | LogUnavailable | ClusterUnavailable]:
        """Each log as ``pod_log`` reads one, the pods read in one query."""
        pods = {
            pod.object_name: pod
            for pod in SimulatedPod.objects.filter(
                object_name__any=[one.ref.name for one in asked], index=0
            )
        }
        answers: dict[int, PodLog | LogUnavailable | ClusterUnavailable] = {}
        for one in asked:
            try:
                answers[one.job_id] = _pod_log(
                    pods.get(one.ref.name),
                    one.ref,
                    head=one.head,
                    now=now,
                    tail_lines=tail_lines,
                    limit_bytes=limit_bytes,
                )
            except LogUnavailable as error:
                answers[one.job_id] = error
        return answers

    def publish_quota(self, *, tree: dict | None, queues: list[dict] | None) -> None:
        """Refused: the simulated cluster places gangs and reads no quota objects, so the
        settings allow CLUSTER_PUBLISH_QUOTA only with the Kubernetes backend."""
        raise Rejected(400, "the simulated cluster has no scheduler that reads quota objects")

    def close(self) -> None:
        """Nothing to let go: the simulated cluster keeps its state in the database, and
        each call opens and ends its own session."""

    def checks(self, *, namespaces: Iterable[str], publish: Sequence[str]) -> list[Check]:
        """Refused: there is no API server to ask; the checks are for a real cluster."""
        raise Rejected(
            400,
            "CLUSTER_BACKEND is simulated: set CLUSTER_BACKEND=kubernetes (docs/deployment.md, "
            "'Connecting to a Kubernetes cluster')",
        )

    def _cluster(self) -> _Session:
        return _Session(self)


class _Session:
    """Load the cluster under an advisory lock, let the caller change it, save the changes."""

    def __init__(self, backend: SimulatedBackend):
        self.backend = backend

    def __enter__(self) -> SimulatedCluster:

        self.atomic = transaction.atomic()
        self.atomic.__enter__()
        try:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_xact_lock(%s)", [_SIM_LOCK])
            rows = list(SimulatedPod.objects.all())
        except BaseException:
            # __exit__ is not called when __enter__ fails: leave the atomic block here, or
            # the connection stays "in a transaction" for good and, once lost (the database
            # dropped it), is never replaced; every later task of the process would fail.
            self.atomic.__exit__(*sys.exc_info())
            raise
        self.before = {row.name: _pod(row) for row in rows}
        self.cluster = SimulatedCluster(
            self.backend.named_nodes, self.before.values(), cycle_seconds=self.backend.cycle_seconds
        )
        return self.cluster

    def __exit__(self, exc_type, exc, tb) -> None:

        try:
            if exc_type is None:
                after = self.cluster.pods
                gone = [name for name in self.before if name not in after]
                if gone:
                    SimulatedPod.objects.filter(name__any=gone).delete()
                new = [pod for name, pod in after.items() if name not in self.before]
                SimulatedPod.objects.bulk_create([_row(pod) for pod in new])
                changed = [
                    pod
                    for name, pod in after.items()
                    if name in self.before and self.before[name] != pod
                ]
                if changed:
                    with connection.cursor() as cursor:
                        cursor.executemany(
                            f"UPDATE {SimulatedPod._meta.db_table} SET phase = %s, node = %s,"
                            " started_at = %s, cycle = %s, last_cycle_at = %s WHERE name = %s",
                            [
                                (p.phase, p.node, p.started_at, p.cycle, p.last_cycle_at, p.name)
                                for p in changed
                            ],
                        )
        finally:
            self.atomic.__exit__(exc_type, exc, tb)


def _pod_log(
    pod: SimulatedPod | None,
    ref: ObjectRef,
    *,
    head: str,
    now: datetime,
    tail_lines: int | None,
    limit_bytes: int,
) -> PodLog:
    """The log of a job's first pod as read from its row (None: there is none)."""
    if pod is None:
        raise LogUnavailable(f"The {head} pod of {ref.name} is not there.", missing=True)
    if pod.phase == PodPhase.SUSPENDED:
        raise LogUnavailable(
            f"Pod {pod.name} has not started: its job is suspended until it leaves its queue."
        )
    if pod.started_at is None:
        raise LogUnavailable(
            f"Pod {pod.name} has no log yet: it waits for the scheduler to place the "
            "job's pods on nodes."
        )
    timeline = Timeline(
        pod.name, pod.node, pod.requests, pod.started_at, pod.run_seconds, pod.exit_code
    )
    return simulated_log(
        timeline,
        finished=pod.phase in (PodPhase.SUCCEEDED, PodPhase.FAILED),
        now=now,
        tail_lines=tail_lines,
        limit_bytes=limit_bytes,
    )


def _pod(row) -> Pod:
    return Pod(
        name=row.name,
        object_name=row.object_name,
        job_id=row.job_id,
        index=row.index,
        requests=dict(row.requests),
        run_seconds=row.run_seconds,
        created_at=row.created_at,
        phase=row.phase,
        node=row.node,
        started_at=row.started_at,
        cycle=row.cycle,
        last_cycle_at=row.last_cycle_at,
        exit_code=row.exit_code,
        placement=_placement(json.dumps(row.placement, sort_keys=True))
        if row.placement
        else Placement(),
    )


@lru_cache(maxsize=1024)
def _placement(said: str) -> Placement:
    """A pod row's placement, read once for all the pods that say the same (a job's pods,
    a node pool's): a session reads every pod."""
    return Placement.from_json(json.loads(said))


def _row(pod: Pod):

    return SimulatedPod(
        name=pod.name,
        object_name=pod.object_name,
        job_id=pod.job_id,
        index=pod.index,
        requests=pod.requests,
        run_seconds=pod.run_seconds,
        created_at=pod.created_at,
        phase=pod.phase,
        node=pod.node,
        started_at=pod.started_at,
        cycle=pod.cycle,
        last_cycle_at=pod.last_cycle_at,
        exit_code=pod.exit_code,
        placement=pod.placement.as_json(),
    )
