"""What `settleq gen --format x12` writes, read and mapped by our own reader and
mappings (docs/architecture.md#edi-intake): every invoice a document, the
demo's partitions, amounts as billed, and each settling against the demo
contracts as the JSON batches do; and its 997 valid to pyx12."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

import pytest

from shared.domain.kinds import KINDS
from shared.domain.synthetic import freight_contract, promo_contract
from shared.domain.x12.acknowledging.answer import acknowledge
from shared.domain.x12.mapping.files import map_file
from shared.domain.x12.model import EdiRefused
from shared.domain.x12.reading.reader import read_file
from shared.domain.x12.synthetic import freight_210_file, promo_810_file
from tests.unit.x12.pyx12_peer import map_dir, validate_997

NOW = datetime(2026, 10, 2, 9, 30, tzinfo=UTC)


def _billed(data: bytes, tag: bytes, element: int) -> Decimal:
    """The sum of one N2 element over the file, read with bytes.split (no reader)."""
    total = Decimal(0)
    for line in data.split(b"~\n"):
        if line.startswith(tag + b"*"):
            total += Decimal(line.split(b"*")[element].decode()) / 100
    return total


def _settle(kind_name: str, documents: list[dict[str, object]]) -> dict[str, int]:
    kind = KINDS[kind_name]
    contract = kind.contract_model.model_validate(
        freight_contract() if kind_name == "freight_audit" else promo_contract()
    )
    outcomes: dict[str, int] = {}
    for raw in documents:
        document = kind.document_model.model_validate(raw)
        for line in kind.lines(document):
            outcome = kind.settle(document, line, contract).outcome
            outcomes[outcome] = outcomes.get(outcome, 0) + 1
    return outcomes


def test_a_generated_210_file_maps_to_one_leg_a_set_and_settles_as_billed() -> None:
    data = freight_210_file(1_000, seed=12, carriers=5, sets_per_group=300)
    interchanges = read_file(data)
    mapped = map_file(interchanges, contract_version=1, partition_key=None, period=None)
    assert mapped.kind == "freight_audit" and mapped.skipped == []
    assert len(mapped.documents) == 1_000
    assert [d["document_id"] for d in mapped.documents] == [f"PRO12-{n:07d}" for n in range(1_000)]
    assert {d["partition_key"] for d in mapped.documents} == {f"CARRIER-00{n}" for n in range(5)}
    assert all(len(d["legs"]) == 1 and d["document_type"] == "EDI" for d in mapped.documents)
    billed = sum(Decimal(d["legs"][0]["billed_amount"]) for d in mapped.documents)
    assert billed == _billed(data, b"B3", 7)
    assert {d["legs"][0].get("rate_basis") for d in mapped.documents} >= {"cwt", "flat", "unit"}
    first = mapped.documents[0]["correlation_id"]
    assert first == f"x12:SQSYNTH210:{interchanges[0].control_number}:1:0001"
    # every 40th is overbilled by 12.00, as freight_batch's JSON invoices are
    assert _settle("freight_audit", mapped.documents) == {"posted": 975, "disputed": 25}


def test_a_generated_810_file_maps_its_allowance_lines_and_settles_at_the_tier_rates() -> None:
    data = promo_810_file(400, seed=12, vendors=5, sets_per_group=150)
    mapped = map_file(read_file(data), contract_version=1, partition_key=None, period=None)
    assert mapped.kind == "promo_accrual" and mapped.skipped == []
    assert len(mapped.documents) == 400
    assert {d["partition_key"] for d in mapped.documents} == {f"VENDOR-000{n}" for n in range(5)}
    assert {d["period"] for d in mapped.documents} == {"2026-Q3"}
    lines = [line for d in mapped.documents for line in d["lines"]]
    assert len(lines) == data.count(b"\nSAC*A*")
    claimed = sum(Decimal(line["claimed_amount"]) for line in lines)
    assert claimed == _billed(data, b"SAC", 5)
    outcomes = _settle("promo_accrual", mapped.documents)
    assert outcomes == {"posted": len(lines) - len(lines) // 50, "disputed": len(lines) // 50}


@pytest.mark.parametrize("code", ["210", "810"])
def test_the_997_of_a_generated_file_read_by_our_reader_is_valid(code: str, tmp_path: Path) -> None:
    shape = {"seed": 13, "sets_per_group": 100, "groups_per_interchange": 2}
    if code == "210":
        data = freight_210_file(450, carriers=2, **shape)
    else:
        data = promo_810_file(450, vendors=2, **shape)
    interchanges = read_file(data)
    assert [len(ic.groups) for ic in interchanges] == [2, 2, 1]
    numbers = [101, 102, 103]
    answer = acknowledge(interchanges, [], control_numbers=numbers, now=datetime.now(UTC))
    assert validate_997(answer, map_dir(tmp_path)) == []
    assert answer.count(b"AK5*A~") == 450 and b"AK5*R" not in answer


def test_a_mapping_refusal_rejects_its_set_in_the_997_with_pointers(tmp_path: Path) -> None:
    lines = freight_210_file(5, seed=1, carriers=2).split(b"~\n")
    third_discount = [n for n, line in enumerate(lines) if line.endswith(b"****DSC")][2]
    lines[third_discount] = lines[third_discount].replace(b"****DSC", b"1****DSC")  # x10
    interchanges = read_file(b"~\n".join(lines))
    with pytest.raises(EdiRefused) as refused:
        map_file(interchanges, contract_version=1, partition_key=None, period=None)
    assert {(p.code, p.tag, p.element) for p in refused.value.problems} == {
        ("edi_total_mismatch", "B3", 7),
        ("edi_total_mismatch", "L3", 5),
    }
    answer = acknowledge(interchanges, refused.value.problems, control_numbers=[3], now=NOW)
    assert validate_997(answer, map_dir(tmp_path)) == []
    rows = answer.decode("ascii").split("~\n")
    third = rows.index("AK2*210*0003")
    assert rows[third : third + 6] == [
        "AK2*210*0003",
        "AK3*B3*2**8",  # B3 is the set's 2nd segment, outside any loop
        "AK4*7**7",
        "AK3*L3*24**8",
        "AK4*5**7",
        "AK5*R*5",
    ]
    assert "AK9*P*5*5*4" in rows
