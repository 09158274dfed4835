"""Reading a job document (API body or form) into a checked draft.

One reader for the REST API and the HTML form, so both give the same errors: each names
the field (``workers[0].resources.cpu``) and the reason.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from django.conf import settings

from kube.quantity import MAX_UNITS, QuantityError, ResourceList, add, parse_resources

from .models import Job
from .spec import AUTOSCALER_RESOURCES

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_FILENAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
NAME_MAX = 40  # leaves room for "-<id>" within Kubernetes' 63 characters
MAX_REPLICAS = 1000
MIN_RUN_SECONDS = 0.01
MAX_RUN_SECONDS = 7 * 24 * 3600
MAX_SCRIPT_BYTES = 1024 * 1024  # a ConfigMap holds at most 1 MiB
PRIORITY_RANGE = (-1000, 1000)
MAX_PIP = 100
MAX_ENV = 100
MAX_INTEGER_DIGITS = 18  # every integer field fits far inside; a bigint holds 18 digits
PAGE_MAX = 500  # the most entries one page of a list holds
OFFSET_MAX = 10_000_000  # far past the deepest queue; a larger OFFSET overflowed a bigint
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# The runtimes each kind can run on; a cluster offers some of them (settings.CLUSTER_RUNTIMES).
RUNTIMES = {
    Job.Kind.RAY: (Job.Runtime.KUBERAY, Job.Runtime.VOLCANO),
    Job.Kind.PYTORCH: (Job.Runtime.KUBEFLOW, Job.Runtime.VOLCANO),
}


def runtimes_offered(kind: str) -> list[str]:
    """The runtimes this cluster offers for ``kind``, the default first."""
    return [r for r in settings.CLUSTER_RUNTIMES if r in RUNTIMES.get(kind, ())]


FIELDS = {
    "queue", "kind", "runtime", "name", "image", "entrypoint", "command", "script",
    "script_filename", "head", "master", "workers", "priority", "run_seconds", "pip", "env",
}  # fmt: skip


class JobInvalid(ValueError):
    def __init__(self, errors: Mapping[str, str | list[str]]):
        self.errors = {k: v if isinstance(v, list) else [v] for k, v in errors.items()}
        super().__init__("; ".join(f"{k}: {m}" for k, ms in self.errors.items() for m in ms))


@dataclass
class JobDraft:
    queue: str
    kind: str
    runtime: str
    name: str
    image: str
    head: dict
    workers: list[dict]
    # Every pod of the gang, summed: an autoscaling worker group counts at its replicas
    # (KubeRay's minReplicas), as DESIGN.md section 3 and kube-queue count it.
    request: ResourceList
    entrypoint: str = ""
    command: list[str] = field(default_factory=list)
    script: str = ""
    script_filename: str = "main.py"
    priority: int = 0
    run_seconds: float = 60
    pip: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)


def job_parse(raw: object) -> JobDraft:
    """Check a job document; raise JobInvalid with every problem found."""
    if not isinstance(raw, Mapping):
        raise JobInvalid({"body": "must be a JSON object"})
    errors: dict[str, str] = {}
    for unknown in sorted(set(raw) - FIELDS):
        errors[unknown] = "unknown field"

    def text(name: str, *, required: bool = False, limit: int = 500) -> str:
        value = raw.get(name, "")
        if value is None:
            value = ""
        if not isinstance(value, str):
            errors[name] = "must be a string"
            return ""
        value = value.strip() if name != "script" else value
        if required and not value:
            errors[name] = "is required"
        elif len(value.encode()) > limit:
            errors[name] = f"is longer than {limit} bytes"
        return value

    def integer(name: str, default: int, low: int, high: int) -> int:
        value = raw.get(name, default)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int):
            if isinstance(value, str) and re.fullmatch(r"-?\d+", value.strip()):
                if len(value.strip()) > MAX_INTEGER_DIGITS:  # int() would refuse 4,300
                    errors[name] = f"must be between {low} and {high}"
                    return default
                value = int(value)
            else:
                errors[name] = f"must be an integer, got {value!r}"
                return default
        if not low <= value <= high:
            errors[name] = f"must be between {low} and {high}, got {value}"
        return value

    def number(name: str, default: float, low: float, high: float) -> float:
        value = raw.get(name, default)
        if value is None:
            return default
        if isinstance(value, str) and re.fullmatch(r"\s*-?\d+(\.\d+)?\s*", value):
            value = float(value)
        if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
            errors[name] = f"must be a number, got {value!r}"
            return default
        if not low <= value <= high:
            # An integer past a float's range has no :g spelling.
            shown = f"{value:g}" if abs(value) < 1e300 else "a larger number"
            errors[name] = f"must be between {low:g} and {high:g}, got {shown}"
        return value

    queue = text("queue", required=True)
    kind = text("kind", required=True)
    if kind and kind not in RUNTIMES:
        errors["kind"] = f"must be one of {', '.join(RUNTIMES)}, got {kind!r}"
    offered = runtimes_offered(kind)
    runtime = text("runtime") or (offered[0] if offered else "")
    if kind in RUNTIMES and runtime not in RUNTIMES[kind]:
        errors["runtime"] = f"a {kind} job runs on {', '.join(RUNTIMES[kind])}, not {runtime!r}"
    elif kind in RUNTIMES and runtime not in offered:
        errors["runtime"] = (
            f"this cluster runs {kind} jobs on {', '.join(offered) or 'no runtime'}"
            f", not {runtime!r}"
        )
    name = text("name", required=True)
    if name and (not _DNS_LABEL.match(name) or len(name) > NAME_MAX):
        errors["name"] = (
            f"{name!r} must be a DNS-1123 label of at most {NAME_MAX} characters "
            "(lowercase letters, digits and '-', starting and ending with a letter or digit)"
        )
    image = text("image", required=True)
    script = text("script", limit=MAX_SCRIPT_BYTES)
    script_filename = text("script_filename", limit=100) or "main.py"
    if not _FILENAME.match(script_filename):
        errors["script_filename"] = f"{script_filename!r} is not a plain file name"

    entrypoint, command = "", []
    if kind == Job.Kind.RAY:
        entrypoint = text("entrypoint", limit=10_000)
        if raw.get("command"):
            errors["command"] = "Ray jobs take an entrypoint, not a command"
        if not entrypoint and not script:
            errors["entrypoint"] = "is required (or give a script to run)"
        if raw.get("master") is not None:
            errors["master"] = "Ray jobs have a head, not a master"
    elif kind == Job.Kind.PYTORCH:
        command = _command(raw.get("command"), errors)
        if not command and not script:
            errors["command"] = "is required (or give a script to run)"
        if raw.get("entrypoint"):
            errors["entrypoint"] = "PyTorch jobs take a command, not an entrypoint"
        if raw.get("head") is not None:
            errors["head"] = "PyTorch jobs have a master, not a head"

    head_field = "master" if kind == Job.Kind.PYTORCH else "head"
    head, head_request = _head(head_field, raw.get(head_field), errors)
    workers, request = _workers(raw.get("workers"), errors, kind, runtime)
    if runtime == Job.Runtime.VOLCANO and len(workers) > 1 and "workers" not in errors:
        errors["workers"] = "a Volcano Job has one worker task: give one worker group"
    request = add(request, head_request)
    if autoscales(runtime, workers):
        # KubeRay's autoscaler runs beside the head: part of the gang that starts.
        request = add(request, parse_resources("autoscaler", AUTOSCALER_RESOURCES))
    for resource in sorted(name for name, units in request.items() if units > MAX_UNITS):
        # Usage is summed as bigint in PostgreSQL; no cluster has this much anyway.
        errors["request"] = f"{resource} summed over all pods is too large"
    priority = integer("priority", 0, *PRIORITY_RANGE)
    run_seconds = number("run_seconds", 60, MIN_RUN_SECONDS, MAX_RUN_SECONDS)
    pip = _pip(raw.get("pip"), errors)
    if pip and runtime and runtime != Job.Runtime.KUBERAY and "pip" not in errors:
        errors["pip"] = (
            f"pip packages go into a Ray runtime environment (runtime kuberay); on {runtime},"
            " install them in the image"
        )
    env = _env(raw.get("env"), errors)
    if errors:
        raise JobInvalid(errors)
    return JobDraft(
        queue=queue,
        kind=kind,
        runtime=runtime,
        name=name,
        image=image,
        head=head,
        workers=workers,
        request={k: v for k, v in request.items() if v},
        entrypoint=entrypoint,
        command=command,
        script=script,
        script_filename=script_filename,
        priority=priority,
        run_seconds=run_seconds,
        pip=pip,
        env=env,
    )


def autoscales(runtime: str, workers: Sequence[Mapping]) -> bool:
    """KubeRay runs its autoscaler beside the head: a group may grow past its replicas."""
    return runtime == Job.Runtime.KUBERAY and any(
        (g.get("max_replicas") or 0) > g.get("replicas", 0) for g in workers
    )


def job_pods(
    *, kind: str, runtime: str, head: Mapping, workers: Sequence[Mapping]
) -> dict[str, ResourceList]:
    """Each kind of pod of a job, named by its field: ``head`` (``master`` for PyTorch),
    with KubeRay's autoscaler container when a group autoscales, and ``workers[i]`` for
    every group that can have pods (an autoscaling group at zero replicas too: the pods
    it adds must fit a node as well). ``head`` and ``workers`` are as a draft or a job
    holds them, already checked; the node check (``queues.placement``) reads these."""
    head_field = "master" if kind == Job.Kind.PYTORCH else "head"
    head_request = parse_resources(head_field, head.get("resources"))
    if autoscales(runtime, workers):
        head_request = add(head_request, parse_resources("autoscaler", AUTOSCALER_RESOURCES))
    pods = {head_field: head_request}
    for index, group in enumerate(workers):
        if group.get("replicas", 0) or group.get("max_replicas"):
            pods[f"workers[{index}]"] = parse_resources(f"workers[{index}]", group.get("resources"))
    return pods


def page_window(*, offset: str | None, limit: str | None, default_limit: int) -> tuple[int, int]:
    """(offset, limit) of a page of a list, from the query string's text.

    A limit is clamped to 1..PAGE_MAX (so ``?limit=100000`` is one page, not every job); a
    negative offset is 0; an offset past OFFSET_MAX is refused, as PostgreSQL's OFFSET
    would overflow. Raises JobInvalid naming the parameter.
    """
    errors: dict[str, str] = {}

    def integer(name: str, raw: str | None) -> int | None:
        if raw is None or raw.strip() == "":
            return None
        text = raw.strip()
        if not re.fullmatch(r"[+-]?\d+", text):
            errors[name] = f"must be an integer, got {text[:40]!r}"
            return None
        if len(text.lstrip("+-")) > MAX_INTEGER_DIGITS:  # past any bound; int() may refuse it
            return -OFFSET_MAX - 1 if text.startswith("-") else OFFSET_MAX + 1
        return int(text)

    start = integer("offset", offset)
    size = integer("limit", limit)
    if start is not None and start > OFFSET_MAX:
        errors["offset"] = f"must be at most {OFFSET_MAX}"
    if errors:
        raise JobInvalid(errors)
    size = default_limit if size is None else min(max(size, 1), PAGE_MAX)
    return max(start or 0, 0), size


def _pip(raw: object, errors: dict[str, str]) -> list[str]:
    """Requirement specifiers, as pip takes them: ``torch==2.4.0``, ``requests>=2``."""
    if raw is None or raw == []:
        return []
    if not isinstance(raw, list):
        errors["pip"] = 'must be a list of requirements, such as ["torch==2.4.0"]'
        return []
    if len(raw) > MAX_PIP:
        errors["pip"] = f"at most {MAX_PIP} requirements, got {len(raw)}"
        return []
    packages = []
    for index, item in enumerate(raw):
        if not isinstance(item, str) or not item.strip():
            errors[f"pip[{index}]"] = "must be a requirement such as torch==2.4.0"
        elif len(item) > 200 or any(c.isspace() for c in item.strip()):
            errors[f"pip[{index}]"] = f"{item!r} is not one requirement (no spaces, 200 at most)"
        else:
            packages.append(item.strip())
    return packages


def _env(raw: object, errors: dict[str, str]) -> dict[str, str]:
    """Environment variables: names as a shell takes them, values as strings."""
    if raw is None or raw == {}:
        return {}
    if not isinstance(raw, Mapping):
        errors["env"] = "must be an object of NAME: value"
        return {}
    if len(raw) > MAX_ENV:
        errors["env"] = f"at most {MAX_ENV} variables, got {len(raw)}"
        return {}
    env = {}
    for name, value in raw.items():
        if not _ENV_NAME.match(str(name)) or len(str(name)) > 128:
            errors[f"env.{name}"] = "is not a variable name (letters, digits, _; not first a digit)"
        elif value is None:
            errors[f"env.{name}"] = "needs a value (NAME=value)"
        elif not isinstance(value, str):
            errors[f"env.{name}"] = f"must be a string, got {value!r}"
        elif len(value) > 4096:
            errors[f"env.{name}"] = "is longer than 4096 characters"
        else:
            env[name] = value
    return env


def _command(raw: object, errors: dict[str, str]) -> list[str]:
    if raw is None or raw == "":
        return []
    if isinstance(raw, str):
        try:
            return shlex.split(raw)
        except ValueError as error:
            errors["command"] = f"cannot be split into arguments: {error}"
            return []
    if isinstance(raw, list) and all(isinstance(arg, str) for arg in raw):
        return list(raw)
    errors["command"] = "must be a list of strings or a shell-style string"
    return []


def _resources(field: str, raw: object, errors: dict[str, str]) -> tuple[dict, ResourceList]:
    if not isinstance(raw, Mapping) or not raw:
        errors[field] = 'is required: a mapping such as {"cpu": "4", "memory": "4Gi"}'
        return {}, {}
    try:
        parsed = parse_resources(field, raw)
    except QuantityError as error:
        errors[error.field] = error.reason
        return {}, {}
    return {name: str(value) for name, value in raw.items()}, parsed


def _head(field: str, raw: object, errors: dict[str, str]) -> tuple[dict, ResourceList]:
    if not isinstance(raw, Mapping):
        errors[field] = 'is required: {"resources": {"cpu": "4", "memory": "4Gi"}}'
        return {}, {}
    unknown = sorted(set(raw) - {"resources"})
    if unknown:
        errors[f"{field}.{unknown[0]}"] = "unknown field"
    resources, request = _resources(f"{field}.resources", raw.get("resources"), errors)
    return {"resources": resources}, request


def _workers(
    raw: object, errors: dict[str, str], kind: str, runtime: str
) -> tuple[list[dict], ResourceList]:
    """The worker groups and their request.

    A group may autoscale (``max_replicas``, Ray on KubeRay only): it runs between
    ``replicas`` and ``max_replicas`` pods. Its request counts ``replicas`` pods, the gang
    that must start together (DESIGN.md section 3, as kube-queue counts a RayJob); the pods
    the autoscaler adds later are placed by the cluster as it has room.
    """
    if raw is None:
        return [], {}
    if not isinstance(raw, list):
        errors["workers"] = "must be a list of worker groups"
        return [], {}
    groups, request, names = [], {}, set()
    for index, group in enumerate(raw):
        field = f"workers[{index}]"
        if not isinstance(group, Mapping):
            errors[field] = "must be an object with name, replicas and resources"
            continue
        unknown = sorted(set(group) - {"name", "replicas", "max_replicas", "resources"})
        if unknown:
            errors[f"{field}.{unknown[0]}"] = "unknown field"
        name = group.get("name") or ("worker" if kind == Job.Kind.PYTORCH else f"group-{index}")
        if not isinstance(name, str) or not _DNS_LABEL.match(name) or len(name) > 30:
            errors[f"{field}.name"] = f"{name!r} must be a DNS-1123 label of at most 30 characters"
        elif name in names:
            errors[f"{field}.name"] = f"{name!r} is used by another worker group"
        else:
            names.add(name)  # only a checked name: an object or a list is unhashable
        replicas = group.get("replicas", 1)
        if isinstance(replicas, bool) or not isinstance(replicas, int):
            errors[f"{field}.replicas"] = f"must be an integer, got {replicas!r}"
            replicas = 0
        elif not 0 <= replicas <= MAX_REPLICAS:
            errors[f"{field}.replicas"] = f"must be between 0 and {MAX_REPLICAS}, got {replicas}"
            replicas = 0
        max_replicas = _max_replicas(
            f"{field}.max_replicas",
            group.get("max_replicas"),
            None if f"{field}.replicas" in errors else replicas,
            errors,
            kind,
            runtime,
        )
        resources, per_pod = _resources(f"{field}.resources", group.get("resources"), errors)
        entry = {"name": name, "replicas": replicas, "resources": resources}
        if max_replicas is not None:
            entry["max_replicas"] = max_replicas
        groups.append(entry)
        request = add(request, per_pod, times=replicas)
    if kind == Job.Kind.PYTORCH and len(groups) > 1:
        errors["workers"] = "a PyTorchJob has one worker group"
    return groups, request


def _max_replicas(
    field: str, value: object, replicas: int | None, errors: dict[str, str], kind: str, runtime: str
) -> int | None:
    """A group's autoscaling maximum, or None (absent, or refused with its reason).

    ``replicas`` is the group's minimum, None when it was refused itself.
    """
    if value is None:
        return None
    if kind != Job.Kind.RAY or runtime != Job.Runtime.KUBERAY:
        reason = "autoscaling needs Ray on KubeRay"
        if runtime == Job.Runtime.VOLCANO:
            reason += "; a Volcano Job has a fixed number of pods"
        elif kind == Job.Kind.PYTORCH:
            reason += "; a PyTorchJob has a fixed number of pods"
        errors[field] = reason
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        errors[field] = f"must be an integer, got {value!r}"
        return None
    low = 0 if replicas is None else replicas
    if not low <= value <= MAX_REPLICAS:
        least = "0" if replicas is None else f"replicas ({replicas})"
        errors[field] = f"must be between {least} and {MAX_REPLICAS}, got {value}"
        return None
    return value
