"""The front door's msgspec screen accepts only what the Pydantic model accepts,
with the same meaning (shared/domain/kinds/screen.py): checked on generated documents
that mix valid values with the kinds of wrong ones producers send."""

from __future__ import annotations

import datetime as dt
import json
import re
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from shared.domain.kinds import KINDS
from shared.domain.kinds.screen import (
    all_plain_money,
    all_plain_quantity,
    plain_money,
    plain_quantity,
    screen,
)
from tests.support.decimal_text import decimal_texts, exact_value, within_limits
from tests.support.workload import generate

PROMO = KINDS["promo_accrual"]

_ODD_TEXT = st.sampled_from(
    ["", "x" * 129, "a|b", "tab\there", "nl\n", "\x7f", "\x9f", "\u2028"]
) | st.text(max_size=6)
_ODD_AMOUNT = (
    st.sampled_from(
        [
            "1e3",
            "NaN",
            "Infinity",
            "+5",
            ".5",
            "5.",
            "1000000000000",
            " 1",
            "1 ",
            "1.0000001",
            "0x10",
            "\u0661",
            "1.23456",
            "-0",
        ]
    )
    | st.integers(-5, 5)
    | st.floats(allow_nan=True)
    | st.none()
)
_ODD_INT = st.sampled_from([0, -1, 2**31, True, 1.0, "1", None])
_ODD_DATE = st.sampled_from(
    ["2026-02-30", "2026-07-01T00:00:00", "20260701", 0, "2026-7-1", "2026-07-01Z"]
)


