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

The page asks before it acts (``BulkPlan``: "Cancel 111 jobs of 3 people in 2 queues?",
with the number typed above ``CONFIRM_TYPED_ABOVE`` jobs); scripts calling the API are not
asked. What is asked is computed here, from the same jobs the action would take, so the
question cannot tell a different story from the answer.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, gettext_noop, ngettext, pgettext_lazy
from django_stubs_ext import StrOrPromise

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
    job_hold,
    job_move_to_head,
    job_release,
    job_resubmit,
    job_set_priority,
)

BULK_MAX = 5_000  # jobs one request may act on
# Past this many jobs the page's confirmation asks for their number typed, not one more click.
CONFIRM_TYPED_ABOVE = 20
NAMED = 8  # the confirmation names this many of the people, and of the queues, it touches


@dataclass(frozen=True)
class Action:
    """An action's words, each a whole sentence in the reader's language (word order differs
    between languages, so no sentence is put together from translated pieces): ``%(jobs)s``
    names counted jobs ("111 jobs"), ``%(people)s`` and ``%(queues)s`` the people and queues
    counted, ``%(job)s`` one job, ``%(number)s`` its number, ``%(priority)s`` the new
    priority, ``%(count)s`` how many it changed."""

    label: StrOrPromise  # on the page's form
    done: StrOrPromise  # what the answer says of the jobs it changed
    ask: StrOrPromise  # the question asked first, of many jobs
    ask_one: StrOrPromise  # the question asked first, of one job
    button: StrOrPromise  # the confirming button, of many jobs
    button_one: StrOrPromise  # the confirming button, of one job


ACTION = {
    "cancel": Action(
        pgettext_lazy("bulk action", "Cancel"),
        gettext_lazy("%(count)s cancelled"),
        gettext_lazy("Cancel %(jobs)s of %(people)s in %(queues)s?"),
        gettext_lazy("Cancel %(job)s?"),
        gettext_lazy("Cancel %(jobs)s"),
        gettext_lazy("Cancel job #%(number)s"),
    ),
    "priority": Action(
        pgettext_lazy("bulk action", "Set priority"),
        gettext_lazy("%(count)s re-prioritised"),
        gettext_lazy("Set the priority of %(jobs)s of %(people)s in %(queues)s to %(priority)s?"),
        gettext_lazy("Set the priority of %(job)s to %(priority)s?"),
        gettext_lazy("Set the priority of %(jobs)s to %(priority)s"),
        gettext_lazy("Set the priority of job #%(number)s to %(priority)s"),
    ),
    "move-to-head": Action(
        pgettext_lazy("bulk action", "Move to head"),
        gettext_lazy("%(count)s moved to the head"),
        gettext_lazy("Move %(jobs)s of %(people)s in %(queues)s to the head of the queue?"),
        gettext_lazy("Move %(job)s to the head of the queue?"),
        gettext_lazy("Move %(jobs)s to the head of the queue"),
        gettext_lazy("Move job #%(number)s to the head of the queue"),
    ),
    "hold": Action(
        pgettext_lazy("bulk action", "Hold"),
        gettext_lazy("%(count)s held"),
        gettext_lazy("Hold %(jobs)s of %(people)s in %(queues)s? They keep their places."),
        gettext_lazy("Hold %(job)s? It keeps its place."),
        gettext_lazy("Hold %(jobs)s"),
        gettext_lazy("Hold job #%(number)s"),
    ),
    "release": Action(
        pgettext_lazy("bulk action", "Release"),
        gettext_lazy("%(count)s released"),
        gettext_lazy("Release %(jobs)s of %(people)s in %(queues)s?"),
        gettext_lazy("Release %(job)s?"),
        gettext_lazy("Release %(jobs)s"),
        gettext_lazy("Release job #%(number)s"),
    ),
    "resubmit": Action(
        pgettext_lazy("bulk action", "Resubmit (finished jobs)"),
        gettext_lazy("%(count)s resubmitted"),
        gettext_lazy("Resubmit %(jobs)s of %(people)s in %(queues)s as new jobs of yours?"),
        gettext_lazy("Resubmit %(job)s as a new job of yours?"),
        gettext_lazy("Resubmit %(jobs)s as new jobs of yours"),
        gettext_lazy("Resubmit job #%(number)s as a new job of yours"),
    ),
}
ACTIONS = tuple(ACTION)
NOT_VISIBLE = gettext_noop("no such job")
YOU = ""  # the asking person among the people a plan counts: no user name is empty
COPIES_NAMED = 10  # the summary names this many of the copies a resubmit queued


