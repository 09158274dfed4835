"""Kubernetes quantities, parsed exactly into integer base units.

cpu is counted in millicores, every other resource in its base unit (bytes for memory,
whole devices for ``nvidia.com/gpu``). Sums and comparisons are then exact integer
arithmetic, never floating point.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from fractions import Fraction

from .said import Said, gettext_noop

# Each suffix as the fraction (numerator, denominator) it multiplies by: integers only, so
# parsing is exact and costs no Fraction objects (a batch parses thousands).
_SUFFIXES = {
    "Ki": (2**10, 1), "Mi": (2**20, 1), "Gi": (2**30, 1), "Ti": (2**40, 1), "Pi": (2**50, 1),
    "Ei": (2**60, 1),
    "n": (1, 10**9), "u": (1, 10**6), "m": (1, 1000), "": (1, 1),
    "k": (10**3, 1), "M": (10**6, 1), "G": (10**9, 1), "T": (10**12, 1), "P": (10**15, 1),
    "E": (10**18, 1),
}  # fmt: skip
_BINARY = {suffix: times for suffix, (times, _per) in _SUFFIXES.items() if suffix.endswith("i")}
_WHOLE_DECIMAL = {suffix: _SUFFIXES[suffix][0] for suffix in "kMGTPE"}
_QUANTITY = re.compile(
    r"^(?P<number>[+-]?(\d+(\.\d*)?|\.\d+))"
    r"(?:(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)|[eE](?P<exponent>[+-]?\d+))?$"
)
_RESOURCE_NAME = re.compile(
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$"
)

ResourceList = dict[str, int]
# The count of pods, as a ResourceQuota and a node's allocatable name it: every pod of a job
# asks for one, so a job's request counts its pods and the quota tree may limit them.
PODS = "pods"
# A kubelet's default maxPods: what a node holds that does not say (a simulated node).
KUBELET_MAX_PODS = 110
# Sums of quantities are taken in PostgreSQL as bigint; anything larger is no real amount.
MAX_UNITS = 2**63 - 1
MAX_QUANTITY_LENGTH = 64  # long digit strings would only cost time (or hit int()'s limit)
MAX_EXPONENT = 30
# A resource counted in one node pool of the quota tree (``queues.pools``): its name, this
# mark and the pool's (``nvidia.com/gpu@h100``). No resource name has one, so a list keeps
# a job's totals and its pool's share side by side and every sum stays a sum of keys.
POOL_MARK = "@"


def pooled(resource: str, pool: str) -> str:
    """The key of ``resource`` counted in ``pool``."""
    return f"{resource}{POOL_MARK}{pool}"


def pool_parts(key: str) -> tuple[str, str]:
    """A key's resource and pool ("" for a total): ``nvidia.com/gpu@h100`` -> both."""
    resource, _mark, pool = key.partition(POOL_MARK)
    return resource, pool


def in_pool(request: Mapping[str, int], pool: str) -> ResourceList:
    """A request as placed in ``pool``: its totals, and each again as the pool's share
    ("" for no pool: the request as it is)."""
    if not pool:
        return dict(request)
    placed = dict(request)
    for resource, amount in request.items():
        if POOL_MARK not in resource:
            placed[pooled(resource, pool)] = amount
    return placed


def unpooled(resources: Mapping[str, int]) -> ResourceList:
    """The keys of no pool: what a scheduler that knows no pools reads."""
    return {key: amount for key, amount in resources.items() if POOL_MARK not in key}


class QuantityError(ValueError):
    """A quantity or resource name that cannot be used; ``field`` says where, ``reason`` why
    (a ``Said``: English, translated where it is answered)."""

    def __init__(self, reason: Said, field: str = ""):
        super().__init__(f"{field}: {reason}" if field else reason)
        self.field = field
        self.reason = reason


def scale(resource: str) -> int:
    """How many stored units make one unit of the resource (cpu is kept in millicores)."""
    return 1000 if _is_cpu(resource) else 1


def _is_cpu(resource: str) -> bool:
    return resource == "cpu" or resource.startswith("cpu" + POOL_MARK)


