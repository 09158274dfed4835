"""What Caldera says about a job, kept as a code and its arguments and shown in the
reader's language and time zone.

A backoff reason or an event message is written once (by the admission cycle, the sync,
a cancel) and read for months, by people who read English or Simplified Chinese and live
in different zones. So the writer stores a ``Phrase``: a code naming one declared wording
and the arguments it fills in (plain JSON: numbers, strings, ISO times, quantities in base
units, nested phrases). The page renders it with ``Phrase.text()`` in the active language
and zone; the writer also stores ``Phrase.english()`` (English, UTC) as the row's text,
which the API, the webhooks, the CLI and the metrics read as before, and which the pages
show for rows written before codes existed.

Every wording is declared here, in one module, queues' own rules and jobs' alike: queues
may not import jobs, and a single vocabulary keeps one place for translators and one
place to check that every code a writer uses is declared (``declare`` refuses a code
twice). The English templates are marked with ``gettext_noop`` and ``ngettext_noop`` so
that ``makemessages`` finds them (portal's makemessages knows the second name);
``text()`` translates them when rendered, never when written.

Arguments are tagged so the renderer knows how to show them in any language:

- ``{"code": ..., "args": {...}}``: a nested phrase;
- ``{"resource": "memory", "units": 12884901888, "like": 15032385536}``: a quantity, shown
  by ``kube.quantity.human`` (units are the same in every language);
- ``{"request": [["cpu", 4000], ...]}``: several quantities, "cpu 4, memory 8Gi";
- ``{"jobs": [12, 13]}``: job numbers, "#12, #13";
- ``{"at": "2026-11-27T11:18:48+00:00"}``: a time of day in the reader's zone;
- ``{"moment": "..."}``: a date and time in the reader's zone;
- ``{"number": 2007}``: a count, grouped ("2,007");
- ``{"seconds": 1.23}``: a duration to a tenth of a second;
- ``{"all": [phrase, ...]}``: phrases joined by "and";
- a plain string or number: shown as it is.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, tzinfo
from typing import Any

from django.utils import timezone
from django.utils.translation import gettext, gettext_noop, ngettext, pgettext

from kube.quantity import human, pool_parts
from kube.said import Said


@dataclass(frozen=True)
class Wording:
    """One declared message: its English template (named placeholders, ``%(cpu)s``), and
    for a message whose English changes with a number, its plural and the argument that
    counts."""

    code: str
    singular: str
    plural: str = ""
    count: str = ""


WORDINGS: dict[str, Wording] = {}


def declare(code: str, singular: str, plural: str = "", *, count: str = "") -> str:
    """Declare a wording once; the code, for the writer to name it by."""
    if code in WORDINGS:
        raise ValueError(f"the wording {code} is declared twice")
    WORDINGS[code] = Wording(code, singular, plural, count)
    return code


def ngettext_noop(singular: str, plural: str) -> tuple[str, str]:
    """Marks a plural pair for ``makemessages`` (its keyword list includes ``ngettext_noop``
    through ``--keyword``) without translating it at import time."""
    return singular, plural


@dataclass(frozen=True)
class Phrase:
    """A declared wording and its arguments: what a row stores as ``code`` and ``args``."""

    code: str
    args: Mapping[str, Any] = field(default_factory=dict)

    def text(self) -> str:
        """In the active language and time zone."""
        return _render(self, _ACTIVE)

    def english(self) -> str:
        """What the row stores as its text: in English, times in UTC. Rendered without
        activating a language or a zone: the admission cycle writes one per event."""
        return _render(self, _ENGLISH_UTC)

    def in_english(self) -> str:
        """In English, times in the active zone (what the API says of a job now)."""
        return _render(self, _ENGLISH)

    def as_json(self) -> dict[str, Any]:
        return {"code": self.code, "args": dict(self.args)}

    def __str__(self) -> str:
        return self.text()


def said(code: str, args: Mapping[str, Any] | None, stored: str) -> str:
    """What a row says in the active language: its phrase when it has a declared code, else
    its stored text (rows written before codes, or by a writer that knew a code this
    version does not)."""
    if not code or code not in WORDINGS:
        return stored
    try:
        return Phrase(code, args or {}).text()
    except (KeyError, TypeError, ValueError):
        # Arguments that do not fill this version's wording: the stored text is still true.
        return stored


# Tagged arguments, built by writers.


def quantity(resource: str, units: int, like: int | None = None) -> dict[str, Any]:
    value: dict[str, Any] = {"resource": resource, "units": units}
    if like is not None:
        value["like"] = like
    return value


def resource(key: str) -> dict[str, Any] | str:
    """A resource as a sentence names it: its name, or a pool's share of it (``kube.quantity
    .pooled``) as "nvidia.com/gpu in pool h100" in the reader's language."""
    name, pool = pool_parts(key)
    return Phrase(IN_POOL, {"resource": name, "pool": pool}).as_json() if pool else key


