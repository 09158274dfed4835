"""The job document's fields, declared once.

``FIELDS`` lists every field of a job document, in the order the API documents them. A
row says how the field is read (its reader, from ``jobs.document.fields``), which column
of a ``Job`` keeps it, how ``job_document`` gives it back, how the submit page asks for
it and turns its input into the document's value and back, and how the cluster's
``JobSpec`` takes it. ``JobIn`` and so the API's job answers, a draft's columns and so the
``Job`` it becomes, ``job_document``, the form's inputs with both mappings, and
``job_spec`` are derived from these rows: a new field of a job is a row here, a column of
the model with its migration, and its tests (tests/api/test_job_fields.py checks that
every place takes every row).

Two parts of the document are one kind's: a Ray job's ``head`` and ``entrypoint``, a
PyTorch job's ``master`` and ``command`` (``of_kind`` names the part, ``jobs.models.KINDS``
which field each kind has). The pods, ``head`` or ``master`` and ``workers``, are
structured: ``JobIn`` reads them with ``jobs.document.pods``, the form has sections of its
own for them, and ``job_spec`` makes their pod groups.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, NamedTuple

from django.conf import settings
from django.core.validators import RegexValidator
from django.utils.functional import lazy
from django.utils.translation import gettext, gettext_lazy, gettext_noop
from django_stubs_ext import StrOrPromise
from rest_framework import serializers

from jobs.cluster.spec import DEFAULT_RUN_SECONDS
from jobs.document.fields import (
    Choice,
    Claims,
    Command,
    Count,
    Duration,
    Env,
    ImageReference,
    Number,
    Pip,
    PoolNames,
    SecretEnv,
    SharedMemory,
    Text,
    priority_field,
)
from jobs.document.pods import PodIn, WorkerGroupIn
from jobs.document.validation import (
    DNS_LABEL,
    FILE_NAME,
    MAX_RUN_SECONDS,
    MAX_SCRIPT_BYTES,
    MIN_RUN_SECONDS,
    NAME_MAX,
)
from jobs.models import DOCUMENT_KINDS, Job
from queues.limits import RETRIES_MAX, format_duration

_INTEGER = re.compile(r"^[+-]?\d{1,18}$")  # longer goes on as text, for JobIn to refuse

# How the form's text becomes the document's value and back


class Codec(NamedTuple):
    to_form: Callable[[Any], str]  # the document's value, as the input shows it
    from_form: Callable[[str], Any]  # the input's text, as the document holds it


def _as_typed(text: str) -> str:
    return text


def _number(text: str) -> int | str:
    """Digits become an int (as in a JSON body); anything else goes on for JobIn to name."""
    return int(text) if _INTEGER.match(text) else text.strip()


def _plain(number: object) -> str:
    """600.0 -> "600", 2.5 -> "2.5"."""
    if isinstance(number, float) and number.is_integer():
        return str(int(number))
    return str(number)


def _env_lines(env: Mapping[str, str]) -> str:
    return "\n".join(f"{name}={value}" for name, value in env.items())


def _env_read(text: str) -> dict[str, str | None]:
    """One NAME=value a line; a line without "=" has no value, for JobIn to refuse."""
    env: dict[str, str | None] = {}
    for line in text.splitlines():
        if line.strip():
            name, equals, value = line.strip().partition("=")
            env[name.strip()] = value if equals else None
    return env


def _claim_lines(claims: list[Mapping[str, Any]]) -> str:
    return "\n".join(
        f"{c['claim']}:{c['path']}{':ro' if c.get('read_only') else ''}" for c in claims
    )


def _claims_read(text: str) -> list[dict[str, Any]]:
    """One CLAIM:/path a line, ``:ro`` after it for read-only (as ``docker run -v`` writes
    it); a line that is not one goes on for the reader to refuse."""
    claims: list[dict[str, Any]] = []
    for line in text.splitlines():
        if line.strip():
            claim, _colon, rest = line.strip().partition(":")
            mount, read_only = rest, False
            if rest.endswith(":ro"):
                mount, read_only = rest[: -len(":ro")], True
            claims.append({"claim": claim.strip(), "path": mount.strip(), "read_only": read_only})
    return claims


TEXT = Codec(str, _as_typed)
NUMBER = Codec(_plain, _number)
SHELL = Codec(shlex.join, _as_typed)  # a shell-style line; JobIn splits it
WORDS = Codec(" ".join, str.split)
LINES = Codec(_env_lines, _env_read)
CLAIM_LINES = Codec(_claim_lines, _claims_read)


@dataclass(frozen=True)
class FormInput:
    """How the submit page asks for a field. The input's help, bounds and whether it keeps
    surrounding spaces come from the field's reader unless it says otherwise."""

    label: StrOrPromise  # in the reader's language when the form is made
    section: str = "Job"  # the form's "Job", "Storage" or "Scheduling"
    type: str = "text"  # text, number, select, textarea
    placeholder: str = ""
    help: StrOrPromise | None = None  # None: the reader's help_text
    wide: bool = False  # a line of its own
    value: str = ""  # what an empty form shows
    choices: Sequence[tuple[str, str]] | None = None  # a select's; None: the form is given them
    blank: StrOrPromise = ""  # a select's choice of nothing, so named
    codec: Codec = TEXT
    at_end: bool = False  # below the other inputs of its section (a large text area)


