"""The OpenAPI schema states the errors every operation can answer, in their shapes.

Views declare their successes (and their own conflicts); the errors that the edge, the
authentication and the exception handler give every operation alike are added here once,
so a client generated from the schema, and the schemathesis run in the tests, know a 400,
a 401, a 403, a 404 on an operation with a path parameter, and a 503 (portal/errors.py).
"""

from __future__ import annotations

from drf_spectacular.openapi import AutoSchema
from drf_spectacular.plumbing import ResolvedComponent

from .errors import BROKER, DATABASE

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
        "component": {"type": "string", "enum": [DATABASE, BROKER]},
    },
    "required": ["detail", "component"],
}


class CalderaAutoSchema(AutoSchema):
    def _component(self, name: str, schema: dict) -> dict:
        component = ResolvedComponent(
            name=name, type=ResolvedComponent.SCHEMA, schema=schema, object=name
        )
        self.registry.register_on_missing(component)
        return component.ref

    def _error(self, description: str, schema: dict) -> dict:
        return {"description": description, "content": {"application/json": {"schema": schema}}}

    def _get_response_bodies(self, direction="response"):
        responses = super()._get_response_bodies(direction)
        if direction != "response":
            return responses
        detail = self._component("ErrorDetail", _DETAIL)
        field_errors = self._component("FieldErrors", _FIELD_ERRORS)
        errors = {
            # Bad input names each field; a body that is not JSON at all gets a detail.
            "400": self._error(
                "Bad input: each field with its reasons", {"anyOf": [field_errors, detail]}
            ),
            "401": self._error("No credentials, or a token that is not valid", detail),
            "403": self._error("Not allowed to do this; the detail says who may", detail),
            "503": self._error(
                "The database or the broker is down; Retry-After says when to try again",
                self._component("Unavailable", _UNAVAILABLE),
            )
            | {"headers": {"Retry-After": {"schema": {"type": "integer"}}}},
        }
        if "{" in self.path:
            errors["404"] = self._error("Nothing of that name or id that you may see", detail)
        for code, response in errors.items():
            responses.setdefault(code, response)
        return responses
