"""The job-to-spec mapping: what a job row becomes for the manifests and the backends.

``job_spec`` turns a job into the plain ``JobSpec`` that ``jobs.cluster.manifests`` and
``jobs.cluster`` take; ``object_wanted`` says where the job's object belongs for its state
(released, suspended or absent). The pages, the API and the reconciler all read these.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db.models import QuerySet

from jobs.cluster import ObjectRef
from jobs.cluster.kinds import RESOURCES
from jobs.cluster.manifests.common import object_name, script_configmap_name
from jobs.cluster.manifests.objects import config_map_names
from jobs.cluster.spec import JobSpec, PodGroup
from jobs.document.shape import SPEC_COLUMNS, spec_values
from jobs.models import IN_CLUSTER, PENDING, Job, kind_shape
from jobs.tables.jobs import live_config_maps
from kube.scheduling import Placement
from queues.models import Queue
from queues.pools import Pool
from queues.selectors import node_pools, queue_department

# The columns ``job_spec`` reads, and the state where the job's object belongs.
SPEC_READS = (
    *SPEC_COLUMNS,
    "id",
    "state",
    "namespace",
    "object_name",
    "head",
    "workers",
    "manifest",
    "queue_id",
    "owner_id",
    "pool",
    "enqueued_at",
    "dequeued_at",
)
# Runtimes whose objects have a suspend flag: KubeRay's RayJob, Kubeflow's PyTorchJob.
SUSPENDABLE = tuple(name for name, kind in RESOURCES.items() if kind.suspend_path)
RUNNING, SUSPENDED, ABSENT = "running", "suspended", "absent"


def object_wanted(state: str, runtime: str) -> str:
    """Where a job in ``state`` wants its object: released to the scheduler (running),
    created and suspended until its dequeue (suspended, with CLUSTER_GATE=suspend), or
    not in the cluster at all (absent)."""
    if state in IN_CLUSTER:
        return RUNNING
    if state in PENDING and settings.CLUSTER_GATE == "suspend" and runtime in SUSPENDABLE:
        return SUSPENDED
    return ABSENT


def job_object_name(job: Job) -> str:
    """The name of the job's object in the cluster: the team's own (``metadata.name``), or
    one derived from the job (``<name>-<id>``: Caldera's document, a ``generateName``)."""
    return job.object_name or object_name(job.name, job.pk)


def object_ref(job: Job) -> ObjectRef:
    """Where the job's object is, with the ConfigMaps it has: those it was sent with, or
    its document's script's, or none (no delete is sent for a ConfigMap never made)."""
    return ObjectRef(job_object_name(job), job.namespace, job.runtime, job_config_maps(job))


def job_config_maps(job: Job) -> tuple[str, ...]:
    """The ConfigMaps Caldera made for the job: those of the objects it was sent as, or
    the one of its document's script."""
    if job.manifest:
        return config_map_names(job.manifest["objects"])
    return (script_configmap_name(job_object_name(job)),) if job.script else ()


def refs_removable(pairs: list[tuple[int, ObjectRef]]) -> list[ObjectRef]:
    """The objects to remove, by job id, each without the ConfigMaps another live job of
    its namespace keeps too (jobs sent with the same ConfigMap share it, as ``kubectl
    create`` of one file twice does; it goes with the last of them). One query."""
    names = [name for _, ref in pairs for name in ref.config_maps or ()]
    holders = live_config_maps(names)
    return [
        replace(
            ref,
            config_maps=tuple(
                name
                for name in ref.config_maps
                if not any(h.job_id != job_id for h in holders.get((ref.namespace, name), []))
            ),
        )
        if ref.config_maps
        else ref
        for job_id, ref in pairs
    ]


def head_group(kind: str) -> str:
    """The name of a job's main pod group: a PyTorch job's master, a Ray job's head."""
    return kind_shape(kind).head


def job_head(job: Job) -> str:
    """The name of this job's main pod group: its kind's (``head_group``), or for a Volcano
    Job sent as an object the name of its leading task, which Volcano labels its pods with
    (``volcano.sh/task-spec``)."""
    return job.head.get("name") or head_group(job.kind)


def jobs_for_specs(jobs: QuerySet[Job]) -> list[Job]:
    """The jobs as ``job_spec`` reads them: only the columns it reads (SPEC_READS), each
    job with its queue, the queue's quota node and its owner, each of those fetched once
    for all the jobs that share it (a cycle's thousand jobs have a few queues and owners)
    rather than joined to, and built for, every row."""
    found = list(jobs.only(*SPEC_READS))
    queues = {
        queue.pk: queue
        for queue in Queue.objects.filter(
            pk__any=list({job.queue_id for job in found})
        ).select_related("node")
    }
    owners = {
        person.pk: person
        for person in get_user_model()
        .objects.filter(pk__any=list({job.owner_id for job in found}))
        .only("username")
    }
    for job in found:
        job.queue = queues[job.queue_id]
        job.owner = owners[job.owner_id]
    return found


def job_spec(
    job: Job,
    *,
    department: str = "",
    suspend: bool = False,
    pools: Mapping[str, Pool] | None = None,
) -> JobSpec:
    """The plain description of a job that manifests and backends take: its document's
    fields as ``jobs.document.shape`` says JobSpec takes them, its pods and its place,
    with the node pool it was placed in (``pools``: the tree's, by name; read when not
    given). A pool the tree no longer declares adds nothing."""
    pool = None
    if job.pool:
        pool = (pools if pools is not None else pools_by_name()).get(job.pool)
    return JobSpec(
        **spec_values(job),
        id=job.pk,
        object_name=job_object_name(job),
        namespace=job.namespace,
        head=PodGroup(
            name=job_head(job),
            replicas=1,
            resources=dict(job.head.get("resources", {})),
            limits=dict(job.head.get("limits", {})),
            placement=Placement.from_json(job.head.get("placement")),
        ),
        workers=tuple(
            PodGroup(
                g["name"],
                g["replicas"],
                dict(g["resources"]),
                g.get("max_replicas"),
                dict(g.get("limits", {})),
                Placement.from_json(g.get("placement")),
            )
            for g in job.workers
        ),
        queue_name=job.queue.name,
        queue_path=job.queue.node.path,
        department=department,
        owner=job.owner.username,
        priority_class=job.queue.priority_class,
        enqueued_at=job.enqueued_at,
        dequeued_at=job.dequeued_at,
        batch_scheduler="volcano" if "volcano" in settings.CLUSTER_RUNTIMES else "",
        suspend=suspend,
        objects=tuple(job.manifest["objects"]) if job.manifest else (),
        pool=job.pool,
        pool_placement=pool.placement if pool is not None else Placement(),
    )


def pools_by_name() -> dict[str, Pool]:
    return {pool.name: pool for pool in node_pools()}


def job_spec_full(job: Job) -> JobSpec:
    department = queue_department(job.queue)
    return job_spec(job, department=department.name if department else "")