@dataclass(frozen=True)
class NoInput:
    """A field the form has no input for: its errors are shown on ``errors_on``'s input,
    and a copied job whose value is not what the API reads without it is told that the
    form leaves out ``words`` (the API takes it)."""

    words: StrOrPromise
    errors_on: str


@dataclass(frozen=True)
class JobField:
    """One field of a job document, and how each place that handles a job takes it."""

    name: str  # in the document, and the Job's column unless ``column`` says another
    reader: Callable[[], serializers.Field]  # a new one for each serializer that declares it
    form: FormInput | NoInput | None = None  # None: a structured field, in a section of its own
    # The Job's column that keeps it; None: none does (the draft keeps the queue's name).
    column: str | None = ""
    # What job_document gives back; None: the column.
    document: Callable[[Job], object] | None = None
    omit_empty: bool = False  # job_document leaves it out when empty
    spec: Callable[[Any], Any] | None = None  # JobSpec's value of the column; None: not taken
    of_kind: str = ""  # "head" or "launch": the KindShape part it is for one kind
    structured: bool = False  # a pod or the worker groups: read and shown by their own code

    def __post_init__(self) -> None:
        if self.column == "":
            object.__setattr__(self, "column", self.name)

    def stored(self, job: Job) -> object:
        """The field's value in ``job``, as the document gives it."""
        if self.document is not None:
            return self.document(job)
        assert self.column is not None  # a field without a column says how it reads
        return getattr(job, self.column)


def _as_is(value: Any) -> Any:
    return value


def _run_seconds(seconds: float | None) -> float:
    return DEFAULT_RUN_SECONDS if seconds is None else seconds


def _worker_groups() -> serializers.Field:
    # many=True hands max_length to the ListSerializer; the stub's __init__ does not list it.
    return WorkerGroupIn(  # type: ignore[call-arg]
        many=True,
        required=False,
        max_length=settings.JOB_MAX_WORKER_GROUPS,
        help_text=f"at most {settings.JOB_MAX_WORKER_GROUPS} groups (JOB_MAX_WORKER_GROUPS), "
        f"and at most {settings.JOB_MAX_PODS} pods in all (JOB_MAX_PODS): the head or master "
        "and every worker, an autoscaling group at its max_replicas",
    )


def _words(text: str, **values: object) -> StrOrPromise:
    """``text`` (marked with gettext_noop) in the reader's language, filled with ``values``,
    when it is read rather than when this module is loaded."""
    return lazy(lambda: gettext(text) % values, str)()


