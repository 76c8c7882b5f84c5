"""Column types that keep money exact on every backend, and the identity's key
as its index holds it."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from decimal import ROUND_HALF_UP, Context, Decimal, localcontext
from typing import Any

from sqlalchemy import JSON, BigInteger, Integer, Numeric, String, TypeDecorator
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.engine import Dialect
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.functions import FunctionElement

SCALE = Decimal("0.0001")  # NUMERIC(20,4), and NUMERIC(38,4) for totals

# Sums and totals are computed and stored in this context: the default one's 28
# digits would round a large sum silently, or refuse to quantize it.
EXACT_SUMS = Context(prec=60, rounding=ROUND_HALF_UP)

# Totals (a chunk's, a job's): the sum of lines each below 10^16 (the ledger
# column). A batch carries at most ``max_body_bytes`` lines (a line takes more
# than one byte), so a total is below 10^16 * 2^28 < 10^25 at the 256 MiB
# default: 34 integer digits keep room for bodies up to 10^18 bytes. A fixed
# precision, not PostgreSQL's unbounded NUMERIC, keeps the scale at 4 places
# and reads back the same on every backend.
TOTAL_PRECISION = 38


class DecimalText(TypeDecorator[Decimal]):
    """SQLite has no exact NUMERIC: store the decimal's text instead of a float,
    at the same scale as PostgreSQL's NUMERIC(20,4) so both read back alike."""

    impl = String(40)  # a total's 38 digits, its sign and its point
    cache_ok = True

    def process_bind_param(self, value: Any, dialect: Dialect) -> str | None:
        return None if value is None else format(EXACT_SUMS.quantize(Decimal(value), SCALE), "f")

    def process_result_value(self, value: Any, dialect: Dialect) -> Decimal | None:
        return None if value is None else Decimal(value)


def money_column_type() -> Any:
    """``NUMERIC(20,4)`` (docs/architecture.md#ledger-schema); text on SQLite."""
    return Numeric(20, 4, asdecimal=True).with_variant(DecimalText(), "sqlite")


def total_column_type() -> Any:
    """``NUMERIC(38,4)``, for sums of ledger amounts; text on SQLite."""
    return Numeric(TOTAL_PRECISION, 4, asdecimal=True).with_variant(DecimalText(), "sqlite")


def byte_ordered(width: int) -> Any:
    """``VARCHAR(width) COLLATE "C"`` on PostgreSQL, for identifiers we mint or hash
    (ASCII: hex keys, job ids, outcomes), so that their B-tree indexes compare
    bytes. Under the database's locale (``C.UTF-8`` here, ``en_US.UTF-8`` often)
    every comparison goes through ``strcoll``, and abbreviated sort keys are off:
    a cost on every ledger row inserted (migration 0015). For
    ASCII both orders agree. SQLite already compares bytes."""
    return String(width).with_variant(String(width, collation="C"), "postgresql")


# SQLite only autoincrements an INTEGER PRIMARY KEY.
BigId = BigInteger().with_variant(Integer(), "sqlite")


def id_list_type() -> Any:
    """A list of row ids: ``BIGINT[]`` on PostgreSQL, a JSON array on SQLite;
    never joined text, which nothing can index or join."""
    return ARRAY(BigInteger).with_variant(JSON(), "sqlite")


def sqlite_cmp_abs_diff(a: Any, b: Any, bound: Any) -> int | None:
    """SQLite's ``settleq_cmp_abs_diff(a, b, bound)``: the sign of
    ``abs(a - b) - bound`` over money kept as text, computed in Decimal (SQLite's
    own arithmetic would turn the text into floating point)."""
    if a is None or b is None or bound is None:
        return None
    with localcontext(EXACT_SUMS):
        diff = abs(Decimal(str(a)) - Decimal(str(b))) - Decimal(str(bound))
    return (diff > 0) - (diff < 0)


def sqlite_sub(a: Any, b: Any) -> str | None:
    """SQLite's ``settleq_sub(a, b)``: ``a - b`` of money kept as text, exact, as
    ``DecimalText`` stores it."""
    if a is None or b is None:
        return None
    with localcontext(EXACT_SUMS):
        return format((Decimal(str(a)) - Decimal(str(b))).quantize(SCALE), "f")


def utc(value: dt.datetime) -> dt.datetime:
    """Aware UTC (SQLite reads timestamps back naive; they were written in UTC)."""
    if value.tzinfo is None:
        return value.replace(tzinfo=dt.UTC)
    return value.astimezone(dt.UTC)


class identity_key(FunctionElement[Any]):  # noqa: N801 (used like a SQL function)
    """What the identity's unique index holds of a reconciliation key
    (``uq_ledger_entries_identity``, migration 0030): on PostgreSQL its 32
    bytes, ``decode(key, 'hex')``, half the index of the 64 characters, which
    a large ledger's inserts pay for a row (docs/performance.md); the key itself
    on SQLite. A query finds a key through that index only by this same
    expression: compare ``identity_key(column)`` with ``identity_key(value)``.
    The ``'hex'`` is written out, never bound: a generic plan could not match
    ``decode(key, $1)`` to the index."""

    name = "identity_key"
    inherit_cache = True


def identity_key_sql(key: str) -> str:
    """``identity_key`` on PostgreSQL, for statements written as text."""
    return f"decode({key}, 'hex')"


@compiles(identity_key, "postgresql")
def _identity_key_postgresql(element: identity_key, compiler: Any, **kw: Any) -> str:
    return identity_key_sql(compiler.process(element.clauses, **kw))


@compiles(identity_key)
def _identity_key_elsewhere(element: identity_key, compiler: Any, **kw: Any) -> str:
    return str(compiler.process(element.clauses, **kw))


def identity_keys(keys: Iterable[str], dialect: str) -> list[Any]:
    """Reconciliation keys as bound values to compare with ``identity_key(column)``:
    their bytes on PostgreSQL (keys settleq made: lower-case hex)."""
    return [bytes.fromhex(k) for k in keys] if dialect == "postgresql" else list(keys)