def resource_name(key: str) -> str:
    """A resource as a page names it, in the reader's language: ``nvidia.com/gpu in pool
    h100`` for a pool's share."""
    named = resource(key)
    return named if isinstance(named, str) else Phrase(named["code"], named["args"]).text()


def request(resources: Mapping[str, int]) -> dict[str, Any]:
    # Pairs, not a mapping: the database keeps a JSON object's keys in an order of its own.
    return {"request": [[name, units] for name, units in sorted(resources.items())]}


def jobs(keys: Sequence[int]) -> dict[str, Any]:
    return {"jobs": list(keys)}


def at(moment: datetime) -> dict[str, Any]:
    return {"at": moment.isoformat()}


def moment(when: datetime) -> dict[str, Any]:
    return {"moment": when.isoformat()}


def number(count: int) -> dict[str, Any]:
    return {"number": count}


def seconds(value: float) -> dict[str, Any]:
    return {"seconds": value}


def nested(phrase: Phrase) -> dict[str, Any]:
    return phrase.as_json()


def argument(value: Phrase | str) -> dict[str, Any] | str:
    """A phrase nested as an argument, or words that have no code (the cluster's own)."""
    return value.as_json() if isinstance(value, Phrase) else value


def all_of(phrases: Sequence[Phrase]) -> dict[str, Any]:
    return {"all": [phrase.as_json() for phrase in phrases]}


def _number(value: Any) -> int:
    if isinstance(value, Mapping):
        if "number" in value:
            return int(value["number"])
        if "jobs" in value:
            return len(value["jobs"])
    return int(value)


@dataclass(frozen=True)
class _Voice:
    """How a phrase is rendered: translated into the active language or left in the
    English it is declared in, and its times in the active zone or in ``zone``."""

    translated: bool
    zone: tzinfo | None = None

    def words(self, singular: str, plural: str = "", count: int = 1) -> str:
        if self.translated:
            return ngettext(singular, plural, count) if plural else gettext(singular)
        return singular if not plural or count == 1 else plural

    # The joining words, each a literal for makemessages to find.
    def comma(self) -> str:
        return pgettext("between items of a list", ", ") if self.translated else ", "

    def last_and(self) -> str:
        return (
            pgettext("between the last two items of a list", " and ")
            if self.translated
            else " and "
        )

    def amount(self) -> str:
        if self.translated:
            return pgettext("a resource and its amount", "%(resource)s %(amount)s")
        return "%(resource)s %(amount)s"

    def time(self, iso: str, form: str) -> str:
        return format(timezone.localtime(datetime.fromisoformat(iso), self.zone), form)


_ACTIVE = _Voice(translated=True)
_ENGLISH = _Voice(translated=False)
_ENGLISH_UTC = _Voice(translated=False, zone=UTC)


def _render(phrase: Phrase, voice: _Voice) -> str:
    wording = WORDINGS[phrase.code]
    values = {name: _shown(value, voice) for name, value in phrase.args.items()}
    count = _number(phrase.args[wording.count]) if wording.plural else 1
    template = voice.words(wording.singular, wording.plural, count)
    return template % values if "%" in template else template


def _shown(value: Any, voice: _Voice) -> str:
    if not isinstance(value, Mapping):
        return str(value)
    if "code" in value:
        return _render(Phrase(value["code"], value.get("args") or {}), voice)
    if "resource" in value:
        return human(value["resource"], value["units"], value.get("like"))
    if "request" in value:
        return voice.comma().join(
            voice.amount() % {"resource": name, "amount": human(name, units)}
            for name, units in value["request"]
        )
    if "jobs" in value:
        return voice.comma().join(f"#{key}" for key in value["jobs"])
    if "at" in value:
        return voice.time(value["at"], "%H:%M:%S")
    if "moment" in value:
        return voice.time(value["moment"], "%Y-%m-%d %H:%M:%S")
    if "number" in value:
        return f"{value['number']:,}"
    if "seconds" in value:
        return f"{value['seconds']:.1f}"
    if "all" in value:
        return voice.last_and().join(_shown(item, voice) for item in value["all"])
    raise ValueError(f"an argument of unknown shape: {sorted(value)}")


