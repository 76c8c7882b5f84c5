"""Column types that keep money exact on every backend."""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from sqlalchemy import BigInteger, Integer, Numeric, String, TypeDecorator
from sqlalchemy.engine import Dialect

SCALE = Decimal("0.0001")  # NUMERIC(20,4)


class DecimalText(TypeDecorator[Decimal]):
    """SQLite has no exact NUMERIC: store the decimal's text instead of a float,
    at the same scale as PostgreSQL's NUMERIC(20,4) so both read back alike."""

    impl = String(40)
    cache_ok = True

    def process_bind_param(self, value: Any, dialect: Dialect) -> str | None:
        return None if value is None else format(Decimal(value).quantize(SCALE, ROUND_HALF_UP), "f")

    def process_result_value(self, value: Any, dialect: Dialect) -> Decimal | None:
        return None if value is None else Decimal(value)


def money_column_type() -> Any:
    """``NUMERIC(20,4)`` (SPEC §8); text on SQLite."""
    return Numeric(20, 4, asdecimal=True).with_variant(DecimalText(), "sqlite")


# SQLite only autoincrements an INTEGER PRIMARY KEY.
BigId = BigInteger().with_variant(Integer(), "sqlite")
