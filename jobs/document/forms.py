"""The submit page's form, built on the job document that ``jobs.document.schema.JobIn`` declares.

Each input stands for one path of the document (``head_cpu`` is ``head.resources.cpu``,
``worker1_replicas`` is ``workers[1].replicas``); the inputs of the document's plain fields
are those its rows declare (``jobs.document.shape``). An input takes its help and limits
from the declared field where the form says nothing else, and shows the errors the API gives
for that path, word for word. A form holds any number of worker groups: "Add a worker
group" posts the form back with one more (no script needed). The form's values become an
API body (``SubmitForm.document``) that ``JobIn`` checks like any other.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from rest_framework import serializers

from jobs.document.fields import path, resources_required
from jobs.document.pods import WorkerGroupIn, pod_required
from jobs.document.schema import JobIn, bound
from jobs.document.shape import FIELDS, NUMBER, FormInput, NoInput
from jobs.models import kind_shape

GPU = "nvidia.com/gpu"
# The resources the form asks for, per pod: (resource, input suffix, label, example).
RESOURCES = (
    ("cpu", "cpu", gettext_lazy("CPU"), "4"),
    ("memory", "memory", gettext_lazy("Memory"), "4Gi"),
    (GPU, "gpu", gettext_lazy("GPU"), ""),
)
# What a pod may use beyond its request, which the form asks apart: (resource, suffix, label).
LIMITS = (
    ("cpu", "cpu_limit", gettext_lazy("CPU limit")),
    ("memory", "memory_limit", gettext_lazy("Memory limit")),
)
# What the form asks of every head or master pod (a pod of no resources cannot be placed).
HEAD_REQUIRED = ("cpu", "memory")
# The API's words that read as code on a form, and a person's for them: a pod's resources
# missing (the API's reasons in the active language) is said as what to fill in.
_FORM_WORDS = (
    (resources_required, gettext_lazy("give the pod's CPU and memory")),
    (pod_required, gettext_lazy("give the pod's CPU and memory")),
)
# The API's reasons a form shows most, in the reader's language (the API words them for
# programs; the others are shown as the API gives them).
_REASONS = {
    "is required": gettext_lazy("is required"),
    "is required (or give a script to run)": gettext_lazy("is required (or give a script to run)"),
}
MAX_GROUPS = 8  # worker groups one form offers; the API takes more
# The fields the form has an input for, in the order it shows them, and those it has none
# for (jobs.document.shape).
ASKED = sorted(
    ((f, f.form) for f in FIELDS if isinstance(f.form, FormInput)), key=lambda a: a[1].at_end
)
NOT_ASKED = [(f, f.form) for f in FIELDS if isinstance(f.form, NoInput)]
_ERRORS_ON = {declared.name: form.errors_on for declared, form in NOT_ASKED}
ADD_GROUP = "add-group"
REMOVE_GROUP = "remove-group"


@dataclass
class Input:
    name: str  # the HTML name
    path: str  # the document path whose errors it shows
    label: str
    type: str = "text"  # text, number, select, textarea
    help: str = ""
    placeholder: str = ""
    choices: Sequence[tuple[str, str]] = ()
    value: str = ""
    errors: list[str] = field(default_factory=list)
    minimum: int | float | None = None
    maximum: int | float | None = None
    wide: bool = False  # a line of its own
    strip: bool = True  # surrounding spaces are dropped, unless the field keeps them
    required: bool = False  # marked so, and refused empty


@dataclass
class Section:
    legend: str
    path: str  # errors of this path, or below it and on no input, are shown on the section
    inputs: list[Input]
    note: str = ""
    errors: list[str] = field(default_factory=list)
    group: int | None = None  # the worker group's number on the form
    name: str = ""  # its HTML id, and its key in SubmitForm.errors


def group_prefix(index: int) -> str:
    """The inputs of worker group ``index`` are named ``worker_cpu``, ``worker1_cpu``, ..."""
    return "worker" if index == 0 else f"worker{index}"


def _declared(reader: serializers.Field, name: str, label: str, **kwargs) -> Input:
    """An input for a declared field: its help and limits unless the form gives its own."""
    kwargs.setdefault("help", reader.help_text or "")
    for limit, attribute in (("minimum", "min_value"), ("maximum", "max_value")):
        kwargs.setdefault(limit, getattr(reader, attribute, None))
    kwargs.setdefault("strip", getattr(reader, "strip", True))
    kwargs.setdefault("required", reader.required)
    return Input(name=name, path=name, label=label, **kwargs)


class SubmitForm:
    """The form's inputs, values and errors. ``data`` is a POST (or nothing, for the
    empty form); ``queues`` and ``runtimes`` are the choices this user and cluster have."""

    def __init__(self, data: Mapping[str, str] | None, *, queues, runtimes):
        data = data or {}
        self.fields = bound(JobIn).fields
        self.groups = self._group_count(data)
        self.sections = self._sections(queues, runtimes)
        self.inputs = {i.name: i for section in self.sections for i in section.inputs}
        for name, item in self.inputs.items():
            raw = data.get(name, "") if data else item.value  # a POST says every value
            item.value = raw.strip() if item.strip else raw
        self.top_errors: list[str] = []
        self.group_of: list[int] = []  # the form's group of each worker group in the document

    @staticmethod
    def _group_count(data: Mapping[str, str]) -> int:
        given = data.get("groups", "1")
        count = max(int(given), 1) if re.fullmatch(r"\d{1,2}", given) else 1
        action = data.get("action")
        count += 1 if action == ADD_GROUP else -1 if action == REMOVE_GROUP else 0
        return min(max(count, 1), MAX_GROUPS)

    def _sections(self, queues, runtimes) -> list[Section]:
        offered = {"queue": queues, "runtime": runtimes}  # this user's, this cluster's
        asked: dict[str, list[Input]] = {"Job": [], "Storage": [], "Scheduling": []}
        for declared, form in ASKED:
            choices = offered.get(declared.name, ()) if form.choices is None else form.choices
            if form.blank:
                choices = [("", str(form.blank)), *choices]
            asked[form.section].append(
                _declared(
                    self.fields[declared.name],
                    declared.name,
                    str(form.label),
                    type=form.type,
                    placeholder=form.placeholder,
                    choices=choices if form.type == "select" else (),
                    value=form.value,
                    wide=form.wide,
                    **({} if form.help is None else {"help": str(form.help)}),
                )
            )
        job = Section(_("Job"), "", asked["Job"])
        head = Section(
            _("Head (Ray) / master (PyTorch): one pod"),
            "head",
            name="head",
            inputs=[
                Input(
                    f"head_{suffix}",
                    f"head.resources.{resource}",
                    f"{label} ({resource})" if resource == GPU else str(label),
                    placeholder=example,
                    help=_("optional") if resource == GPU else "",
                    required=resource in HEAD_REQUIRED,
                )
                for resource, suffix, label, example in RESOURCES
            ]
            + self._limit_inputs("head", "head"),
        )
        groups = [self._group_section(index) for index in range(self.groups)]
        storage = Section(_("Data, shared memory and credentials"), "", asked["Storage"])
        scheduling = Section(_("Scheduling"), "", asked["Scheduling"])
        return [job, head, *groups, storage, scheduling]

    @staticmethod
    def _limit_inputs(prefix: str, key: str) -> list[Input]:
        """A pod's limits apart from its request: what it may use when the node has it."""
        return [
            Input(
                f"{prefix}_{suffix}",
                path(key, f"limits.{resource}"),
                str(label),
                help=_("optional: at least the request; the request is what quota counts"),
            )
            for resource, suffix, label in LIMITS
        ]

    def _group_section(self, index: int) -> Section:
        group: WorkerGroupIn = self.fields["workers"].child
        g, key = group.fields, f"workers[{index}]"
        prefix = group_prefix(index)
        inputs = [
            _declared(g["name"], f"{prefix}_name", _("Name"), help="", placeholder="small-group"),
            _declared(g["replicas"], f"{prefix}_replicas", _("Replicas"), type="number", value="1"),
            _declared(
                g["max_replicas"],
                f"{prefix}_max_replicas",
                _("Max replicas (optional)"),
                type="number",
                help=_(
                    "Ray on KubeRay only: the group autoscales between Replicas and this. "
                    "Quota counts Replicas, the pods it starts with, and the autoscaler "
                    "(500m CPU, 512Mi)."
                ),
            ),
        ]
        inputs += [
            Input(
                f"{prefix}_{suffix}",
                "",
                _("%(resource)s per pod") % {"resource": label},
                placeholder=example,
            )
            for resource, suffix, label, example in RESOURCES
        ]
        for item, name in zip(inputs, ("name", "replicas", "max_replicas"), strict=False):
            item.path = path(key, name)
        for item, (resource, *_rest) in zip(inputs[3:], RESOURCES, strict=True):
            item.path = path(key, f"resources.{resource}")
        inputs += self._limit_inputs(prefix, key)
        legend = (
            _("Worker group")
            if index == 0
            else _("Worker group %(number)s") % {"number": index + 1}
        )
        return Section(
            legend,
            key,
            inputs,
            note=_("leave CPU, memory and GPU empty for none"),
            group=index,
            name=prefix,
        )

    # The document

    def document(self) -> dict:
        """The form's values as an API body (see RAY_JOB / PYTORCH_JOB in the tests)."""
        values = {name: item.value for name, item in self.inputs.items()}
        shape = kind_shape(values["kind"])
        document: dict = {}
        for declared, form in ASKED:
            value = values[declared.name]
            # What the API requires is sent as it is, so that JobIn names what is missing,
            # and so is the kind's own command field; the other kind's is passed on only
            # when filled, so that JobIn says why it does not belong.
            own = declared.of_kind and getattr(shape, declared.of_kind) == declared.name
            if own or self.fields[declared.name].required or value.strip():
                document[declared.name] = form.codec.from_form(value)
        document[shape.head] = {"resources": self._resources(values, "head")}
        if limits := self._limits(values, "head"):
            document[shape.head]["limits"] = limits
        workers = []
        self.group_of = []
        for index in range(self.groups):
            group = self._group(values, group_prefix(index))
            if group is not None:
                workers.append(group)
                self.group_of.append(index)
        if workers:
            document["workers"] = workers
        return document

    @staticmethod
    def _limits(values: Mapping[str, str], prefix: str) -> dict[str, str]:
        return {
            resource: values[f"{prefix}_{suffix}"]
            for resource, suffix, _label in LIMITS
            if values[f"{prefix}_{suffix}"]
        }

    @staticmethod
    def _resources(values: Mapping[str, str], prefix: str) -> dict[str, str]:
        return {
            resource: values[f"{prefix}_{suffix}"]
            for resource, suffix, _label, _example in RESOURCES
            if values[f"{prefix}_{suffix}"]
        }

    def _group(self, values: Mapping[str, str], prefix: str) -> dict | None:
        """A worker group, or None when its inputs are empty (no group)."""
        resources = self._resources(values, prefix)
        name, maximum = values[f"{prefix}_name"], values[f"{prefix}_max_replicas"]
        if not (resources or name or maximum):
            return None
        group: dict = {
            "replicas": NUMBER.from_form(values[f"{prefix}_replicas"] or "1"),
            "resources": resources,
        }
        if name:
            group["name"] = name
        if limits := self._limits(values, prefix):
            group["limits"] = limits
        if maximum:
            group["max_replicas"] = NUMBER.from_form(maximum)
        return group

    # Errors

    def place(self, errors: Mapping[str, list[str]]) -> None:
        """Put each of JobInvalid's errors on its input, else on its section, else at
        the top of the form with its path."""
        by_path = {item.path: item for item in self.inputs.values()}
        sections = sorted(
            (s for s in self.sections if s.path), key=lambda s: len(s.path), reverse=True
        )
        for key, reasons in errors.items():
            where = self._form_path(key)
            item = by_path.get(where)
            prefix = re.split(r"[.\[]", where)[0]
            if item is None and where in _ERRORS_ON:  # a field without an input
                item = self.inputs[_ERRORS_ON[where]]
            if item is None and prefix in by_path and where != prefix:
                # pip[2] and env.NAME: on the input, saying which
                item = by_path[prefix]
                reasons = [f"{where[len(prefix) :].lstrip('.')}: {reason}" for reason in reasons]
            if item is not None:
                item.errors.extend(str(_REASONS.get(reason, reason)) for reason in reasons)
                continue
            section = next((s for s in sections if _within(where, s.path)), None)
            if section is None and where == "workers":
                section = next(s for s in self.sections if s.group == 0)
            if section is not None and where in (section.path, path(section.path, "resources")):
                section.errors.extend(_in_words(reason) for reason in reasons)
            elif section is not None:
                section.errors.extend(f"{key}: {reason}" for reason in reasons)
            else:
                self.top_errors.extend(f"{key}: {reason}" for reason in reasons)

    def _form_path(self, key: str) -> str:
        """A document path as the form lays it out: ``master`` shows as ``head``, and a
        worker group as the form group it came from."""
        if key == "master" or key.startswith(("master.", "master[")):
            return "head" + key[len("master") :]
        found = re.match(r"workers\[(\d+)\]", key)
        if found and int(found.group(1)) < len(self.group_of):
            return f"workers[{self.group_of[int(found.group(1))]}]" + key[found.end() :]
        return key

    @property
    def first_error(self) -> str:
        """The input that takes the focus when the page answers a refusal: the first with
        an error, or the first of the first section with one."""
        for section in self.sections:
            for item in section.inputs:
                if item.errors or (section.errors and item is section.inputs[0]):
                    return item.name
        return ""

    @property
    def errors(self) -> dict[str, list[str]]:
        """Errors by input name, and by section: ``head``, ``worker``, ``worker1``, ..."""
        placed = {name: item.errors for name, item in self.inputs.items() if item.errors}
        return placed | {s.name: s.errors for s in self.sections if s.errors}

    @property
    def values(self) -> dict[str, str]:
        return {name: item.value for name, item in self.inputs.items()} | {
            "groups": str(self.groups)
        }