# The vocabulary. Codes name what happened; a wording may change its English (and its
# translations) without a migration, since rows keep the code and the numbers.

# The admission rule (queues.quota, queues.admission, queues.placement).
QUOTA_SHORT = declare(
    "quota.short",
    gettext_noop(
        "Insufficient quota in %(where)s: %(resource)s requested %(requested)s, free "
        "%(free)s (used %(used)s of max %(limit)s)"
    ),
)
CLUSTER_SHORT = declare(
    "cluster.short",
    gettext_noop(
        "Insufficient cluster capacity: %(resource)s requested %(requested)s, free "
        "%(free)s (used %(used)s of allocatable %(limit)s)"
    ),
)
IN_POOL = declare("resource.in_pool", gettext_noop("%(resource)s in pool %(pool)s"))
POOLS_SHORT = declare("pools.short", gettext_noop("No pool it accepts has room: %(reasons)s"))
POOLS_SHORT_UNLISTED = declare(
    "pools.short_unlisted",
    *ngettext_noop(
        "No pool it accepts has room: %(reasons)s; pool %(pools)s is not in its list",
        "No pool it accepts has room: %(reasons)s; pools %(pools)s are not in its list",
    ),
    count="count",
)
NO_POOL = declare(
    "pools.none",
    gettext_noop("None of the node pools it accepts is a pool of the tree (the tree's: %(pools)s)"),
)
PREEMPTED_RECLAIM = declare(
    "preempted.reclaim",
    gettext_noop(
        "Preempted: %(node)s reclaimed its guaranteed quota (min) from %(borrower)s, which "
        "used more than its min, for job #%(by)s; released %(released)s"
    ),
)
PREEMPTED_PRIORITY = declare(
    "preempted.priority",
    gettext_noop(
        "Preempted: job #%(by)s of higher priority in the same queue needed the quota of "
        "%(node)s; released %(released)s"
    ),
)
PREEMPTED_OVER_QUOTA = declare(
    "preempted.over_quota",
    gettext_noop(
        "Preempted: the quota of %(node)s was lowered below its usage; released %(released)s"
    ),
)
PREEMPTED_DRAIN = declare(
    "preempted.drain",
    gettext_noop(
        "Preempted: %(node)s is drained (stopPolicy HoldAndDrain); back in its queue until it "
        "is resumed; released %(released)s"
    ),
)
PERSON_JOBS = declare(
    "person.jobs",
    *ngettext_noop(
        "Its owner has %(holding)s job holding quota in %(leaf)s, the most one person may have "
        "there (perPerson of %(node)s: %(limit)s)",
        "Its owner has %(holding)s jobs holding quota in %(leaf)s, the most one person may "
        "have there (perPerson of %(node)s: %(limit)s)",
    ),
    count="holding",
)
PERSON_RESOURCES = declare(
    "person.resources",
    gettext_noop(
        "Its owner holds %(used)s of %(resource)s in %(leaf)s and it asks for %(asks)s: one "
        "person may hold %(limit)s there (perPerson of %(node)s)"
    ),
)
RELEASING = declare(
    "releasing",
    *ngettext_noop(
        "Waiting for %(count)s job leaving the cluster (%(jobs)s) to release their quota; "
        "until then: %(now)s",
        "Waiting for %(count)s jobs leaving the cluster (%(jobs)s) to release their quota; "
        "until then: %(now)s",
    ),
    count="count",
)
NO_NODE_HAS = declare(
    "placement.no_node_has",
    gettext_noop("%(pod)s asks for %(resource)s %(amount)s; no node has %(resource)s"),
)
NO_NODE_HAS_THOUGH_TREE = declare(
    "placement.no_node_has_though_tree",
    gettext_noop(
        "%(pod)s asks for %(resource)s %(amount)s; no node has %(resource)s, though the "
        "quota tree offers it"
    ),
)
LARGEST_NODE = declare(
    "placement.largest_node",
    gettext_noop("%(pod)s asks for %(resource)s %(amount)s; the largest node has %(largest)s"),
)
NO_NODE_SELECTED = declare(
    "placement.no_node_selected",
    gettext_noop("%(pod)s asks for nodes with %(selector)s; no node has those labels"),
)
NO_NODE_TOLERATED = declare(
    "placement.no_node_tolerated",
    gettext_noop(
        "%(pod)s can run on no node: each node it selects has a taint it does not "
        "tolerate, such as %(taint)s"
    ),
)
NO_NODE_HAS_ALL = declare(
    "placement.no_node_has_all",
    gettext_noop(
        "%(pod)s asks for %(asks)s on one node; no node has all of it: the closest has "
        "%(resource)s %(closest)s"
    ),
)
BEYOND_THE_NODES = declare(
    "placement.beyond_the_nodes",
    gettext_noop(
        "the job asks for %(resource)s %(amount)s in all; the %(nodes)s nodes hold "
        "%(together)s together"
    ),
)

