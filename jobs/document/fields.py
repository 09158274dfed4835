"""The fields the job document is declared with (``jobs.document.shape``), and how they read.

Each field is one of DRF's types, so the OpenAPI schema shows a string, an integer, a
list, with its limits; each checks in its own ``run_validation`` and refuses with the
product's words (``must be between 0 and 1000, got 5000``), not DRF's.

A ``Reader`` is a serializer that reads with ``read(data, errors, key)``: it records every
problem under its path in the document (``head.resources.cpu``, ``workers[1].replicas``,
``env.HOME``; a batch adds ``jobs[3].``) and reads on, so one answer names all of them and
the rules that join fields still run when one of them was refused. ``check`` is ``read``
that raises JobInvalid, ``run_validation`` (DRF's ``is_valid``) ``read`` that raises
DRF's ValidationError with the same paths.
"""

from __future__ import annotations

import re
import shlex
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from operator import attrgetter
from typing import Any, NamedTuple, cast

from django.core.validators import RegexValidator
from django.utils.translation import gettext as _
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers
from rest_framework.exceptions import ValidationError
from rest_framework.fields import SkipField, empty
from rest_framework.settings import api_settings

from jobs.document.validation import (
    IMAGE_CHARACTERS,
    IMAGE_EXAMPLE,
    IMAGE_MAX,
    IMAGE_PATTERN,
    MAX_ENV,
    MAX_INTEGER_DIGITS,
    MAX_PIP,
    PRIORITY_RANGE,
    JobInvalid,
)
from kube.quantity import QuantityError, ResourceList, format_resources, parse_resources
from queues.limits import TIME_MAX, duration_read
from queues.phrases import in_language
from queues.pools import MAX_POOLS
from queues.pools import NAME as POOL_NAME
from queues.pools import NAME_LENGTH as POOL_NAME_LENGTH

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_DIGITS = re.compile(r"-?\d+")
_DECIMAL = re.compile(r"\s*-?\d+(\.\d+)?\s*")
RESOURCES_EXAMPLE = '{"cpu": "4", "memory": "4Gi"}'
INVALID = object()  # what a refused field reads as; its error is recorded


# Paths and errors


def path(key: str, name: str | int) -> str:
    """The path of ``name`` inside ``key``: ``head`` + ``resources`` -> ``head.resources``,
    ``workers`` + 0 -> ``workers[0]``, ``pip`` + ``[2]`` -> ``pip[2]``."""
    if isinstance(name, int):
        return f"{key}[{name}]"
    if name == api_settings.NON_FIELD_ERRORS_KEY:
        return key or "body"
    if not key:
        return name
    return f"{key}{name}" if name.startswith("[") else f"{key}.{name}"


def flat(detail: Any, key: str = "") -> dict[str, list[str]]:
    """DRF's nested error detail as paths: ``{"workers": [{}, {"replicas": ["..."]}]}``
    -> ``{"workers[1].replicas": ["..."]}``. A key that is a path already stays one."""
    if isinstance(detail, Mapping):
        found: dict[str, list[str]] = {}
        for name, value in detail.items():
            # A ListField's errors are keyed by the item's index: ids + 3 -> ids[3].
            where_in = path(key, name if isinstance(name, int) else str(name))
            for where, reasons in flat(value, where_in).items():
                found.setdefault(where, []).extend(reasons)
        return found
    if isinstance(detail, list) and any(isinstance(item, Mapping | list) for item in detail):
        found = {}
        for index, item in enumerate(detail):
            found |= flat(item, path(key, index))
        return found
    reasons = detail if isinstance(detail, list) else [detail]
    return {key or "body": [str(reason) for reason in reasons]} if reasons else {}


def read_field(
    reader: serializers.Field, raw: object, errors: dict, key: str, name: str | int
) -> Any:
    """``reader``'s value of ``raw``, the field ``name`` of ``key``; or INVALID with its
    errors recorded under that path (made only then: a batch reads 16,000 fields)."""
    if isinstance(reader, Reader):
        return reader.read(raw, errors, path(key, name))
    try:
        return reader.run_validation(raw)
    except ValidationError as refused:
        for where, reasons in flat(refused.detail, path(key, name)).items():
            errors.setdefault(where, []).extend(reasons)
        return INVALID


def resources_required() -> str:
    """The reason a pod's resources are missing, in the active language (a form says it in
    a person's words instead)."""
    return _("is required: a mapping such as %(example)s") % {"example": RESOURCES_EXAMPLE}