def _in_words(reason: str) -> str:
    """An error of a pod's resources as the form says it."""
    for said, words in _FORM_WORDS:
        if reason == said():
            return str(words)
    return str(_REASONS.get(reason, reason))


def form_data(document: Mapping) -> tuple[dict[str, str], list[str]]:
    """The form's values for a job document (``schema.job_document``): the inverse of
    ``SubmitForm.document``. Also what the form cannot hold (a resource it has no input
    for, more than MAX_GROUPS worker groups, a field it has no input for, such as a script's
    own file name), for the page to say so: the API takes those."""
    kind = document["kind"]
    head = document.get(kind_shape(kind).head) or {}
    data = {}
    for declared, form in ASKED:
        value = document.get(declared.name)
        data[declared.name] = "" if value is None else form.codec.to_form(value)
    left_out = _fill_resources(data, "head", head.get("resources") or {}, "head")
    _fill_limits(data, "head", head.get("limits") or {})
    workers = document.get("workers") or []
    for index, group in enumerate(workers[:MAX_GROUPS]):
        prefix = group_prefix(index)
        data[f"{prefix}_name"] = group.get("name", "")
        data[f"{prefix}_replicas"] = str(group.get("replicas", 1))
        data[f"{prefix}_max_replicas"] = str(group.get("max_replicas") or "")
        where = f"workers[{index}]"
        left_out += _fill_resources(data, prefix, group.get("resources") or {}, where)
        _fill_limits(data, prefix, group.get("limits") or {})
    data["groups"] = str(max(min(len(workers), MAX_GROUPS), 1))
    if len(workers) > MAX_GROUPS:
        left_out.append(_("worker groups after the first %(count)s") % {"count": MAX_GROUPS})
    fields = bound(JobIn).fields
    for declared, missing in NOT_ASKED:
        value = document.get(declared.name)
        if value is not None and value != fields[declared.name].run_validation(None):
            left_out.append(f"{missing.words} {value!r}")  # not what the API reads without it
    return data, left_out


def _fill_resources(data: dict, prefix: str, resources: Mapping, where: str) -> list[str]:
    offered = {resource: suffix for resource, suffix, _label, _example in RESOURCES}
    for resource, suffix in offered.items():
        data[f"{prefix}_{suffix}"] = str(resources.get(resource, ""))
    return [f"{where}: {resource}" for resource in resources if resource not in offered]


def _fill_limits(data: dict, prefix: str, limits: Mapping) -> None:
    for resource, suffix, _label in LIMITS:
        data[f"{prefix}_{suffix}"] = str(limits.get(resource, ""))


def _within(key: str, prefix: str) -> bool:
    return key == prefix or key.startswith((f"{prefix}.", f"{prefix}["))