@dataclass
class BulkOutcome:
    action: str
    done: list[int] = field(default_factory=list)
    refused: dict[str, list[int]] = field(default_factory=dict)  # reason -> job ids
    copies: dict[int, int] = field(default_factory=dict)  # resubmit: job id -> its copy's

    def summary(self) -> str:
        """ "12 cancelled; 3 refused: members cancel only their own jobs"."""
        parts = [ACTION[self.action].done % {"count": len(self.done)}]
        if self.copies:
            shown = [f"#{copy}" for copy in list(self.copies.values())[:COPIES_NAMED]]
            more = len(self.copies) - len(shown)
            copies = {"done": parts[0], "copies": _(", ").join(shown), "more": more}
            parts[0] = (
                _("%(done)s as %(copies)s and %(more)s more") % copies
                if more
                else _("%(done)s as %(copies)s") % copies
            )
        parts += [
            _("%(count)s refused: %(reason)s") % {"count": len(ids), "reason": reason}
            for reason, ids in self.refused.items()
        ]
        return _("; ").join(parts)


def jobs_chosen(user, ids: Iterable[object]) -> tuple[list[Job], list[int]]:
    """The jobs of ``ids`` the user may see, in the order given, and the ids of the others
    (not found, or not theirs to see: the same answer, so nothing leaks)."""
    wanted: list[int] = []
    for raw in ids:
        try:
            wanted.append(int(raw))  # type: ignore[call-overload]  # any value: TypeError below
        except (TypeError, ValueError):
            raise JobInvalid(
                {"ids": _("%(value)s is not a job id") % {"value": repr(str(raw)[:40])}}
            ) from None
    wanted = list(dict.fromkeys(wanted))
    _check_size(len(wanted), "ids")
    found = {job.pk: job for job in jobs_for_user(user).filter(pk__any=wanted)}
    return [found[pk] for pk in wanted if pk in found], [pk for pk in wanted if pk not in found]


def jobs_matching(user, wanted: JobFilter) -> list[Job]:
    """Every job the user may see that the filter matches, oldest first."""
    jobs = wanted.apply(jobs_for_user(user), user).order_by("id")
    matched = list(jobs[: BULK_MAX + 1])
    _check_size(len(matched), "filter")
    return matched


def _check_size(count: int, name: str) -> None:
    if count == 0:
        raise JobInvalid({name: _("names no job")})
    if count > BULK_MAX:
        raise JobInvalid({name: _("names more than %(most)s jobs; narrow it") % {"most": BULK_MAX}})


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
    priority = _action_read(action, priority)
    now = now or timezone.now()

    def act() -> BulkOutcome:
        outcome = BulkOutcome(action=action)
        if not_visible:
            outcome.refused[_(NOT_VISIBLE)] = list(not_visible)
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
                    elif action == "hold":
                        job_hold(user=user, job=job, now=now)
                    elif action == "release":
                        job_release(user=user, job=job, now=now)
                    else:
                        outcome.copies[job.pk] = job_resubmit(user=user, job=job, now=now).pk
            except (JobPermissionDenied, JobConflict, JobInvalid) as refusal:
                outcome.refused.setdefault(str(refusal), []).append(job.pk)
            else:
                outcome.done.append(job.pk)
        return outcome

    return retrying(act)


def _action_read(action: str, priority: object) -> int | None:
    """The priority the action sets (None unless it sets one); a request wrong as a whole
    (an unknown action, a bad priority) is refused before any job is looked at."""
    if not action:
        raise JobInvalid(
            {"action": _("choose one of %(actions)s") % {"actions": ", ".join(ACTIONS)}}
        )
    if action not in ACTION:
        raise JobInvalid(
            {
                "action": _("unknown action %(value)s; one of %(actions)s")
                % {"value": repr(str(action)[:40]), "actions": ", ".join(ACTIONS)}
            }
        )
    return priority_read(priority) if action == "priority" else None


