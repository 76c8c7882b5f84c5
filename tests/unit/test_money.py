"""shared.domain.money: exact decimals on the wire (docs/architecture.md#exact-money,
docs/architecture.md#decimal-limits)."""

from __future__ import annotations

from decimal import Decimal, Inexact, Rounded

import pytest
from pydantic import BaseModel, ConfigDict, ValidationError

from shared.domain.kinds import shown, shown_over
from shared.domain.money import (
    ABS_LIMIT,
    BASIS,
    CENT,
    MONEY_PLACES,
    QUANTITY_PLACES,
    DecimalOutOfRange,
    Money,
    Quantity,
    at_quantum,
    exact_arithmetic,
    exact_product,
    parse_decimal,
    quantize,
)

REVIEWED = pytest.mark.regression(
    reason="was a BUG (issue 12 item 2): parse_decimal counted places on value.normalize(), "
    "which rounds to 28 digits first: 1.30000000000000000000000000001 was accepted as 1.3"
)


class _Wire(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    amount: Money
    units: Quantity


def _error_type(json_text: str) -> str:
    with pytest.raises(ValidationError) as info:
        _Wire.model_validate_json(json_text)
    errors = info.value.errors()
    assert len(errors) == 1, errors
    return str(errors[0]["type"])


# --- parse_decimal -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("16.65", Decimal("16.65")),
        ("0", Decimal("0")),
        ("-3.5", Decimal("-3.5")),
        ("37", Decimal("37")),
        ("0.0001", Decimal("0.0001")),
        ("999999999999.9999", Decimal("999999999999.9999")),
        ("-999999999999.9999", Decimal("-999999999999.9999")),
        ("1.5e1", Decimal("15")),
        ("1E2", Decimal("100")),
        ("12.3400", Decimal("12.34")),  # trailing zeros are not significant places
    ],
)
def test_plain_decimal_text_parses_to_the_exact_value(text: str, expected: Decimal) -> None:
    value = parse_decimal(text, MONEY_PLACES)
    assert isinstance(value, Decimal)
    assert value == expected


def test_parse_keeps_the_exact_digits_without_binary_float_error() -> None:
    # 0.1 + 0.2 is 0.30000000000000004 in binary floating point; in Decimal it is exact.
    assert parse_decimal("0.1", 4) + parse_decimal("0.2", 4) == Decimal("0.3")


@pytest.mark.parametrize(
    "text",
    [
        "NaN",
        "nan",
        "-NaN",
        "sNaN",
        "Infinity",
        "-Infinity",
        "inf",
        "",
        " ",
        " 1",
        "1 ",
        "1,5",
        "1.2.3",
        "0x10",
        "e5",
        "1e",
        "--1",
        "abc",
        "1_000",
        "½",
    ],
)
def test_text_that_is_not_a_plain_finite_decimal_is_refused(text: str) -> None:
    with pytest.raises(ValueError) as info:
        parse_decimal(text, MONEY_PLACES)
    assert not isinstance(info.value, DecimalOutOfRange)


def test_overlong_text_is_refused_as_invalid_before_parsing() -> None:
    with pytest.raises(ValueError):
        parse_decimal("1" + "0" * 70, MONEY_PLACES)


@REVIEWED
@pytest.mark.parametrize("places", [MONEY_PLACES, QUANTITY_PLACES])
@pytest.mark.parametrize(
    "text",
    [
        "1.30000000000000000000000000001",
        "1.29999999999999999999999999999",
        "-1.30000000000000000000000000001",
        "1.3000000000000000000000000000000000000000000000000000000001",
        "13000000000000000000000000000001e-28",  # the same digits, written with an exponent
        "0.0000000000000000000000000000001e+20",
    ],
)
def test_places_are_counted_on_the_digits_sent_never_after_rounding(text: str, places: int) -> None:
    with pytest.raises(DecimalOutOfRange, match="places"):
        parse_decimal(text, places)


@REVIEWED
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1.3" + "0" * 100, "1.3"),  # trailing zeros are not places, at any length
        ("0" * 100 + "7.25", "7.25"),  # nor are leading zeros integer digits
        ("1" + "0" * 40 + "e-40", "1"),
        ("123456789012345678e-6", "123456789012.345678"),
        ("0.000000000000000000000000000000001e33", "1"),
        ("0e-99999999999999999999999", "0"),  # zero, however far its point moves
        ("-0e99999999999999999999999", "0"),
        ("999999999999.9999990000000000000000000000000", "999999999999.999999"),
    ],
)
def test_a_long_spelling_of_a_value_in_range_is_that_exact_value(text: str, expected: str) -> None:
    value = parse_decimal(text, QUANTITY_PLACES)
    assert value == Decimal(expected)
    assert -6 <= value.as_tuple().exponent <= 0  # type: ignore[operator]


@REVIEWED
@pytest.mark.parametrize(
    "text",
    [
        "1" + "0" * 13 + "e-1",  # 10^12, spelled in ways the plain regex does not take
        "0.0000000000001e25",
        "-1000000000000.000000000000000000000000000000000",
        "0000000000000000000000000001000000000000",
    ],
)
def test_magnitude_is_judged_on_the_digits_sent(text: str) -> None:
    with pytest.raises(DecimalOutOfRange, match="below"):
        parse_decimal(text, QUANTITY_PLACES)


