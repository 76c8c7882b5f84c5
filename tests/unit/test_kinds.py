"""shared.domain.kinds: the kind registry and the BATCH adapter the front door parses with."""

from __future__ import annotations

import copy
import json
from decimal import Decimal
from typing import Any

import pytest
from pydantic import ValidationError

from shared.domain.kinds import BATCH, KINDS, get_kind
from shared.domain.kinds.promo_accrual import PromoAccrual, PromoBatch
from shared.domain.synthetic import freight_batch, promo_batch, recipe_batch

SPEC_BATCH: dict[str, Any] = {
    "kind": "promo_accrual",
    "documents": [
        {
            "document_id": "INV-2026-000123",
            "partition_key": "VENDOR-0042",
            "contract_version": 7,
            "period": "2026-Q3",
            "correlation_id": "corr-1",
            "lines": [
                {
                    "line_no": 1,
                    "sku": "SKU-48213",
                    "promo_tier": "T2",
                    "qualifying_units": "37",
                    "claimed_amount": "16.65",
                }
            ],
        }
    ],
}


def _batch(mutate: Any = None) -> str:
    body = copy.deepcopy(SPEC_BATCH)
    if mutate is not None:
        mutate(body)
    return json.dumps(body)


def _errors(text: str) -> list[dict[str, Any]]:
    """Errors with the discriminating kind tag dropped from their locations."""
    with pytest.raises(ValidationError) as info:
        BATCH.validate_json(text)
    errors = [dict(e) for e in info.value.errors()]
    for e in errors:
        if e["loc"] and e["loc"][0] in KINDS:
            e["loc"] = e["loc"][1:]
    return errors


def _line0(body: dict[str, Any]) -> dict[str, Any]:
    line: dict[str, Any] = body["documents"][0]["lines"][0]
    return line


def test_registry_holds_promo_accrual() -> None:
    assert "promo_accrual" in KINDS
    assert isinstance(get_kind("promo_accrual"), PromoAccrual)


def test_unknown_kind_name_is_not_in_the_registry() -> None:
    with pytest.raises(KeyError):
        get_kind("no_such_kind")


def test_valid_json_batch_parses() -> None:
    batch = BATCH.validate_json(_batch())
    assert isinstance(batch, PromoBatch)
    doc = batch.documents[0]
    assert doc.document_id == "INV-2026-000123"
    assert doc.contract_version == 7
    assert doc.correlation_id == "corr-1"
    assert doc.lines[0].qualifying_units == Decimal("37")
    assert doc.lines[0].claimed_amount == Decimal("16.65")


def test_optional_fields_may_be_absent_or_present() -> None:
    def mutate(body: dict[str, Any]) -> None:
        del body["documents"][0]["correlation_id"]
        _line0(body).update(store_id="ST-1", transaction_date="2026-07-01")

    batch = BATCH.validate_json(_batch(mutate))
    assert batch.documents[0].correlation_id is None
    assert batch.documents[0].lines[0].store_id == "ST-1"
    assert batch.documents[0].lines[0].transaction_date.isoformat() == "2026-07-01"


def test_json_number_for_claimed_amount_is_refused() -> None:
    text = _batch().replace('"claimed_amount": "16.65"', '"claimed_amount": 16.65')
    assert '"claimed_amount": 16.65' in text
    errors = _errors(text)
    assert [e["type"] for e in errors] == ["decimal_must_be_string"]
    assert errors[0]["loc"] == ("documents", 0, "lines", 0, "claimed_amount")


def test_json_number_for_qualifying_units_is_refused() -> None:
    errors = _errors(_batch(lambda b: _line0(b).update(qualifying_units=37)))
    assert [e["type"] for e in errors] == ["decimal_must_be_string"]


@pytest.mark.parametrize("version", [0, -1])
def test_contract_version_below_one_is_refused(version: int) -> None:
    def mutate(body: dict[str, Any]) -> None:
        body["documents"][0]["contract_version"] = version

    errors = _errors(_batch(mutate))
    assert [e["type"] for e in errors] == ["greater_than_equal"]
    assert errors[0]["loc"] == ("documents", 0, "contract_version")


@pytest.mark.parametrize("version", ['"7"', "7.5", "true"])
def test_contract_version_is_not_coerced(version: str) -> None:
    text = _batch().replace('"contract_version": 7', f'"contract_version": {version}')
    assert len(_errors(text)) == 1


def test_contract_version_written_7_0_is_7() -> None:
    """JSON Schema's integer (openapi.yaml) holds 7.0: so does the model
    (tests/unit/test_whole_numbers.py: and the worker reads it back)."""
    text = _batch().replace('"contract_version": 7', '"contract_version": 7.0')
    assert BATCH.validate_json(text).documents[0].contract_version == 7


