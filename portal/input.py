"""Text the database cannot store is refused at the edge, with the field that holds it.

PostgreSQL refuses a NUL in any text and Python's UTF-8 encoder refuses an unpaired
surrogate, so either reaching a query turned a typo into a 500. Every way in passes here
first: the JSON body of the API (``CheckedJSONParser``, the default parser), and paths,
query strings, cookies and POSTed form fields (``portal.middleware.RefuseUnstorableText``);
the API's form parsers check a PUT or PATCH form the same way.

Free text (a JSON string value, a form field) may hold tab, line feed and carriage return,
as a script or a multi-line entrypoint does; names, keys, paths and query parameters may
hold no C0 control character at all.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable

from django.conf import settings
from django.utils.translation import gettext as _
from rest_framework import exceptions, status
from rest_framework.parsers import (
    BaseParser,
    DataAndFiles,
    FormParser,
    JSONParser,
    MultiPartParser,
)

from kube.yaml_text import YamlRefused, load_file

_IN_FREE_TEXT = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff]")
_ANYWHERE = re.compile(r"[\x00-\x1f\ud800-\udfff]")
# Deeper than any job or quota tree document (a tree nests two levels per generation);
# refused before the walk, or a hostile body would exhaust the stack.
MAX_JSON_DEPTH = 100


def text_problem(value: str, *, free_text: bool) -> str | None:
    """Why ``value`` cannot be stored, or None. Free text may hold tab, LF and CR."""
    found = (_IN_FREE_TEXT if free_text else _ANYWHERE).search(value)
    if found is None:
        return None
    code = ord(found.group())
    if 0xD800 <= code <= 0xDFFF:
        return _("contains an unpaired surrogate (U+%(code)04X), which is not valid Unicode") % {
            "code": code
        }
    if free_text:
        return _(
            "contains the control character U+%(code)04X; only tab, line feed and carriage "
            "return are allowed"
        ) % {"code": code}
    return _("contains the control character U+%(code)04X") % {"code": code}


def pairs_problem(pairs: Iterable[tuple[str, str]], *, free_text: bool) -> tuple[str, str] | None:
    """The first (name, reason) among name/value pairs: a query string, cookies, a form.

    A name may hold no control character; a value is checked as free text when
    ``free_text`` (a form's textarea holds line breaks; a query parameter does not).
    """
    for name, value in pairs:
        reason = text_problem(name, free_text=False)
        if reason is not None:
            return printable(name), _("the name %(reason)s") % {"reason": reason}
        reason = text_problem(value, free_text=free_text)
        if reason is not None:
            return name, reason
    return None


def printable(name: str) -> str:
    """A field name fit to be an error's key: control characters spelled as escapes."""
    return _ANYWHERE.sub(lambda m: f"\\u{ord(m.group()):04x}", name) or "body"


# In JSON written with every non-ASCII character escaped, what a string value may hide
# that cannot be stored: a control character other than tab, LF and CR, or half of a
# surrogate pair. It also matches what is harmless (an escaped backslash before "u0000",
# an emoji's pair): those are only walked for nothing.
_ESCAPED_PROBLEM = re.compile(r"\\(?:u00(?:0[0-8bBcCe-fE-F]|1[0-9a-fA-F])|u[dD][89a-fA-F]|[bf])")


def json_problem(data: object) -> tuple[str, str] | None:
    """The first (field path, reason) in parsed JSON that cannot be stored, or None.

    The path is the one the services' errors use: ``jobs[0].name``, ``head.resources.cpu``.
    A body is first read at C speed (its containers' depth and keys, then its values as
    escaped JSON) and walked string by string, naming the field, only when that finds
    something: a batch of 1,000 jobs holds some 60,000 strings.
    """
    if _containers_clean(data) and not _ESCAPED_PROBLEM.search(json.dumps(data)):
        return None
    return _first_problem(data)


def _containers_clean(data: object) -> bool:
    """No container deeper than MAX_JSON_DEPTH, and no key a name may not hold."""
    stack: list[tuple[object, int]] = [(data, 0)]
    while stack:
        value, depth = stack.pop()
        if depth > MAX_JSON_DEPTH:
            return False
        children: Iterable[object] = ()
        if isinstance(value, dict):
            for key in value:
                if not key.isprintable() and _ANYWHERE.search(key):
                    return False
            children = value.values()
        elif isinstance(value, list):
            children = value
        for item in children:
            if type(item) is dict or type(item) is list:
                stack.append((item, depth + 1))
    return True


def too_deep() -> str:
    return _("is nested deeper than %(most)d levels") % {"most": MAX_JSON_DEPTH}


def _first_problem(data: object) -> tuple[str, str] | None:
    """The walk that names the field: with an explicit stack, so the depth limit, not the
    interpreter's, decides."""
    stack: list[tuple[object, str, int]] = [(data, "", 0)]
    while stack:
        value, path, depth = stack.pop()
        if depth > MAX_JSON_DEPTH:
            return "body", too_deep()
        if isinstance(value, str):
            reason = text_problem(value, free_text=True)
            if reason is not None:
                return path or "body", reason
        elif isinstance(value, dict):
            children = []
            for key, item in value.items():
                reason = text_problem(key, free_text=False)
                if reason is not None:
                    return path or "body", _("a key %(reason)s") % {"reason": reason}
                children.append((item, f"{path}.{key}" if path else key, depth + 1))
            stack.extend(reversed(children))  # popped in document order
        elif isinstance(value, list):
            children = [(item, f"{path}[{i}]", depth + 1) for i, item in enumerate(value)]
            stack.extend(reversed(children))
    return None


class CheckedJSONParser(JSONParser):
    """DRF's JSON parser, refusing what the database cannot store with the field's path,
    and a body that is not an object (a list or a number), which no endpoint takes.

    The 400 has the API's error shape, ``{"jobs[0].name": ["contains the control
    character U+0000; ..."]}``. A body nested so deep that the JSON decoder itself gives up
    is refused the same way instead of failing with a RecursionError.
    """

    def parse(self, stream, media_type=None, parser_context=None):
        try:
            data = super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise exceptions.ValidationError({"body": [too_deep()]}) from None
        return _storable(data, _("must be a JSON object"))


def _storable(data: object, not_an_object: str) -> dict:
    """A parsed body, refused unless it is an object (every body this API takes is one)
    whose text the database can store."""
    if not isinstance(data, dict):
        raise exceptions.ValidationError({"body": [not_an_object]})
    problem = json_problem(data)
    if problem is not None:
        field, reason = problem
        raise exceptions.ValidationError({field: [reason]})
    return data


class BodyTooLarge(exceptions.APIException):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_code = "too_large"


class CheckedYAMLParser(BaseParser):
    """A YAML body (``Content-Type: application/yaml``), as a Kubernetes manifest is
    written: read within ``kube.yaml_text``'s bounds (one document, few aliases, JSON's
    values) and at most ``YAML_BODY_MAX_BYTES``, then refused for what the database cannot
    store exactly as a JSON body is. The operations that take a job's manifest take it."""

    media_type = "application/yaml"

    def parse(self, stream, media_type=None, parser_context=None):
        limit = settings.YAML_BODY_MAX_BYTES
        raw = stream.read(limit + 1) if stream is not None else b""
        if len(raw) > limit:
            raise BodyTooLarge(
                {
                    "body": [
                        _("is larger than YAML_BODY_MAX_BYTES (%(limit)d bytes)") % {"limit": limit}
                    ]
                }
            )
        try:
            text = raw.decode(settings.DEFAULT_CHARSET)
        except UnicodeDecodeError:
            raise exceptions.ValidationError({"body": [_("is not UTF-8 text")]}) from None
        try:
            data = load_file(text)
        except YamlRefused as refused:
            raise exceptions.ValidationError({refused.field: [str(refused)]}) from None
        return _storable(data, _("must be a YAML mapping"))


class CheckedXYAMLParser(CheckedYAMLParser):
    """The older media type some tools still send."""

    media_type = "application/x-yaml"


class _CheckedFormMixin:
    """A form body's fields, by the rule of the middleware (values are free text)."""

    def parse(self, stream, media_type=None, parser_context=None):
        parsed = super().parse(stream, media_type, parser_context)  # type: ignore[misc]  # mixed in
        fields = parsed.data if isinstance(parsed, DataAndFiles) else parsed
        pairs = ((name, value) for name, values in fields.lists() for value in values)
        problem = pairs_problem(
            ((name, value) for name, value in pairs if isinstance(value, str)), free_text=True
        )
        if problem is not None:
            field, reason = problem
            raise exceptions.ValidationError({field: [reason]})
        return parsed


class CheckedFormParser(_CheckedFormMixin, FormParser):
    pass


class CheckedMultiPartParser(_CheckedFormMixin, MultiPartParser):
    pass