def parse_quantity(resource: str, value: object) -> int:
    """Parse ``value`` as a Kubernetes quantity of ``resource`` into integer base units."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise QuantityError(
            Said(gettext_noop("%(value)s is not a quantity"), value=repr(value)), resource
        )
    if isinstance(value, int) and abs(value) > MAX_UNITS:
        raise QuantityError(Said(gettext_noop("is too large to be a quantity")), resource)
    text = str(value).strip()
    if len(text) > MAX_QUANTITY_LENGTH:
        raise QuantityError(
            Said(gettext_noop("is longer than %(limit)s characters"), limit=MAX_QUANTITY_LENGTH),
            resource,
        )
    match = _QUANTITY.match(text)
    if not match:
        raise QuantityError(
            Said(
                gettext_noop(
                    "%(value)s is not a Kubernetes quantity (examples: 500m, 2, 1.5, 4Gi, 4G)"
                ),
                value=repr(text),
            ),
            resource,
        )
    sign, digits = (-1, match["number"][1:]) if match["number"][0] == "-" else (1, match["number"])
    whole, _, fraction = digits.lstrip("+").partition(".")
    numerator = sign * int((whole or "0") + fraction)
    denominator: int = 10 ** len(fraction)
    if match["exponent"] is not None:
        exponent = int(match["exponent"])
        if abs(exponent) > MAX_EXPONENT:
            raise QuantityError(
                Said(
                    gettext_noop("%(value)s has an exponent beyond ±%(limit)s"),
                    value=repr(text),
                    limit=MAX_EXPONENT,
                ),
                resource,
            )
        if exponent >= 0:
            numerator *= 10**exponent
        else:
            denominator *= 10**-exponent
    times, per = _SUFFIXES[match["suffix"] or ""]
    numerator *= times * scale(resource)
    denominator *= per
    if numerator < 0:
        raise QuantityError(Said(gettext_noop("%(value)s is negative"), value=repr(text)), resource)
    units, rest = divmod(numerator, denominator)
    if rest:
        smallest = "1m" if resource == "cpu" else "1"
        raise QuantityError(
            Said(
                gettext_noop("%(value)s is finer than the smallest unit (%(smallest)s)"),
                value=repr(text),
                smallest=smallest,
            ),
            resource,
        )
    if units > MAX_UNITS:
        raise QuantityError(
            Said(gettext_noop("%(value)s is too large"), value=repr(text)), resource
        )
    return units


def parse_resources(field: str, raw: object) -> ResourceList:
    """Parse a resource list (``{"cpu": "4", "memory": "4G"}``); errors name ``field.resource``."""
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise QuantityError(
            Said(gettext_noop("must be a mapping of resource name to quantity")), field
        )
    parsed: ResourceList = {}
    for name, value in raw.items():
        if not isinstance(name, str) or not _RESOURCE_NAME.match(name) or len(name) > 253:
            raise QuantityError(
                Said(gettext_noop("%(name)s is not a valid resource name"), name=repr(name)), field
            )

        try:
            parsed[name] = parse_quantity(name, value)
        except QuantityError as error:
            raise QuantityError(error.reason, f"{field}.{name}") from None
    return parsed


HUMAN_EXACT_MAX = 7


def format_quantity(resource: str, units: int) -> str:
    """The shortest exact Kubernetes spelling of ``units`` of ``resource`` (4G, 12Gi, 500m)."""
    if _is_cpu(resource):
        return str(units // 1000) if units % 1000 == 0 else f"{units}m"
    spellings = [str(units)]
    for suffix, factor in [*_BINARY.items(), *_WHOLE_DECIMAL.items()]:
        if units and units % factor == 0:
            spellings.append(f"{units // int(factor)}{suffix}")
    return min(spellings, key=len)


def format_resources(resources: Mapping[str, int]) -> dict[str, str]:
    return {name: format_quantity(name, value) for name, value in sorted(resources.items())}


def human(resource: str, units: int, like: int | None = None) -> str:
    """A quantity for people: cpu in cores (``1.5``), others exact when that is short
    (``12Gi``, ``4G``), else rounded to a tenth of the largest binary unit (``107.2Gi``
    for 96Gi + 12G) rather than a wall of digits.

    ``like``: the quantity it sits beside (a limit), whose unit it is given in, so that a
    column or a sentence compares like with like: 12G beside a max of 14Gi reads
    ``11.2Gi``, not ``12G``. A quantity under a tenth of that unit keeps its own."""
    if like is not None and not _is_cpu(resource):
        unit = _unit_of(format_quantity(resource, like))
        if unit is not None:
            suffix, factor = unit
            if units == 0 or abs(units) * 10 >= factor:
                return f"{units / factor:.1f}".removesuffix(".0") + suffix
    if _is_cpu(resource):
        cores = Fraction(units, 1000)
        return str(cores.numerator) if cores.denominator == 1 else f"{float(cores):g}"
    exact = format_quantity(resource, units)
    if len(exact) <= HUMAN_EXACT_MAX:
        return exact
    suffix, factor = max(
        ((s, f) for s, f in _BINARY.items() if abs(units) >= f), key=lambda item: item[1]
    )
    return f"{units / factor:.1f}".removesuffix(".0") + suffix


def _unit_of(spelled: str) -> tuple[str, int] | None:
    """The suffix of a quantity's spelling and its factor (``14Gi`` -> Gi), or None for a
    plain number."""
    for suffix, factor in [*_BINARY.items(), *_WHOLE_DECIMAL.items()]:
        if spelled.endswith(suffix) and spelled[: -len(suffix)].lstrip("-").isdigit():
            return suffix, int(factor)
    return None


def add(a: Mapping[str, int], b: Mapping[str, int], times: int = 1) -> ResourceList:
    total = dict(a)
    for name, value in b.items():
        total[name] = total.get(name, 0) + value * times
    return total


def subtract(a: Mapping[str, int], b: Mapping[str, int]) -> ResourceList:
    total = dict(a)
    for name, value in b.items():
        total[name] = total.get(name, 0) - value
    return total


def total(lists: Iterable[Mapping[str, int]]) -> ResourceList:
    result: ResourceList = {}
    for resources in lists:
        result = add(result, resources)
    return result