@dataclass(frozen=True)
class BulkPlan:
    """What an action would do to these jobs, asked before it is done: "Cancel 111 jobs of 3
    people in 2 queues?", or for one job "Cancel sweep-0 #12 (carol's, in
    root-algorithm-video)?".

    ``fingerprint`` names the action and the very jobs: a confirmation holds for them only, so
    a filter that matches other jobs by the time it is confirmed is asked about again rather
    than acted on. Above ``CONFIRM_TYPED_ABOVE`` jobs the answer must also carry their number
    typed (``typed_word``): a number read is harder to click through than a button.
    """

    user_name: str
    action: str
    priority: int | None
    job_ids: tuple[int, ...]
    one: Job | None  # the job, when there is exactly one, to name it
    people: tuple[tuple[str, int], ...]  # each owner's name and how many of the jobs are theirs
    queues: tuple[tuple[str, int], ...]  # each queue's name and how many of the jobs are in it
    others: int  # how many of the jobs are other people's

    @property
    def count(self) -> int:
        return len(self.job_ids)

    @property
    def fingerprint(self) -> str:
        named = f"{self.action}:{self.priority}:{','.join(map(str, sorted(self.job_ids)))}"
        return hashlib.blake2b(named.encode(), digest_size=12).hexdigest()

    @property
    def typed_word(self) -> str:
        """What must be typed to confirm, or "" when a click is enough."""
        return str(self.count) if self.count > CONFIRM_TYPED_ABOVE else ""

    def question(self) -> str:
        """ "Cancel 111 jobs of 3 people in 2 queues?"."""
        action = ACTION[self.action]
        if self.one is not None:
            owner = self.one.owner.get_username()
            named = {"name": self.one.name, "number": self.one.pk, "queue": self.one.queue.name}
            job = (
                _("%(name)s #%(number)s (yours, in %(queue)s)") % named
                if owner == self.user_name
                else _("%(name)s #%(number)s (%(owner)s's, in %(queue)s)")
                % (named | {"owner": owner})
            )
            return action.ask_one % {"job": job, "priority": self.priority}
        return action.ask % {
            "jobs": _jobs(self.count),
            "people": ngettext("%(count)s person", "%(count)s people", len(self.people))
            % {"count": len(self.people)},
            "queues": ngettext("%(count)s queue", "%(count)s queues", len(self.queues))
            % {"count": len(self.queues)},
            "priority": self.priority,
        }

    def button(self) -> str:
        """The confirming button's words: the question, short ("Cancel 111 jobs")."""
        action = ACTION[self.action]
        if self.one is not None:
            return action.button_one % {"number": self.one.pk, "priority": self.priority}
        return action.button % {"jobs": _jobs(self.count), "priority": self.priority}

    def people_named(self) -> str:
        return _named(self.people)

    def queues_named(self) -> str:
        return _named(self.queues)


def _jobs(count: int) -> str:
    """ "111 jobs", counted in the reader's language."""
    return ngettext("%(count)s job", "%(count)s jobs", count) % {"count": count}


def _named(counts: tuple[tuple[str, int], ...]) -> str:
    """ "carol (40), you (30) and 2 more" (the largest first)."""
    shown = _(", ").join(
        _("%(name)s (%(count)s)") % {"name": _("you") if name == YOU else name, "count": count}
        for name, count in counts[:NAMED]
    )
    more = len(counts) - NAMED
    return _("%(names)s and %(more)s more") % {"names": shown, "more": more} if more > 0 else shown


def bulk_plan(*, user, action: str, jobs: Sequence[Job], priority: object = None) -> BulkPlan:
    """What ``jobs_bulk`` would be asked to do with the same arguments, counted, changing
    nothing; a request wrong as a whole is refused as ``jobs_bulk`` refuses it."""
    priority = _action_read(action, priority)
    me = user.get_username()
    owners = Counter(job.owner.get_username() for job in jobs)
    return BulkPlan(
        user_name=me,
        action=action,
        priority=priority,
        job_ids=tuple(job.pk for job in jobs),
        one=jobs[0] if len(jobs) == 1 else None,
        people=tuple((YOU if name == me else name, n) for name, n in owners.most_common()),
        queues=tuple(Counter(job.queue.name for job in jobs).most_common()),
        others=sum(n for name, n in owners.items() if name != me),
    )