# The admission cycle's writes (jobs.engine.admission).
DEQUEUED = declare("dequeued", gettext_noop("Dequeued from %(queue)s after waiting %(waited)ss"))
NEXT_TRY = declare("backoff.next_try", gettext_noop("%(reason)s; next try at %(next_at)s"))
CAN_NEVER_RUN = declare("unrunnable", gettext_noop("Can never run: %(reason)s"))

# The cluster's answers (jobs.engine.reconcile, sync, start_timeouts, namespace_health).
REQUEUED = declare(
    "requeued",
    gettext_noop("Left the cluster and went back to %(queue)s at its original place"),
)
OBJECTS_LEFT = declare("stopped", gettext_noop("Its objects left the cluster; its quota is free"))
ALL_PODS_RUNNING = declare("running", gettext_noop("All pods are running"))
START_TIMEOUT = declare(
    "start_timeout",
    gettext_noop(
        "Its pods were not all running %(timeout)ss after its objects were created, so it "
        "left the cluster; last scheduling failure: %(cause)s"
    ),
)
START_TIMEOUT_EVENT = declare(
    "start_timeout.event",
    gettext_noop("%(reason)s; start attempt %(attempt)s of %(attempts)s; next try at %(next_at)s"),
)
START_ATTEMPTS_EXCEEDED = declare(
    "start_timeout.exceeded",
    gettext_noop(
        "Its pods were not all running %(timeout)ss after its objects were created, "
        "%(attempt)s of %(attempts)s times, so it left the cluster and failed; last "
        "scheduling failure: %(cause)s"
    ),
)
NO_SCHEDULING_FAILURE = declare(
    "start_timeout.no_failure", gettext_noop("the cluster reported no scheduling failure")
)
NAMESPACE_FIX = declare(
    "namespace.fix",
    gettext_noop(
        "manage.py cluster_check names what is missing; once the namespace exists, run "
        "%(command)s to give Caldera its Role there"
    ),
)
NAMESPACE_HELD = declare(
    "namespace.held",
    gettext_noop("Its namespace is unavailable since %(since)s: %(reason)s. %(fix)s"),
)
NAMESPACE_FAILED = declare(
    "namespace.failed",
    gettext_noop(
        "Its namespace has been unavailable since %(since)s "
        "(NAMESPACE_GRACE_SECONDS=%(grace)s): %(reason)s"
    ),
)
NAMESPACE_GONE = declare(
    "namespace.gone",
    gettext_noop("Its namespace %(namespace)s was deleted, and the job's objects with it"),
)

