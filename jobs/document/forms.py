"""The submit page's form, built on the job document that ``jobs.document.schema.JobIn`` declares.

Each input stands for one path of the document (``head_cpu`` is ``head.resources.cpu``,
``worker1_replicas`` is ``workers[1].replicas``), takes its label, help and limits from
the declared field where the form says nothing else, and shows the errors the API gives
for that path, word for word. A form holds any number of worker groups: "Add a worker
group" posts the form back with one more (no script needed). The form's values become an
API body (``SubmitForm.document``) that ``JobIn`` checks like any other.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from rest_framework import serializers

from jobs.document.fields import path
from jobs.document.schema import JobIn, WorkerGroupIn, bound
from jobs.models import Job, kind_shape

GPU = "nvidia.com/gpu"
# The resources the form asks for, per pod: (resource, input suffix, label, placeholder).
RESOURCES = (
    ("cpu", "cpu", "CPU", "4"),
    ("memory", "memory", "Memory", "4Gi"),
    (GPU, "gpu", "GPU", "0"),
)
MAX_GROUPS = 8  # worker groups one form offers; the API takes more
_INTEGER = re.compile(r"^[+-]?\d{1,18}$")  # longer goes on as text, for JobIn to refuse
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
            item.value = raw if name == "script" else raw.strip()
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
        f = self.fields
        job = Section(
            "Job",
            "",
            [
                _declared(f["queue"], "queue", "Queue", type="select", choices=queues, help=""),
                _declared(
                    f["kind"], "kind", "Kind", type="select", choices=Job.Kind.choices,
                    value=Job.Kind.RAY,
                ),
                _declared(
                    f["runtime"], "runtime", "Runs on", type="select",
                    choices=[("", "the cluster's default for the kind"), *runtimes], help="",
                ),
                _declared(f["name"], "name", "Name", placeholder="rayjob-video"),
                _declared(f["image"], "image", "Image", placeholder="rayproject/ray:2.36.1"),
                _declared(
                    f["entrypoint"], "entrypoint", "Entrypoint (Ray)", help="", wide=True,
                    placeholder="python /home/ray/samples/sample_code.py",
                ),
                _declared(
                    f["command"], "command", "Command (PyTorch, shell-style)", help="", wide=True,
                    placeholder="torchrun --nproc-per-node 1 train.py",
                ),
                _declared(
                    f["pip"], "pip", "Pip packages (Ray on KubeRay, space-separated)", help="",
                    wide=True, placeholder="torch==2.4.0 pandas",
                ),
                _declared(
                    f["env"], "env", "Environment variables (one NAME=value a line)",
                    type="textarea", help="", wide=True,
                ),
                _declared(
                    f["script"], "script",
                    "Script (optional, mounted as main.py in the head/master pod)",
                    type="textarea", help="", wide=True,
                ),
            ],
        )  # fmt: skip
        head = Section(
            "Head (Ray) / master (PyTorch): one pod",
            "head",
            name="head",
            inputs=[
                Input(
                    f"head_{suffix}",
                    f"head.resources.{resource}",
                    f"{label} ({resource})" if resource == GPU else label,
                    placeholder=example,
                )
                for resource, suffix, label, example in RESOURCES
            ],
        )
        groups = [self._group_section(index) for index in range(self.groups)]
        scheduling = Section(
            "Scheduling",
            "",
            [
                _declared(f["priority"], "priority", "Priority", type="number", value="0"),
                _declared(
                    f["run_seconds"], "run_seconds", "Expected run time (seconds)",
                    type="number", placeholder="e.g. 600",
                    help="if you know it: start estimates use it, and the simulated cluster "
                    "runs the job this long (60 s if blank)",
                ),
            ],
        )  # fmt: skip
        return [job, head, *groups, scheduling]

    def _group_section(self, index: int) -> Section:
        group: WorkerGroupIn = self.fields["workers"].child
        g, key = group.fields, f"workers[{index}]"
        prefix = group_prefix(index)
        inputs = [
            _declared(g["name"], f"{prefix}_name", "Name", help="", placeholder="small-group"),
            _declared(g["replicas"], f"{prefix}_replicas", "Replicas", type="number", value="1"),
            _declared(
                g["max_replicas"],
                f"{prefix}_max_replicas",
                "Max replicas (optional)",
                type="number",
                help="Ray on KubeRay only: the group autoscales between Replicas and this. "
                "Quota counts Replicas, the pods it starts with, and the autoscaler "
                "(500m CPU, 512Mi).",
            ),
        ]
        inputs += [
            Input(f"{prefix}_{suffix}", "", f"{label} per pod", placeholder=example)
            for resource, suffix, label, example in RESOURCES
        ]
        for item, name in zip(inputs, ("name", "replicas", "max_replicas"), strict=False):
            item.path = path(key, name)
        for item, (resource, *_rest) in zip(inputs[3:], RESOURCES, strict=True):
            item.path = path(key, f"resources.{resource}")
        legend = "Worker group" if index == 0 else f"Worker group {index + 1}"
        return Section(
            legend,
            key,
            inputs,
            note="leave CPU, memory and GPU empty for none",
            group=index,
            name=prefix,
        )

    # The document

    def document(self) -> dict:
        """The form's values as an API body (see RAY_JOB / PYTORCH_JOB in the tests)."""
        values = {name: item.value for name, item in self.inputs.items()}
        kind = values["kind"]
        document: dict = {
            "queue": values["queue"],
            "kind": kind,
            "name": values["name"],
            "image": values["image"],
        }
        if values["runtime"]:
            document["runtime"] = values["runtime"]
        # Each kind takes its own command field; the other one is passed on only when
        # filled, so that JobIn says why it does not belong.
        shape = kind_shape(kind)
        document[shape.launch] = values[shape.launch]
        for other in shape.others():
            if values[other.launch]:
                document[other.launch] = values[other.launch]
        if values["script"].strip():
            document["script"] = values["script"]
        document[shape.head] = {"resources": self._resources(values, "head")}
        workers = []
        self.group_of = []
        for index in range(self.groups):
            group = self._group(values, group_prefix(index))
            if group is not None:
                workers.append(group)
                self.group_of.append(index)
        if workers:
            document["workers"] = workers
        for key in ("priority", "run_seconds"):
            if values[key]:
                document[key] = _number(values[key])
        if values["pip"].strip():
            document["pip"] = values["pip"].split()
        env = {}
        for line in values["env"].splitlines():
            if line.strip():
                name, equals, value = line.strip().partition("=")
                env[name.strip()] = value if equals else None
        if env:
            document["env"] = env
        return document

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
            "replicas": _number(values[f"{prefix}_replicas"] or "1"),
            "resources": resources,
        }
        if name:
            group["name"] = name
        if maximum:
            group["max_replicas"] = _number(maximum)
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
            if item is None and where == "script_filename":
                item = self.inputs["script"]
            if item is None and prefix in ("pip", "env") and where != prefix:
                # pip[2] and env.NAME: on the input, saying which
                item = self.inputs[prefix]
                reasons = [f"{where[len(prefix) :].lstrip('.')}: {reason}" for reason in reasons]
            if item is not None:
                item.errors.extend(reasons)
                continue
            section = next((s for s in sections if _within(where, s.path)), None)
            if section is None and where == "workers":
                section = next(s for s in self.sections if s.group == 0)
            if section is not None and where in (section.path, path(section.path, "resources")):
                section.errors.extend(reasons)
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
    def errors(self) -> dict[str, list[str]]:
        """Errors by input name, and by section: ``head``, ``worker``, ``worker1``, ..."""
        placed = {name: item.errors for name, item in self.inputs.items() if item.errors}
        return placed | {s.name: s.errors for s in self.sections if s.errors}

    @property
    def values(self) -> dict[str, str]:
        return {name: item.value for name, item in self.inputs.items()} | {
            "groups": str(self.groups)
        }


