"""The end kept: the last lines of a finished job's log, kept before its pods are removed.

When a job succeeds or fails, the cluster sync removes its objects, and its pods and their
logs go with them. Just before, it reads the end of each such job's main pod's log (its
last JOB_LOG_TAIL_LINES lines, at most ``tail_bytes()``) and keeps it on the job
(``Job.log_tail``, with the pod, the time and the exit code), which the job's page, the API
and ``caldera logs`` answer once the pods are gone (docs/jobs.md, "The end kept").

The cost is bounded however many jobs end at once: the logs are read together
(``ClusterBackend.pod_logs``: in parallel on Kubernetes, in one query simulated), KEEP_CHUNK
jobs at a time, each chunk written in one UPDATE whose columns go as arrays; reading stops
after KEEP_SECONDS, and a chunk the cluster did not answer at all stops it too. The jobs
not read then are left for the next sync, whose listing still has their objects (the sync
removes only the objects of jobs whose end is kept). Each job's log is read once: a pod
that is gone, or a cluster that did not answer it, is recorded as the reason instead.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from datetime import datetime

from django.conf import settings
from django.db.models import Q
from django.utils.translation import gettext_noop

from jobs.cluster import (
    ClusterUnavailable,
    LogAsked,
    LogUnavailable,
    ObjectRef,
    PodLog,
    get_backend,
)
from jobs.engine.objects import job_head
from jobs.models import Job, State
from jobs.tables.jobs import log_tails_write

log = logging.getLogger(__name__)

# The jobs whose end is kept: those that ran to their end, and those stopped to end so (past
# their time limit, or a failed attempt with retries left: ``Job.ends_as``). A cancelled
# job's objects are removed by the cancel; a job that timed out goes back to its queue and
# runs again.
KEPT_STATES = (State.SUCCEEDED, State.FAILED)
ENDING = Q(state__in=KEPT_STATES) | (Q(state=State.STOPPING) & ~Q(ends_as=""))
# The most of a log's end that is kept (and that the job page shows): more than a person
# reads there, and a program that writes no newline (a progress bar) cannot make a job's
# row, or a chunk of them in memory, heavy.
LOG_TAIL_BYTES = 256 * 1024
KEEP_CHUNK = 200
KEEP_SECONDS = 30.0

# Why no tail was kept, as stored; the pages show them in the reader's language
# (``Job.log_tail_missing_said``).
POD_GONE = gettext_noop("The pod was gone before its log could be read.")
NOT_ANSWERED = gettext_noop("The cluster did not answer when its log was read.")


def tail_bytes() -> int:
    """The most bytes of a log's end that are kept or shown on the job page."""
    return min(LOG_TAIL_BYTES, settings.JOB_LOG_LIMIT_BYTES)


def tails_keep(ended: Sequence[tuple[int, ObjectRef]], *, now: datetime) -> set[int]:
    """Read and keep the end of the log of these jobs, whose objects the listing just had
    (by job id): those that succeeded or failed and have none kept yet. Returns the jobs
    left for the next sync (not read: too many ended at once, or the cluster stopped
    answering), whose objects are not to be removed yet."""
    refs = dict(ended)
    jobs = (
        Job.objects.filter(ENDING, pk__any=list(refs), log_tail_at=None)
        .only("pk", "kind", "head")
        .order_by("pk")
    )
    asked = [LogAsked(job.pk, refs[job.pk], job_head(job)) for job in jobs]
    deadline = time.monotonic() + KEEP_SECONDS
    for start in range(0, len(asked), KEEP_CHUNK):
        if time.monotonic() > deadline:
            log.warning("%d logs of jobs that ended left for the next sync", len(asked) - start)
            return {one.job_id for one in asked[start:]}
        chunk = asked[start : start + KEEP_CHUNK]
        answers = get_backend().pod_logs(
            chunk, tail_lines=settings.JOB_LOG_TAIL_LINES, limit_bytes=tail_bytes(), now=now
        )
        _write(answers, now=now)
        if all(isinstance(answer, ClusterUnavailable) for answer in answers.values()):
            rest = asked[start + KEEP_CHUNK :]
            if rest:
                log.warning("the cluster did not answer: %d logs left for the next sync", len(rest))
            return {one.job_id for one in rest}
    return set()


def _write(answers: dict[int, PodLog | LogUnavailable | ClusterUnavailable], *, now) -> int:
    """Keep each job's answer in one UPDATE, the columns as arrays; a job another sync kept
    meanwhile keeps its own. The number of jobs written."""
    ids, texts, pods, truncated, missing, codes = [], [], [], [], [], []
    for job_id, answer in answers.items():
        ids.append(job_id)
        if isinstance(answer, PodLog):
            # PostgreSQL's text holds no NUL; a log may.
            texts.append(answer.text.replace("\x00", "\ufffd"))
            pods.append(answer.pod)
            truncated.append(answer.truncated)
            missing.append("")
            codes.append(answer.exit_code)
            continue
        if isinstance(answer, ClusterUnavailable):
            log.warning("the log of job %d was not read: %s", job_id, answer)
            reason = NOT_ANSWERED
        else:
            reason = POD_GONE if answer.missing else str(answer)
        texts.append("")
        pods.append("")
        truncated.append(False)
        missing.append(reason)
        codes.append(None)
    if not ids:
        return 0
    return log_tails_write(now, ids, texts, pods, truncated, missing, codes)
