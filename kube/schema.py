"""Whether an object is one the cluster would take: the operators' CRD schemas for their
kinds (``k8s/crds``, see k8s/SOURCES.md), the official client's models for the core ones.

The API server validates a custom resource against its CRD's ``openAPIV3Schema`` and
drops the fields the schema does not declare. Caldera is stricter: an undeclared field is
refused with its path, so that a misspelt ``nodeSelecter`` is a refusal at submit rather
than a job that runs without it (``kubectl apply --validate=strict`` reads it the same way).
A core object (a ConfigMap, an ObjectMeta) is checked against the models the
``kubernetes`` client ships: every field it names, of the type it says.

Every problem is found at once, each as ``path -> reasons`` (``spec.tasks[0].replicas``),
worded in English as ``kube.said`` words a rule's refusal.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes.client
import yaml

from .said import Said, gettext_noop

CRDS = Path(__file__).resolve().parent.parent / "k8s" / "crds"

CRD_FILES = {
    ("ray.io/v1", "RayJob"): "rayjobs.ray.io.yaml",
    ("ray.io/v1", "RayCluster"): "rayclusters.ray.io.yaml",
    ("kubeflow.org/v1", "PyTorchJob"): "pytorchjobs.kubeflow.org.yaml",
    ("batch.volcano.sh/v1alpha1", "Job"): "jobs.batch.volcano.sh.yaml",
    ("scheduling.volcano.sh/v1beta1", "Queue"): "queues.scheduling.volcano.sh.yaml",
    ("scheduling.sigs.k8s.io/v1beta1", "ElasticQuotaTree"): (
        "elasticquotatrees.scheduling.sigs.k8s.io.yaml"
    ),
}
# The core kinds, by the client's model that declares them.
CORE_MODELS = {("v1", "ConfigMap"): "V1ConfigMap"}

Problems = dict[str, list[str]]
# The pattern the CRDs give a Kubernetes quantity (resources, limits, capacity), and how a
# person is told a value is not one (kube.quantity's words).
QUANTITY_PATTERN_START = r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))"
QUANTITY_WORDS = gettext_noop(
    "%(value)s is not a Kubernetes quantity (examples: 500m, 2, 1.5, 4Gi, 4G)"
)


def render(where: tuple[str | int, ...]) -> str:
    """``("spec", "tasks", 0, "name")`` -> ``spec.tasks[0].name``; a key that is not a
    plain name is quoted as kubectl's JSONPath quotes it: ``metadata.labels['a.b/c']``."""
    text = ""
    for part in where:
        if isinstance(part, int):
            text += f"[{part}]"
        elif part.replace("-", "").replace("_", "").isalnum():
            text += f".{part}" if text else part
        else:
            text += f"['{part}']"
    return text


def _strict(schema: Any) -> Any:
    """Forbid undeclared fields wherever the schema declares properties and does not
    ask Kubernetes to preserve unknown ones."""
    if isinstance(schema, dict):
        for key, value in list(schema.items()):
            if key in {"properties", "patternProperties", "definitions"}:
                for sub in value.values():
                    _strict(sub)
            elif isinstance(value, dict | list):
                _strict(value)
        if (
            "properties" in schema
            and "additionalProperties" not in schema
            and not schema.get("x-kubernetes-preserve-unknown-fields")
        ):
            schema["additionalProperties"] = False
    elif isinstance(schema, list):
        for item in schema:
            _strict(item)
    return schema


