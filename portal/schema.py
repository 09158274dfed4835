"""The OpenAPI schema states the errors every operation can answer, in their shapes.

Views declare their successes (and their own conflicts); the errors that the edge, the
authentication and the exception handler give every operation alike are added here once,
so a client generated from the schema, and the schemathesis run in the tests, know a 400,
a 401, a 403, a 404 on an operation with a path parameter, a 409 on a write, a 415 on an
operation that takes a body, a 429 past a limit (portal/throttling.py) and a 503
(portal/errors.py).

A 400 also lists the refusals no schema can rule out (``queues.api_base.refusals``): those
that depend on what is stored (a queue that does not exist, a name already taken) or on
several fields at once. A body that refuses fields it does not declare says so
(``additionalProperties: false``), and a text in a path may hold no control character, as
the edge refuses one (portal.input).
"""

from __future__ import annotations

import copy

from drf_spectacular.openapi import AutoSchema
from drf_spectacular.plumbing import ResolvedComponent, force_instance
from rest_framework import serializers

from jobs.document.fields import Reader
from jobs.document.params import NO_CONTROL
from queues.api_base import REFUSALS, Body

from .errors import BROKER, DATABASE
from .throttling import LIMITS

_DETAIL = {
    "type": "object",
    "properties": {"detail": {"type": "string"}},
    "required": ["detail"],
}
_FIELD_ERRORS = {
    "type": "object",
    "description": 'Each field named with its reasons: {"jobs[0].name": ["..."]}',
    "additionalProperties": {"type": "array", "items": {"type": "string"}},
}
_UNAVAILABLE = {
    "type": "object",
    "properties": {
        "detail": {"type": "string"},
        "component": {
            "type": "string",
            "enum": [DATABASE, BROKER],
            "description": "the service that is down",
        },
        "reason": {
            "type": "string",
            "description": '"busy": the request kept losing to others\' changes of the same '
            "rows; nothing of it was kept",
        },
    },
    "required": ["detail"],
}
_LIMIT_REACHED = {
    "type": "object",
    "properties": {
        "detail": {"type": "string"},
        "limit": {
            "type": "string",
            "enum": [limit.name for limit in LIMITS],
            "description": "the limit the request would pass",
        },
        "rate": {"type": "string", "description": 'the limit\'s rate, as set: "3000/min"'},
        "retry_after": {
            "type": "integer",
            "nullable": True,
            "description": "seconds until the limit's window ends, as Retry-After; null: the "
            "request alone is more than the whole limit, and waiting does not help",
        },
    },
    "required": ["detail", "limit", "rate", "retry_after"],
}
# What the edge refuses in a body's text (portal.input): a C0 control character other than
# tab, line feed and carriage return.
FREE_TEXT = "^[^\\u0000-\\u0008\\u000b\\u000c\\u000e-\\u001f]*$"
WRITES = ("POST", "PUT", "PATCH", "DELETE")
BODIES = ("POST", "PUT", "PATCH")


def _free_text(schema: dict) -> None:
    """Write FREE_TEXT into each string of a body's property, its items and its values,
    unless the string has its own pattern, choices or format (a reference is its
    component's, written where the component is)."""
    if schema.get("type") == "string":
        if not {"pattern", "enum", "format"} & set(schema):
            schema["pattern"] = FREE_TEXT
    for inner in ("items", "additionalProperties"):
        if isinstance(schema.get(inner), dict):
            _free_text(schema[inner])
    for branch in schema.get("anyOf", []) + schema.get("oneOf", []) + schema.get("allOf", []):
        _free_text(branch)


class CalderaAutoSchema(AutoSchema):
    def _component(self, name: str, schema: dict) -> dict:
        """A component of its own, registered once per schema, by reference. A copy: the
        schema's hooks rewrite a component in place (an ``enum`` becomes a reference to its
        enum's component), and a module's dict changed by one schema would be the next
        one's, which has no such enum component: a web process served a broken schema
        from its second request on."""
        component = ResolvedComponent(
            name=name, type=ResolvedComponent.SCHEMA, schema=copy.deepcopy(schema), object=name
        )
        self.registry.register_on_missing(component)
        return component.ref

    def _error(self, description: str, schema: dict) -> dict:
        return {"description": description, "content": {"application/json": {"schema": schema}}}

    def _bad_input(self) -> str:
        described = "Bad input: each field with its reasons"
        refusals = self.get_extensions().get(REFUSALS)
        if not refusals:
            return described
        listed = "; ".join(f"{field}: {why}" for field, why in refusals.items())
        return f"{described}. Also refused, however well formed: {listed}"

    def _map_basic_serializer(self, serializer, direction):
        schema = super()._map_basic_serializer(serializer, direction)
        if direction != "request":
            return schema
        serializer = force_instance(serializer)
        if isinstance(serializer, Body | Reader):  # each refuses a field it does not name
            schema["additionalProperties"] = False
        # The API's PATCH (a job's priority) reads its body whole, not as DRF's partial
        # update: what its serializer requires is required.
        required = [name for name, field in serializer.fields.items() if field.required]
        if required:
            schema["required"] = required
        for text in schema["properties"].values():
            _free_text(text)
        for name, field in serializer.fields.items():
            if isinstance(field, serializers.ListSerializer) and name in schema["properties"]:
                # ListSerializer keeps both bounds; its stub does not name them.
                bounds = {"minItems": field.min_length, "maxItems": field.max_length}  # type: ignore[attr-defined]
                schema["properties"][name] |= {k: v for k, v in bounds.items() if v is not None}
        return schema

    def _resolve_path_parameters(self, variables):
        parameters = super()._resolve_path_parameters(variables)
        for parameter in parameters:
            text = parameter["schema"]
            if text.get("type") == "string" and "pattern" not in text:
                text["pattern"] = NO_CONTROL
        return parameters

    def _get_response_bodies(self, direction="response"):
        responses = super()._get_response_bodies(direction)
        if direction != "response":
            return responses
        detail = self._component("ErrorDetail", _DETAIL)
        field_errors = self._component("FieldErrors", _FIELD_ERRORS)
        errors = {
            # Bad input names each field; a body that is not JSON at all gets a detail.
            "400": self._error(self._bad_input(), {"anyOf": [field_errors, detail]}),
            "401": self._error("No credentials, or a token that is not valid", detail),
            "403": self._error("Not allowed to do this; the detail says who may", detail),
            "503": self._error(
                "The database or the broker is down (component), or the request kept losing "
                "to others' changes (reason busy); Retry-After says when to try again",
                self._component("Unavailable", _UNAVAILABLE),
            )
            | {"headers": {"Retry-After": {"schema": {"type": "integer", "minimum": 0}}}},
            "429": self._error(
                "Past a limit of the token's or the person's requests (docs/api.md); "
                "Retry-After says when its window ends",
                self._component("LimitReached", _LIMIT_REACHED),
            )
            | {"headers": {"Retry-After": {"schema": {"type": "integer", "minimum": 1}}}},
        }
        if "{" in self.path:
            errors["404"] = self._error("Nothing of that name or id that you may see", detail)
        if self.method in WRITES:
            errors["409"] = self._error(
                "Others' changes to the same rows went first; nothing was changed, try again",
                detail,
            )
        if self.method in BODIES and self.get_request_serializer() is not None:
            errors["415"] = self._error(
                "A body of a media type this operation does not take", detail
            )
        for code, response in errors.items():
            responses.setdefault(code, response)
        return responses
