"""Small, valid X12 files for the API's tests: one 210 or 810 per call, with
the ids a test needs to be alone in a shared ledger (its own carrier or
vendor, document and interchange control number).

Each file is what a partner sends: ``*`` elements, ``>`` components, ``~``
then a line break ending each segment. Amounts are N2 (implied cents).
"""

from __future__ import annotations

import itertools
import secrets
from dataclasses import dataclass
from decimal import Decimal

# From a random start: every test run shares one ledger (and its interchanges).
_ISA13 = itertools.count(secrets.randbelow(900_000_000))


def next_control_number() -> int:
    """An ISA13 this test run has not used yet (nine digits)."""
    return next(_ISA13) % 999_999_999 + 1


def _cents(amount: str) -> str:
    return str(int(Decimal(amount) * 100))


def envelope(sets: list[list[str]], *, code: str, sender: str, isa13: int, gs06: int = 1) -> bytes:
    """An ISA/GS around transaction sets (each its segments, ST..SE excluded)."""
    segments = [
        f"ISA*00*          *00*          *ZZ*{sender:<15}*ZZ*SETTLEQ        *260315*1200*U*00401"
        f"*{isa13:09d}*0*P*>",
        f"GS*{code}*{sender}*SETTLEQ*20260315*1200*{gs06}*X*004010",
    ]
    for n, body in enumerate(sets, start=1):
        st01 = "210" if code == "IM" else "810"
        st02 = f"{n:04d}"
        segments += [f"ST*{st01}*{st02}", *body, f"SE*{len(body) + 2}*{st02}"]
    segments += [f"GE*{len(sets)}*{gs06}", f"IEA*1*{isa13:09d}"]
    return "".join(s + "~\n" for s in segments).encode()


@dataclass(frozen=True)
class Freight:
    """A 210 billed per mile, with one LIFTGATE accessorial."""

    invoice: str
    scac: str
    miles: int = 100
    rate: str = "2.15"
    linehaul: str = "215.00"
    liftgate: str = "75.00"

    @property
    def billed(self) -> str:
        return str(Decimal(self.linehaul) + Decimal(self.liftgate))

    def segments(self) -> list[str]:
        return [
            f"B3**{self.invoice}*SHP{self.invoice}*PP**20260315*{_cents(self.billed)}**20260316*035"
            f"*{self.scac}*20260315",
            "N1*SH*SHIPPER CO",
            "LX*1",
            "L5*1*GOODS",
            f"L0*1*{self.miles}*DM",
            f"L1*1*{self.rate}*PM*{_cents(self.linehaul)}",
            f"L1*2***{_cents(self.liftgate)}****LIFTGATE",
        ]


def freight_file(
    *invoices: Freight, sender: str = "CARRIERTEST", isa13: int | None = None
) -> bytes:
    number = next_control_number() if isa13 is None else isa13
    return envelope([i.segments() for i in invoices], code="IM", sender=sender, isa13=number)


def freight_contract() -> dict[str, object]:
    """What ``Freight`` settles against, to the cent."""
    return {
        "rate_per_mile": "2.15",
        "accessorials": {"LIFTGATE": "75.00"},
        "tolerance": "0.05",
    }


@dataclass(frozen=True)
class Promo:
    """An 810 of one item with one allowance (tier T1 at 0.125 a unit)."""

    invoice: str
    vendor: str
    units: int = 80
    claimed: str = "10.00"
    sku: str = "012345678905"
    store: str = "STORE-7"

    def segments(self) -> list[str]:
        return [
            f"BIG*20260315*{self.invoice}",
            f"REF*VN*{self.vendor}",
            f"N1*ST*STORE*92*{self.store}",
            f"IT1*1*{self.units}*EA*1.00**UP*{self.sku}",
            f"SAC*A*T1***{_cents(self.claimed)}",
            f"TDS*{int(self.units) * 100}",
        ]

    def as_json(self, contract_version: int = 1) -> dict[str, object]:
        """The same invoice as our JSON (docs/api.md#edi-intake: the same keys)."""
        return {
            "document_id": self.invoice,
            "partition_key": self.vendor,
            "contract_version": contract_version,
            "period": "2026-Q1",
            "lines": [
                {
                    "line_no": 1,
                    "sku": self.sku,
                    "promo_tier": "T1",
                    "qualifying_units": str(self.units),
                    "claimed_amount": self.claimed,
                    "store_id": self.store,
                    "transaction_date": "2026-03-15",
                }
            ],
        }


def promo_file(*invoices: Promo, sender: str = "RETAILTEST", isa13: int | None = None) -> bytes:
    number = next_control_number() if isa13 is None else isa13
    return envelope([i.segments() for i in invoices], code="IN", sender=sender, isa13=number)


PROMO_CONTRACT = {"tier_rates": {"T1": "0.125"}, "tolerance": "0.05"}