FIELDS: tuple[JobField, ...] = (
    JobField(
        "queue",
        partial(Text, required=True, help_text="leaf path (root/algorithm/video) or queue name"),
        FormInput(gettext_lazy("Queue"), type="select", help=""),
        column=None,
        document=lambda job: job.queue.node.path,
    ),
    JobField(
        "kind",
        partial(Choice, DOCUMENT_KINDS, required=True),
        FormInput(gettext_lazy("Kind"), type="select", choices=DOCUMENT_KINDS, value=Job.Kind.RAY),
        spec=_as_is,
    ),
    JobField(
        "runtime",
        partial(
            Choice,
            Job.Runtime.choices,
            check=False,
            help_text="default: the first runtime this cluster offers for the kind",
        ),
        FormInput(
            gettext_lazy("Runs on"),
            type="select",
            blank=gettext_lazy("the cluster's default for the kind"),
            help="",
        ),
        spec=_as_is,
    ),
    JobField(
        "name",
        partial(
            Text,
            required=True,
            max_length=NAME_MAX,
            validators=[RegexValidator(DNS_LABEL.pattern)],  # declared; JobIn.read checks it
            help_text=f"lowercase letters, digits and '-', at most {NAME_MAX} characters",
        ),
        FormInput(
            gettext_lazy("Name"),
            placeholder="rayjob-video",
            help=_words(
                gettext_noop("lowercase letters, digits and '-', at most %(count)s characters"),
                count=NAME_MAX,
            ),
        ),
        spec=_as_is,
    ),
    JobField(
        "image",
        partial(
            ImageReference,
            required=True,
            help_text="[registry[:port]/]path[:tag][@digest]: rayproject/ray:2.36.1",
        ),
        FormInput(
            gettext_lazy("Image"),
            placeholder="rayproject/ray:2.36.1",
            help=gettext_lazy("[registry[:port]/]path[:tag][@digest]: rayproject/ray:2.36.1"),
        ),
        spec=_as_is,
    ),
    JobField(
        "entrypoint",
        partial(Text, limit=10_000, help_text="Ray: the command to run"),
        FormInput(
            gettext_lazy("Entrypoint (Ray)"),
            help="",
            wide=True,
            placeholder="python /home/ray/samples/sample_code.py",
        ),
        spec=_as_is,
        of_kind="launch",
    ),
    JobField(
        "command",
        partial(Command, help_text="PyTorch: a list of arguments or one shell-style string"),
        FormInput(
            gettext_lazy("Command (PyTorch, shell-style)"),
            help="",
            wide=True,
            placeholder="torchrun --nproc-per-node 1 train.py",
            codec=SHELL,
        ),
        spec=tuple,
        of_kind="launch",
    ),
    JobField(
        "script",
        partial(Text, limit=MAX_SCRIPT_BYTES, strip=False, help_text="mounted as a ConfigMap"),
        FormInput(
            gettext_lazy("Script (optional, mounted as main.py in the head/master pod)"),
            type="textarea",
            help="",
            wide=True,
            at_end=True,
        ),
        omit_empty=True,
        spec=_as_is,
    ),
    JobField(
        "script_filename",
        partial(
            Text,
            limit=100,
            max_length=100,
            default="main.py",
            validators=[RegexValidator(FILE_NAME.pattern)],  # declared; JobIn.read checks it
        ),
        NoInput(gettext_lazy("the script's file name"), errors_on="script"),
        # Its file name goes with a script, and without one it names nothing.
        document=lambda job: job.script_filename if job.script else "",
        omit_empty=True,
        spec=_as_is,
    ),
    JobField(
        "head",
        partial(PodIn, required=False, help_text="Ray: the head pod"),
        of_kind="head",
        structured=True,
    ),
    JobField(
        "master",
        partial(PodIn, required=False, help_text="PyTorch: the master pod"),
        column="head",
        of_kind="head",
        structured=True,
    ),
    JobField("workers", _worker_groups, structured=True),
    JobField(
        "priority",
        partial(
            priority_field, default=0, help_text="higher runs first; members submit at 0 or below"
        ),
        FormInput(
            gettext_lazy("Priority"),
            section="Scheduling",
            type="number",
            value="0",
            help=gettext_lazy("higher runs first; members submit at 0 or below"),
            codec=NUMBER,
        ),
        spec=_as_is,
    ),
    JobField(
        "pools",
        partial(
            PoolNames,
            help_text="the node pools of the quota tree the job accepts, in order: "
            '["h100", "a100"]; empty: the tree\'s order. Its pods carry the chosen pool\'s '
            "node labels and tolerations",
        ),
        FormInput(
            gettext_lazy("Node pools (in order, space-separated)"),
            section="Scheduling",
            placeholder="h100 a100",
            help=gettext_lazy(
                "the kinds of node it may run on, the one it prefers first; empty: any, in the "
                "quota tree's order"
            ),
            codec=WORDS,
        ),
        omit_empty=True,
    ),
    JobField(
        "run_seconds",
        partial(
            Number,
            default=None,
            allow_null=True,
            min_value=MIN_RUN_SECONDS,
            max_value=MAX_RUN_SECONDS,
            help_text="the expected run time in seconds, if known: estimates of when jobs "
            "start use it (else the median of the queue's recent jobs), and the simulated "
            "cluster runs the job this long (60 s when not given)",
        ),
        FormInput(
            gettext_lazy("Expected run time (seconds)"),
            section="Scheduling",
            type="number",
            placeholder="600",
            help=gettext_lazy(
                "if you know it: start estimates use it, and the simulated cluster runs the "
                "job this long (60 s if blank)"
            ),
            codec=NUMBER,
        ),
        omit_empty=True,
        spec=_run_seconds,
    ),
    JobField(
        "time_limit",
        partial(
            Duration,
            help_text="the longest the job may run once its pods run: 2h, 1h30m or seconds; "
            "past it the job is stopped and fails. Empty: the queue's default (its leaf's "
            "limits.defaultTime), if any; never above its limits.maxTime",
        ),
        FormInput(
            gettext_lazy("Time limit"),
            section="Scheduling",
            placeholder="2h",
            help=gettext_lazy(
                "past it the job is stopped and fails: 2h, 1h30m; empty: the queue's default"
            ),
        ),
        document=lambda job: format_duration(job.time_limit) if job.time_limit else None,
        omit_empty=True,
    ),
    JobField(
        "retries",
        partial(
            Count,
            default=0,
            min_value=0,
            max_value=RETRIES_MAX,
            help_text="how many times a failed job is run again, each a numbered attempt "
            "(preemptions and start timeouts are not failures); at most the leaf's "
            "limits.maxRetries",
        ),
        FormInput(
            gettext_lazy("Retries on failure"),
            section="Scheduling",
            type="number",
            value="0",
            help=gettext_lazy("each retry is a numbered attempt of the same job"),
            codec=NUMBER,
        ),
        omit_empty=True,
    ),
    JobField(
        "pip",
        partial(
            Pip,
            help_text='Ray on kuberay: requirements for the runtime environment, ["torch==2.4.0"]',
        ),
        FormInput(
            gettext_lazy("Pip packages (Ray on KubeRay, space-separated)"),
            help="",
            wide=True,
            placeholder="torch==2.4.0 pandas",
            codec=WORDS,
        ),
        omit_empty=True,
        spec=tuple,
    ),
    JobField(
        "env",
        partial(Env, help_text='{"NAME": "value"}'),
        FormInput(
            gettext_lazy("Environment variables (one NAME=value a line)"),
            type="textarea",
            help=gettext_lazy(
                "stored with the job and shown on its page: give passwords and tokens as "
                "variables from Secrets (below)"
            ),
            wide=True,
            codec=LINES,
        ),
        omit_empty=True,
        spec=dict,
    ),
    JobField(
        "claims",
        partial(
            Claims,
            help_text="PersistentVolumeClaims of the job's namespace, mounted in every pod: "
            '[{"claim": "datasets", "path": "/data", "read_only": true}]',
        ),
        FormInput(
            gettext_lazy("Claims to mount (one CLAIM:/path a line, :ro for read-only)"),
            section="Storage",
            type="textarea",
            help=gettext_lazy(
                "PersistentVolumeClaims of the queue's namespace, mounted in every pod: "
                "datasets:/data:ro"
            ),
            wide=True,
            placeholder="datasets:/data:ro",
            codec=CLAIM_LINES,
        ),
        omit_empty=True,
        spec=tuple,
    ),
    JobField(
        "shm",
        partial(
            SharedMemory,
            help_text="a memory-backed /dev/shm of this size in every pod (PyTorch's data "
            "loader needs more than the runtime's 64M): 8Gi; it counts against the pod's "
            "memory",
        ),
        FormInput(
            gettext_lazy("Shared memory (/dev/shm)"),
            section="Storage",
            placeholder="8Gi",
            help=gettext_lazy(
                "memory-backed, in every pod; PyTorch's data loader needs more than the "
                "runtime's 64M. It counts against the pod's memory"
            ),
        ),
        omit_empty=True,
        spec=_as_is,
    ),
    JobField(
        "secret_env",
        partial(
            SecretEnv,
            help_text="variables read from Secrets of the job's namespace, in every pod: "
            '{"HF_TOKEN": "hf-credentials/token"} (a Secret\'s name and key); the value '
            "never passes through Caldera",
        ),
        FormInput(
            gettext_lazy("Variables from Secrets (one NAME=secret/key a line)"),
            section="Storage",
            type="textarea",
            help=gettext_lazy(
                "credentials stay in the namespace's Secrets: HF_TOKEN=hf-credentials/token. "
                "Caldera never sees their values; give passwords and tokens this way, not as "
                "plain variables"
            ),
            wide=True,
            placeholder="HF_TOKEN=hf-credentials/token",
            codec=LINES,
        ),
        omit_empty=True,
        spec=dict,
    ),
)

# The fields read as they are, each by its reader alone (JobIn reads the rest by the
# kind, or group by group).
PLAIN: tuple[JobField, ...] = tuple(f for f in FIELDS if not f.of_kind and not f.structured)
# The fields JobSpec takes, by name, from their columns.
_SPEC = tuple((f.name, f.column, f.spec) for f in FIELDS if f.spec is not None and f.column)
SPEC_COLUMNS = tuple(column for _, column, _ in _SPEC)


def spec_values(job: Job) -> dict[str, Any]:
    """What ``JobSpec`` takes of ``job``'s document, by the names it takes them under."""
    return {name: take(getattr(job, column)) for name, column, take in _SPEC}
