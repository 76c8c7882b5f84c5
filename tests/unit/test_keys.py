"""shared.domain.keys: reconciliation keys per docs/architecture.md#reconciliation-keys."""

from __future__ import annotations

import hashlib
import re

from hypothesis import given
from hypothesis import strategies as st

from shared.domain.keys import promo_key, promo_line_item_hash, sha256_hex

HEX64 = re.compile(r"^[0-9a-f]{64}$")


def _by_hand(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def test_promo_key_recomputed_by_hand_from_the_spec_definition() -> None:
    # docs/architecture.md#reconciliation-keys: line_item_hash =
    # sha256("line_no|sku|store_id|transaction_date"), promo key =
    # sha256("partition_key|document_id|line_item_hash|promo_tier|period").
    line_item_hash = _by_hand("1|SKU-48213|STORE-7|2026-07-01")
    expected = _by_hand(f"VENDOR-7|INV-2026-000123|{line_item_hash}|T2|2026-Q3")

    item = promo_line_item_hash(1, "SKU-48213", "STORE-7", "2026-07-01")
    assert item == line_item_hash
    assert promo_key("VENDOR-7", "INV-2026-000123", item, "T2", "2026-Q3") == expected


def test_missing_optional_fields_join_as_empty_strings() -> None:
    # store_id and transaction_date absent: "1|SKU-48213||" (two trailing empty fields).
    assert promo_line_item_hash(1, "SKU-48213", None, None) == _by_hand("1|SKU-48213||")
    assert promo_line_item_hash(1, "SKU-48213", None, "2026-07-01") == _by_hand(
        "1|SKU-48213||2026-07-01"
    )


def test_missing_optional_field_is_the_same_as_an_empty_one() -> None:
    assert promo_line_item_hash(3, "S", None, None) == promo_line_item_hash(3, "S", "", "")


def test_keys_are_lower_case_hex_sha256() -> None:
    item = promo_line_item_hash(1, "SKU", None, None)
    key = promo_key("V", "DOC", item, "T1", "2026-Q3")
    assert HEX64.match(item)
    assert HEX64.match(key)


def test_sha256_hex_joins_fields_with_a_pipe_and_utf8() -> None:
    assert sha256_hex("a", 1, None, "é") == _by_hand("a|1||é")
    assert sha256_hex() == _by_hand("")


def test_key_is_deterministic() -> None:
    first = promo_key("V", "DOC", promo_line_item_hash(1, "SKU", "S1", "2026-01-01"), "T1", "P")
    second = promo_key("V", "DOC", promo_line_item_hash(1, "SKU", "S1", "2026-01-01"), "T1", "P")
    assert first == second


def test_every_business_field_changes_the_key() -> None:
    base = ("V", "DOC", 1, "SKU", "S1", "2026-01-01", "T1", "2026-Q3")

    def key(*fields: object) -> str:
        vendor, doc, line_no, sku, store, date, tier, period = fields
        item = promo_line_item_hash(line_no, sku, store, date)  # type: ignore[arg-type]
        return promo_key(vendor, doc, item, tier, period)  # type: ignore[arg-type]

    variants = [
        ("V2", "DOC", 1, "SKU", "S1", "2026-01-01", "T1", "2026-Q3"),
        ("V", "DOC2", 1, "SKU", "S1", "2026-01-01", "T1", "2026-Q3"),
        ("V", "DOC", 2, "SKU", "S1", "2026-01-01", "T1", "2026-Q3"),
        ("V", "DOC", 1, "SKU2", "S1", "2026-01-01", "T1", "2026-Q3"),
        ("V", "DOC", 1, "SKU", "S2", "2026-01-01", "T1", "2026-Q3"),
        ("V", "DOC", 1, "SKU", "S1", "2026-01-02", "T1", "2026-Q3"),
        ("V", "DOC", 1, "SKU", "S1", "2026-01-01", "T2", "2026-Q3"),
        ("V", "DOC", 1, "SKU", "S1", "2026-01-01", "T1", "2026-Q4"),
    ]
    keys = {key(*base)} | {key(*v) for v in variants}
    assert len(keys) == 1 + len(variants)


def test_the_amounts_are_not_part_of_the_identity() -> None:
    # Only immutable business fields go into the key; the claimed amount and units do not,
    # so a corrected re-send of the same line is recognised as the same identity.
    item = promo_line_item_hash(1, "SKU", None, None)
    assert promo_key("V", "DOC", item, "T1", "P") == _by_hand(f"V|DOC|{item}|T1|P")


@given(
    st.integers(min_value=1, max_value=2**31 - 1),
    st.text(min_size=1, max_size=20),
    st.none() | st.text(max_size=20),
    st.none() | st.text(max_size=10),
    st.text(min_size=1, max_size=10),
)
def test_spelled_out_promo_keys_equal_the_generic_join(line_no, sku, store, date, tier) -> None:
    item = promo_line_item_hash(line_no, sku, store, date)
    assert item == sha256_hex(line_no, sku, store, date)
    assert promo_key(tier, sku, item, tier, "P") == sha256_hex(tier, sku, item, tier, "P")
