"""Synthetic X12 4010 files (``settleq gen --format x12``): 210 freight invoices
and 810 invoices with promotional allowances, deterministic for a seed.

They map (docs/architecture.md#edi-intake) onto the partitions and contracts
``settleq demo`` publishes (``shared/domain/synthetic.py``): 210s bill carriers
``CARRIER-nnn`` in B3-11, priced at the demo freight contract (per mile, per
hundredweight, flat or per car, less its discount, plus fuel on the net and
sometimes the per-mile ENS), every 40th overbilled by 12.00 so that it is
disputed; 810s claim, in SAC*A lines of IT1 loops, allowances of vendors
``VENDOR-nnnn`` (REF*IA) at the demo tier rates, every 50th line 1.00 over. A real SCAC has 2-4
letters; B3-11 carries the demo's partition names instead, so that a generated
file settles against the demo's contracts as it is.

The envelope is what a translator writes for a large batch: up to
``sets_per_group`` sets in a GS and ``groups_per_interchange`` groups in an
ISA, then the next ISA. Control numbers are unique within the file; ISA13
derives from the arguments, so two different files of one seed do not share
an ISA13 (the API refuses a known sender and ISA13 with other bytes).
"""

from __future__ import annotations

import random
import zlib
from collections.abc import Callable, Iterator
from datetime import date, datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal

from shared.domain.money import CENT
from shared.domain.synthetic import PROMO_TIERS, freight_contract
from shared.domain.x12.writer import Writer

RECEIVER = "SETTLEQ"
SENT_AT = datetime(2026, 10, 1, 8, 0)
QUARTER_START = date(2026, 7, 1)  # invoice dates fall in 2026-Q3, the JSON batches' period
SETS_PER_GROUP = 2_000
GROUPS_PER_INTERCHANGE = 10

_CONTRACT = freight_contract()
_RATES = {basis: Decimal(rate) for basis, rate in _CONTRACT["rates"].items()}
_DISCOUNT = Decimal(_CONTRACT["discount_pct"])
_FUEL = Decimal(_CONTRACT["fuel_surcharge"])
_ENS = Decimal(_CONTRACT["accessorials"]["ENS"]["rate"])
# The rate-value qualifier (L1-03) each basis is billed with.
_QUALIFIERS = {"mile": "PM", "cwt": "CW", "flat": "FR", "unit": "PC"}
_PLACES = [
    ("CHICAGO", "IL", "60607"),
    ("MEMPHIS", "TN", "38118"),
    ("DALLAS", "TX", "75247"),
    ("ATLANTA", "GA", "30336"),
    ("COLUMBUS", "OH", "43228"),
    ("RENO", "NV", "89502"),
]
_COMMODITIES = ["PAPER ROLLS", "CANNED GOODS", "AUTO PARTS", "PLASTIC RESIN", "FURNITURE"]
_PRODUCTS = ["CEREAL 12OZ", "COFFEE 1LB", "PASTA 16OZ", "SOAP 3PK", "JUICE 64OZ"]


def freight_210_file(
    invoices: int,
    *,
    seed: int,
    carriers: int,
    sets_per_group: int = SETS_PER_GROUP,
    groups_per_interchange: int = GROUPS_PER_INTERCHANGE,
) -> bytes:
    """``invoices`` 210s (one leg each) billed by ``carriers`` carriers."""
    rng = random.Random(seed)
    bodies = (_freight_body(rng, n, seed, carriers) for n in range(invoices))
    shape = f"210|{invoices}|{seed}|{carriers}|{sets_per_group}|{groups_per_interchange}"
    return _file(
        bodies, invoices, "210", "IM", "SQSYNTH210", shape, sets_per_group, groups_per_interchange
    )


def promo_810_file(
    invoices: int,
    *,
    seed: int,
    vendors: int,
    sets_per_group: int = SETS_PER_GROUP,
    groups_per_interchange: int = GROUPS_PER_INTERCHANGE,
) -> bytes:
    """``invoices`` 810s of 1-8 allowance lines each, from ``vendors`` vendors."""
    rng = random.Random(seed)
    lines = _Counter()
    bodies = (_promo_body(rng, n, seed, vendors, lines) for n in range(1, invoices + 1))
    shape = f"810|{invoices}|{seed}|{vendors}|{sets_per_group}|{groups_per_interchange}"
    return _file(
        bodies, invoices, "810", "IN", "SQSYNTH810", shape, sets_per_group, groups_per_interchange
    )


