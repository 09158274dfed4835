"""Which nodes may take a pod: its ``nodeSelector``, its required node affinity and its
tolerations against a node's labels and taints, as kube-scheduler's NodeAffinity and
TaintToleration filters decide (resources are ``kube.quantity``'s and ``queues.placement``'s).

``Placement`` is what a pod template says about where it may run; ``ClusterNode`` is a
node as the cluster backends read it (its allocatable resources, labels and taints). Both
are plain data: the simulated cluster places pods with them, and submit refuses a job
whose pod no node will ever take, naming what it asked for.

The rules, from the Kubernetes API reference (core/v1 NodeSelectorRequirement, Toleration):
- ``nodeSelector``: every pair is a label of the node.
- ``requiredDuringSchedulingIgnoredDuringExecution``: its terms are ORed, a term's
  requirements ANDed; a term with no requirement matches no node. ``In``/``NotIn`` (a
  missing label is "not in"), ``Exists``/``DoesNotExist``, ``Gt``/``Lt`` (the label and
  the one value read as integers). ``matchFields`` knows ``metadata.name``.
- A taint whose effect is ``NoSchedule`` or ``NoExecute`` keeps away every pod that does not
  tolerate it (``PreferNoSchedule`` only discourages). A toleration matches a taint when its
  effect is empty or the same, and its key is empty with ``Exists`` (every taint) or the
  same with ``Exists`` (any value) or ``Equal`` (the same value; the default operator).
- A pod that asks for an extended resource tolerates the taints keyed by that resource
  (``NoSchedule``, any value): what the ExtendedResourceToleration admission plugin adds to
  such a pod, as clusters that taint their GPU nodes run it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .quantity import ResourceList

BLOCKING_EFFECTS = ("NoSchedule", "NoExecute")
EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")
NODE_NAME_FIELD = "metadata.name"
AFFINITY = ("affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution")


@dataclass(frozen=True)
class Taint:
    key: str
    value: str = ""
    effect: str = "NoSchedule"

    def __str__(self) -> str:
        """kube-scheduler's words for it: ``{nvidia.com/gpu: present}``."""
        return f"{{{self.key}: {self.value}}}"


@dataclass(frozen=True)
class ClusterNode:
    """A schedulable node: its name, what it can hold, its labels and its taints."""

    name: str
    allocatable: ResourceList
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()

    def shape(self) -> list[Any]:
        """What placement reads of the node, comparable: the sync tells a change by it."""
        return [
            self.name,
            sorted(self.allocatable.items()),
            sorted(self.labels.items()),
            sorted((t.key, t.value, t.effect) for t in self.taints),
        ]


@dataclass(frozen=True)
class Requirement:
    key: str
    operator: str
    values: tuple[str, ...] = ()

    def matches(self, value: str | None) -> bool:
        """Whether a node whose label (or field) ``key`` is ``value`` (None: absent) passes."""
        if self.operator == "In":
            return value is not None and value in self.values
        if self.operator == "NotIn":
            return value is None or value not in self.values
        if self.operator == "Exists":
            return value is not None
        if self.operator == "DoesNotExist":
            return value is None
        if value is None or len(self.values) != 1:
            return False
        try:
            have, bound = int(value), int(self.values[0])
        except ValueError:
            return False
        return have > bound if self.operator == "Gt" else have < bound

    def __str__(self) -> str:
        if self.operator in ("Exists", "DoesNotExist"):
            return f"{self.key} {self.operator}"
        return f"{self.key} {self.operator} ({', '.join(self.values)})"


@dataclass(frozen=True)
class Term:
    """One ``nodeSelectorTerms`` entry: its label requirements and its field requirements."""

    expressions: tuple[Requirement, ...] = ()
    fields: tuple[Requirement, ...] = ()

    def matches(self, node: ClusterNode) -> bool:
        if not (self.expressions or self.fields):
            return False
        return all(r.matches(node.labels.get(r.key)) for r in self.expressions) and all(
            r.matches(node.name if r.key == NODE_NAME_FIELD else None) for r in self.fields
        )

    def __str__(self) -> str:
        return ", ".join(str(r) for r in (*self.expressions, *self.fields))


@dataclass(frozen=True)
class Toleration:
    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""

    def tolerates(self, taint: Taint) -> bool:
        if self.effect and self.effect != taint.effect:
            return False
        if self.operator == "Exists":
            return not self.key or self.key == taint.key
        return self.key == taint.key and self.value == taint.value