@cache
def crd_schema(api_version: str, kind: str) -> dict[str, Any]:
    """The served version's ``openAPIV3Schema`` of the kind's CRD, strict (above); read
    once a process (the RayJob's is 1.4 MB of YAML, a quarter of a second)."""
    text = (CRDS / CRD_FILES[(api_version, kind)]).read_text()
    document = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))  # noqa: S506
    version = api_version.split("/")[1]
    (served,) = [v for v in document["spec"]["versions"] if v["name"] == version]
    schema = copy.deepcopy(served["schema"]["openAPIV3Schema"])
    # metadata is the API server's ObjectMeta, not the CRD's (``object_problems`` reads it
    # by the client's model); every object has apiVersion and kind even where the CRD
    # (ElasticQuotaTree's) leaves them out.
    schema["properties"]["metadata"] = {"type": "object"}
    schema["properties"].setdefault("apiVersion", {"type": "string"})
    schema["properties"].setdefault("kind", {"type": "string"})
    strict: dict[str, Any] = _strict(schema)
    return strict


@cache
def _validator(api_version: str, kind: str) -> jsonschema.Draft7Validator:
    return jsonschema.Draft7Validator(crd_schema(api_version, kind))


def known(api_version: object, kind: object) -> bool:
    """Whether the object's kind has a schema here."""
    return (api_version, kind) in CRD_FILES or (api_version, kind) in CORE_MODELS


@dataclass
class Checked:
    """What a schema says of an object: ``problems``, for which the API server would refuse
    it (a wrong type, a required field missing, a value out of bounds), and ``unknown``, the
    fields it does not declare, which the API server drops (``kubectl apply
    --validate=warn`` warns of them and sends the object on). Both by path."""

    problems: Problems = field(default_factory=dict)
    unknown: Problems = field(default_factory=dict)


def object_check(obj: Mapping[str, Any], at: tuple[str | int, ...] = ()) -> Checked:
    """``obj`` read by its kind's schema, by paths under ``at``. Its ``metadata`` is read by
    the client's ObjectMeta. A required field whose schema has a default is not missing:
    the API server writes the default before it validates."""
    key = (obj.get("apiVersion"), obj.get("kind"))
    checked = Checked()
    if key in CORE_MODELS:
        _model(CORE_MODELS[key], obj, at, checked)
        return checked
    for error in _validator(*key).iter_errors(obj):
        _crd_problem(error, at, checked, f"the {key[1]} CRD")
    if "metadata" in obj:
        _model("V1ObjectMeta", obj["metadata"], (*at, "metadata"), checked)
    return checked


def object_problems(obj: Mapping[str, Any], at: tuple[str | int, ...] = ()) -> Problems:
    """Every way ``obj`` breaks its kind's schema, undeclared fields included (what the
    tests hold Caldera's own objects to); empty when valid."""
    checked = object_check(obj, at)
    return {**checked.unknown, **checked.problems}


def _say(problems: Problems, where: tuple[str | int, ...], reason: str) -> None:
    problems.setdefault(render(where) or "body", []).append(reason)


_TYPES = {
    "string": gettext_noop("must be a string"),
    "integer": gettext_noop("must be an integer"),
    "number": gettext_noop("must be a number"),
    "boolean": gettext_noop("must be true or false"),
    "object": gettext_noop("must be an object"),
    "array": gettext_noop("must be a list"),
}


