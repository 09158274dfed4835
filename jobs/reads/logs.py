"""A job's log: its main pod's (the Ray head, the PyTorch master), as the job page, the
download and the API read it.

The cluster backend reads the pod's log (``ClusterBackend.pod_log``); this module adds what
the job's state says about it. A job still in its queue has no pods yet, so the cluster is
not asked; a job that has ended has had its objects, and so its pods and their log,
removed by the cluster sync, which is said in those words rather than as a missing pod.
A job that succeeded or failed has the end of its log kept by that sync before it removed
them (``jobs.engine.log_tails``): that end is the answer then, marked as kept, without
asking the cluster. The read happens while a person waits: it is bounded by
JOB_LOG_LIMIT_BYTES, and the Kubernetes backend gives the cluster JOB_LOG_TIMEOUT_SECONDS
and one try.
"""

from __future__ import annotations

from datetime import datetime

from django.conf import settings
from django.utils import timezone
from django.utils.translation import gettext as _

from jobs.cluster import LogUnavailable, PodLog, get_backend
from jobs.document.params import Integer, params
from jobs.engine.objects import job_head, object_ref
from jobs.models import IN_CLUSTER, PENDING, Job, State

# The most lines a read may ask for: far past what a page shows, well inside what the API
# server takes (an int64).
TAIL_LINES_MAX = 1_000_000


# GET /api/v1/jobs/{id}/log/: how much of the log.
LOG_QUERY = params(
    Integer(
        name="tail_lines",
        minimum=1,
        maximum=TAIL_LINES_MAX,
        description="only the last lines; without it, the log from its start",
    )
)


def job_log(
    *,
    job: Job,
    tail_lines: int | None,
    limit_bytes: int | None = None,
    now: datetime | None = None,
) -> PodLog:
    """The end of the job's main pod's log: its last ``tail_lines`` lines (None: from the
    start), at most ``limit_bytes`` bytes (default JOB_LOG_LIMIT_BYTES).

    LogUnavailable with a sentence for the person reading the job when there is no log to
    show; ClusterUnavailable when the cluster does not answer. The caller has checked the
    user may see the job (``selectors.job_get_for_user``)."""
    head = job_head(job)
    if job.state in PENDING:
        raise LogUnavailable(
            _(
                "The job has not started: it waits in its queue, and its %(head)s pod is "
                "created when it is admitted."
            )
            % {"head": head}
        )
    if job.is_terminal and job.started_at is None and job.dequeued_at is None:
        raise LogUnavailable(
            _(
                "The job has no log: it ended (%(state)s) while it waited in its queue, "
                "where it has no pods."
            )
            % {"state": str(job.get_state_display()).lower()}
        )
    if job.is_terminal and job.log_tail_at is not None:
        return _kept(job, head, tail_lines=tail_lines, limit_bytes=limit_bytes)
    try:
        return get_backend().pod_log(
            object_ref(job),
            job_id=job.pk,
            head=head,
            tail_lines=tail_lines,
            limit_bytes=limit_bytes or settings.JOB_LOG_LIMIT_BYTES,
            now=now or timezone.now(),
        )
    except LogUnavailable as error:
        if error.missing:
            raise LogUnavailable(_missing(job, head)) from None
        raise


def _kept(job: Job, head: str, *, tail_lines: int | None, limit_bytes: int | None) -> PodLog:
    """The end of the log kept as the job ended (``kept_at`` says so), cut as the cluster
    cuts a log: its last ``tail_lines`` lines, then at most ``limit_bytes`` bytes from
    their start. LogUnavailable with why none was kept."""
    if job.log_tail_missing:
        raise LogUnavailable(
            _(
                "The job's %(head)s pod is gone, and its log with it; none of it was kept "
                "as the job ended: %(reason)s"
            )
            % {"head": head, "reason": job.log_tail_missing_said}
        )
    text, truncated = job.log_tail, job.log_tail_truncated
    if tail_lines is not None:
        # Lines end with a newline alone, as the kubelet counts them (a progress bar's
        # carriage returns stay inside a line).
        end = "\n" if text.endswith("\n") else ""
        lines = text.removesuffix("\n").split("\n")
        if text and len(lines) > tail_lines:
            text, truncated = "\n".join(lines[-tail_lines:]) + end, True
    data = text.encode()
    limit = limit_bytes or settings.JOB_LOG_LIMIT_BYTES
    if len(data) > limit:
        text, truncated = data[:limit].decode("utf-8", errors="replace"), True
    return PodLog(
        pod=job.log_tail_pod,
        text=text,
        truncated=truncated,
        exit_code=job.exit_code,
        kept_at=job.log_tail_at,
    )


def _missing(job: Job, head: str) -> str:
    """Why the job has no main pod, from where the job stands."""
    if job.state == State.ADMITTED:
        return _(
            "The job's %(head)s pod has not been created yet: the cluster is making the job's pods."
        ) % {"head": head}
    if job.state in IN_CLUSTER:
        return _(
            "The job's %(head)s pod is not there: the cluster may be replacing it. Its log "
            "shows again once it runs."
        ) % {"head": head}
    return _(
        "The job's %(head)s pod is gone, and its log with it: the cluster removes a job's "
        "pods once it has ended or left the cluster."
    ) % {"head": head}