@REVIEWED
def test_an_already_parsed_decimal_is_judged_like_its_text() -> None:
    too_fine = Decimal("1.30000000000000000000000000001")
    with pytest.raises(ValidationError) as info:
        _Wire.model_validate({"amount": too_fine, "units": Decimal(1)})
    assert info.value.errors()[0]["type"] == "decimal_out_of_range"
    with pytest.raises(ValidationError) as info:
        _Wire.model_validate({"amount": Decimal("NaN"), "units": Decimal(1)})
    assert info.value.errors()[0]["type"] == "decimal_invalid"


@pytest.mark.regression(
    reason="was a BUG (issue 12 item 2): the 80-digit 'exact' context rounded a long "
    "product silently, then quantize rounded it again"
)
def test_settlement_arithmetic_raises_rather_than_rounding_before_the_end() -> None:
    # Exactly 0.0049...9 (90 nines): a cent of 0.00. Rounded at 80 digits first, it
    # became 0.0050, then 0.01: two roundings. Now the first one is an error.
    just_under_half_a_cent = Decimal("0.004" + "9" * 90)
    with pytest.raises((Inexact, Rounded)):
        exact_product(just_under_half_a_cent, Decimal(1), CENT)
    with exact_arithmetic(), pytest.raises((Inexact, Rounded)):
        _ = just_under_half_a_cent * Decimal(3)
    with exact_arithmetic():  # the final rounding is the one that is allowed
        assert quantize(Decimal("0.005"), CENT) == Decimal("0.01")


@pytest.mark.parametrize(
    "text",
    ["1e999999", "1e-999999", "-1E999999", "1e41"],
)
def test_huge_exponent_is_out_of_range_without_materialising_it(text: str) -> None:
    with pytest.raises(DecimalOutOfRange):
        parse_decimal(text, MONEY_PLACES)


@pytest.mark.parametrize(
    "text",
    ["1000000000000", "-1000000000000", "1e12", "1000000000000.0001", "99999999999999999"],
)
def test_absolute_value_of_ten_to_the_twelve_or_more_is_out_of_range(text: str) -> None:
    with pytest.raises(DecimalOutOfRange):
        parse_decimal(text, MONEY_PLACES)


def test_money_allows_four_places_and_refuses_five() -> None:
    assert parse_decimal("1.2345", MONEY_PLACES) == Decimal("1.2345")
    with pytest.raises(DecimalOutOfRange):
        parse_decimal("1.23456", MONEY_PLACES)
    with pytest.raises(DecimalOutOfRange):
        parse_decimal("1e-5", MONEY_PLACES)


def test_quantity_allows_six_places_and_refuses_seven() -> None:
    assert parse_decimal("0.123456", QUANTITY_PLACES) == Decimal("0.123456")
    with pytest.raises(DecimalOutOfRange):
        parse_decimal("0.1234567", QUANTITY_PLACES)


def test_limits_match_the_spec() -> None:
    assert MONEY_PLACES == 4
    assert QUANTITY_PLACES == 6
    assert Decimal(10) ** 12 == ABS_LIMIT


@pytest.mark.parametrize("text", ["\u0661\u0666.\u0666\u0665", "\uff11\uff16"])
def test_non_ascii_digits_are_not_a_plain_decimal(text: str) -> None:
    with pytest.raises(ValueError):
        parse_decimal(text, MONEY_PLACES)


# --- quantize ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "quantum", "expected"),
    [
        ("0.375", CENT, "0.38"),  # tie rounds up, not to even (banker's would give 0.38 too)
        ("0.125", CENT, "0.13"),  # tie: banker's rounding would give 0.12
        ("2.345", CENT, "2.35"),
        ("2.344999", CENT, "2.34"),
        ("-0.125", CENT, "-0.13"),  # half up is away from zero for negatives
        ("-2.345", CENT, "-2.35"),
        ("1.00005", BASIS, "1.0001"),
        ("1.00004999", BASIS, "1.0000"),
        ("7", CENT, "7.00"),
    ],
)
def test_quantize_rounds_half_up_at_the_quantum(
    value: str, quantum: Decimal, expected: str
) -> None:
    result = quantize(Decimal(value), quantum)
    assert result == Decimal(expected)
    assert str(result) == expected  # exponent of the quantum, e.g. two places at CENT


@pytest.mark.parametrize(
    ("kind", "value", "expected"),
    [
        ("promo_accrual", "5000.0000", "5000.00"),  # NUMERIC(20,4) read back
        ("freight_audit", "-2.5000", "-2.50"),
        ("recipe_cost", "5.0000", "5.0000"),
        ("recipe_cost", "5", "5.0000"),
        ("promo_accrual", "1.2345", "1.2345"),  # never rounded: the places stay
        ("promo_accrual", "1E+2", "100.00"),  # never an exponent
        ("freight_audit", "-0.0000", "0.00"),  # never a negative zero
        ("a_kind_since_removed", "1.2000", "1.2000"),  # the column's places
    ],
)
def test_an_amount_is_shown_at_its_kinds_quantum_in_plain_notation(
    kind: str, value: str, expected: str
) -> None:
    assert shown(kind, Decimal(value)) == expected
    assert shown(kind, None) is None