# People's actions (jobs.services).
ENQUEUED = declare(
    "enqueued", gettext_noop("Enqueued in %(queue)s by %(user)s at priority %(priority)s")
)
CANCELLED_LEAVING = declare(
    "cancelled.leaving",
    gettext_noop(
        "Cancelled by %(user)s while %(state)s; it holds its quota until the cluster confirms "
        "its objects are gone"
    ),
)
CANCELLED = declare("cancelled", gettext_noop("Cancelled by %(user)s while %(state)s"))
RESUBMITTED = declare("resubmitted", gettext_noop("Resubmitted by %(user)s as #%(copy)s"))
HELD = declare(
    "held", gettext_noop("Held by %(user)s: it keeps its place and is not admitted until released")
)
ENQUEUED_HELD = declare(
    "enqueued.held",
    gettext_noop("Enqueued held in %(queue)s by %(user)s at priority %(priority)s"),
)
RELEASED = declare(
    "released", gettext_noop("Released by %(user)s after %(held)ss held; it is tried again")
)
TIME_LIMIT_STOPPING = declare(
    "time_limit.stopping",
    gettext_noop(
        "Ran past its limit of %(limit)s: it is stopped, and fails once its objects are gone"
    ),
)
TIME_LIMIT_FAILED = declare(
    "time_limit.failed", gettext_noop("Ran past its limit of %(limit)s; its quota is freed")
)
RETRYING = declare(
    "retrying",
    gettext_noop(
        "Attempt %(attempt)s of %(attempts)s failed: %(reason)s; it stops, and attempt "
        "%(next)s is queued once its objects are gone"
    ),
)
RETRY_BACKOFF = declare(
    "retry.backoff",
    gettext_noop("attempt %(attempt)s of %(attempts)s failed: %(reason)s"),
)
RETRY_QUEUED = declare(
    "retry.queued",
    gettext_noop(
        "Attempt %(next)s of %(attempts)s queued in %(queue)s, tried from %(until)s (its backoff)"
    ),
)
PRIORITY_CHANGED = declare(
    "priority.changed", gettext_noop("%(user)s changed priority from %(old)s to %(new)s")
)
PRIORITY_TO_HEAD = declare(
    "priority.to_head",
    gettext_noop("%(user)s moved the job to the head: priority from %(old)s to %(new)s"),
)

