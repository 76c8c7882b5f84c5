"""An 820 read into a remittance, its deductions and its balance check
(docs/architecture.md#remittances-and-deductions):
pure functions, the three real files of ../shared/realdata/other/x12_820 and small
files of our own."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from shared.domain.remittances.deductions import (
    DEFAULT_REASONS,
    balance,
    deductions,
    reason_class,
    unexplained_short_pay,
)
from shared.domain.remittances.model import Adjustment, Line, Payer, Remittance
from shared.domain.remittances.x12_820 import RemittanceFile, read_820
from tests.unit.x12.build import x12

# The repository is a sibling of shared/; absent on a clean checkout elsewhere, so
# the tests of the real files skip there (as tests/unit/x12/test_realdata.py's do).
X12_820 = Path(__file__).resolve().parents[2].parent / "shared" / "realdata" / "other" / "x12_820"
real = pytest.mark.skipif(not X12_820.is_dir(), reason="../shared/realdata is absent")


def _read(name: str) -> RemittanceFile:
    return read_820((X12_820 / name).read_bytes())


def _only(read: RemittanceFile) -> Remittance:
    assert not read.problems, [p.detail() for p in read.problems]
    assert len(read.remittances) == 1
    return read.remittances[0]


# --- the real files ------------------------------------------------------------


@real
def test_the_edinet_sample_balances_to_the_cent_with_one_shortage_under_a_line() -> None:
    """x12.820.issue140.edi (EDI.Net's sample): 005010, LF line ends, '~'-less (a line
    break ends each segment), ISA sender 08/TPTESTUS00. One 820 (ST02 101053): BPR02
    21298.97 paid 2019-10-29 (BPR16), TRN02 4529952, CUR*PR*USD, N1*PR MART INC.
    (UL 1238742000008). One ENT of 7 RMR*IV lines (26801 ... 27029), each with six
    REFs and a DTM*097; their RMR04 add up to 21298.97 exactly. Line 26801 is invoiced
    4650.41 less a 97.90 discount and paid 4408.75: 143.76 short, and its nested
    ADX*-143.76*59*CM*26801 says why (59, a shortage). The other lines are paid in full."""
    remittance = _only(_read("x12.820.issue140.edi"))
    assert remittance.payer == Payer(id="1238742000008", id_qualifier="UL", name="MART INC.")
    assert (remittance.trace, remittance.currency) == ("4529952", "USD")
    assert remittance.paid_total == Decimal("21298.97")
    assert remittance.paid_at is not None and remittance.paid_at.isoformat() == "2019-10-29"
    assert [line.reference for line in remittance.lines] == [
        "26801", "26927", "26935", "27009", "27018", "27028", "27029",
    ]  # fmt: skip
    first = remittance.lines[0]
    assert (first.qualifier, first.paid, first.invoiced, first.discount) == (
        "IV", Decimal("4408.75"), Decimal("4650.41"), Decimal("97.9"),
    )  # fmt: skip
    assert first.adjustments == (
        Adjustment(
            amount=Decimal("-143.76"), reason_code="59", reference="26801", reference_qualifier="CM"
        ),
    )
    assert {r.qualifier for r in first.references} >= {"DP", "MR", "PO", "MC", "19", "ST"}
    assert [(d.qualifier, d.date.isoformat()) for d in first.dates] == [("097", "2019-09-04")]
    assert not remittance.adjustments and all(not line.adjustments for line in remittance.lines[1:])

    check = balance(remittance)
    assert (check.stated, check.computed, check.difference) == (
        Decimal("21298.97"), Decimal("21298.97"), Decimal(0),
    )  # fmt: skip
    assert check.balanced
    [taken] = deductions(remittance)
    assert (taken.amount, taken.reason_code, taken.reason_class) == (
        Decimal("143.76"), "59", "shortage",
    )  # fmt: skip
    assert (taken.reference, taken.line) == ("26801", 0)


@real
def test_the_safeway_sample_is_210_apart_and_nothing_is_refused() -> None:
    """Example4_Safeway.txt, as published: a UTF-8 byte-order mark, CRLF, segments
    indented by loop, 004010, an anonymised receiver (ISA07 'XX', ISA08 XXXXXXXXXX).
    One 820 (ST02 00106001): BPR02 416093.15 by ACH, BPR16 2005-10-20, TRN02
    4311000190, no CUR, N1*PR Safeway - U. S. Corporate (9 0091372090000). Five ENTs:
    four ADX with reason ZZ (mutually defined) stand under ENTs, not lines:
    -13676.81 and -18200 (CM, ENT 1), -892.8 (CM, ENT 2) and +210 (DB, ENT 3, a
    debit memo sent positive); six RMR*IV lines paid 448862.76 in all, each paid
    exactly invoiced less discount (no short-pay). Lines plus adjustments make
    416303.15: 210.00 more than stated, as if the debit memo were meant negative."""
    remittance = _only(_read("Example4_Safeway.txt"))
    assert remittance.payer == Payer(
        id="0091372090000", id_qualifier="9", name="Safeway - U. S. Corporate"
    )
    assert (remittance.trace, remittance.currency, remittance.control_number) == (
        "4311000190", "USD", "00106001",
    )  # fmt: skip
    assert remittance.paid_at is not None and remittance.paid_at.isoformat() == "2005-10-20"
    assert len(remittance.lines) == 6 and all(not line.adjustments for line in remittance.lines)
    assert sum((line.paid for line in remittance.lines), Decimal(0)) == Decimal("448862.76")
    assert [(a.amount, a.reason_code, a.reference) for a in remittance.adjustments] == [
        (Decimal("-13676.81"), "ZZ", "WSO_144324_05"),
        (Decimal("-18200"), "ZZ", "WSO_144343_05"),
        (Decimal("-892.8"), "ZZ", "P7159010-17"),
        (Decimal("210"), "ZZ", "P7817948-20"),
    ]
    assert remittance.lines[0].references[0].value == "999999999"  # REF*PO under the RMR

    check = balance(remittance)
    assert (check.stated, check.computed) == (Decimal("416093.15"), Decimal("416303.15"))
    assert check.difference == Decimal("-210.00") and not check.balanced

    taken = deductions(remittance)
    assert [(d.amount, d.reason_class, d.line) for d in taken] == [
        (Decimal("13676.81"), "other", None),
        (Decimal("18200"), "other", None),
        (Decimal("892.8"), "other", None),
    ]
    # Safeway's ZZ means what its profile says it means.
    assert {d.reason_class for d in deductions(remittance, {"ZZ": "promotion"})} == {"promotion"}


@real
def test_the_home_depot_template_is_refused_with_its_placeholders_named() -> None:
    """Example3_HomeDepot.txt is Home Depot's published template, not a payment: a
    BOM, CRLF, indentation, version 00406/004060, and words where values belong:
    BPR02 'TOTAL DOLLAR AMT OF CHECK', TRN02 'REFERENCE NUMBER', DTMs 'CCYYMMDD',
    RMR02 'INVOICE NUMBER', RMR04-06 'NET AMOUNT PAID'..., and GS06 '44 (Group
    Control Number)', which GE02 '44' does not match (the reader's own refusal).
    Refused whole, every problem located; nothing raised."""
    read = _read("Example3_HomeDepot.txt")
    assert read.refused and read.remittances == ()
    assert read.interchanges is not None  # the envelopes were read: a 997 can answer
    first = read.problems[0].detail()
    assert first == {
        "code": "edi_bad_number",
        "segment": 4,
        "tag": "BPR",
        "element": 2,
        "control_number": "000000044",
        "message": "BPR02 (the amount paid) 'TOTAL DOLLAR AMT OF CHECK' is not a number "
        "(a template's placeholder)",
    }
    by_place = {(p.tag, p.element): p for p in read.problems}
    assert by_place["TRN", 2].code == "edi_unmappable"
    assert "'REFERENCE NUMBER' is a template's placeholder" in by_place["TRN", 2].message
    assert "'CCYYMMDD' is a template's placeholder" in by_place["DTM", 2].message
    assert by_place["GE", 2].code == "edi_control_mismatch"
    assert {p.code for p in read.problems} == {
        "edi_bad_number", "edi_unmappable", "edi_control_mismatch",
    }  # fmt: skip


# --- files of our own: what is no remittance -----------------------------------

_BODY = {
    "BPR": "BPR*I*150.00*C*ACH************20260105",
    "TRN": "TRN*1*T-1",
    "CUR": "",
    "N1": "N1*PR*A RETAILER*91*R-7",
    "ENT": "ENT*1",
    "ADX": "ADX*-5*ZZ*CM*CM-9",
    "RMR": "RMR*IV*INV-1**150*160*5",
}


def _file(**over: str) -> bytes:
    body = {**_BODY, **over}
    return x12([("820", "0001", [s for s in body.values() if s])], version="00501")


def test_a_small_820_is_read_with_its_header_and_entity_adjustments_standing_alone() -> None:
    remittance = _only(read_820(_file()))
    assert remittance.payer == Payer(id="R-7", id_qualifier="91", name="A RETAILER")
    [line] = remittance.lines
    assert (line.paid, line.invoiced, line.discount) == (Decimal(150), Decimal(160), Decimal(5))
    assert remittance.adjustments == (
        Adjustment(
            amount=Decimal(-5), reason_code="ZZ", reference="CM-9", reference_qualifier="CM"
        ),
    )
    assert balance(remittance).difference == Decimal(5)


def test_without_an_n1_pr_the_payer_is_the_interchange_sender() -> None:
    remittance = _only(read_820(_file(N1="N1*PE*US")))
    assert remittance.payer == Payer(id="SENDER", id_qualifier="ZZ", from_sender=True)


def test_an_n1_pr_without_an_id_names_the_payer_the_sender_identifies() -> None:
    remittance = _only(read_820(_file(N1="N1*PR*A RETAILER")))
    assert remittance.payer == Payer(
        id="SENDER", id_qualifier="ZZ", name="A RETAILER", from_sender=True
    )


def test_each_820_of_a_file_is_one_remittance() -> None:
    body = [s for s in _BODY.values() if s]
    second = [s.replace("T-1", "T-2") for s in body]
    read = read_820(x12([("820", "0001", body), ("820", "0002", second)]))
    assert [(r.trace, r.control_number) for r in read.remittances] == [
        ("T-1", "0001"), ("T-2", "0002"),
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("over", "code", "where", "says"),
    [
        ({"BPR": ""}, "edi_unmappable", None, "no BPR (the payment)"),
        ({"TRN": ""}, "edi_unmappable", None, "no TRN (the trace number)"),
        ({"BPR": "BPR*I*12,50*C"}, "edi_bad_number", ("BPR", 2), "'12,50' is not a number"),
        ({"RMR": "RMR*IV*INV-1**1e3"}, "edi_bad_number", ("RMR", 4), "'1e3' is not a number"),
        ({"ADX": "ADX*ABC*ZZ"}, "edi_bad_number", ("ADX", 1), "'ABC' is not a number"),
        ({"ADX": "ADX*-5"}, "edi_unmappable", ("ADX", 2), "ADX02 (the reason) is empty"),
        ({"RMR": "RMR*IV*INV-1"}, "edi_unmappable", ("RMR", 4), "RMR04 (the amount paid) is empty"),
        ({"BPR": "BPR*I*0.00001*C"}, "edi_unmappable", ("BPR", 2), "does not fit"),
        ({"TRN": "TRN*1*TRACE NUMBER"}, "edi_unmappable", ("TRN", 2), "placeholder"),
        ({"BPR": "BPR*I*1*C*ACH" + "*" * 12 + "CCYYMMDD"}, "edi_unmappable", ("BPR", 16), "placeh"),
        ({"CUR": "CUR*PR*dollars"}, "edi_unmappable", ("CUR", 2), "not a currency"),
    ],
)
def test_what_cannot_be_a_remittance_is_refused_with_a_located_problem(
    over: dict[str, str], code: str, where: tuple[str, int] | None, says: str
) -> None:
    read = read_820(_file(**over))
    assert read.refused and not read.remittances
    [problem] = read.problems
    assert problem.code == code and says in problem.message, problem
    assert (problem.tag, problem.element) == (where or ("ST", None))
    assert problem.control_number == "0001"


@given(
    tag=st.sampled_from(["BPR", "TRN", "N1", "ADX", "RMR"]),
    element=st.integers(1, 17),
    text=st.text(max_size=40),
)
def test_any_element_of_an_820_is_read_or_refused_never_raised(
    tag: str, element: int, text: str
) -> None:
    parts = _BODY[tag].split("*")
    parts += [""] * (element + 1 - len(parts))
    parts[element] = text
    read = read_820(_file(**{tag: "*".join(parts)}))
    assert bool(read.remittances) != read.refused
    assert all(p.code.startswith("edi_") and p.message for p in read.problems)


def test_a_set_other_than_an_820_is_no_remittance() -> None:
    read = read_820(x12([("810", "0001", ["BIG*20260101*I-1"])]))
    assert [p.code for p in read.problems] == ["edi_unsupported_transaction_set"]


def test_a_file_that_is_not_x12_is_refused_without_an_envelope() -> None:
    read = read_820(b"PK\x03\x04 not an interchange")
    assert read.refused and read.interchanges is None and read.problems[0].code.startswith("edi_")


# --- reasons, short-pays, and the property --------------------------------------


def test_the_default_reason_table_classes_element_426_and_an_unknown_code_is_other() -> None:
    expected = {
        "01": "pricing", "02": "promotion", "06": "shortage", "14": "return",
        "16": "promotion", "19": "duplicate", "22": "freight", "24": "discount",
        "54": "freight", "56": "promotion", "57": "promotion", "59": "shortage",
    }  # fmt: skip
    assert {code: DEFAULT_REASONS[code] for code in expected} == expected
    assert {code: reason_class(code) for code in expected} == expected
    assert reason_class("70") == reason_class("ZZ") == reason_class("") == "other"


def test_a_profile_overrides_the_class_of_a_code_and_no_other() -> None:
    overrides = {"70": "promotion", "59": "damage"}
    assert reason_class("70", overrides) == "promotion"
    assert reason_class("59", overrides) == "damage"  # over the default table
    assert reason_class("06", overrides) == "shortage"
    assert reason_class("71", overrides) == "other"
    with pytest.raises(ValueError, match="no reason class"):
        reason_class("70", {"70": "promo"})


def _line(paid: str, invoiced: str | None, discount: str | None, *adjustments: str) -> Line:
    return Line(
        reference="INV-1",
        paid=Decimal(paid),
        invoiced=None if invoiced is None else Decimal(invoiced),
        discount=None if discount is None else Decimal(discount),
        adjustments=tuple(Adjustment(amount=Decimal(a), reason_code="70") for a in adjustments),
    )


def _remittance(*lines: Line, adjustments: tuple[Adjustment, ...] = ()) -> Remittance:
    total = sum((line.paid for line in lines), Decimal(0))
    return Remittance(
        payer=Payer(id="R-7"),
        trace="T-1",
        paid_total=total,
        currency="USD",
        lines=lines,
        adjustments=adjustments,
    )


@pytest.mark.parametrize(
    ("line", "short"),
    [
        (_line("90", "100", "2"), "8"),  # nothing explains 8
        (_line("90", "100", "2", "-5"), "3"),  # an ADX explains 5 of it
        (_line("90", "100", "2", "-8"), "0"),  # explained whole
        (_line("90", "100", None), "10"),  # no discount taken
        (_line("110", "100", None, "10"), "0"),  # paid over, and an ADX adds it
        (_line("120", "100", None), "-20"),  # overpaid: nothing short
        (_line("90", None, "2"), "0"),  # nothing invoiced to compare with
    ],
)
def test_a_lines_unexplained_short_pay(line: Line, short: str) -> None:
    assert unexplained_short_pay(line) == Decimal(short)


def test_an_unexplained_short_pay_is_a_deduction_after_the_lines_own_adjustments() -> None:
    remittance = _remittance(
        _line("90", "100", "2", "-5", "4"),
        adjustments=(Adjustment(amount=Decimal("-1.50"), reason_code="02"),),
    )
    found = [(d.amount, d.reason_code, d.reason_class, d.line) for d in deductions(remittance)]
    assert found == [
        (Decimal(5), "70", "other", 0),
        (Decimal(7), "unexplained", "unexplained", 0),  # 100 - 2 - 90 - 5 + 4
        (Decimal("1.50"), "02", "promotion", None),
    ]
    assert deductions(remittance, {"70": "promotion"})[0].reason_class == "promotion"


def test_the_balance_check_reports_both_figures_and_counts_only_standalone_adjustments() -> None:
    remittance = _remittance(
        _line("90", "100", None, "-10"),  # paid is already net of its own adjustment
        _line("40.25", None, None),
        adjustments=(Adjustment(amount=Decimal("-20"), reason_code="ZZ"),),
    )
    stated = remittance.model_copy(update={"paid_total": Decimal("100.00")})
    check = balance(stated)
    assert (check.stated, check.computed) == (Decimal("100.00"), Decimal("110.25"))
    assert check.difference == Decimal("-10.25") and not check.balanced
    assert balance(stated.model_copy(update={"paid_total": Decimal("110.25")})).balanced


def test_money_is_a_string_on_the_wire_and_a_json_number_is_refused() -> None:
    remittance = _remittance(
        _line("90.10", "100", "2", "-5"),
        adjustments=(Adjustment(amount=Decimal("-1.50"), reason_code="02", reference="P-1"),),
    )
    wire = json.loads(remittance.model_dump_json())
    assert wire["paid_total"] == "90.10" and wire["lines"][0]["adjustments"][0]["amount"] == "-5"
    assert Remittance.model_validate_json(remittance.model_dump_json()) == remittance
    wire["paid_total"] = 90.1
    with pytest.raises(ValidationError, match="must be a JSON string"):
        Remittance.model_validate_json(json.dumps(wire))


_AMOUNTS = st.decimals(
    min_value=Decimal("-99999.99"), max_value=Decimal("99999.99"), places=2, allow_nan=False
)
_ADJUSTMENTS = st.lists(
    st.builds(
        Adjustment,
        amount=_AMOUNTS,
        reason_code=st.sampled_from(["01", "02", "59", "ZZ", "70"]),
    ),
    max_size=4,
).map(tuple)
_LINES = st.builds(
    Line,
    reference=st.just("INV-1"),
    paid=_AMOUNTS,
    invoiced=st.none() | _AMOUNTS,
    discount=st.none() | _AMOUNTS,
    adjustments=_ADJUSTMENTS,
)


@given(lines=st.lists(_LINES, max_size=4), standalone=_ADJUSTMENTS)
def test_a_deduction_never_comes_from_a_positive_adjustment(
    lines: list[Line], standalone: tuple[Adjustment, ...]
) -> None:
    remittance = _remittance(*lines, adjustments=standalone)
    found = deductions(remittance)
    assert all(d.amount > 0 for d in found)
    taken = [d.amount for d in found if d.reason_code != "unexplained"]
    every = [a for line in lines for a in line.adjustments] + list(standalone)
    assert taken == [-a.amount for a in every if a.amount < 0]
    shorts = [d for d in found if d.reason_code == "unexplained"]
    assert len(shorts) == sum(1 for line in lines if unexplained_short_pay(line) > 0)
