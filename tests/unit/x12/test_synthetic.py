"""settleq gen --format x12 (shared/domain/x12/synthetic.py): sound envelopes
(by our count and by pyx12's), split as a translator splits a large batch,
deterministic, about 600 bytes a 210, and invoices that settle against the
contracts `settleq demo` publishes when read by the mapping tables
(docs/architecture.md#edi-intake)."""

from __future__ import annotations

from collections import Counter
from decimal import Decimal

import pytest

from shared.domain.kinds.freight_audit import FreightContract, Leg, leg_charge
from shared.domain.money import CENT, quantize
from shared.domain.synthetic import PROMO_TIERS, freight_contract
from shared.domain.x12.model import Interchange, TransactionSet
from shared.domain.x12.synthetic import freight_210_file, promo_810_file
from tests.unit.x12.pyx12_peer import envelope_errors
from tests.unit.x12.x12_build import interchanges

CONTRACT = FreightContract.model_validate(freight_contract())


def envelope_faults(received: tuple[Interchange, ...]) -> list[str]:
    """Every count and control number that disagrees, by our own reading."""
    faults = []
    for ic in received:
        if len("*".join((ic.isa.tag, *ic.isa.elements))) != 105:
            faults.append(f"ISA {ic.control_number} is not fixed-width")
        if ic.iea.elements != (str(len(ic.groups)), ic.isa.get(13)):
            faults.append(f"IEA {ic.iea.elements}")
        numbers = [g.control_number for g in ic.groups]
        if len(set(numbers)) != len(numbers):
            faults.append(f"GS06 repeated in {ic.control_number}")
        for group in ic.groups:
            if group.ge.elements != (str(len(group.sets)), group.control_number):
                faults.append(f"GE {group.ge.elements}")
            st02 = [ts.control_number for ts in group.sets]
            if len(set(st02)) != len(st02):
                faults.append(f"ST02 repeated in group {group.control_number}")
            for ts in group.sets:
                if ts.se.elements != (str(len(ts.segments)), ts.control_number):
                    faults.append(f"SE {ts.se.elements} of {ts.control_number}")
    return faults


def sets(received: tuple[Interchange, ...]) -> list[TransactionSet]:
    return [ts for ic in received for g in ic.groups for ts in g.sets]


def n2(value: str) -> Decimal:
    """An N2 element: two implied decimals."""
    return Decimal(value) / 100


SMALL = {"sets_per_group": 3, "groups_per_interchange": 2}


@pytest.mark.parametrize(
    ("kind", "invoices", "shape", "groups", "interchanges_"),
    [
        ("210", 1, {}, [1], 1),
        ("810", 1, {}, [1], 1),
        ("210", 2_001, {}, [2_000, 1], 1),  # the defaults: 2,000 sets a group, 10 groups an ISA
        ("210", 13, SMALL, [3, 3, 3, 3, 1], 3),
        ("810", 13, SMALL, [3, 3, 3, 3, 1], 3),
        ("810", 21, {"sets_per_group": 1, "groups_per_interchange": 10}, [1] * 21, 3),
    ],
)
def test_the_envelope_counts_and_splits_as_a_translator_writes_it(
    kind: str, invoices: int, shape: dict[str, int], groups: list[int], interchanges_: int
) -> None:
    if kind == "210":
        data = freight_210_file(invoices, seed=5, carriers=5, **shape)
    else:
        data = promo_810_file(invoices, seed=5, vendors=5, **shape)
    received = interchanges(data.decode("ascii"))
    assert envelope_faults(received) == []
    assert envelope_errors(data) == []  # pyx12's reading agrees
    assert len(received) == interchanges_
    assert [len(g.sets) for ic in received for g in ic.groups] == groups
    assert len({ic.control_number for ic in received}) == interchanges_
    assert {ts.code for ts in sets(received)} == {kind}
    assert {g.code for ic in received for g in ic.groups} == {"IM" if kind == "210" else "IN"}
    gs06 = [g.control_number for ic in received for g in ic.groups]
    assert gs06 == [str(n) for n in range(1, len(groups) + 1)]


