"""Where a running Ray job's dashboard is: its head Service, and the deployment's URL for
it (RAY_DASHBOARD_URL) or the ``kubectl port-forward`` line that reaches it.

The dashboard is served by the Ray head on port 8265, behind the head Service the runtime
makes: KubeRay names it after the RayCluster it made for the RayJob
(``<status.rayClusterName>-head-svc``, which the cluster sync keeps as ``Job.ray_cluster``),
Volcano's ``ray`` plugin after the Volcano Job (``<job>-head-svc``), on the port its
``--dashboardPort`` argument names (8265 by default). See docs/jobs.md, "The Ray dashboard".
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from django.conf import settings

from jobs.engine.objects import job_object_name
from jobs.models import Job, State

DASHBOARD_PORT = 8265
_PORT_ARGUMENT = re.compile(r"--dashboardPort=(\d{1,5})")


@dataclass(frozen=True)
class RayDashboard:
    namespace: str
    service: str
    port: int  # the Service's dashboard port
    url: str  # the deployment's (RAY_DASHBOARD_URL); "" when it sets none

    @property
    def command(self) -> str:
        """The line that serves the dashboard at http://localhost:8265 from one's machine."""
        return (
            f"kubectl -n {self.namespace} port-forward svc/{self.service} "
            f"{DASHBOARD_PORT}:{self.port}"
        )


def ray_dashboard(job: Job) -> RayDashboard | None:
    """Where the job's Ray dashboard is while it runs; None for a job that is not a running
    Ray job, or a RayJob whose RayCluster the cluster has not named yet."""
    if job.kind != Job.Kind.RAY or job.state != State.RUNNING:
        return None
    if job.runtime == Job.Runtime.KUBERAY and job.ray_cluster:
        service, port = f"{job.ray_cluster}-head-svc", DASHBOARD_PORT
    elif job.runtime == Job.Runtime.VOLCANO:
        service, port = f"{job_object_name(job)}-head-svc", _volcano_port(job)
    else:
        return None
    url = settings.RAY_DASHBOARD_URL.format(
        namespace=job.namespace, service=service, name=job_object_name(job), id=job.pk
    )
    return RayDashboard(namespace=job.namespace, service=service, port=port, url=url)


def _volcano_port(job: Job) -> int:
    """The dashboard port the ray plugin of a Volcano Job sent as an object was given
    (``--dashboardPort=8266``); Caldera's own Volcano Jobs take the plugin's default."""
    objects = (job.manifest or {}).get("objects") or [{}]
    plugins = (objects[0].get("spec") or {}).get("plugins") or {}
    for argument in plugins.get("ray") or []:
        match = _PORT_ARGUMENT.fullmatch(str(argument).strip())
        if match and 0 < int(match[1]) < 65536:
            return int(match[1])
    return DASHBOARD_PORT