def _crd_problem(
    error: jsonschema.ValidationError, at: tuple[str | int, ...], checked: Checked, schema: str
) -> None:
    """One schema error as the path it is at and a reason a person reads."""
    problems = checked.problems
    where = (*at, *error.absolute_path)
    rule, expected = error.validator, error.validator_value
    if rule == "additionalProperties" and isinstance(error.instance, Mapping):
        declared = set(error.schema.get("properties") or {})
        for name in sorted(set(error.instance) - declared):
            _say(checked.unknown, (*where, str(name)), _undeclared(schema))
        return
    if rule == "required":
        missing = re.match(r"^'(.+)' is a required property$", error.message)
        name = missing.group(1) if missing else str(expected)
        if "default" not in (error.schema.get("properties") or {}).get(name, {}):
            _say(problems, (*where, name), Said(gettext_noop("is required")))
        return
    if rule == "type":
        types = expected if isinstance(expected, list) else [expected]
        _say(problems, where, Said(_TYPES.get(types[0], gettext_noop("has the wrong type"))))
        return
    if rule == "enum":
        _say(
            problems,
            where,
            Said(
                gettext_noop("must be one of %(values)s"),
                values=", ".join(repr(value) for value in expected),
            ),
        )
        return
    if rule in ("minimum", "maximum", "minLength", "maxLength", "minItems", "maxItems"):
        words = {
            "minimum": gettext_noop("must be at least %(bound)s"),
            "maximum": gettext_noop("must be at most %(bound)s"),
            "minLength": gettext_noop("must be at least %(bound)s characters long"),
            "maxLength": gettext_noop("must be at most %(bound)s characters long"),
            "minItems": gettext_noop("must hold at least %(bound)s items"),
            "maxItems": gettext_noop("must hold at most %(bound)s items"),
        }
        _say(problems, where, Said(words[rule], bound=expected))
        return
    if rule == "pattern":
        if str(expected).startswith(QUANTITY_PATTERN_START):
            _say(problems, where, Said(QUANTITY_WORDS, value=repr(error.instance)))
        else:
            _say(problems, where, Said(gettext_noop("must match %(pattern)s"), pattern=expected))
        return
    if rule == "anyOf" and error.schema.get("x-kubernetes-int-or-string"):
        _say(problems, where, Said(gettext_noop("must be an integer or a string")))
        return
    _say(problems, where, Said(gettext_noop("is not valid here: %(why)s"), why=error.message))


# The client's models: ``openapi_types`` names each attribute's type
# "List[V1Container]", "Dict[str, str]", "V1ObjectMeta", "object"), ``attribute_map`` its
# JSON name.
_LIST = re.compile(r"^(?:list|List)\[(.+)\]$")
_DICT = re.compile(r"^(?:dict\(str, (.+)\)|Dict\[str, (.+)\])$")
_PLAIN = {
    "str": (str,),
    "int": (int,),
    "float": (int, float),
    "bool": (bool,),
    "bytes": (str,),  # base64 in JSON
    "datetime": (str,),
    "date": (str,),
}


def _undeclared(schema: str) -> Said:
    return Said(
        gettext_noop(
            "is not a field here: %(schema)s does not declare it, so the API server drops it"
        ),
        schema=schema,
    )


def _model(name: str, value: Any, where: tuple[str | int, ...], checked: Checked) -> None:
    """``value`` read as the client's model ``name`` (or one of its type names)."""
    problems = checked.problems
    if name == "object":
        return
    if (found := _LIST.match(name)) is not None:
        if not isinstance(value, list):
            _say(problems, where, Said(_TYPES["array"]))
            return
        for index, item in enumerate(value):
            _model(found.group(1), item, (*where, index), checked)
        return
    if (found := _DICT.match(name)) is not None:
        if not isinstance(value, Mapping):
            _say(problems, where, Said(_TYPES["object"]))
            return
        for key, item in value.items():
            _model(found.group(1) or found.group(2), item, (*where, str(key)), checked)
        return
    if name in _PLAIN:
        wanted = _PLAIN[name]
        if not isinstance(value, wanted) or (isinstance(value, bool) and bool not in wanted):
            words = {"str": "string", "int": "integer", "float": "number", "bool": "boolean"}
            _say(problems, where, Said(_TYPES.get(words.get(name, "string"), "")))
        return
    model = getattr(kubernetes.client, name)
    if not isinstance(value, Mapping):
        _say(problems, where, Said(_TYPES["object"]))
        return
    fields = {
        json_name: model.openapi_types[attr] for attr, json_name in model.attribute_map.items()
    }
    for key, item in value.items():
        if key not in fields:
            _say(checked.unknown, (*where, str(key)), _undeclared(f"the client's {name[2:]}"))
        elif item is not None:
            _model(fields[key], item, (*where, str(key)), checked)