@pytest.mark.parametrize(
    ("mutate", "loc"),
    [
        (lambda b: b.update(priority="high"), ("priority",)),
        (lambda b: b["documents"][0].update(currency="EUR"), ("documents", 0, "currency")),
        (
            lambda b: _line0(b).update(discount="1.00"),
            ("documents", 0, "lines", 0, "discount"),
        ),
    ],
)
def test_unknown_field_anywhere_is_extra_forbidden(mutate: Any, loc: tuple[Any, ...]) -> None:
    errors = _errors(_batch(mutate))
    assert [e["type"] for e in errors] == ["extra_forbidden"]
    assert errors[0]["loc"] == loc


def test_unknown_kind_is_refused() -> None:
    errors = _errors(_batch(lambda b: b.update(kind="carbon_credit")))
    assert [e["type"] for e in errors] == ["union_tag_invalid"]


def test_promo_documents_under_another_kind_are_refused() -> None:
    errors = _errors(_batch(lambda b: b.update(kind="freight_audit")))
    assert errors and all(e["type"] in ("missing", "extra_forbidden") for e in errors)


def test_empty_documents_list_is_refused() -> None:
    errors = _errors(_batch(lambda b: b.update(documents=[])))
    assert [e["type"] for e in errors] == ["too_short"]


def test_money_round_trips_through_model_dump_json_as_strings() -> None:
    def mutate(body: dict[str, Any]) -> None:
        _line0(body).update(claimed_amount="16.650", qualifying_units="37.5")

    batch = BATCH.validate_json(_batch(mutate))
    dumped = json.loads(batch.model_dump_json())
    line = dumped["documents"][0]["lines"][0]
    assert line["claimed_amount"] == "16.650"
    assert line["qualifying_units"] == "37.5"
    assert isinstance(line["claimed_amount"], str)
    again = BATCH.validate_json(batch.model_dump_json())
    assert again == batch
    assert again.documents[0].lines[0].claimed_amount == Decimal("16.650")


def test_adapter_dump_json_also_writes_money_as_strings() -> None:
    batch = BATCH.validate_json(_batch())
    dumped = json.loads(BATCH.dump_json(batch))
    assert dumped["documents"][0]["lines"][0]["claimed_amount"] == "16.65"


@pytest.mark.regression(
    reason="was a BUG (issue 12 item 5): a promo document could hold line_no 1 twice; "
    "both lines shared a line_ref and a key, and requeues broke the job's counters"
)
def test_a_repeated_line_reference_is_found_in_every_kind_and_in_the_promo_screen() -> None:
    promo = {
        "document_id": "INV-1",
        "partition_key": "V-1",
        "contract_version": 1,
        "period": "2026-Q3",
        "lines": [
            {
                "line_no": n,
                "sku": "SKU-1",
                "promo_tier": "T1",
                "qualifying_units": "1",
                "claimed_amount": "1",
            }
            for n in (1, 2, 1)
        ],
    }
    kind = get_kind("promo_accrual")
    raw = json.dumps(promo).encode()
    screened = kind.screen.decoder.decode(raw)
    for document in (kind.document_model.model_validate_json(raw), screened):
        repeated = kind.repeated_line(document)
        assert repeated is not None
        assert (repeated.loc, repeated.value) == (("lines", "2", "line_no"), "1")
    recipe = get_kind("recipe_cost")
    body = {
        "document_id": "REQ-1",
        "partition_key": "RCP-1",
        "contract_version": 1,
        "recipe_id": "RCP-1",
        "location_ids": ["LOC-1", "LOC-2", "LOC-2"],
        "effective_at": "2026-07-01T00:00:00Z",
        "pricing_snapshot": {"A": "1"},
        "trigger": "vendor_rate",
    }
    repeated = recipe.repeated_line(recipe.document_model.model_validate(body))
    assert repeated is not None
    assert (repeated.loc, repeated.value) == (("location_ids", "2"), "LOC-2")
    promo["lines"][2]["line_no"] = 3
    assert kind.repeated_line(kind.document_model.model_validate(promo)) is None


@pytest.mark.parametrize(
    ("name", "make"),
    [
        ("promo_accrual", promo_batch),
        ("recipe_cost", recipe_batch),
        ("freight_audit", freight_batch),
    ],
)
def test_each_kind_gives_its_csv_columns_for_every_line_in_line_order(name: str, make: Any) -> None:
    kind = KINDS[name]
    batch = BATCH.validate_python(make(40))
    for document in batch.documents:
        cells = kind.line_cells(document)
        assert len(cells) == kind.line_count(document) == len(kind.lines(document))
        assert all(len(c) == len(kind.line_columns) for c in cells)
        assert all(v is None or isinstance(v, str | Decimal) for c in cells for v in c)


def test_a_promo_lines_csv_cells_are_its_fields() -> None:
    [document] = BATCH.validate_json(_batch()).documents
    assert KINDS["promo_accrual"].line_cells(document) == [
        ("2026-Q3", "SKU-48213", "T2", Decimal("37"), None, None)
    ]


def test_every_kind_has_a_quantum_its_settlement_rounds_to() -> None:
    assert {name: kind.quantum for name, kind in KINDS.items()} == {
        "promo_accrual": Decimal("0.01"),
        "freight_audit": Decimal("0.01"),
        "recipe_cost": Decimal("0.0001"),
    }
