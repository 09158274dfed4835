"""What a leaf's queue and its jobs may do, set on any node of the quota tree and taken by
the leaves below it:

- ``stopPolicy``: ``Hold`` (nothing new is admitted; running jobs go on) or
  ``HoldAndDrain`` (and its running jobs are preempted back to their queue), as Kueue's
  ``stopPolicy`` on a ClusterQueue. A stop on any node stops every leaf below it;
  ``HoldAndDrain`` anywhere on a leaf's path drains it.
- ``limits``: ``defaultTime`` (a job that gives no time limit gets this one), ``maxTime``
  (no job may ask for more), ``maxRetries`` (no job may ask for more retries) and
  ``perPerson`` (``jobs``: how many jobs one person may have holding quota in the leaf;
  ``resources``: how much of each resource they may hold there). A leaf takes each of these
  from the nearest node on its path that sets it, as it does its ``pods`` policy.

The tree keeps ``limits`` in base units: seconds, and resources as ``kube.quantity`` counts
them; ``limits_yaml`` spells them back as the tree's YAML writes them. Pure: no Django.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kube.quantity import QuantityError, ResourceList, format_resources, parse_resources
from kube.said import Said, gettext_noop

from .quota import Node, path_to_root

HOLD = "Hold"
HOLD_AND_DRAIN = "HoldAndDrain"
STOP_POLICIES = (HOLD, HOLD_AND_DRAIN)

KEYS = ("defaultTime", "maxTime", "maxRetries", "perPerson")
PERSON_KEYS = ("jobs", "resources")
TIME_MAX = 365 * 86400  # the longest time limit a tree or a job may give
RETRIES_MAX = 10  # the most retries a job may ask for, and a tree may allow
PERSON_JOBS_MAX = 100_000

_DURATION = re.compile(r"(\d+)(d|h|m|s)")
_UNITS = {"d": 86400, "h": 3600, "m": 60, "s": 1}


def parse_duration(text: object) -> int | None:
    """``2h``, ``1h30m``, ``90m``, ``3d`` (Go's durations in whole units, and days), or a
    number of seconds: the seconds, or None when it is not one."""
    if isinstance(text, bool):
        return None
    if isinstance(text, int):
        return text
    if not isinstance(text, str) or not text or len(text) > 32:
        return None
    if text.isdigit():
        return int(text)
    position, seconds = 0, 0
    for match in _DURATION.finditer(text):
        if match.start() != position:
            return None
        seconds += int(match.group(1)) * _UNITS[match.group(2)]
        position = match.end()
    return seconds if position == len(text) else None


def format_duration(seconds: int) -> str:
    """``2h``, ``1h30m``, ``45s``: each unit that is not zero, the largest first."""
    if seconds <= 0:
        return "0s"
    parts = []
    for unit, size in _UNITS.items():
        if seconds >= size:
            parts.append(f"{seconds // size}{unit}")
            seconds %= size
    return "".join(parts)


def duration_read(raw: object, where: str, errors: dict[str, Said]) -> int | None:
    """A time limit as a person gives it (``2h``, or seconds): its seconds, or None with
    the reason in ``errors``."""
    seconds = parse_duration(raw)
    if seconds is None or not 0 < seconds <= TIME_MAX:
        errors[where] = Said(
            gettext_noop("must be a duration from 1s to 365d, such as 2h or 1h30m")
        )
        return None
    return seconds


def stop_read(raw: object, field: str) -> tuple[str, dict[str, Said]]:
    """A node's ``stopPolicy``: "" when it admits (absent, null or ``None``)."""
    if raw is None or raw == "None":
        return "", {}
    if raw in STOP_POLICIES:
        return str(raw), {}
    return "", {field: Said(gettext_noop("must be None, Hold or HoldAndDrain"))}


def limits_read(raw: object, field: str) -> tuple[dict[str, Any], dict[str, Said]]:
    """A node's ``limits`` as the tree keeps them (base units), and its refusals by path:
    every problem at once."""
    if raw is None:
        return {}, {}
    if not isinstance(raw, Mapping):
        return {}, {
            field: Said(
                gettext_noop("must be an object of defaultTime, maxTime, maxRetries and perPerson")
            )
        }
    errors: dict[str, Said] = {}
    kept: dict[str, Any] = {}
    for key in sorted(set(raw) - set(KEYS), key=str):
        errors[f"{field}.{key}"] = Said(gettext_noop("unknown field"))
    for key in ("defaultTime", "maxTime"):
        if raw.get(key) is not None:
            seconds = duration_read(raw[key], f"{field}.{key}", errors)
            if seconds is not None:
                kept[key] = seconds
    if kept.get("defaultTime", 0) > kept.get("maxTime", TIME_MAX):
        errors[f"{field}.defaultTime"] = Said(
            gettext_noop("must not be longer than maxTime (%(max)s)"),
            max=format_duration(kept["maxTime"]),
        )
    if raw.get("maxRetries") is not None:
        retries = _count(raw["maxRetries"], 0, RETRIES_MAX, f"{field}.maxRetries", errors)
        if retries is not None:
            kept["maxRetries"] = retries
    person = raw.get("perPerson")
    if person is not None:
        where = f"{field}.perPerson"
        if not isinstance(person, Mapping):
            errors[where] = Said(gettext_noop("must be an object of jobs and resources"))
        else:
            mine: dict[str, Any] = {}
            for key in sorted(set(person) - set(PERSON_KEYS), key=str):
                errors[f"{where}.{key}"] = Said(gettext_noop("unknown field"))
            if person.get("jobs") is not None:
                jobs = _count(person["jobs"], 1, PERSON_JOBS_MAX, f"{where}.jobs", errors)
                if jobs is not None:
                    mine["jobs"] = jobs
            try:
                resources = parse_resources(f"{where}.resources", person.get("resources"))
            except QuantityError as error:
                errors[error.field] = error.reason
            else:
                if resources:
                    mine["resources"] = resources
            if mine:
                kept["perPerson"] = mine
    return kept, errors


def _count(raw: object, low: int, high: int, where: str, errors: dict[str, Said]) -> int | None:
    if isinstance(raw, bool) or not isinstance(raw, int) or not low <= raw <= high:
        errors[where] = Said(
            gettext_noop("must be a whole number from %(low)s to %(high)s"), low=low, high=high
        )
        return None
    return raw


def limits_yaml(kept: Mapping[str, Any]) -> dict[str, Any]:
    """A node's ``limits`` as the tree's YAML spells them (``2h``, ``nvidia.com/gpu: "4"``)."""
    said: dict[str, Any] = {}
    for key in ("defaultTime", "maxTime"):
        if key in kept:
            said[key] = format_duration(kept[key])
    if "maxRetries" in kept:
        said["maxRetries"] = kept["maxRetries"]
    person = kept.get("perPerson")
    if person:
        mine: dict[str, Any] = {}
        if "jobs" in person:
            mine["jobs"] = person["jobs"]
        if person.get("resources"):
            mine["resources"] = format_resources(person["resources"])
        said["perPerson"] = mine
    return said


def limits_lines(kept: Mapping[str, Any]) -> list[str]:
    """A node's limits as lines (``maxTime: 1d``, ``perPerson.resources.cpu: 8``): the tree
    editor's field, and the quota page's note."""
    lines = []
    for key, value in limits_yaml(kept).items():
        if key != "perPerson":
            lines.append(f"{key}: {value}")
            continue
        if "jobs" in value:
            lines.append(f"perPerson.jobs: {value['jobs']}")
        for resource, amount in value.get("resources", {}).items():
            lines.append(f"perPerson.resources.{resource}: {amount}")
    return lines


@dataclass(frozen=True)
class LeafLimits:
    """What a leaf takes from its path: each value with the node that sets it ("" none)."""

    stop: str = ""  # "", HOLD or HOLD_AND_DRAIN
    stopped_at: str = ""
    default_time: int | None = None
    max_time: int | None = None
    max_time_at: str = ""
    max_retries: int | None = None
    max_retries_at: str = ""
    person_jobs: int | None = None
    person_resources: ResourceList = field(default_factory=dict)
    person_at: str = ""

    @property
    def per_person(self) -> bool:
        return self.person_jobs is not None or bool(self.person_resources)


def leaf_limits(path_nodes: list[tuple[str, str, Mapping[str, Any]]]) -> LeafLimits:
    """A leaf's limits from its path's nodes, the leaf's own first: (path, stopPolicy,
    limits) of each. A stop anywhere on the path holds (the one nearest the root names
    it); a drain anywhere drains; each limit is the nearest node's that sets it."""
    stops = [(path, policy) for path, policy, _limits in path_nodes if policy]
    chosen = [stop for stop in stops if stop[1] == HOLD_AND_DRAIN] or stops
    stopped_at, stop = chosen[-1] if chosen else ("", "")
    found: dict[str, tuple[Any, str]] = {}
    for path, _policy, limits in path_nodes:
        for key in KEYS:
            if key in limits and key not in found:
                found[key] = (limits[key], path)
    person, person_at = found.get("perPerson", ({}, ""))
    return LeafLimits(
        stop=stop,
        stopped_at=stopped_at,
        default_time=found.get("defaultTime", (None, ""))[0],
        max_time=found.get("maxTime", (None, ""))[0],
        max_time_at=found.get("maxTime", (None, ""))[1],
        max_retries=found.get("maxRetries", (None, ""))[0],
        max_retries_at=found.get("maxRetries", (None, ""))[1],
        person_jobs=person.get("jobs"),
        person_resources=dict(person.get("resources", {})),
        person_at=person_at,
    )


def limits_of(tree: Mapping[str, Node], leaf: str) -> LeafLimits:
    """The limits ``leaf`` takes from its path in ``tree``."""
    return leaf_limits(
        [(path, tree[path].stop, tree[path].limits) for path in path_to_root(leaf) if path in tree]
    )