@dataclass(frozen=True)
class Placement:
    """Where a pod may run, as its template says: no constraint by default."""

    node_selector: tuple[tuple[str, str], ...] = ()
    terms: tuple[Term, ...] = ()  # required node affinity; () is no requirement
    tolerations: tuple[Toleration, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.node_selector or self.terms or self.tolerations)

    def selects(self, node: ClusterNode) -> bool:
        """Whether the node's labels (and name) are those the pod asks for."""
        if any(node.labels.get(key) != value for key, value in self.node_selector):
            return False
        return not self.terms or any(term.matches(node) for term in self.terms)

    def untolerated(self, node: ClusterNode, resources: Iterable[str] = ()) -> Taint | None:
        """The first taint of the node that keeps this pod away, if any; a pod asking for
        an extended resource tolerates the taints keyed by it (module docstring)."""
        asked = {resource for resource in resources if "/" in resource}
        for taint in node.taints:
            if taint.effect not in BLOCKING_EFFECTS:
                continue
            if taint.key in asked and taint.effect == "NoSchedule":
                continue
            if not any(toleration.tolerates(taint) for toleration in self.tolerations):
                return taint
        return None

    def allows(self, node: ClusterNode, resources: Iterable[str] = ()) -> bool:
        return self.selects(node) and self.untolerated(node, resources) is None

    def selector_text(self) -> str:
        """What it asks of a node's labels, as the refusal names it:
        ``nodeSelector pool=a100; node affinity zone In (a, b)``."""
        parts = []
        if self.node_selector:
            pairs = ", ".join(f"{key}={value}" for key, value in self.node_selector)
            parts.append(f"nodeSelector {pairs}")
        if self.terms:
            parts.append("node affinity " + " or ".join(f"({term})" for term in self.terms))
        return "; ".join(parts)

    # -- as a pod template says it, and as a job's row keeps it -------------------------

    @classmethod
    def of_pod_spec(cls, spec: Mapping[str, Any]) -> Placement:
        """The placement a pod spec asks for (already schema-checked: wrong shapes are
        read as absent)."""
        selector = spec.get("nodeSelector")
        required: Any = spec
        for key in AFFINITY:
            required = required.get(key) if isinstance(required, Mapping) else None
        terms = required.get("nodeSelectorTerms") if isinstance(required, Mapping) else None
        tolerations = spec.get("tolerations")
        return cls(
            node_selector=tuple(sorted((str(k), str(v)) for k, v in _mapping(selector).items())),
            terms=tuple(_term(term) for term in _list(terms) if isinstance(term, Mapping)),
            tolerations=tuple(
                Toleration(
                    key=str(t.get("key") or ""),
                    operator=str(t.get("operator") or "Equal"),
                    value=str(t.get("value") or ""),
                    effect=str(t.get("effect") or ""),
                )
                for t in _list(tolerations)
                if isinstance(t, Mapping)
            ),
        )

    def joined(self, other: Placement) -> Placement:
        """This placement with ``other``'s added: its node labels over these, its
        tolerations after these (a node pool's, added to a pod's own)."""
        if not other:
            return self
        selector = {**dict(self.node_selector), **dict(other.node_selector)}
        tolerations = self.tolerations + tuple(
            t for t in other.tolerations if t not in self.tolerations
        )
        return Placement(tuple(sorted(selector.items())), self.terms, tolerations)

    def placement_tolerations(self) -> list[dict[str, str]]:
        """Its tolerations as a pod spec writes them, the empty fields left out."""
        return [
            {k: v for k, v in (("key", t.key), ("operator", t.operator), ("value", t.value),
                               ("effect", t.effect)) if v}
            for t in self.tolerations
        ]  # fmt: skip

    def as_json(self) -> dict[str, Any]:
        said: dict[str, Any] = {}
        if self.node_selector:
            said["nodeSelector"] = dict(self.node_selector)
        if self.terms:
            said["nodeSelectorTerms"] = [_term_json(term) for term in self.terms]
        if self.tolerations:
            said["tolerations"] = [
                {"key": t.key, "operator": t.operator, "value": t.value, "effect": t.effect}
                for t in self.tolerations
            ]
        return said

    @classmethod
    def from_json(cls, said: Mapping[str, Any] | None) -> Placement:
        """The inverse of ``as_json``; also reads a pod spec's own shape of the terms."""
        if not said:
            return cls()
        spec = {
            "nodeSelector": said.get("nodeSelector"),
            "tolerations": said.get("tolerations"),
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": said.get("nodeSelectorTerms")
                    }
                }
            },
        }
        return cls.of_pod_spec(spec)


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _list(value: Any) -> Sequence[Any]:
    return value if isinstance(value, list) else []


def _requirements(value: Any) -> tuple[Requirement, ...]:
    return tuple(
        Requirement(
            key=str(r.get("key") or ""),
            operator=str(r.get("operator") or ""),
            values=tuple(str(v) for v in _list(r.get("values"))),
        )
        for r in _list(value)
        if isinstance(r, Mapping)
    )


def _term(term: Mapping[str, Any]) -> Term:
    return Term(
        expressions=_requirements(term.get("matchExpressions")),
        fields=_requirements(term.get("matchFields")),
    )


def _term_json(term: Term) -> dict[str, Any]:
    said: dict[str, Any] = {}
    for name, requirements in (
        ("matchExpressions", term.expressions),
        ("matchFields", term.fields),
    ):
        if requirements:
            said[name] = [
                {"key": r.key, "operator": r.operator, "values": list(r.values)}
                for r in requirements
            ]
    return said


def parse_labels(text: str) -> dict[str, str]:
    """``pool=a100,zone=a`` (kubectl label's pairs) -> {"pool": "a100", "zone": "a"}."""
    labels = {}
    for pair in filter(None, (part.strip() for part in text.split(","))):
        key, equals, value = pair.partition("=")
        if not equals or not key:
            raise ValueError(f"a label is key=value, got {pair!r}")
        labels[key] = value
    return labels


def parse_taints(text: str) -> tuple[Taint, ...]:
    """``nvidia.com/gpu=present:NoSchedule,spot:NoExecute`` (kubectl taint's words)."""
    taints = []
    for part in filter(None, (part.strip() for part in text.split(","))):
        body, colon, effect = part.rpartition(":")
        if not colon or effect not in EFFECTS or not body:
            raise ValueError(
                f"a taint is key[=value]:effect, the effect one of {', '.join(EFFECTS)}; "
                f"got {part!r}"
            )
        key, _equals, value = body.partition("=")
        taints.append(Taint(key, value, effect))
    return tuple(taints)