def form_data(document: Mapping) -> tuple[dict[str, str], list[str]]:
    """The form's values for a job document (``schema.job_document``): the inverse of
    ``SubmitForm.document``. Also what the form cannot hold (a resource it has no input
    for, more than MAX_GROUPS worker groups, a script's own file name), for the page to say
    so: the API takes those."""
    kind = document["kind"]
    head = document.get(kind_shape(kind).head) or {}
    data = {
        "queue": document["queue"],
        "kind": kind,
        "runtime": document.get("runtime", ""),
        "name": document["name"],
        "image": document["image"],
        "entrypoint": document.get("entrypoint", ""),
        "command": shlex.join(document.get("command") or []),
        "script": document.get("script", ""),
        "pip": " ".join(document.get("pip") or []),
        "env": "\n".join(f"{k}={v}" for k, v in (document.get("env") or {}).items()),
        "priority": str(document.get("priority", "")),
        "run_seconds": _plain(document.get("run_seconds", "")),
    }
    left_out = _fill_resources(data, "head", head.get("resources") or {}, "head")
    workers = document.get("workers") or []
    for index, group in enumerate(workers[:MAX_GROUPS]):
        prefix = group_prefix(index)
        data[f"{prefix}_name"] = group.get("name", "")
        data[f"{prefix}_replicas"] = str(group.get("replicas", 1))
        data[f"{prefix}_max_replicas"] = str(group.get("max_replicas") or "")
        where = f"workers[{index}]"
        left_out += _fill_resources(data, prefix, group.get("resources") or {}, where)
    data["groups"] = str(max(min(len(workers), MAX_GROUPS), 1))
    if len(workers) > MAX_GROUPS:
        left_out.append(f"worker groups after the first {MAX_GROUPS}")
    if document.get("script_filename", "main.py") != "main.py":
        left_out.append(f"the script's file name {document['script_filename']!r}")
    return data, left_out


def _fill_resources(data: dict, prefix: str, resources: Mapping, where: str) -> list[str]:
    offered = {resource: suffix for resource, suffix, _label, _example in RESOURCES}
    for resource, suffix in offered.items():
        data[f"{prefix}_{suffix}"] = str(resources.get(resource, ""))
    return [f"{where}: {resource}" for resource in resources if resource not in offered]


def _plain(number: object) -> str:
    """600.0 -> "600", 2.5 -> "2.5"."""
    if isinstance(number, float) and number.is_integer():
        return str(int(number))
    return str(number)


def _within(key: str, prefix: str) -> bool:
    return key == prefix or key.startswith((f"{prefix}.", f"{prefix}["))


def _number(value: str) -> int | str:
    """Digits become an int (as in a JSON body); anything else goes on for JobIn to name."""
    return int(value) if _INTEGER.match(value) else value.strip()