def refuse(errors: dict, key: str, reason: str) -> None:
    """Record ``reason`` as the (only) problem of ``key``."""
    errors[key] = [reason]


# Fields: DRF's types, each checking with the product's messages


def _text(data: object, *, required: bool, limit: int, strip: bool) -> str:
    if data is empty or data is None:
        data = ""
    if not isinstance(data, str):
        raise ValidationError(_("must be a string"))
    value = data.strip() if strip else data
    if required and not value:
        raise ValidationError(_("is required"))
    if len(value.encode()) > limit:
        raise ValidationError(_("is longer than %(limit)s bytes") % {"limit": limit})
    return value


class Text(serializers.CharField):
    """A string: absent or null reads as "" (or ``default``), surrounding space is trimmed
    unless ``strip=False``, and at most ``limit`` bytes in UTF-8."""

    def __init__(self, *, limit: int = 500, strip: bool = True, default: str = "", **kwargs):
        self.limit, self.strip, self.fallback = limit, strip, default
        kwargs.setdefault("required", False)
        super().__init__(**kwargs)

    def run_validation(self, data=empty) -> str:
        value = _text(data, required=self.required, limit=self.limit, strip=self.strip)
        return value or self.fallback


class ImageReference(Text):
    """A container image as the kubelet pulls it: ``[registry[:port]/]path[:tag][@digest]``.
    Its characters and length are declared in the schema (the whole grammar is checked
    here, and declared as a refusal of ``image``)."""

    _reference = re.compile(IMAGE_PATTERN)

    def __init__(self, **kwargs):
        kwargs.setdefault("validators", [RegexValidator(IMAGE_CHARACTERS)])
        super().__init__(limit=IMAGE_MAX, max_length=IMAGE_MAX, **kwargs)

    def run_validation(self, data=empty) -> str:
        value = super().run_validation(data)
        if value and not self._reference.match(value):
            raise ValidationError(
                _(
                    "%(value)s is not an image reference ([registry[:port]/]path[:tag]"
                    "[@digest], such as %(example)s)"
                )
                % {"value": repr(value[:80]), "example": IMAGE_EXAMPLE}
            )
        return value


class Choice(serializers.ChoiceField):
    """One of ``choices``, read as Text (the rule that judges it may need other fields)."""

    def __init__(self, choices, *, check: bool = True, **kwargs):
        self.check = check
        kwargs.setdefault("required", False)
        super().__init__(choices, **kwargs)

    def run_validation(self, data=empty) -> str:
        value = _text(data, required=self.required, limit=500, strip=True)
        if self.check and value and value not in self.choices:
            raise ValidationError(
                _("must be one of %(choices)s, got %(value)s")
                % {"choices": ", ".join(map(str, self.choices)), "value": repr(value)}
            )
        return value


class Integer(serializers.IntegerField):
    """An integer within ``min_value``..``max_value``; absent or null reads as ``default``
    (is required without one).
    A JSON body's digits in a string count (a form sends nothing else) unless
    ``strings=False``; null is refused when ``nulls=False``."""

    def __init__(
        self, *, default: int | None = None, strings: bool = True, nulls: bool = True, **kwargs
    ):
        self.fallback, self.strings, self.nulls = default, strings, nulls
        if default is not None:
            kwargs["default"] = default
        kwargs.setdefault("required", default is None)
        super().__init__(**kwargs)

    def run_validation(self, data=empty) -> int:
        low, high = self.min_value, self.max_value
        if data is empty and not self.required and self.fallback is None:
            raise SkipField()  # optional, and absent: the body does without it
        if data is empty or (data is None and self.nulls):
            if self.fallback is None:
                raise ValidationError(_("is required"))
            return self.fallback
        if isinstance(data, bool) or not isinstance(data, int):
            text = data.strip() if isinstance(data, str) else None
            if not (self.strings and text is not None and _DIGITS.fullmatch(text)):
                raise ValidationError(
                    _("must be an integer, got %(value)s") % {"value": repr(data)}
                )
            if len(text) > MAX_INTEGER_DIGITS:  # int() would refuse 4,300 digits
                raise ValidationError(
                    _("must be between %(low)s and %(high)s") % {"low": low, "high": high}
                )
            data = int(text)
        if not low <= data <= high:
            raise ValidationError(
                _("must be between %(low)s and %(high)s, got %(value)s")
                % {"low": low, "high": high, "value": data}
            )
        return data