def _mostly(valid: st.SearchStrategy[Any], odd: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """A valid value nine times in ten: enough whole documents pass the screen
    for the property to bite, and every field still meets every odd value."""
    return st.integers(0, 9).flatmap(lambda n: odd if n == 0 else valid)


_TEXT = _mostly(st.sampled_from(["A", "SKU-1", "x" * 128, "é", "VENDOR 7", "ÿ"]), _ODD_TEXT)
_MONEY = _mostly(st.sampled_from(["1", "16.65", "-0.01", "1.2345", "999999999999"]), _ODD_AMOUNT)
_QUANTITY = _mostly(st.sampled_from(["37", "0.125", "1.234567", "-2"]), _ODD_AMOUNT)
_INT = _mostly(st.sampled_from([1, 7, 2**31 - 1]) | st.integers(1, 2**31 - 1), _ODD_INT)
_DATE = _mostly(st.sampled_from(["2026-07-01", "2024-02-29", None]), _ODD_DATE)


def _maybe(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.just(None) | strategy


@st.composite
def promo_lines(draw: st.DrawFn) -> dict[str, Any]:
    line: dict[str, Any] = {
        "line_no": draw(_INT),
        "sku": draw(_TEXT),
        "promo_tier": draw(_TEXT),
        "qualifying_units": draw(_QUANTITY),
        "claimed_amount": draw(_MONEY),
    }
    for name, strategy in (("store_id", _TEXT), ("transaction_date", _DATE)):
        if draw(st.booleans()):
            line[name] = draw(strategy)
    if draw(st.integers(0, 40)) == 0:
        line["unexpected"] = 1
    if draw(st.integers(0, 40)) == 0:
        del line[draw(st.sampled_from(sorted(line)))]
    return line


@st.composite
def promo_documents(draw: st.DrawFn) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "document_id": draw(_TEXT),
        "partition_key": draw(_TEXT),
        "contract_version": draw(_INT),
        "period": draw(_TEXT),
        "lines": draw(
            st.lists(promo_lines(), min_size=draw(_mostly(st.just(1), st.just(0))), max_size=2)
        ),
    }
    if draw(st.booleans()):
        doc["correlation_id"] = draw(_maybe(_TEXT))
    if draw(st.integers(0, 40)) == 0:
        doc["kind"] = "promo_accrual"
    return doc


@settings(max_examples=600, deadline=None)
@given(promo_documents())
def test_what_the_screen_accepts_the_model_accepts_with_the_same_meaning(doc) -> None:
    # About one generated document in six passes the screen. Both encodings: raw
    # UTF-8 (DEL and C1 controls as bytes) and ASCII escapes.
    for raw in (json.dumps(doc, ensure_ascii=False).encode(), json.dumps(doc).encode()):
        screened = screen(PROMO.screen, raw)
        if screened is None:
            continue  # the model decides
        try:
            model = PROMO.document_model.model_validate_json(raw)
        except ValidationError as exc:  # pragma: no cover - the property under test
            raise AssertionError(f"screen accepted what the model refuses: {exc}") from None
        assert (model.document_id, model.partition_key, model.contract_version) == (
            screened.document_id,
            screened.partition_key,
            screened.contract_version,
        )
        assert PROMO.line_count(model) == PROMO.line_count(screened)


def test_ordinary_documents_take_the_fast_path() -> None:
    documents = generate(200, 5).documents
    assert all(screen(PROMO.screen, json.dumps(d).encode()) is not None for d in documents)


@pytest.mark.parametrize(
    ("sku", "screened"),
    [
        ("SKU-1", True),
        ("¡Olé 7", True),  # \xc2\xa1 starts like a C1 control but is not one
        ("x" * 128, True),
        ("x" * 129, False),
        ("\x85NEL", False),  # C1 control
        ("DEL\x7f", False),
        ("a|b", False),
        ("INV\\2026", False),  # any escape goes to the model (which takes this one)
        ("", False),
    ],
)
def test_screen_defers_every_identifier_it_cannot_vouch_for(sku: str, screened: bool) -> None:
    doc = generate(20, 1).documents[0]
    doc["lines"][0]["sku"] = sku
    raw = json.dumps(doc, ensure_ascii=False).encode()
    assert (screen(PROMO.screen, raw) is not None) is screened


# Near misses of a plain decimal: every part at, just under and just over its
# limit, with signs, dots and commas (the separator the list check joins with).
_DECIMAL_PIECES = st.sampled_from(
    ["0", "7", "1" * 11, "9" * 12, "1" * 13, ".", ".5", ".1234", ".12345", ".123456", ".1234567"]
    + ["-", "+", ",", " ", "e3", "\u0661", "", "1,2", "-0"]
)
_DECIMALISH = _mostly(
    # Plain numbers with one digit too many allowed in each part.
    st.from_regex(r"-?[0-9]{1,13}(\.[0-9]{1,7})?", fullmatch=True),
    st.lists(_DECIMAL_PIECES, max_size=4).map("".join)
    | st.text(alphabet="0123456789.-,e ", max_size=16),
)


@settings(max_examples=1000, deadline=None)
@given(st.lists(_DECIMALISH, max_size=6))
def test_list_checks_agree_with_the_per_value_checks(values: list[str]) -> None:
    assert all_plain_money(values) == all(plain_money(v) for v in values)
    assert all_plain_quantity(values) == all(plain_quantity(v) for v in values)


@pytest.mark.regression(
    reason="was a BUG (issue 12 item 2): the model took 1.30000000000000000000000000001 "
    "(places counted after a 28-digit rounding), which the screen refused: they disagreed"
)
@settings(max_examples=300, deadline=None, database=None)
@given(text=decimal_texts(), field=st.sampled_from(["claimed_amount", "qualifying_units"]))
def test_screen_model_and_settle_decoder_agree_on_decimals_of_any_length(
    text: str, field: str
) -> None:
    """The screen takes only plain decimals in range; the model takes every value
    in range and nothing else; the worker's decoder reads the same values."""
    doc = generate(20, 1).documents[0]
    doc["lines"][0][field] = text
    raw = json.dumps(doc).encode()
    value = exact_value(text)
    places = 4 if field == "claimed_amount" else 6
    assert value is not None
    screened = screen(PROMO.screen, raw)
    try:
        model = PROMO.document_model.model_validate_json(raw)
    except ValidationError as exc:
        assert screened is None, "the screen accepted what the model refuses"
        assert exc.errors()[0]["type"] == "decimal_out_of_range"
        assert not within_limits(value, places), text
        return
    assert within_limits(value, places), text
    assert getattr(model.lines[0], field) == value
    if screened is not None:
        assert Decimal(getattr(screened.lines[0], field)) == value
    decoded = PROMO.settle_decoder(b"[" + raw + b"]")
    if decoded is not None:
        assert getattr(decoded[0].lines[0], field) == value


_DATE_LIKE = st.one_of(
    st.dates().map(lambda d: d.isoformat()),
    st.datetimes().map(lambda d: d.isoformat()),
    st.datetimes().map(lambda d: d.strftime("%Y-%m-%dT00:00:00Z")),
    st.integers(-(10**13), 10**13),
    st.integers(0, 10**13).map(str),
    st.floats(allow_nan=False, allow_infinity=False),
    st.from_regex(r"[0-9]{2,5}-[0-9]{1,3}-[0-9]{1,3}", fullmatch=True),
    st.text(alphabet="0123456789-TZ:+ ", max_size=12),
    st.booleans(),
)


@pytest.mark.regression(
    reason="was a BUG (issue 12 item 8): the model took 0, Unix seconds, numeric strings "
    "and midnight datetimes as a transaction_date, where the screen refused them"
)
@settings(max_examples=400, deadline=None, database=None)
@given(value=_DATE_LIKE)
def test_screen_and_model_take_the_same_dates_and_only_iso_ones(value: Any) -> None:
    doc = generate(20, 1).documents[0]
    doc["lines"][0]["transaction_date"] = value
    raw = json.dumps(doc).encode()
    screened = screen(PROMO.screen, raw)
    iso = isinstance(value, str) and re.fullmatch(r"[0-9]{4}-[0-9]{2}-[0-9]{2}", value)
    try:
        model = PROMO.document_model.model_validate_json(raw)
    except ValidationError as exc:
        assert screened is None, "the screen accepted what the model refuses"
        assert [e["type"] for e in exc.errors()] == ["date_invalid"]
        if iso:  # the form is right: then only the calendar can refuse it
            with pytest.raises(ValueError):
                dt.date.fromisoformat(value)
        return
    assert iso, f"the model took {value!r} as a date"
    assert model.lines[0].transaction_date == dt.date.fromisoformat(value)
    if screened is not None:
        assert screened.lines[0].transaction_date == model.lines[0].transaction_date
