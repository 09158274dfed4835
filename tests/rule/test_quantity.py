"""Kubernetes quantities are parsed exactly into integer base units."""

from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kube.quantity import (
    MAX_UNITS,
    QuantityError,
    format_quantity,
    format_resources,
    human,
    parse_quantity,
    parse_resources,
)


@pytest.mark.parametrize(
    ("resource", "text", "units"),
    [
        ("cpu", "500m", 500),
        ("cpu", "4", 4000),
        ("cpu", "1.5", 1500),
        ("cpu", 2, 2000),
        ("cpu", "0.001", 1),
        ("cpu", "100u", None),
        ("memory", "4Gi", 4 * 2**30),
        ("memory", "4G", 4 * 10**9),
        ("memory", "1.5Gi", 3 * 2**29),
        ("memory", "128974848", 128974848),
        ("memory", "129e6", 129 * 10**6),
        ("memory", "123Mi", 123 * 2**20),
        ("memory", "1k", 1000),
        ("nvidia.com/gpu", "2", 2),
        ("metax-tech.com/gpu", "8", 8),
    ],
)
def test_it_parses_quantities_exactly(resource, text, units):
    if units is None:
        with pytest.raises(QuantityError):
            parse_quantity(resource, text)
    else:
        assert parse_quantity(resource, text) == units


@pytest.mark.parametrize("text", ["", "4 cores", "Gi", "1.2.3", "4gi", "--1", "1Ki5", "abc"])
def test_it_rejects_malformed_quantities_naming_the_value(text):
    with pytest.raises(QuantityError) as caught:
        parse_quantity("memory", text)
    assert caught.value.field == "memory"
    assert repr(text.strip()) in caught.value.reason


def test_it_rejects_negative_quantities():
    with pytest.raises(QuantityError, match="negative"):
        parse_quantity("cpu", "-1")


def test_it_rejects_fractional_devices():
    with pytest.raises(QuantityError, match="smallest unit"):
        parse_quantity("nvidia.com/gpu", "0.5")


def test_it_names_the_field_and_resource_of_a_bad_entry():
    with pytest.raises(QuantityError) as caught:
        parse_resources("head.resources", {"cpu": "4", "memory": "lots"})
    assert caught.value.field == "head.resources.memory"
    assert "'lots'" in caught.value.reason


def test_it_rejects_invalid_resource_names():
    with pytest.raises(QuantityError, match="not a valid resource name"):
        parse_resources("min", {"bad name!": "1"})


@pytest.mark.parametrize(
    ("resource", "text", "expected"),
    [
        ("cpu", "500m", "500m"),
        ("cpu", "12", "12"),
        ("memory", "4G", "4G"),
        ("memory", "12Gi", "12Gi"),
        ("memory", "1536Mi", "1536Mi"),
        ("memory", "0", "0"),
        ("nvidia.com/gpu", "4", "4"),
    ],
)
def test_it_formats_back_to_an_equal_quantity(resource, text, expected):
    units = parse_quantity(resource, text)
    assert format_quantity(resource, units) == expected
    assert parse_quantity(resource, format_quantity(resource, units)) == units


def test_it_formats_resource_lists_and_messages():
    assert format_resources({"memory": 2**30, "cpu": 250}) == {"cpu": "250m", "memory": "1Gi"}
    assert human("cpu", 1500) == "1.5"
    assert human("cpu", 12000) == "12"
    assert human("memory", 12 * 10**9) == "12G"


def test_people_see_a_mixed_sum_rounded_instead_of_a_wall_of_digits():
    mixed = 96 * 2**30 + 12 * 10**9
    assert format_quantity("memory", mixed) == "112382046Ki"  # the API stays exact
    assert human("memory", mixed) == "107.2Gi"
    assert human("memory", 3 * 2**30 + 1) == "3Gi"


def test_a_quantity_beside_a_limit_is_given_in_the_limits_unit():
    max_14gi = 14 * 2**30
    assert human("memory", 12 * 10**9, like=max_14gi) == "11.2Gi"  # not 12G beside 14Gi
    assert human("memory", 14 * 2**30, like=max_14gi) == "14Gi"
    assert human("memory", 512 * 2**20, like=max_14gi) == "0.5Gi"
    assert human("memory", 2**20, like=max_14gi) == "1Mi"  # under a tenth: its own unit
    assert human("memory", 3 * 10**9, like=8 * 10**9) == "3G"
    assert human("memory", 3 * 2**30, like=8 * 10**9) == "3.2G"
    assert human("cpu", 12_500, like=14_000) == "12.5"  # cores, whatever the limit
    assert human("pods", 12, like=110) == "12"  # a plain number


_REFERENCE_SUFFIXES = {
    "": Fraction(1), "n": Fraction(1, 10**9), "u": Fraction(1, 10**6), "m": Fraction(1, 1000),
    "k": Fraction(10**3), "M": Fraction(10**6), "G": Fraction(10**9), "T": Fraction(10**12),
    "Ki": Fraction(2**10), "Mi": Fraction(2**20), "Gi": Fraction(2**30), "Ti": Fraction(2**40),
}  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(
    resource=st.sampled_from(["cpu", "memory", "nvidia.com/gpu"]),
    whole=st.integers(min_value=0, max_value=10**6),
    decimals=st.text(alphabet="0123456789", max_size=4),
    suffix=st.sampled_from(sorted(_REFERENCE_SUFFIXES)),
    exponent=st.one_of(st.none(), st.integers(min_value=-6, max_value=6)),
)
def test_integer_parsing_agrees_with_exact_fractions(resource, whole, decimals, suffix, exponent):
    text = f"{whole}.{decimals}" if decimals else str(whole)
    text += suffix if exponent is None else f"e{exponent}"
    value = Fraction(text.rstrip(suffix) if exponent is None and suffix else text)
    if exponent is None:
        value *= _REFERENCE_SUFFIXES[suffix]
    units = value * (1000 if resource == "cpu" else 1)

    if units.denominator != 1:
        with pytest.raises(QuantityError, match="finer than the smallest unit"):
            parse_quantity(resource, text)
    elif units > MAX_UNITS:
        with pytest.raises(QuantityError, match="is too large"):
            parse_quantity(resource, text)
    else:
        assert parse_quantity(resource, text) == units