def priority_field(**kwargs) -> Integer:
    """A job's priority as every input reads it (the submitted document, a change of
    priority on a page or in the API, a bulk action): an integer within PRIORITY_RANGE."""
    return Integer(min_value=PRIORITY_RANGE[0], max_value=PRIORITY_RANGE[1], **kwargs)


class Number(serializers.FloatField):
    """A number within ``min_value``..``max_value``; absent or null reads as ``default``."""

    def __init__(self, *, default: float | None, **kwargs):
        self.fallback = default
        super().__init__(required=False, default=default, **kwargs)

    def run_validation(self, data=empty) -> float | None:
        if data is empty or data is None:
            return self.fallback
        if isinstance(data, str) and _DECIMAL.fullmatch(data):
            data = float(data)
        if isinstance(data, bool) or not isinstance(data, int | float) or data != data:
            raise ValidationError(_("must be a number, got %(value)s") % {"value": repr(data)})
        low, high = cast(float, self.min_value), cast(float, self.max_value)  # given both
        if not low <= data <= high:
            # An integer past a float's range has no :g spelling.
            bounds = {"low": f"{low:g}", "high": f"{high:g}"}
            if abs(data) >= 1e300:
                raise ValidationError(
                    _("must be between %(low)s and %(high)s, got a larger number") % bounds
                )
            raise ValidationError(
                _("must be between %(low)s and %(high)s, got %(value)s")
                % (bounds | {"value": f"{data:g}"})
            )
        return data


class Command(serializers.ListField):
    """A command: a list of arguments, or one shell-style string split as a shell would."""

    def __init__(self, **kwargs):
        super().__init__(child=serializers.CharField(), required=False, **kwargs)

    def run_validation(self, data=empty) -> list[str]:
        if data is empty or data is None or data == "":
            return []
        if isinstance(data, str):
            try:
                return shlex.split(data)
            except ValueError as error:
                raise ValidationError(
                    _("cannot be split into arguments: %(error)s") % {"error": error}
                ) from None
        if isinstance(data, list) and all(isinstance(arg, str) for arg in data):
            return list(data)
        raise ValidationError(_("must be a list of strings or a shell-style string"))


class _Words(serializers.ListField, ABC):
    """A list of at most ``most`` words, each read by ``item`` (its value, or the reason it
    is refused), every refusal at once by position; ``shape`` says what the list is."""

    most = 0

    def __init__(self, **kwargs):
        super().__init__(child=serializers.CharField(), required=False, **kwargs)

    @abstractmethod
    def shape(self) -> str: ...

    @abstractmethod
    def counted(self, count: int) -> str: ...

    @abstractmethod
    def item(self, value: object, kept: list[str]) -> tuple[str | None, str]: ...

    def run_validation(self, data=empty) -> list[str]:
        if data is empty or data is None or data == []:
            return []
        if not isinstance(data, list):
            raise ValidationError(self.shape())
        if len(data) > self.most:
            raise ValidationError(self.counted(len(data)))
        kept: list[str] = []
        errors = {}
        for index, value in enumerate(data):
            word, reason = self.item(value, kept)
            if word is None:
                errors[f"[{index}]"] = [reason]
            else:
                kept.append(word)
        if errors:
            raise ValidationError(errors)
        return kept


class Pip(_Words):
    """Requirement specifiers, as pip takes them: ``torch==2.4.0``, ``requests>=2``."""

    most = MAX_PIP

    def shape(self) -> str:
        return _('must be a list of requirements, such as ["torch==2.4.0"]')

    def counted(self, count: int) -> str:
        return _("at most %(limit)s requirements, got %(count)s") % {
            "limit": MAX_PIP, "count": count
        }  # fmt: skip

    def item(self, value: object, kept: list[str]) -> tuple[str | None, str]:
        if not isinstance(value, str) or not value.strip():
            return None, _("must be a requirement such as torch==2.4.0")
        if len(value) > 200 or any(c.isspace() for c in value.strip()):
            return None, _("%(value)s is not one requirement (no spaces, 200 at most)") % {
                "value": repr(value)
            }
        return value.strip(), ""


