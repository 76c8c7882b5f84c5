"""Every X12 file of ../shared/realdata is a test (issue 16): accepted with the documents
it holds (id, partition, amount and line count asserted), or refused with the specific
edi_* code at the segment and element at fault. Its envelopes, when they can be read,
are checked too, so that nothing is read silently wrong.

The files' quirks are listed in ../shared/realdata/SOURCES.md; these tests skip when
that directory is absent.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import pytest

from shared.domain.kinds import get_kind
from shared.domain.x12.mapping.files import map_file
from shared.domain.x12.model import EdiRefused, Interchange, Mapped
from shared.domain.x12.reading.reader import read_file
from tests.unit.x12.build import DATA, REALDATA, fast_and_slow_agree

Envelope = tuple[str, str, str, str | None, str, str, list[tuple[str, list[str]]]]


@dataclass(frozen=True)
class Accepted:
    kind: str
    documents: list[tuple[str, str, str, int]]  # document id, partition, amount, lines
    envelope: Envelope


@dataclass(frozen=True)
class Refused:
    code: str
    segment: int | None
    tag: str | None
    element: int | None
    codes: frozenset[str] = field(default_factory=frozenset)  # all of them, when several
    envelope: Envelope | None = None  # None: the envelopes cannot be read


def refused(
    code: str,
    segment: int | None,
    tag: str | None,
    element: int | None,
    envelope: Envelope | None,
    *also: str,
) -> Refused:
    return Refused(code, segment, tag, element, frozenset({code, *also}), envelope)


NO_DOCUMENTS = ("edi_no_documents", None, None, None)
UNSUPPORTED = ("edi_unsupported_transaction_set", 3, "ST", 1)

# (element, component, terminator, repetition, ISA06 trimmed, ISA13, [(GS06, [ST02...])])
EXPECTED: dict[str, Accepted | Refused] = {
    # --- 210s: four settle, one has a wrong GE02 ---
    "x12_210/210-MGCTLYST-SAMPLE.EDI": Accepted(
        "freight_audit", [("09851270", "SCAC", "659.40", 1)],
        ("*", ":", "~", None, "SCAC", "000001838", [("1838", ["18380001"])]),
    ),
    "x12_210/CN_FreightInvoiceSample1.txt": Accepted(
        "freight_audit", [("28066945", "CNRU", "2754.33", 1)],  # CNRU, not CNR: ISA11 is "U"
        ("*", ">", "~", None, "CN", "000000340", [("340", ["340001"])]),
    ),
    "x12_210/CN_FreightInvoiceSample2.txt": Accepted(
        "freight_audit", [("28061234", "CNRU", "1949.33", 1)],  # 2083.60 less 134.27 GST
        ("*", ">", "~", None, "CN", "000000612", [("612", ["612001"])]),
    ),
    "x12_210/FreightInvoice.txt": Accepted(
        "freight_audit", [("3410889", "NLMI", "51.65", 1)],
        ("*", ">", "~", None, "SENDER1", "000000263", [("000000001", ["00000001"])]),
    ),
    "x12_210/ts210_80char.edi": Accepted(
        "freight_audit", [("699751522", "DDDD", "124.17", 1)],  # ST02 1305 wrapped as 1|305
        ("*", ">", "~", None, "DDDD", "000026003", [("2619", ["1305"])]),
    ),
    "x12_210/DBSchenker_SampleMotorFreightDetailsAndInvoice.txt": refused(
        "edi_control_mismatch", 25, "GE", 2,  # GE02 24, GS06 1; "." ends segments, not 46.40's
        ("*", ":", ".", None, "055001924INV", "000000024", [("1", ["000013496"])]),
    ),
    # --- 810s: the Walmart allowance settles; the others have no allowance line ---
    "x12_810/Example5_Walmart.txt": Accepted(
        "promo_accrual", [("6463367", "123456170", "23.50", 1)],
        ("*", ">", "\n", None, "102096559TEST", "810000263", [("810000263", ["0001"])]),
    ),
    "x12_810/2011110815164104.txt": refused(
        *NO_DOCUMENTS, ("*", ":", "~", None, "XXXXXXXX4T", "810000163", [("163", ["0163"])])
    ),
    "x12_810/Example1_CaliforniaISO.txt": refused(
        *NO_DOCUMENTS, ("*", ">", "~", None, "943274043", "000000002", [("1", ["0001"])])
    ),
    "x12_810/Example2_ManualBilling.txt": refused(
        *NO_DOCUMENTS, ("*", ">", "~", None, "943274043", "000000035", [("1", ["0001"])])
    ),
    "x12_810/Example3_MultiInvoice.txt": refused(
        *NO_DOCUMENTS,  # SAC*C (charges) only; ISA12 00403 makes ISA11 "^" a repetition
        ("*", ":", "~", "^", "ABYZ000", "000000224", [("224", ["2240001", "2240002"])]),
    ),
    "x12_810/Example4_Adobe.txt": refused(
        *NO_DOCUMENTS,  # line breaks end segments; ISA12 "00040"
        ("*", ">", "\n", None, "102096559TEST", "810000263", [("810000263", ["166061414"])]),
    ),
    "x12_810/Invoice.txt": refused(
        *NO_DOCUMENTS, ("*", ">", "~", None, "SENDER1", "000000263", [("000000001", ["0001"])])
    ),
    "x12_810/simple810.edi": refused(
        *NO_DOCUMENTS,
        ("*", ">", "~", None, "SENDERISA", "000000020", [("1", ["000000001", "000000002"])]),
    ),
    "x12_810/x12.810a.edi": refused(  # SAC*N and SAC*C only; an 81-character ISA
        *NO_DOCUMENTS, ("*", ">", "~", None, "ABCMUSICSUPPLY", "000000001", [("1", ["0001"])])
    ),
    "x12_810/x12.810b.edi": refused(
        *NO_DOCUMENTS, ("*", ">", "~", None, "ABCMUSICSUPPLY", "000000001", [("1", ["0001"])])
    ),
    "x12_810/x12.810c.edi": refused(  # its SAC*A is a percentage (SAC06/07): not a line
        *NO_DOCUMENTS, ("*", ">", "~", None, "ABCMUSICSUPPLY", "000000001", [("1", ["0001"])])
    ),
    "x12_810/x12.810d.edi": refused(
        *NO_DOCUMENTS, ("*", ">", "~", None, "ABCMUSICSUPPLY", "000000001", [("1", ["0001"])])
    ),
    "x12_810/invoice810_po850_dual.edi": refused(
        "edi_unsupported_transaction_set", 59, "ST", 1,  # the 850 of the second group
        ("*", ">", "~", None, "SENDERISA", "000000020",
         [("1", ["000000001", "000000002"]), ("165", ["000191240"])]),
    ),
    # --- 850s: purchase orders are not settled; some have broken envelopes ---
    "x12_850/Example1_PGWGlass.txt": refused(
        *UNSUPPORTED, ("*", "~", "|", None, "828513080", "000000245", [("245", ["0001"])])
    ),
    "x12_850/Example2_Adobe_TLP.txt": refused(
        *UNSUPPORTED,
        ("~", ">", "\n", None, "000000000", "000211462", [("11464", ["114640004"])]),
    ),
    "x12_850/Example3_Adobe_CLP.txt": refused(
        *UNSUPPORTED,
        ("~", ">", "*", None, "00000000", "000511461", [("11464", ["114640004"])]),
    ),
    "x12_850/Example4_Adobe_ShrinkWrapped.txt": refused(
        *UNSUPPORTED,  # "> " then CRLF: line breaks end segments, spaces in data survive
        ("*", ">", "\n", None, "PARTNER", "638504569", [("4569", ["891325"])]),
    ),
    "x12_850/From_aojuk.txt": refused(
        *UNSUPPORTED, ("*", ">", "~", None, "SITESTUFFP2P", "000000091", [("83", ["0083"])])
    ),
    "x12_850/PurchaseOrder.txt": refused(
        *UNSUPPORTED, ("*", ">", "~", None, "SENDER1", "000000263", [("000000001", ["0001"])])
    ),
    "x12_850/PurchaseOrders.txt": refused(
        *UNSUPPORTED,
        ("*", ">", "~", None, "SENDER1", "000000263", [("000000001", ["0001", "0002"])]),
    ),
    "x12_850/x12.850.edi": refused(
        "edi_control_mismatch", 15, "IEA", 2,  # IEA02 000000001, ISA13 000000055
        ("*", ">", "~", None, "000123456", "000000055", [("2", ["0003"])]),
    ),
    "x12_850/x12.850a.edi": refused(
        "edi_control_mismatch", 54, "IEA", 2,
        ("*", ">", "~", None, "000123456", "000000055", [("2", ["0001"])]),
    ),
    "x12_850/x12.850.issue135.edi": refused(
        "edi_duplicate_control", 90, "ST", 2,  # ISA16 "~" then LF: each line ends "~"
        ("*", "~", "\n", None, "049351117", "000000001", [("1", ["0001~", "0001~"])]),
        "edi_control_mismatch",
    ),
    # --- other transaction sets and negative tests ---
    "other/x12_110/FedEx_SampleInvoice1.txt": refused(
        "edi_control_mismatch", 102, "GE", 2,
        ("*", ":", "~", None, "055001924INV", "000000024", [("1", ["0053"])]),
    ),
    "other/x12_820/Example3_HomeDepot.txt": refused(
        "edi_control_mismatch", 27, "GE", 2,  # GS06 "44 (Group Control Number)"
        ("*", ">", "~", "|", "072271711USAP", "000000194",
         [("44 (Group Control Number)", ["000000044"])]),
    ),
    "other/x12_820/Example4_Safeway.txt": refused(
        *UNSUPPORTED, ("*", ">", "~", None, "9251750000", "000025029", [("106", ["00106001"])])
    ),
    "other/x12_820/x12.820.issue140.edi": refused(
        *UNSUPPORTED,
        ("*", ">", "\n", ":", "TPTESTUS00", "820101047", [("820101047", ["101053"])]),
    ),
    "other/x12_832/x12.832.edi": refused(
        "edi_count_mismatch", 14, "SE", 1,  # SE01 17, 12 segments; a 78-character ISA
        ("*", ">", "~", None, "999999999", "000000030", [("1", ["2001"])]),
    ),
    "other/x12_852/AftermarketExample.txt": refused(
        *UNSUPPORTED, ("*", ">", "^", None, "007061617", "000000001", [("132", ["1357"])])
    ),
    "other/x12_852/hdexchange.txt": refused(
        "edi_control_mismatch", 23, "IEA", 2,  # IEA02 "000000002~"
        ("*", ">", "^", None, "943274043", "000000002", [("1", ["0001"])]),
    ),
    "other/x12_857/Kroger_CreditExample.txt": refused(
        *UNSUPPORTED,  # its guide wrote blanks as "b": ISA06 is sent as 007061617bbbbbb
        ("*", ":", "~", None, "007061617bbbbbb", "000007023", [("1225", ["0001"])]),
    ),
    "other/x12_867/Example1.txt": refused(
        *UNSUPPORTED, ("^", ">", "~", None, "943274043", "000000002", [("1", ["1001"])])
    ),
    "other/x12_867/Example2.txt": refused(
        *UNSUPPORTED, ("^", ">", "~", None, "943274043", "000000002", [("1", ["1002"])])
    ),
    "other/x12_867/Example3.txt": refused(
        *UNSUPPORTED, ("^", ">", "~", None, "943274043", "000000002", [("1", ["1003"])])
    ),
    "other/x12_875/AmasoftExample1.txt": refused(
        *UNSUPPORTED,
        ("*", ">", "~", None, "3109992367T", "000024398", [("24398", ["000024479"])]),
    ),
    "other/x12_880/SimplotExample1.txt": refused(
        *UNSUPPORTED,
        ("*", ">", "~", None, "3109992367T", "000024398", [("24398", ["000024479"])]),
    ),
    "other/x12_edgecases/CorruptIsa.txt": refused("edi_envelope_missing", 1, "SA", None, None),
    "other/x12_edgecases/MixedTransactionsNoEnvelopes.txt": refused(
        "edi_envelope_missing", 1, "ST", None, None
    ),
    "other/x12_edgecases/DuplicateGroup.txt": refused(
        "edi_duplicate_control", 19, "GS", 6,
        ("*", ">", "~", None, "SENDER1", "000000263",
         [("000000001", ["0001"]), ("000000001", ["0001"])]),
    ),
    "other/x12_edgecases/PurchaseOrderInvalid.txt": refused(
        "edi_count_mismatch", 16, "SE", 1,
        ("*", ">", "~", None, "INVALID1", "000000263", [("000000001", ["0001"])]),
    ),
    "other/x12_edgecases/x12.810.mandatory-conditions.edi": refused(
        "edi_count_mismatch", 8, "SE", 1,  # SE01 50, 6 segments; then IEA02 is not ISA13
        ("*", ">", "~", None, "000123456", "000000055", [("2", ["0001"])]),
        "edi_control_mismatch",
    ),
}  # fmt: skip

needs_realdata = pytest.mark.skipif(not REALDATA.is_dir(), reason="../shared/realdata absent")


def _outcome(data: bytes) -> tuple[Mapped | EdiRefused, tuple[Interchange, ...] | None]:
    try:
        interchanges = read_file(data)
        return map_file(
            interchanges, contract_version=3, partition_key=None, period=None
        ), interchanges
    except EdiRefused as exc:
        return exc, exc.interchanges


def _envelope(interchanges: tuple[Interchange, ...]) -> Envelope:
    [interchange] = interchanges
    d = interchange.delimiters
    groups = [(g.control_number, [s.control_number for s in g.sets]) for g in interchange.groups]
    return (
        d.element,
        d.component,
        d.segment,
        d.repetition,
        interchange.sender_id,
        interchange.control_number,
        groups,
    )


@needs_realdata
def test_every_x12_file_has_an_expected_outcome() -> None:
    files = {
        str(p.relative_to(REALDATA))
        for pattern in ("x12_*/*", "other/x12_*/*")
        for p in REALDATA.glob(pattern)
        if p.is_file()
    }
    assert files == set(EXPECTED)


@needs_realdata
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_real_file(name: str) -> None:
    expected = EXPECTED[name]
    data = (REALDATA / name).read_bytes()
    outcome, interchanges = _outcome(data)
    fast = fast_and_slow_agree(interchanges or (), 3)
    if isinstance(expected, Accepted) and expected.kind == "freight_audit":
        assert fast == len(expected.documents)  # real 210s take the fast path, and agree
    if isinstance(expected, Refused):
        assert isinstance(outcome, EdiRefused), f"{name} was accepted"
        first = outcome.problems[0]
        assert (first.code, first.segment, first.tag, first.element) == (
            expected.code,
            expected.segment,
            expected.tag,
            expected.element,
        )
        assert {p.code for p in outcome.problems} == expected.codes
        assert all(p.message for p in outcome.problems)
        if expected.envelope is None:
            assert interchanges is None
        else:
            assert interchanges is not None and _envelope(interchanges) == expected.envelope
        return
    assert isinstance(outcome, Mapped), f"{name}: {getattr(outcome, 'problems', None)}"
    assert interchanges is not None and _envelope(interchanges) == expected.envelope
    _check_accepted(outcome, expected, data)


def _check_accepted(mapped: Mapped, expected: Accepted, data: bytes) -> None:
    kind = get_kind(expected.kind)
    assert mapped.kind == expected.kind and mapped.skipped == []
    got = []
    for raw in mapped.documents:
        document = kind.document_model.model_validate(raw)  # mapped documents always validate
        lines = kind.lines(document)
        amount = sum((line.claimed_amount for line in lines), Decimal(0))
        got.append((document.document_id, document.partition_key, str(amount), len(lines)))
        assert document.contract_version == 3
        assert raw["correlation_id"].startswith(f"x12:{mapped.interchanges[0].sender_id}:")
        if expected.kind == "freight_audit":
            _check_payload(raw, data)
    assert got == expected.documents


def _check_payload(raw: dict[str, Any], data: bytes) -> None:
    payload = base64.b64decode(raw["raw_payload"])
    # The set as sent: from its ST through SE's terminator, a slice of the file.
    assert payload.startswith(b"ST*210*") and payload in data
    assert payload.endswith(b"~") and b"SE*" in payload[-30:]


def test_the_repositorys_own_copy_is_the_readme_example() -> None:
    data = (DATA / "210-MGCTLYST-SAMPLE.EDI").read_bytes()
    mapped, _ = _outcome(data)
    assert isinstance(mapped, Mapped)
    [document] = mapped.documents
    assert document["legs"] == [
        {
            "leg_no": 1,
            "rate_basis": "cwt",
            "rated_quantity": "78.89",
            "accessorials": ["CUS"],
            "billed_amount": "659.40",
        }
    ]
    assert document["correlation_id"] == "x12:SCAC:000001838:1838:18380001"
    assert (document["document_id"], document["partition_key"]) == ("09851270", "SCAC")
