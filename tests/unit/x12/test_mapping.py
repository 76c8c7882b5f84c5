"""map_file on whole files (docs/architecture.md#edi-intake): one batch of one kind, each
ST..SE one document, and the file-level refusals."""

from __future__ import annotations

import pytest

from shared.domain.x12.mapping.files import map_file
from shared.domain.x12.model import EdiRefused, Skipped
from shared.domain.x12.reading.reader import read_file
from tests.unit.x12.build import freight, group, interchange, invoice, write, x12


def _refused(data: bytes) -> EdiRefused:
    interchanges = read_file(data)
    with pytest.raises(EdiRefused) as caught:
        map_file(interchanges, contract_version=1, partition_key=None, period=None)
    assert caught.value.interchanges == interchanges  # so that a rejecting 997 can be written
    return caught.value


def test_each_set_is_one_document_in_file_order() -> None:
    first = interchange(
        [group([("210", "1", freight()), ("210", "2", freight())], "7")], "000000005"
    )
    second = interchange(
        [group([("210", "1", freight(B3=freight()[0].replace("INV-1", "INV-2")))], "8")],
        "000000006",
    )
    interchanges = read_file(write(first) + write(second))
    mapped = map_file(interchanges, contract_version=9, partition_key="ignored", period=None)
    assert mapped.kind == "freight_audit" and mapped.interchanges == interchanges
    assert [d["correlation_id"] for d in mapped.documents] == [
        "x12:SENDER:000000005:7:1",
        "x12:SENDER:000000005:7:2",
        "x12:SENDER:000000006:8:1",
    ]
    assert {d["contract_version"] for d in mapped.documents} == {9}
    assert [d["partition_key"] for d in mapped.documents] == ["SCAC"] * 3  # 210s: B3-11


def test_skipped_invoices_are_listed_beside_the_documents() -> None:
    sets = [("810", "1", invoice(["IT1*1*1*EA*1**UP*A"])), ("810", "2", invoice())]
    mapped = map_file(read_file(x12(sets)), contract_version=1, partition_key=None, period=None)
    assert mapped.kind == "promo_accrual"
    assert mapped.skipped == [Skipped("1", "no_allowance")]
    assert len(mapped.documents) == 1


@pytest.mark.parametrize("code", ["850", "997", "211", "8100", "21O"])
def test_only_210_and_810_are_settled(code: str) -> None:
    sets = [("210", "1", freight()), (code, "2", ["BEG*00*SA*1**20260101"]), (code, "3", [])]
    refused = _refused(x12(sets))
    assert [(p.code, p.tag, p.element, p.control_number) for p in refused.problems] == [
        ("edi_unsupported_transaction_set", "ST", 1, "2"),
        ("edi_unsupported_transaction_set", "ST", 1, "3"),
    ]


def test_a_file_of_both_kinds_is_refused_once() -> None:
    sets = [("810", "1", invoice()), ("210", "2", freight()), ("210", "3", freight())]
    refused = _refused(x12(sets))
    [problem] = refused.problems
    assert (problem.code, problem.tag, problem.control_number) == ("edi_mixed_kinds", "ST", "2")
    assert problem.segment == 3 + len(invoice()) + 2


def test_nothing_to_settle() -> None:
    empty = write(interchange([group([])]))
    assert _refused(empty).code == "edi_no_documents"
    skipped = _refused(x12([("810", "1", invoice(["IT1*1*1*EA*1**UP*A", "SAC*C*D240***500"]))]))
    [problem] = skipped.problems
    assert (problem.code, problem.segment) == ("edi_no_documents", None)
    assert "1 invoice without an allowance" in problem.message


def test_problems_of_every_set_are_reported_together_in_file_order() -> None:
    bad_total = freight(B3=freight()[0].replace("*65940*", "*65941*"))
    bad_number = freight(L1CUS="L1*2***15.00****CUS")
    sets = [("210", "1", bad_total), ("210", "2", freight()), ("210", "3", bad_number)]
    refused = _refused(x12(sets))
    assert [(p.code, p.control_number) for p in refused.problems] == [
        ("edi_total_mismatch", "1"),
        ("edi_bad_number", "3"),
    ]
    assert refused.problems[0].segment < refused.problems[1].segment