class PoolNames(_Words):
    """The node pools a job accepts, in order (``queues.pools``): names, each once. Whether
    the tree declares them is the queue's rule (``jobs.services``)."""

    most = MAX_POOLS

    def shape(self) -> str:
        return _('must be a list of node pool names, such as ["h100", "a100"]')

    def counted(self, count: int) -> str:
        return _("at most %(limit)s node pools, got %(count)s") % {
            "limit": MAX_POOLS, "count": count
        }  # fmt: skip

    def item(self, value: object, kept: list[str]) -> tuple[str | None, str]:
        if (
            not isinstance(value, str)
            or not POOL_NAME.match(value)
            or len(value) > POOL_NAME_LENGTH
        ):
            return None, _("%(value)s is not a node pool's name") % {"value": repr(value)[:80]}
        if value in kept:
            return None, _("%(value)s is named twice") % {"value": repr(value)}
        return value, ""


class Env(serializers.DictField):
    """Environment variables: names as a shell takes them, values as strings."""

    def __init__(self, **kwargs):
        super().__init__(child=serializers.CharField(), required=False, **kwargs)

    def shape(self) -> str:
        """How the object is written, for its refusal."""
        return _("must be an object of NAME: value")

    def value_problem(self, value: object) -> str | None:
        """Why ``value`` cannot be a variable's, or None."""
        if value is None:
            return _("needs a value (NAME=value)")
        if not isinstance(value, str):
            return _("must be a string, got %(value)s") % {"value": repr(value)}
        if len(value) > 4096:
            return _("is longer than %(limit)s characters") % {"limit": 4096}
        return None

    def run_validation(self, data=empty) -> dict[str, str]:
        if data is empty or data is None or data == {}:
            return {}
        if not isinstance(data, Mapping):
            raise ValidationError(self.shape())
        if len(data) > MAX_ENV:
            raise ValidationError(
                _("at most %(limit)s variables, got %(count)s")
                % {"limit": MAX_ENV, "count": len(data)}
            )
        env, errors = {}, {}
        for name, value in data.items():
            if not _ENV_NAME.match(str(name)) or len(str(name)) > 128:
                errors[name] = [_("is not a variable name (letters, digits, _; not first a digit)")]
            elif (problem := self.value_problem(value)) is not None:
                errors[name] = [problem]
            else:
                env[name] = value
        if errors:
            raise ValidationError(errors)
        return env


_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_SECRET_KEY = re.compile(r"^[-._a-zA-Z0-9]+$")
MAX_CLAIMS = 16
# Where a pod's own files are, which a claim may not cover.
RESERVED_PATHS = ("/dev/shm", "/proc", "/sys", "/dev")


def _absolute(text: str) -> bool:
    return (
        text.startswith("/")
        and len(text) <= 1024
        and ".." not in text.split("/")
        and ":" not in text
    )


CLAIM_SCHEMA = {
    "type": "object",
    "properties": {
        "claim": {"type": "string", "maxLength": 253, "pattern": _DNS_SUBDOMAIN.pattern},
        "path": {"type": "string", "maxLength": 1024, "pattern": "^/[^:]*$"},
        "read_only": {"type": "boolean", "default": False},
    },
    "required": ["claim", "path"],
    "additionalProperties": False,
}


@extend_schema_field({"type": "array", "maxItems": MAX_CLAIMS, "items": CLAIM_SCHEMA})
class Claims(serializers.ListField):
    """PersistentVolumeClaims of the job's namespace, each mounted in every pod:
    ``[{"claim": "datasets", "path": "/data", "read_only": true}]``."""

    def __init__(self, **kwargs):
        super().__init__(child=serializers.DictField(), required=False, **kwargs)

    def run_validation(self, data=empty) -> list[dict]:
        if data is empty or data is None or data == []:
            return []
        if not isinstance(data, list):
            raise ValidationError(_("must be a list of claims, path and read_only"))
        if len(data) > MAX_CLAIMS:
            raise ValidationError(
                _("at most %(limit)s claims, got %(count)s")
                % {"limit": MAX_CLAIMS, "count": len(data)}
            )
        claims, errors, paths = [], {}, set()
        for index, entry in enumerate(data):
            where = f"[{index}]"
            if not isinstance(entry, Mapping) or set(entry) - {"claim", "path", "read_only"}:
                errors[where] = [_("must be an object of claim, path and read_only")]
                continue
            claim, mount = entry.get("claim"), entry.get("path")
            read_only = entry.get("read_only", False)
            if not isinstance(claim, str) or not _DNS_SUBDOMAIN.match(claim) or len(claim) > 253:
                errors[f"{where}.claim"] = [
                    _("%(name)s is not a claim's name (a DNS-1123 subdomain)")
                    % {"name": repr(claim)}
                ]
            if not isinstance(mount, str) or not _absolute(mount):
                errors[f"{where}.path"] = [
                    _("%(path)s is not an absolute path (no '..' or ':')") % {"path": repr(mount)}
                ]
            elif mount.rstrip("/") in paths:
                errors[f"{where}.path"] = [_("is mounted by another claim")]
            elif any(mount == r or mount.startswith(f"{r}/") for r in RESERVED_PATHS):
                errors[f"{where}.path"] = [
                    _("%(path)s is the pod's own (a claim may not cover it)") % {"path": mount}
                ]
            if not isinstance(read_only, bool):
                errors[f"{where}.read_only"] = [_("must be true or false")]
            if isinstance(mount, str):
                paths.add(mount.rstrip("/"))
            claims.append({"claim": claim, "path": mount, "read_only": read_only})
        if errors:
            raise ValidationError(errors)
        return claims