def _file(
    bodies: Iterator[list[str]],
    count: int,
    code: str,
    functional_id: str,
    sender: str,
    shape: str,
    sets_per_group: int,
    groups_per_interchange: int,
) -> bytes:
    if count < 1 or sets_per_group < 1 or groups_per_interchange < 1:
        raise ValueError("a file has at least one invoice, per group and per interchange")
    w = Writer()
    isa13 = zlib.crc32(shape.encode()) % 900_000_000 + 1
    chunks: list[bytes] = []
    gs06 = 0
    left = count
    while left:
        segments = [
            w.isa(
                sender=("ZZ", sender),
                receiver=("ZZ", RECEIVER),
                when=SENT_AT,
                control=isa13,
                usage="T",
            )
        ]
        groups = 0
        while left and groups < groups_per_interchange:
            groups += 1
            gs06 += 1
            segments.append(w.gs(functional_id, sender, RECEIVER, SENT_AT, gs06, "004010"))
            sets = min(sets_per_group, left)
            for st in range(1, sets + 1):
                segments += w.transaction_set(code, f"{st:04d}", next(bodies))
            segments.append(w.segment("GE", str(sets), str(gs06)))
            left -= sets
        segments.append(w.iea(groups, isa13))
        chunks.append(w.text(segments).encode("ascii"))
        isa13 += 1
    return b"".join(chunks)


# The quarter's days as CCYYMMDD, and a few days either side of it.
_DAYS = [(QUARTER_START + timedelta(days=d)).strftime("%Y%m%d") for d in range(-14, 92)]


def _day(offset: int) -> str:
    """CCYYMMDD of the quarter's ``offset``-th day (-14 <= offset < 92)."""
    return _DAYS[offset + 14]


def _number(value: Decimal) -> str:
    """An R (real) element: no exponent, no trailing zeros."""
    return format(value.normalize(), "f")


def _cents(amount: Decimal) -> int:
    return int(amount.quantize(CENT, ROUND_HALF_UP) * 100)