def test_a_file_is_the_same_for_a_seed_and_its_isa13_follows_the_arguments() -> None:
    assert freight_210_file(50, seed=3, carriers=2) == freight_210_file(50, seed=3, carriers=2)
    assert freight_210_file(50, seed=3, carriers=2) != freight_210_file(50, seed=4, carriers=2)
    isa13 = {
        interchanges(make.decode())[0].control_number
        for make in (
            freight_210_file(50, seed=3, carriers=2),
            freight_210_file(51, seed=3, carriers=2),
            promo_810_file(50, seed=3, vendors=2),
        )
    }
    assert len(isa13) == 3  # a second file of a seed is not a duplicate interchange
    with pytest.raises(ValueError, match="at least one invoice"):
        freight_210_file(0, seed=3, carriers=2)


def test_a_210_is_about_600_bytes_so_100000_make_60_mb() -> None:
    size = len(freight_210_file(5_000, seed=9, carriers=5)) / 5_000
    assert 570 <= size <= 630, size


def _element(ts: TransactionSet, tag: str, n: int) -> str:
    return next(s.get(n) for s in ts.body if s.tag == tag)


def test_210s_settle_against_the_demo_freight_contract() -> None:
    received = interchanges(freight_210_file(400, seed=8, carriers=5).decode())
    bases: Counter[str] = Counter()
    disputed = []
    for n, ts in enumerate(sets(received)):
        assert _element(ts, "B3", 2) == f"PRO8-{n:07d}"
        assert _element(ts, "B3", 11) == f"CARRIER-{n % 5:03d}"
        l1s = [s for s in ts.body if s.tag == "L1"]
        billed = n2(_element(ts, "B3", 7))
        assert sum(n2(s.get(4)) for s in l1s) == billed == n2(_element(ts, "L3", 5))
        assert _element(ts, "B3", 8) == ""  # not a correction (edi_unsupported_purpose)
        (linehaul,) = [s for s in l1s if s.get(8) in ("", "400")]
        basis = {"PM": "mile", "CW": "cwt", "FR": "flat", "PC": "unit"}[linehaul.get(3)]
        l0 = next(s for s in ts.body if s.tag == "L0")
        miles = l0.get(2) if l0.get(3) == "DM" else None
        quantity = {"cwt": str(Decimal(l0.get(4)) / 100), "unit": l0.get(8)}.get(basis)
        accessorials = [s.get(8) for s in l1s if s.get(8) not in ("", "400", "FUE", "DSC")]
        leg = Leg(
            leg_no=1,
            miles=miles,
            rate_basis=basis,
            rated_quantity=quantity,
            accessorials=accessorials,
            billed_amount=str(billed),
        )
        model = quantize(leg_charge(leg, CONTRACT), CENT)
        bases[basis] += 1
        if abs(billed - model) > CONTRACT.tolerance:
            disputed.append((n, billed - model))
    assert disputed == [(n, Decimal("12.00")) for n in range(39, 400, 40)]
    assert set(bases) == {"mile", "cwt", "flat", "unit"}
    with_ens = sum(
        1 for ts in sets(received) for s in ts.body if s.tag == "L1" and s.get(8) == "ENS"
    )
    assert with_ens > 10


def test_810s_claim_the_demo_tier_rates() -> None:
    received = interchanges(promo_810_file(300, seed=8, vendors=5).decode())
    lines = 0
    over = []
    for n, ts in enumerate(sets(received), 1):
        assert _element(ts, "BIG", 2) == f"INV8-{n:07d}"
        assert _element(ts, "REF", 2) == f"VENDOR-{n % 5:04d}"
        assert "20260701" <= _element(ts, "BIG", 1) <= "20260930"  # period 2026-Q3
        total = Decimal(0)
        it1 = None
        for segment in ts.body:
            if segment.tag == "IT1":
                it1 = segment
                total += int(it1.get(2)) * Decimal(it1.get(4))
            elif segment.tag == "SAC":
                assert it1 is not None and segment.get(1) == "A" and segment.get(6) == ""
                lines += 1
                claimed = n2(segment.get(5))
                units = int(segment.get(10))
                assert units == int(it1.get(2)) and it1.get(6) == "VN"
                model = quantize(units * PROMO_TIERS[segment.get(13)], CENT)
                if claimed != model:
                    over.append((lines, claimed - model))
                total -= claimed
        assert n2(_element(ts, "TDS", 1)) == total
        assert _element(ts, "CTT", 1) == str(sum(s.tag == "IT1" for s in ts.body))
    assert over == [(k, Decimal("1.00")) for k in range(50, lines + 1, 50)]
