"""Acting on many jobs at once: the rows chosen on the jobs page, or everything its filter
matches, and POST /api/v1/jobs/bulk/.

Each job goes through the same service, with the same rights, as its own button: a member
cancels only their own jobs, only managers raise a priority, a finished job is resubmitted
as a new submission of the user's (``job_resubmit``). A request that is wrong as a
whole (an unknown action, a priority out of range, too many jobs) changes nothing; a job
that its action refuses is named with the reason and the others go ahead, each change an
event on its job. All of it commits together, so a failure half-way leaves nothing done.
The chosen jobs are locked at once, by id, the order in which the admission cycle locks
its own (``jobs.engine.locks``), so a bulk action and a cycle wait for each other instead of
deadlocking; one that still loses to contention is tried again.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from django.db import transaction
from django.utils import timezone

from jobs.document.schema import priority_read
from jobs.document.validation import JobInvalid
from jobs.engine.locks import lock_jobs, retrying
from jobs.models import Job
from jobs.reads.listing import JobFilter
from jobs.reads.selectors import jobs_for_user
from jobs.services import (
    JobConflict,
    JobPermissionDenied,
    job_cancel,
    job_move_to_head,
    job_resubmit,
    job_set_priority,
)

BULK_MAX = 5_000  # jobs one request may act on
# Each action, and what the answer says of the jobs it changed.
DONE = {
    "cancel": "cancelled",
    "priority": "re-prioritised",
    "move-to-head": "moved to the head",
    "resubmit": "resubmitted",
}
ACTIONS = tuple(DONE)
NOT_VISIBLE = "no such job"
COPIES_NAMED = 10  # the summary names this many of the copies a resubmit queued


@dataclass
class BulkOutcome:
    action: str
    done: list[int] = field(default_factory=list)
    refused: dict[str, list[int]] = field(default_factory=dict)  # reason -> job ids
    copies: dict[int, int] = field(default_factory=dict)  # resubmit: job id -> its copy's

    def summary(self) -> str:
        """ "12 cancelled; 3 refused: members cancel only their own jobs"."""
        parts = [f"{len(self.done)} {DONE[self.action]}"]
        if self.copies:
            shown = [f"#{copy}" for copy in list(self.copies.values())[:COPIES_NAMED]]
            more = len(self.copies) - len(shown)
            parts[0] += f" as {', '.join(shown)}" + (f" and {more} more" if more else "")
        parts += [f"{len(ids)} refused: {reason}" for reason, ids in self.refused.items()]
        return "; ".join(parts)


def jobs_chosen(user, ids: Iterable[object]) -> tuple[list[Job], list[int]]:
    """The jobs of ``ids`` the user may see, in the order given, and the ids of the others
    (not found, or not theirs to see: the same answer, so nothing leaks)."""
    wanted: list[int] = []
    for raw in ids:
        try:
            wanted.append(int(raw))  # type: ignore[call-overload]  # any value: TypeError below
        except (TypeError, ValueError):
            raise JobInvalid({"ids": f"{str(raw)[:40]!r} is not a job id"}) from None
    wanted = list(dict.fromkeys(wanted))
    _check_size(len(wanted), "ids")
    found = {job.pk: job for job in jobs_for_user(user).filter(pk__in=wanted)}
    return [found[pk] for pk in wanted if pk in found], [pk for pk in wanted if pk not in found]


def jobs_matching(user, wanted: JobFilter) -> list[Job]:
    """Every job the user may see that the filter matches, oldest first."""
    jobs = wanted.apply(jobs_for_user(user), user).order_by("id")
    matched = list(jobs[: BULK_MAX + 1])
    _check_size(len(matched), "filter")
    return matched


def _check_size(count: int, name: str) -> None:
    if count == 0:
        raise JobInvalid({name: "names no job"})
    if count > BULK_MAX:
        raise JobInvalid({name: f"names more than {BULK_MAX} jobs; narrow it"})


def jobs_bulk(
    *,
    user,
    action: str,
    jobs: Sequence[Job],
    not_visible: Sequence[int] = (),
    priority: object = None,
    now: datetime | None = None,
) -> BulkOutcome:
    """Run ``action`` on each job, as its own button would; what each job's action refused
    is named in the outcome."""
    if action not in DONE:
        raise JobInvalid(
            {"action": f"unknown action {str(action)[:40]!r}; one of {', '.join(ACTIONS)}"}
        )
    if action == "priority":
        priority = priority_read(priority)
    now = now or timezone.now()

    def act() -> BulkOutcome:
        outcome = BulkOutcome(action=action)
        if not_visible:
            outcome.refused[NOT_VISIBLE] = list(not_visible)
        # Every chosen job at once, by id, as the admission cycle locks its jobs: the
        # services below then lock rows this transaction already holds.
        lock_jobs([job.pk for job in jobs])
        for job in jobs:
            try:
                with transaction.atomic():  # what a refused job began is undone alone
                    if action == "cancel":
                        job_cancel(user=user, job=job, now=now)
                    elif action == "priority":
                        job_set_priority(user=user, job=job, priority=priority, now=now)
                    elif action == "move-to-head":
                        job_move_to_head(user=user, job=job, now=now)
                    else:
                        outcome.copies[job.pk] = job_resubmit(user=user, job=job, now=now).pk
            except (JobPermissionDenied, JobConflict, JobInvalid) as refusal:
                outcome.refused.setdefault(str(refusal), []).append(job.pk)
            else:
                outcome.done.append(job.pk)
        return outcome

    return retrying(act)