def _freight_body(rng: random.Random, n: int, seed: int, carriers: int) -> list[str]:
    draw = rng.random  # randint's pure-Python path is the generator's slowest part
    carrier = f"CARRIER-{n % carriers:03d}"  # freight_batch's partitions
    bol = f"{int(draw() * 10**9):09d}"
    billed = int(draw() * 92)
    delivered = billed - 1 - int(draw() * 5)
    pick = draw() * 10
    basis = "mile" if pick < 4 else "cwt" if pick < 8 else "flat" if pick < 9 else "unit"
    miles = 20 + int(draw() * 880)
    weight = 200 + int(draw() * 39_800)
    cars = 1 + int(draw() * 3)
    quantities = {"mile": Decimal(miles), "cwt": Decimal(weight) / 100, "unit": Decimal(cars)}
    quantity = quantities.get(basis, Decimal(1))
    gross = quantity * _RATES[basis]
    net = gross * (1 - _DISCOUNT)
    ens = _ENS * miles if basis == "mile" and draw() < 0.25 else Decimal(0)
    over = 1200 if n % 40 == 39 else 0  # overbilled in the linehaul: disputed
    total = _cents(net + _FUEL * net + ens) + over
    linehaul = _cents(gross) + over
    discount = -_cents(gross * _DISCOUNT)
    ens_cents = _cents(ens)
    fuel = total - linehaul - discount - ens_cents
    origin = _PLACES[n % 6]
    destination = _PLACES[(n + 1 + int(draw() * 5)) % 6]
    miles_l0 = f"{miles}*DM" if basis == "mile" else "*"
    lading = f"{cars}*RC" if basis == "unit" else f"{1 + int(draw() * 26)}*PLT"
    commodity = _COMMODITIES[n % 5]
    body = [
        f"B3**PRO{seed}-{n:07d}*{bol}*PP*L*{_day(billed)}*{total}**{_day(delivered)}*035"
        f"*{carrier}*{_day(billed)}",
        "C3*USD",
        f"N9*BM*{bol}",
        f"N9*PO*PO{int(draw() * 10**7):07d}",
        f"N9*CR*{commodity[:4]}{n:08d}",
        f"G62*86*{_day(delivered - 2)}",
        "K1*DELIVERY APPOINTMENT REQUIRED",
        f"N1*SH*{commodity.split()[0]} SHIPPING {n % 97:02d}*93*SH{n % 97:04d}",
        f"N3*{100 + int(draw() * 9900)} INDUSTRIAL PKWY",
        f"N4*{origin[0]}*{origin[1]}*{origin[2]}",
        f"N1*CN*DISTRIBUTION CENTER {n % 89:02d}*93*CN{n % 89:04d}",
        f"N3*{100 + int(draw() * 9900)} COMMERCE DR",
        f"N4*{destination[0]}*{destination[1]}*{destination[2]}",
        "N1*BT*SETTLEQ FREIGHT PAYABLE*93*SQAP",
        "N3*PO BOX 4410",
        "N4*CHICAGO*IL*60680",
        "LX*1",
        f"L5*1*{commodity}*{150_000 + n % 999}*N",
        f"L0*1*{miles_l0}*{weight}*G***{lading}",
        f"L1*1*{_number(_RATES[basis])}*{_QUALIFIERS[basis]}*{linehaul}",
        f"L1*2***{discount}****DSC",
        f"L1*3***{fuel}****FUE",
    ]
    if ens:
        body.append(f"L1*4*{_number(_ENS)}*PM*{ens_cents}****ENS")
    body.append(f"L3*{weight}*G***{total}")
    return body


class _Counter:
    """Allowance lines made so far across the file (every 50th overclaims)."""

    def __init__(self) -> None:
        self.made = 0

    def next(self) -> int:
        self.made += 1
        return self.made


def _promo_body(rng: random.Random, n: int, seed: int, vendors: int, lines: _Counter) -> list[str]:
    vendor = f"VENDOR-{n % vendors:04d}"  # promo_batch's partitions
    day = rng.randrange(92)
    store = f"{rng.randint(1, 4999):04d}"
    place = rng.choice(_PLACES)
    body = [
        f"BIG*{_day(day)}*INV{seed}-{n:07d}*{_day(day - 9)}*PO{rng.randrange(10**8):08d}",
        f"REF*IA*{vendor}",
        f"REF*DP*{rng.randint(1, 99):03d}",
        f"N1*ST*STORE {store}*92*{store}",
        f"N3*{rng.randint(100, 9999)} MAIN ST",
        f"N4*{place[0]}*{place[1]}*{place[2]}",
        f"N1*SU*{vendor} FOODS*92*{vendor}",
        "ITD*01*3*2**10**30",
        f"DTM*011*{_day(day - 2)}",
    ]
    total = 0
    count = rng.randint(1, 8)
    for line_no in range(1, count + 1):
        tier = rng.choice(sorted(PROMO_TIERS))
        units = rng.randint(1, 500)
        price = rng.randint(150, 2500)  # cents, above every tier rate: the total stays positive
        claimed = _cents(units * PROMO_TIERS[tier]) + (100 if lines.next() % 50 == 0 else 0)
        total += units * price - claimed
        body += [
            f"IT1*{line_no}*{units}*EA*{price // 100}.{price % 100:02d}**VN*SKU-"
            f"{rng.randint(10000, 99999)}*IN*{rng.randrange(10**8):08d}",
            f"PID*F****{rng.choice(_PRODUCTS)}",
            f"SAC*A*C310***{claimed}****EA*{units}**02*{tier}",
        ]
    body += [f"TDS*{total}", f"CTT*{count}"]
    return body


# By transaction set: ``settleq gen --format x12`` makes a kind's file of its ``x12_set``.
GENERATORS: dict[str, Callable[..., bytes]] = {"210": freight_210_file, "810": promo_810_file}