@extend_schema_field(
    {"oneOf": [{"type": "string", "maxLength": 32, "example": "2h"},
               {"type": "integer", "minimum": 1, "maximum": TIME_MAX}]}
)  # fmt: skip
class Duration(serializers.Field):
    """A time limit: ``2h``, ``1h30m``, ``3d`` or a number of seconds, from 1 s to 365 d;
    absent or null reads as None (the leaf's default then)."""

    def __init__(self, **kwargs):
        super().__init__(required=False, allow_null=True, default=None, **kwargs)

    def run_validation(self, data=empty) -> int | None:
        if data is empty or data is None or data == "":
            return None
        errors: dict = {}
        seconds = duration_read(data, "", errors)
        if seconds is None:
            raise ValidationError(in_language(errors[""]))
        return seconds

    def to_representation(self, value):
        return value


class Count(serializers.IntegerField):
    """A whole number within ``min_value``..``max_value`` (``retries``); absent or null reads
    as ``default``, digits in a string (an annotation's) as their number."""

    def __init__(self, *, default: int | None, **kwargs):
        self.fallback = default
        super().__init__(required=False, default=default, **kwargs)

    def run_validation(self, data=empty) -> int | None:
        if data is empty or data is None:
            return self.fallback
        if isinstance(data, str) and data.strip().isdigit():
            data = int(data)
        if isinstance(data, bool) or not isinstance(data, int):
            raise ValidationError(
                _("must be a whole number, got %(value)s") % {"value": repr(data)}
            )
        low, high = cast(int, self.min_value), cast(int, self.max_value)  # given both
        if not low <= data <= high:
            raise ValidationError(
                _("must be between %(low)s and %(high)s, got %(value)s")
                % {"low": low, "high": high, "value": data}
            )
        return data


class SharedMemory(serializers.CharField):
    """The size of a memory-backed ``/dev/shm`` in every pod (PyTorch's data loader needs
    more than the runtime's 64M): a quantity of memory, or "" for none."""

    def __init__(self, **kwargs):
        super().__init__(required=False, allow_blank=True, max_length=20, **kwargs)

    def run_validation(self, data=empty) -> str:
        if data is empty or data is None or data == "":
            return ""
        try:
            units = parse_resources("", {"memory": data})["memory"]
        except QuantityError as error:
            raise ValidationError(in_language(error.reason)) from None
        if not units:
            raise ValidationError(_("must be more than 0, or left out"))
        return str(data)


class SecretEnv(Env):
    """Environment variables read from Secrets of the job's namespace, in every pod:
    ``{"HF_TOKEN": "hf-credentials/token"}``, a Secret's name and key. The value never
    passes through Caldera."""

    def shape(self) -> str:
        return _("must be an object of NAME: secret/key")

    def value_problem(self, value: object) -> str | None:
        secret, _slash, key = value.partition("/") if isinstance(value, str) else ("", "", "")
        if _DNS_SUBDOMAIN.match(secret) and len(secret) <= 253 and _SECRET_KEY.match(key):
            return None
        return _("%(value)s is not secret/key (a Secret's name, a slash, one of its keys)") % {
            "value": repr(value)
        }


class Resources(NamedTuple):
    given: dict[str, str]  # as the user wrote them: the pod's requests (and limits)
    units: ResourceList  # in base units, for quota
    limits: dict[str, str] = {}  # noqa: RUF012  # what it may use beyond them, as written


