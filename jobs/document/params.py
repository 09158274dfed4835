"""Query parameters, each declared once: the declaration reads the parameter from a request
and states it in the OpenAPI schema (its type, bounds and allowed values), so what the
server checks and what the schema says cannot drift apart.

A parameter that is given must read: an empty value, a value given twice (a list's aside),
a number that is no integer or out of its bounds, a word that is not one of the allowed
ones: each answers 400 naming the parameter (``JobInvalid``). A list takes its values
comma-separated (``state=queued,backoff``: the schema's array with ``style: form`` and
``explode: false``) or the parameter repeated (``state=queued&state=backoff``, as a form's
checkboxes send it).

A page's filter form sends every field, the empty ones too: the page names its form's fields
(``read(..., form=...)``), whose empty values are fields not filled in. Any other empty
value is refused, so a URL built by a script with a missing value is told so instead of
being answered as if the parameter were not there.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

from django.core.exceptions import BadRequest
from django.http import HttpRequest
from django.utils import timezone
from django.utils.translation import gettext as _
from django_htmx.middleware import HtmxDetails
from drf_spectacular.utils import OpenApiParameter

from jobs.document.validation import OFFSET_MAX, PAGE_MAX, JobInvalid

# What the middleware refuses in any query parameter (portal.input): no C0 control character.
NO_CONTROL = "^[^\\u0000-\\u001f]*$"
# One name of a list: no comma (the list's separator), not only spaces.
_NAME = "[^,\\u0000-\\u001f]*[^ ,\\u0000-\\u001f][^,\\u0000-\\u001f]*"
_INTEGER = re.compile(r"-?[0-9]+")
_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
# RFC 3339's date-time, the schema's ``format: date-time``: seconds and an offset required.
_DATE_TIME = re.compile(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?(Z|[+-][0-9]{2}:[0-9]{2})",
    re.IGNORECASE,
)
SHOWN = 40  # characters of a refused value quoted back


def _quoted(text: str) -> str:
    return repr(text[:SHOWN])


@dataclass(frozen=True, kw_only=True)
class Param(ABC):
    """One query parameter: ``parse`` reads one value's text or raises ValueError with the
    reason; ``schema`` is the JSON schema of the parameter in the query string and
    ``text_schema`` that of its text as a JSON string (a bulk action's filter)."""

    name: str
    description: str
    default: Any = None
    many = False  # a list: comma-separated values, or the parameter repeated

    @abstractmethod
    def parse(self, text: str) -> Any: ...

    @abstractmethod
    def schema(self) -> dict: ...

    def text_schema(self) -> dict:
        return self.schema()

    def parameter(self) -> OpenApiParameter:
        return OpenApiParameter(
            self.name,
            self.schema(),
            OpenApiParameter.QUERY,
            description=self.description,
        )


@dataclass(frozen=True, kw_only=True)
class Integer(Param):
    """An integer from ``minimum`` to ``maximum``, written in digits (``-`` first if below 0)."""

    minimum: int
    maximum: int

    def parse(self, text: str) -> int:
        if not _INTEGER.fullmatch(text):
            raise ValueError(_("must be an integer, got %(value)s") % {"value": _quoted(text)})
        # More digits than the widest bound is out of bounds whatever they read: int() of
        # thousands of digits is slow, and a zero-padded 1 would pass a rule of 9 digits.
        widest = max(len(str(abs(self.minimum))), len(str(abs(self.maximum))))
        if len(text.lstrip("-")) > widest:
            value = self.minimum - 1 if text.startswith("-") else self.maximum + 1
        else:
            value = int(text)
        if value < self.minimum:
            raise ValueError(
                _("must be at least %(minimum)s, got %(value)s")
                % {"minimum": self.minimum, "value": _quoted(text)}
            )
        if value > self.maximum:
            raise ValueError(
                _("must be at most %(maximum)s, got %(value)s")
                % {"maximum": self.maximum, "value": _quoted(text)}
            )
        return value

    def schema(self) -> dict:
        schema = {"type": "integer", "minimum": self.minimum, "maximum": self.maximum}
        return schema if self.default is None else schema | {"default": self.default}

    def text_schema(self) -> dict:
        digits = len(str(self.maximum))
        if self.minimum != -self.maximum or self.maximum != 10**digits - 1:
            raise TypeError(f"{self.name}: only ±(10^n - 1) bounds read as a pattern")
        return {"type": "string", "pattern": f"^-?[0-9]{{1,{digits}}}$"}


@dataclass(frozen=True, kw_only=True)
class Choice(Param):
    """One of ``choices``, exactly as written."""

    choices: Sequence[str]

    def parse(self, text: str) -> str:
        if text not in self.choices:
            raise ValueError(
                _("must be one of %(choices)s, not %(value)s")
                % {"choices": ", ".join(self.choices), "value": _quoted(text)}
            )
        return text

    def schema(self) -> dict:
        schema = {"type": "string", "enum": list(self.choices)}
        return schema if self.default is None else schema | {"default": self.default}


class _List(Param):
    many = True

    @abstractmethod
    def item(self, text: str) -> str | None:
        """One item's value, None to leave it out; ValueError when it is refused."""

    @abstractmethod
    def item_schema(self) -> dict: ...

    def parse(self, text: str) -> tuple[str, ...]:
        values = []
        for item in text.split(","):
            if item == "":
                raise ValueError(
                    _("has an empty value in %(value)s; one comma between two")
                    % {"value": _quoted(text)}
                )
            value = self.item(item)
            if value is not None:
                values.append(value)
        return tuple(dict.fromkeys(values))

    def schema(self) -> dict:
        return {"type": "array", "items": self.item_schema(), "minItems": 1}

    def parameter(self) -> OpenApiParameter:
        return OpenApiParameter(
            self.name,
            self.schema(),
            OpenApiParameter.QUERY,
            description=f"{self.description}; comma-separated, or the parameter repeated",
            style="form",
            explode=False,
        )


@dataclass(frozen=True, kw_only=True)
class Choices(_List):
    """Some of ``choices``: ``state=queued,backoff``."""

    choices: Sequence[str]
    default: tuple = ()

    def item(self, text: str) -> str:
        if text not in self.choices:
            raise ValueError(
                _("unknown %(name)s %(value)s; one of %(choices)s")
                % {"name": self.name, "value": _quoted(text), "choices": ", ".join(self.choices)}
            )
        return text

    def item_schema(self) -> dict:
        return {"type": "string", "enum": list(self.choices)}

    def text_schema(self) -> dict:
        one = "|".join(re.escape(choice) for choice in self.choices)
        return {"type": "string", "pattern": f"^({one})(,({one}))*$"}


@dataclass(frozen=True, kw_only=True)
class Words(_List):
    """Names, such as usernames or queues: ``owner=alice,bob``; spaces around each are
    trimmed (``alice, bob``), and a name of spaces alone is refused: it would name nothing,
    and a bulk action's filter that names nothing would take in every job."""

    default: tuple = ()

    def item(self, text: str) -> str:
        if not text.strip(" "):
            raise ValueError(_("has a blank value in %(value)s") % {"value": _quoted(text)})
        return text.strip(" ")

    def item_schema(self) -> dict:
        return {"type": "string", "pattern": f"^{_NAME}$"}

    def text_schema(self) -> dict:
        return {"type": "string", "pattern": f"^{_NAME}(,{_NAME})*$"}


@dataclass(frozen=True, kw_only=True)
class Text(Param):
    """Any text up to ``max_length`` characters, taken as it is."""

    max_length: int
    default: str = ""

    def parse(self, text: str) -> str:
        if len(text) > self.max_length:
            raise ValueError(
                _("must be at most %(limit)s characters, got %(length)s")
                % {"limit": self.max_length, "length": len(text)}
            )
        return text

    def schema(self) -> dict:
        return {
            "type": "string",
            "minLength": 1,
            "maxLength": self.max_length,
            "pattern": NO_CONTROL,
        }


@dataclass(frozen=True, kw_only=True)
class Flag(Param):
    """Yes or no: ``1`` or ``true``, ``0`` or ``false``."""

    default: bool = False
    YES = ("1", "true")
    NO = ("0", "false")

    def parse(self, text: str) -> bool:
        if text not in self.YES + self.NO:
            raise ValueError(
                _("must be one of %(choices)s, not %(value)s")
                % {"choices": ", ".join(self.YES + self.NO), "value": _quoted(text)}
            )
        return text in self.YES

    def schema(self) -> dict:
        return {"type": "string", "enum": [*self.YES, *self.NO]}


@dataclass(frozen=True, kw_only=True)
class Moment(Param):
    """An RFC 3339 date (``2026-11-24``) or date-time (``2026-11-24T09:30:00Z``, its offset
    required). A date is its midnight in the portal's time zone, or with ``end`` the next
    midnight, so that ``submitted_before=2026-11-24`` takes in the whole day."""

    end: bool = False

    def parse(self, text: str) -> datetime:
        try:
            if _DATE.fullmatch(text):
                day = date.fromisoformat(text)
                if self.end and day == date.max:
                    return datetime.max.replace(tzinfo=UTC)
                day += timedelta(days=self.end)
                moment = timezone.make_aware(datetime.combine(day, time.min))
            elif _DATE_TIME.fullmatch(text):
                moment = datetime.fromisoformat(text.upper())
            else:
                moment = None
        except ValueError:  # well formed, but no such day or time (2026-02-30)
            moment = None
        if moment is None:
            raise ValueError(
                _(
                    "%(value)s is not a date (2026-11-24) or a date-time with its offset "
                    "(2026-11-24T09:30:00Z)"
                )
                % {"value": _quoted(text)}
            )
        try:
            return moment.astimezone(UTC)
        except OverflowError:  # past datetime's range once in UTC: its first or last moment
            return (datetime.min if moment.year == 1 else datetime.max).replace(tzinfo=UTC)

    def schema(self) -> dict:
        return {
            "anyOf": [
                {"type": "string", "format": "date"},
                {"type": "string", "format": "date-time"},
            ]
        }


@dataclass(frozen=True, kw_only=True)
class Day(Param):
    """A calendar day, RFC 3339's date (``2026-10-01``), from ``minimum`` to ``maximum``."""

    minimum: date = date(2000, 1, 1)
    maximum: date = date(2099, 12, 31)

    def parse(self, text: str) -> date:
        try:
            day = date.fromisoformat(text) if _DATE.fullmatch(text) else None
        except ValueError:  # well formed, but no such day (2026-02-30)
            day = None
        if day is None:
            raise ValueError(_("%(value)s is not a date (2026-10-01)") % {"value": _quoted(text)})
        if day < self.minimum:
            raise ValueError(
                _("must be %(minimum)s or later, got %(value)s")
                % {"minimum": self.minimum.isoformat(), "value": _quoted(text)}
            )
        if day > self.maximum:
            raise ValueError(
                _("must be %(maximum)s or earlier, got %(value)s")
                % {"maximum": self.maximum.isoformat(), "value": _quoted(text)}
            )
        return day

    def schema(self) -> dict:
        return {"type": "string", "format": "date"}


def _texts(source: Mapping, name: str) -> list[str]:
    if hasattr(source, "getlist"):  # a QueryDict: every value given
        return list(source.getlist(name))
    return [source[name]] if name in source else []


@dataclass(frozen=True)
class Params:
    """A request's parameters: ``read`` gives each one's value (its default when it is not
    given) or raises JobInvalid naming every one that is wrong; ``parameters`` declares them
    for ``extend_schema``."""

    declared: tuple[Param, ...]

    def __add__(self, other: Params) -> Params:
        return Params(self.declared + other.declared)

    def __getitem__(self, name: str) -> Param:
        return next(param for param in self.declared if param.name == name)

    @property
    def names(self) -> list[str]:
        return [param.name for param in self.declared]

    def read(self, source: Mapping, *, form: Collection[str] = ()) -> dict[str, Any]:
        """Each parameter's value; those named in ``form`` are a form's fields, which read
        as not given when they are empty."""
        errors: dict[str, str] = {}
        values: dict[str, Any] = {}
        for param in self.declared:
            texts = _texts(source, param.name)
            if param.name in form:
                texts = [text for text in texts if text != ""]
            values[param.name] = param.default
            if not texts:
                continue
            if len(texts) > 1 and not param.many:
                errors[param.name] = _("is given %(count)s times; give it once") % {
                    "count": len(texts)
                }
            elif "" in texts:
                errors[param.name] = _("is empty; give a value or leave the parameter out")
            else:
                try:
                    values[param.name] = param.parse(",".join(texts))
                except ValueError as error:
                    errors[param.name] = str(error)
        if errors:
            raise JobInvalid(errors)
        return values

    def parameters(self) -> list[OpenApiParameter]:
        return [param.parameter() for param in self.declared]

    def object_schema(self) -> dict:
        """The parameters as a JSON object of their texts, and no other key."""
        return {
            "type": "object",
            "properties": {
                param.name: param.text_schema() | {"description": param.description}
                for param in self.declared
            },
            "additionalProperties": False,
        }


def params(*declared: Param) -> Params:
    return Params(tuple(declared))


def page(*, default_limit: int, of: str) -> Params:
    """A page of a list by offset: ``offset`` entries skipped, ``limit`` answered."""
    return params(
        Integer(
            name="offset",
            minimum=0,
            maximum=OFFSET_MAX,
            default=0,
            description=f"{of} to skip",
        ),
        Integer(
            name="limit",
            minimum=1,
            maximum=PAGE_MAX,
            default=default_limit,
            description=f"{of} to answer",
        ),
    )


# The pages of the lists read by offset (the jobs list's own are in jobs.reads.listing).
QUEUE_PAGE = page(default_limit=50, of="pending jobs")
EVENTS_PAGE = page(default_limit=PAGE_MAX, of="events")
# GET /api/v1/jobs/{id}/manifest/: the objects Caldera creates, or those the team sent.
# A submission queued held (POST /api/v1/jobs/, its batch and dry runs; caldera submit --hold).
HELD_QUERY = params(
    Flag(
        name="held",
        description="queue the job held: it keeps its place and is not admitted until "
        "POST /api/v1/jobs/{id}/release/",
    )
)
MANIFEST_QUERY = params(
    Choice(
        name="as",
        choices=("created", "sent"),
        default="created",
        description="created: the objects as Caldera creates them; sent: as the team sent them",
    )
)


class HtmxHttpRequest(HttpRequest):
    """A page's request, which django-htmx's middleware tells whether htmx sent it."""

    htmx: HtmxDetails


def page_query(declared: Params, request: HttpRequest) -> dict:
    """A page's parameters, or handler400's page naming the one that is wrong (the API
    answers the same JobInvalid as JSON)."""
    try:
        return declared.read(request.GET)
    except JobInvalid as invalid:
        raise BadRequest(str(invalid)) from None
