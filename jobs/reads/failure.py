"""Why a job failed, as its page leads with it: the reason Caldera recorded as it failed the
job (the cluster's own words when the cluster failed it), its main container's exit code,
and the last lines of the log kept as it ended (``jobs.engine.log_tails``)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from jobs.models import Job, JobEvent, State

# The last lines of the kept log the cause shows; the Log section below has them all.
CAUSE_LINES = 20


@dataclass(frozen=True)
class Failure:
    reason: str  # in the reader's language when Caldera said it; "" when none was recorded
    event: str  # the event that said it: Failed, StartAttemptsExceeded, NamespaceGone...
    exit_code: int | None
    tail: str  # the last CAUSE_LINES lines of the kept log
    shown: int  # how many lines ``tail`` has
    kept_lines: int  # how many lines were kept in all
    kept_at: datetime | None
    missing: str  # why no log was kept ("": one was, or none was tried)


def job_failure(job: Job) -> Failure | None:
    """Why the job failed; None unless it did. One query: the last of the Warning events
    Caldera wrote itself (a cluster's event names the object it is about), which is the one
    that failed the job."""
    if job.state != State.FAILED:
        return None
    event = (
        job.events.filter(type=JobEvent.Type.WARNING, involved="")
        .order_by("-created_at", "-id")
        .only("reason", "message", "code", "args")
        .first()
    )
    kept = job.log_tail.removesuffix("\n").split("\n") if job.log_tail else []
    return Failure(
        reason=event.said if event is not None else job.backoff_said,
        event=event.reason if event is not None else "",
        exit_code=job.exit_code,
        tail="\n".join(kept[-CAUSE_LINES:]),
        shown=len(kept[-CAUSE_LINES:]),
        kept_lines=len(kept),
        kept_at=job.log_tail_at if job.log_tail else None,
        missing=job.log_tail_missing_said,
    )