class PodResources(serializers.DictField):
    """A pod's resources, ``{"cpu": "4", "memory": "4Gi", "nvidia.com/gpu": "1"}``: a
    resource name and a Kubernetes quantity each. Reads as ``Resources``."""

    def __init__(self, **kwargs):
        kwargs.setdefault("help_text", f"per pod: {RESOURCES_EXAMPLE}")
        super().__init__(child=serializers.CharField(), **kwargs)

    def run_validation(self, data=empty) -> Resources:
        if not isinstance(data, Mapping) or not data:
            raise ValidationError(resources_required())
        try:
            units = parse_resources("", data)
        except QuantityError as error:  # error.field is "" or ".<resource>"
            where = error.field.removeprefix(".")
            reason = in_language(error.reason)
            raise ValidationError({where: [reason]} if where else reason) from None
        return Resources({name: str(value) for name, value in data.items()}, units)


def unknown_fields(
    data: Mapping, known, key: str, errors: dict, *, first_only: bool = False
) -> None:
    """Refuse each key of ``data`` that is not a field (only the first, as a pod or a
    worker group always has: the rest usually follow from the same typo)."""
    unknown = sorted(str(name) for name in set(data) - set(known))
    for name in unknown[:1] if first_only else unknown:
        refuse(errors, path(key, name), _("unknown field"))


class Reader(serializers.Serializer):
    """A serializer that reads with ``read(data, errors, key)``, which each subclass
    defines: every problem recorded under its path, reading on. DRF's ``is_valid`` and a
    parent serializer both get ``read``'s problems as one ValidationError of paths."""

    read: Callable[..., Any]

    def check(self, data: object) -> Any:
        """What ``data`` reads as, or JobInvalid naming every problem."""
        errors: dict[str, list[str]] = {}
        value = self.read(data, errors)
        if errors:
            raise JobInvalid(errors)
        return value

    def run_validation(self, data=empty):
        errors: dict[str, list[str]] = {}
        value = self.read(None if data is empty else data, errors)
        if errors:
            raise ValidationError(errors)
        return value

    to_internal_value = run_validation


def plain_writer(serializer: serializers.Serializer) -> Callable[[object], dict]:
    """``serializer.to_representation`` without DRF's per-field dispatch, for a serializer
    whose fields are plain (a dotted ``source``, or ``*`` for a method field, and a
    ``to_representation`` each; null stays null, as in DRF; nested serializers write
    themselves). A batch answers 1,000 entries at once and every job answer goes through
    it, where DRF's per-field loop costs a few times as much (``python -m
    bench.schema_costs`` measures both). The serializer's fields
    stay the one declaration; tests/api/test_job_schema.py checks that both write the same."""
    getters = [
        (name, _getter(cast(str, field.source)), field.to_representation)  # bound: a source
        for name, field in serializer.fields.items()
    ]

    def write(obj: object) -> dict:
        answer = {}
        for name, get, show in getters:
            value = get(obj)
            answer[name] = None if value is None else show(value)
        return answer

    return write


def _getter(source: str) -> Callable[[object], object]:
    """What a field reads from an object: the object itself (``*``), an attribute, or a
    dotted path that reads as null where a step on it is null (a job event's actor)."""
    if source == "*":
        return lambda obj: obj
    if "." not in source:
        return attrgetter(source)
    steps = source.split(".")

    def get(obj: object) -> object:
        for step in steps:
            if obj is None:
                return None
            obj = getattr(obj, step)
        return obj

    return get


class Time(serializers.DateTimeField):
    """A timestamp as Python's ``isoformat`` writes it (``2026-11-24T10:00:00+00:00``)."""

    def __init__(self, **kwargs):
        super().__init__(read_only=True, allow_null=True, **kwargs)

    # Null answers null, as allow_null says; the stub's Field always answers a value.
    def to_representation(self, value) -> str | None:  # type: ignore[override]
        return value.isoformat() if value else None


class Quantities(serializers.DictField):
    """Resources held in base units, answered as quantities: ``{"cpu": "4", "memory": "4G"}``."""

    def __init__(self, **kwargs):
        super().__init__(child=serializers.CharField(), read_only=True, **kwargs)

    def to_representation(self, value) -> dict[str, str]:
        return format_resources(value or {})


class Nullable(serializers.CharField):
    """A text that answers null when it is empty."""

    def __init__(self, **kwargs):
        super().__init__(read_only=True, allow_null=True, **kwargs)

    def to_representation(self, value) -> str | None:  # type: ignore[override]  # as Time's
        return value or None
