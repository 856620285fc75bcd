"""Resource quantities parse, compare and print as Kubernetes' apimachinery does."""

from __future__ import annotations

from fractions import Fraction

import pytest

from kubelab.api.quantity import (
    FORMAT_ERROR,
    SUFFIX_ERROR,
    Quantity,
    QuantityFormat,
    canonical,
    parse_quantity,
)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("100m", Fraction(1, 10)),
        ("1.5Gi", Fraction(3 * 2**29)),
        ("2e3", Fraction(2000)),
        ("128974848", Fraction(128974848)),
        ("129e6", Fraction(129_000_000)),
        ("129M", Fraction(129_000_000)),
        ("123Mi", Fraction(123 * 2**20)),
        ("-1.5k", Fraction(-1500)),
        ("1E", Fraction(10**18)),
        ("5n", Fraction(5, 10**9)),
    ],
)
def test_parses_every_suffix_family_to_an_exact_value(text: str, value: Fraction) -> None:
    assert parse_quantity(text).value == value


@pytest.mark.parametrize(
    ("text", "printed"),
    [
        ("1000m", "1"),
        ("0.5", "500m"),
        ("1.5", "1500m"),
        ("1.5Gi", "1536Mi"),
        ("1024Ki", "1Mi"),
        ("128974848", "128974848"),
        ("129e6", "129e6"),
        ("12e4", "120e3"),
        ("1e-05", "10e-6"),
        ("129M", "129M"),
        ("123Mi", "123Mi"),
        ("1000", "1k"),
        ("-1500m", "-1500m"),
        ("0", "0"),
        ("0Gi", "0"),
        ("+1", "1"),
        ("1.0", "1"),
    ],
)
def test_prints_the_canonical_form_kubernetes_stores(text: str, printed: str) -> None:
    assert canonical(text) == printed


def test_binary_values_below_1024_or_fractional_print_as_decimal() -> None:
    assert canonical("0.5Ki") == "512"
    assert canonical("1.1Ki") == "1126400m"
    assert parse_quantity("0.5Ki").format is QuantityFormat.BINARY_SI


def test_values_finer_than_a_nano_round_up_to_the_next_nano() -> None:
    assert canonical("0.0000000001") == "1n"
    assert canonical("-0.0000000001") == "-1n"
    assert canonical("1e-1000") == "1e-9"


def test_binary_values_are_capped_at_the_largest_int64() -> None:
    assert parse_quantity("8Ei").value == 2**63 - 1
    assert canonical("4Ei") == "4Ei"


def test_json_numbers_are_accepted_as_the_json_decoder_accepts_them() -> None:
    assert canonical(2) == "2"
    assert canonical(0.25) == "250m"
    assert canonical(" 3 ") == "3"


@pytest.mark.parametrize("text", ["abc", "", "1.2.3", "1KiB", "1..", "1 m", "1Kx", "1Mx1"])
def test_malformed_quantities_are_refused_with_kubernetes_regex_message(text: str) -> None:
    with pytest.raises(ValueError) as raised:
        parse_quantity(text)
    assert str(raised.value) == FORMAT_ERROR
    assert str(raised.value) == (
        "quantities must match the regular expression "
        "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
    )


@pytest.mark.parametrize("text", ["1e", "1Mi1", "1e1001", "1iK", "--1"])
def test_unknown_suffixes_are_refused_with_kubernetes_suffix_message(text: str) -> None:
    with pytest.raises(ValueError, match=r"^unable to parse quantity's suffix$"):
        parse_quantity(text)
    assert SUFFIX_ERROR == "unable to parse quantity's suffix"


@pytest.mark.parametrize("value", [True, None, [1], {"a": 1}])
def test_non_numbers_are_refused(value: object) -> None:
    with pytest.raises(ValueError, match="quantities must match"):
        parse_quantity(value)  # type: ignore[arg-type]


def test_quantities_compare_by_value_whatever_their_suffix() -> None:
    assert parse_quantity("1Ki") == parse_quantity("1024")
    assert parse_quantity("100m") < parse_quantity("1")
    assert parse_quantity("1Gi") > parse_quantity("1G")
    assert max(parse_quantity("2"), parse_quantity("1500m")) == parse_quantity("2000m")
    assert len({parse_quantity("1k"), parse_quantity("1000"), parse_quantity("1e3")}) == 1
    assert parse_quantity("1") != "1"


def test_rounding_up_to_millis_goes_away_from_zero() -> None:
    assert str(parse_quantity("0.1m").rounded_up(-3)) == "1m"
    assert str(parse_quantity("-0.1m").rounded_up(-3)) == "-1m"
    assert str(parse_quantity("250m").rounded_up(-3)) == "250m"
    assert str(parse_quantity("1.5").rounded_up(0)) == "2"


def test_a_quantity_built_from_a_fraction_prints_as_decimal() -> None:
    assert str(Quantity(Fraction(3, 2))) == "1500m"
    assert repr(Quantity(Fraction(2))) == "Quantity('2')"
    assert Quantity(Fraction(4)).is_integer()
    assert not parse_quantity("1.5").is_integer()