def test_a_sum_over_kinds_is_shown_at_the_finest_quantum() -> None:
    assert shown_over(["promo_accrual", "freight_audit"], Decimal("3.5000")) == "3.50"
    assert shown_over(["promo_accrual", "recipe_cost"], Decimal("3.5000")) == "3.5000"


# --- Money / Quantity pydantic types -------------------------------------------------------


def test_money_and_quantity_parse_from_json_strings() -> None:
    wire = _Wire.model_validate_json('{"amount": "16.65", "units": "37.123456"}')
    assert wire.amount == Decimal("16.65")
    assert wire.units == Decimal("37.123456")
    assert isinstance(wire.amount, Decimal)


@pytest.mark.parametrize("number", ["16.65", "37", "0", "-1", "1e2"])
def test_json_number_in_money_field_is_refused(number: str) -> None:
    assert _error_type(f'{{"amount": {number}, "units": "1"}}') == "decimal_must_be_string"


def test_json_number_in_quantity_field_is_refused() -> None:
    assert _error_type('{"amount": "1", "units": 37}') == "decimal_must_be_string"


@pytest.mark.parametrize("raw", ["true", "null", "[]", "{}"])
def test_other_json_types_in_money_field_must_be_strings(raw: str) -> None:
    assert _error_type(f'{{"amount": {raw}, "units": "1"}}') == "decimal_must_be_string"


@pytest.mark.parametrize("text", ["NaN", "Infinity", "-Infinity", "abc", "", "1,00"])
def test_nan_infinity_and_garbage_strings_are_decimal_invalid(text: str) -> None:
    assert _error_type(f'{{"amount": "{text}", "units": "1"}}') == "decimal_invalid"


@pytest.mark.parametrize("raw", ["NaN", "Infinity", "-Infinity"])
def test_bare_json_nan_and_infinity_are_refused(raw: str) -> None:
    with pytest.raises(ValidationError):
        _Wire.model_validate_json(f'{{"amount": {raw}, "units": "1"}}')


@pytest.mark.parametrize("text", ["1e999999", "1000000000000", "1.23456", "-1e12"])
def test_money_outside_the_column_is_decimal_out_of_range(text: str) -> None:
    assert _error_type(f'{{"amount": "{text}", "units": "1"}}') == "decimal_out_of_range"


def test_quantity_with_seven_places_is_decimal_out_of_range() -> None:
    assert _error_type('{"amount": "1", "units": "0.0000001"}') == "decimal_out_of_range"


def test_money_with_six_places_is_out_of_range_while_quantity_accepts_it() -> None:
    assert _error_type('{"amount": "0.000001", "units": "0.000001"}') == "decimal_out_of_range"
    wire = _Wire.model_validate_json('{"amount": "0.0001", "units": "0.000001"}')
    assert wire.units == Decimal("0.000001")


def test_money_serialises_back_to_the_same_json_string() -> None:
    text = '{"amount":"16.650","units":"37"}'
    wire = _Wire.model_validate_json(text)
    assert wire.model_dump_json() == text
    assert wire.model_dump(mode="json") == {"amount": "16.650", "units": "37"}


def test_money_from_exponent_text_serialises_in_plain_notation() -> None:
    wire = _Wire.model_validate_json('{"amount": "1.5e2", "units": "1e1"}')
    assert wire.model_dump(mode="json") == {"amount": "150", "units": "10"}


def test_already_parsed_decimal_passes_through_python_validation() -> None:
    wire = _Wire.model_validate({"amount": Decimal("2.50"), "units": Decimal("3")})
    assert wire.amount == Decimal("2.50")


def test_json_schema_advertises_a_string_with_a_pattern() -> None:
    schema = _Wire.model_json_schema()
    amount = schema["properties"]["amount"]
    units = schema["properties"]["units"]
    assert amount["type"] == "string"
    assert units["type"] == "string"
    assert "{1,4}" in amount["pattern"]
    assert "{1,6}" in units["pattern"]


@pytest.mark.parametrize(
    ("value", "quantum", "shown"),
    [
        ("-2.5000", "0.01", "-2.50"),
        ("1000", "0.01", "1000.00"),
        ("1.2345", "0.01", "1.2345"),  # more places than the quantum: kept, never rounded
        ("1.2340", "0.01", "1.234"),
        ("7.5", "0.0001", "7.5000"),
        ("999999999999.9999", "0.01", "999999999999.9999"),
        ("-0.0000", "0.01", "0.00"),
        ("0.001", "0.01", "0.001"),
        ("-0.0049", "0.01", "-0.0049"),
    ],
)
def test_an_amount_is_shown_at_its_quantum_and_never_rounded(
    value: str, quantum: str, shown: str
) -> None:
    assert str(at_quantum(Decimal(value), Decimal(quantum))) == shown