# Why a job waits (jobs.reads.waiting): clauses about "it", put together into the sentence
# the job and queue pages show.
WAITING = declare("waiting", gettext_noop("It %(clause)s"))
WAITING_FITS = declare(
    "waiting.fits", gettext_noop("fits now: it is dequeued at the next admission cycle")
)
WAITING_QUOTA = declare(
    "waiting.quota",
    gettext_noop(
        "waits for %(resource)s in %(where)s: used %(used)s of max %(limit)s; it asks for %(asks)s"
    ),
)
WAITING_FITS_POOL = declare(
    "waiting.fits_pool",
    gettext_noop("fits now in pool %(pool)s: it is dequeued at the next admission cycle"),
)
WAITING_IN_POOLS = declare(
    "waiting.in_pools", gettext_noop("has no room in any pool it accepts: it %(clauses)s")
)
WAITING_QUOTA_POOL = declare(
    "waiting.quota_pool",
    gettext_noop(
        "waits for %(resource)s in pool %(pool)s of %(where)s: used %(used)s of max %(limit)s; "
        "it asks for %(asks)s"
    ),
)
WAITING_CLUSTER_POOL = declare(
    "waiting.cluster_pool",
    gettext_noop(
        "waits for %(resource)s in pool %(pool)s of the cluster: used %(used)s of %(limit)s "
        "allocatable; it asks for %(asks)s"
    ),
)
WAITING_UNLISTED = declare(
    "waiting.unlisted",
    *ngettext_noop(
        "%(clause)s; pool %(pools)s is not in its list",
        "%(clause)s; pools %(pools)s are not in its list",
    ),
    count="count",
)
WAITING_FAIR_SHARE = declare(
    "waiting.fair_share",
    gettext_noop(
        "%(clause)s. %(other)s borrows first: its recent usage (half-life %(half_life)s) is "
        "%(theirs)s of its share, %(ours)s's %(yours)s"
    ),
)
WAITING_CLUSTER = declare(
    "waiting.cluster",
    gettext_noop(
        "waits for %(resource)s in the cluster: used %(used)s of %(limit)s allocatable; it "
        "asks for %(asks)s"
    ),
)
WAITING_JOBS = declare(
    "waiting.jobs",
    *ngettext_noop("%(count)s job (%(jobs)s)", "%(count)s jobs (%(jobs)s)"),
    count="count",
)
WAITING_LEAF_JOBS = declare(
    "waiting.leaf_jobs",
    *ngettext_noop("%(count)s %(leaf)s job (%(jobs)s)", "%(count)s %(leaf)s jobs (%(jobs)s)"),
    count="count",
)
WAITING_RECLAIM = declare(
    "waiting.reclaim",
    *ngettext_noop(
        "reclaims %(resource)s for %(leaf)s: the next cycle preempts %(victims)s of "
        "%(borrowers)s, which uses more than its min",
        "reclaims %(resource)s for %(leaf)s: the next cycle preempts %(victims)s of "
        "%(borrowers)s, which use more than their min",
    ),
    count="count",
)
WAITING_RELEASING = declare(
    "waiting.releasing",
    gettext_noop("waits for %(leaving)s to leave the cluster; until then it %(short)s"),
)
WAITING_HELD = declare(
    "waiting.held",
    gettext_noop(
        "is held by %(user)s since %(since)s: it keeps its place and is not admitted until released"
    ),
)
WAITING_STOPPED = declare(
    "waiting.stopped",
    gettext_noop(
        "waits for %(node)s to be resumed: its stopPolicy is %(policy)s, so its queue admits "
        "nothing new until then"
    ),
)
WAITING_PERSON_JOBS = declare(
    "waiting.person_jobs",
    *ngettext_noop(
        "waits for one of its owner's jobs to end: they have %(holding)s job holding quota in "
        "%(leaf)s, the most one person may have there (perPerson of %(node)s); others' jobs "
        "go on",
        "waits for one of its owner's jobs to end: they have %(holding)s jobs holding quota in "
        "%(leaf)s, the most one person may have there (perPerson of %(node)s); others' jobs "
        "go on",
    ),
    count="holding",
)
WAITING_PERSON_RESOURCES = declare(
    "waiting.person_resources",
    gettext_noop(
        "waits for its owner's jobs to free %(resource)s: they hold %(used)s in %(leaf)s and "
        "it asks for %(asks)s, where one person may hold %(limit)s (perPerson of %(node)s); "
        "others' jobs go on"
    ),
)
WAITING_CLOSED = declare(
    "waiting.closed",
    gettext_noop("waits for its queue %(queue)s to open: it admits nothing until then"),
)
WAITING_AHEAD = declare(
    "waiting.ahead",
    *ngettext_noop("%(count)s job ahead", "%(count)s jobs ahead"),
    count="count",
)
WAITING_BEHIND = declare("waiting.behind", gettext_noop("%(ahead)s; %(first)s %(clause)s; %(own)s"))
WAITING_FIRST = declare("waiting.first", gettext_noop("the first job ahead"))
WAITING_FIRST_NUMBERED = declare(
    "waiting.first_numbered", gettext_noop("the first job ahead, #%(job)s,")
)
WAITING_OWN_ASK = declare(
    "waiting.own_ask", gettext_noop("this job asks for %(resource)s %(amount)s")
)
WAITING_OWN_FITS = declare("waiting.own_fits", gettext_noop("this job alone would fit now"))
WAITING_BACKOFF = declare(
    "waiting.backoff",
    gettext_noop(
        "backs off until %(until)s (sooner if capacity frees) after: %(reason)s; tried now, "
        "it %(clause)s"
    ),
)
WAITING_BEST_EFFORT = declare(
    "waiting.best_effort", gettext_noop("%(ahead)s, tried anyway (best effort); it %(clause)s")
)
WAITING_PASSED_OVER = declare(
    "waiting.passed_over",
    gettext_noop(
        "%(ahead)s, the first at its owner's limit and passed over (perPerson); it %(clause)s"
    ),
)
WAITING_CREATING = declare(
    "waiting.creating",
    gettext_noop("is dequeued and holds its quota; its objects are being created in the cluster"),
)
WAITING_PLACING = declare(
    "waiting.placing",
    gettext_noop(
        "is dequeued and holds its quota; the cluster is placing its pods%(last)s. If they "
        "are not all running by %(deadline)s, it leaves the cluster and waits in its queue "
        "again"
    ),
)
WAITING_LAST_WORD = declare(
    "waiting.last_word", gettext_noop(". The cluster's last word: %(message)s")
)
WAITING_LAST_WORD_CYCLE = declare(
    "waiting.last_word_cycle",
    gettext_noop(". The cluster's last word (scheduling cycle %(cycle)s): %(message)s"),
)


def in_language(reason: str) -> str:
    """A rule module's refusal (``kube.said.Said``) in the active language, at the moment
    it becomes an API error or a form's message; any other text as it is."""
    if not isinstance(reason, Said):
        return reason
    template = gettext(reason.template)
    if not reason.values:
        return template
    return template % {name: in_language(value) for name, value in reason.values.items()}
