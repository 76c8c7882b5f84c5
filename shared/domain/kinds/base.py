"""The settlement-kind interface: what the pipeline needs to know of a kind.

A kind validates its documents (a Pydantic model), expands a document into
lines with reconciliation keys, validates its contract body, and settles one
line against its pinned contract. Everything here is pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Annotated, Any, ClassVar, Generic, Literal, TypeVar

import msgspec
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StringConstraints,
    TypeAdapter,
    ValidationInfo,
    WithJsonSchema,
    WrapValidator,
)
from pydantic_core import PydanticCustomError

from shared.domain.kinds.ids import DocumentId, PartitionKey
from shared.domain.money import CURRENCY, MONEY_PLACES, QUANTITY_PLACES, Money, Quantity

# No control characters (C0, DEL, C1), and no "|": reconciliation keys join
# fields with "|" (docs/architecture.md#reconciliation-keys), so an id holding one could make two
# lines one.
Identifier = Annotated[
    str, StringConstraints(min_length=1, max_length=128, pattern=r"^[^\x00-\x1f\x7f-\x9f|]+$")
]

# A document's ``raw_payload``, the partner's original as it came (an X12 set),
# in base64: at most this many characters. The X12 fast path writes it itself
# (``shared.domain.x12.mapping.freight_210.fast``), so it reads the limit here, not from a kind.
MAX_RAW_PAYLOAD = 512 * 1024 * 1024

Outcome = Literal["posted", "disputed", "duplicate", "dead_lettered"]
LineCell = str | Decimal | None  # a cell of ``Kind.line_cells``


def _whole(value: Any) -> Any:
    """``1.0`` is an integer to JSON Schema (openapi.yaml), so to the server too; a
    fraction, a string or a boolean is still refused, as strict mode refuses them."""
    if type(value) is float and value.is_integer():
        return int(value)
    return value


# A version or a line's number: 1 to 2**31 - 1, written 1 or 1.0.
Ordinal = Annotated[int, Field(ge=1, le=2**31 - 1), BeforeValidator(_whole)]


class WireModel(BaseModel):
    """Every wire shape refuses unknown fields and coerces nothing."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class Contract(WireModel):
    """What every kind's contract may name beside its rates: the currency
    (ISO 4217) its documents settle in; none, SETTLEQ_CURRENCY. A partition's
    versions all name one (docs/api.md#contracts): a re-pricing's delta is
    a difference of two amounts, never of two currencies."""

    # Left out of the stored body when not named: a version published before
    # contracts named a currency is the same text, and republishing it unchanged.
    currency: Annotated[str, StringConstraints(pattern=CURRENCY)] | None = Field(
        default=None, exclude_if=lambda value: value is None
    )


class Document(WireModel):
    document_id: DocumentId
    partition_key: PartitionKey
    contract_version: Ordinal
    correlation_id: Identifier | None = None


# --- Contract bodies: what no contract can sensibly price with (docs/api.md#contracts) ---
#
# A negative rate, price, quantity, surcharge or tolerance, or a discount outside
# [0, 1), is refused when a version is published (``Kind.contract_for_publication``),
# not when a worker reads one back: a published version is immutable, and one
# published before these checks settles the lines pinned to it as it always did.
# Zero is sensible (a free tier, an exact match, no fuel). A table with no rate at
# all is refused on any read, as it always was: none can be stored.
_PUBLISHING: dict[str, bool] = {"publishing": True}


def contract_invalid(message: str, **context: str) -> PydanticCustomError:
    return PydanticCustomError("contract_invalid", message, context)


def _publishing(info: ValidationInfo) -> bool:
    return isinstance(info.context, dict) and info.context.get("publishing") is True


def _not_negative(value: Decimal, info: ValidationInfo) -> Decimal:
    # is_signed: "-0" is refused too, as the published pattern (no minus) says.
    if value.is_signed() and _publishing(info):
        raise contract_invalid(
            "must not be negative: a contract cannot price with {value}", value=format(value, "f")
        )
    return value


def _a_fraction(value: Decimal, info: ValidationInfo) -> Decimal:
    if (value.is_signed() or value >= 1) and _publishing(info):
        raise contract_invalid(
            "must be a fraction from 0 up to, not including, 1 (0.80 is 80%), not {value}",
            value=format(value, "f"),
        )
    return value


def _not_empty(value: dict[Any, Any]) -> dict[Any, Any]:
    if not value:
        raise contract_invalid("is empty: a contract needs a rate to price with")
    return value


def _unsigned(places: int) -> WithJsonSchema:
    # Money's and Quantity's published pattern without the minus sign.
    return WithJsonSchema(
        {
            "type": "string",
            "pattern": rf"^[0-9]{{1,12}}(\.[0-9]{{1,{places}}})?$",
            "examples": ["0.05"],
        }
    )


Price = Annotated[Money, AfterValidator(_not_negative), _unsigned(MONEY_PLACES)]
"""A contract's money (a tolerance, a flat charge): zero or more."""
Rate = Annotated[Quantity, AfterValidator(_not_negative), _unsigned(QUANTITY_PLACES)]
"""A contract's rate, quantity or surcharge fraction: zero or more."""
Fraction = Annotated[
    Quantity,
    AfterValidator(_a_fraction),
    WithJsonSchema(
        {"type": "string", "pattern": r"^0{1,12}(\.[0-9]{1,6})?$", "examples": ["0.80"]}
    ),
]
"""A share of a price, from 0 up to (not including) 1: a discount."""
_PRICE: TypeAdapter[Decimal] = TypeAdapter(Price)


def price_or(model: type[WireModel]) -> WrapValidator:
    """For ``Price | model``: a flat price, or ``model`` (an object), told apart by
    shape, so that a refusal names the one meant (``accessorials.ENS.rate``), never
    both readings of the union (which still gives the schema and the serializer)."""

    def read(value: Any, _: Any, info: ValidationInfo) -> Any:
        if isinstance(value, dict | model):
            return model.model_validate(value, context=info.context)
        return _PRICE.validate_python(value, context=info.context)

    return WrapValidator(read)


RateTable = Annotated[
    dict[Identifier, Rate],
    AfterValidator(_not_empty),
    Field(json_schema_extra={"minProperties": 1}),
]
"""Rates (or quantities) by name, at least one."""


# Made per line and kept alive until the chunk commits: outside the garbage
# collector (nothing here refers back to itself), thousands of them per chunk
# no longer set off full collections of the worker's heap.
class Line(msgspec.Struct, gc=False):
    """One settleable unit of a document (a promo line, a freight leg...)."""

    document_id: str
    line_ref: str
    reconciliation_key: str
    claimed_amount: Decimal | None
    raw: Any  # the kind's own line model, handed back to ``settle``


class Settlement(msgspec.Struct, gc=False):  # per line, as Line
    outcome: Literal["posted", "disputed"]
    amount: Decimal
    claimed_amount: Decimal | None
    note: str | None = None


@dataclass(frozen=True, slots=True)
class RepeatedLine:
    """A line reference that a document holds twice (docs/architecture.md#reconciliation-keys:
    ``duplicate_line``)."""

    field: str  # the wire field, e.g. "line_no"
    loc: tuple[str, ...]  # its second appearance, e.g. ("lines", "3", "line_no")
    value: str  # the repeated reference, as a line_ref reads

    @classmethod
    def find(cls, values: Sequence[Hashable], field: str, *loc: str) -> RepeatedLine | None:
        """The first repeat among ``values`` (a document's line references, in
        order), located at ``loc`` + its index (+ ``field`` for a list of lines)."""
        repeat = first_repeat(values)
        if repeat is None:
            return None
        index, value = repeat
        where = (*loc, str(index), field) if loc else (field, str(index))
        return cls(field, where, str(value))


def first_repeat(values: Sequence[Hashable]) -> tuple[int, Any] | None:
    """The index and value of the first item equal to an earlier one, or None."""
    if len(set(values)) == len(values):  # the common case: one set, no loop
        return None
    seen: set[Hashable] = set()
    for index, value in enumerate(values):
        if value in seen:
            return index, value
        seen.add(value)
    return None  # pragma: no cover - the set was shorter, so a repeat exists


D = TypeVar("D", bound=Document)
C = TypeVar("C", bound=WireModel)


DeltaBasis = Literal["key_versions", "line_history"]
# Who owes whom a partition's balance (docs/api.md#balances-and-statements):
# ``owed_to_us``, the partition pays it (a vendor's promotional allowances);
# ``owed_by_us``, it is paid (a carrier's freight); None, it is no money owed
# (a recipe's unit costs).
Direction = Literal["owed_to_us", "owed_by_us"]


class Kind(Generic[D, C]):
    """One settlement kind. To add a kind: one module, one line in the registry.

    ``delta_basis`` says what a ledger row's ``delta`` is measured against
    (docs/architecture.md#re-pricing-lineage-and-advisory-locks): ``key_versions``, the same
    reconciliation key under an earlier contract version; ``line_history``, the latest committed row
    of the same (partition, line_ref), e.g. a recipe at a location.
    """

    name: ClassVar[str]
    document_model: type[D]
    contract_model: type[C]
    batch_model: type[WireModel]
    delta_basis: ClassVar[DeltaBasis] = "key_versions"
    # What a line's amount is rounded to, once (docs/architecture.md#exact-money),
    # and the places every amount of the kind is shown with.
    quantum: ClassVar[Decimal]
    # What a partition of the kind is (a vendor, a recipe, a carrier): the CLI's
    # and the dashboard's word for it (``GET /v1/kinds``).
    partition_noun: ClassVar[str]
    # What a line's ``line_ref`` is, by its field on the wire (a promo line's
    # ``line_no``, a recipe request's location, a freight leg's ``leg_no``).
    line_ref_name: ClassVar[str]
    # Whether its amounts add up to money (a summary's money totals). A recipe's
    # are unit costs at a location: their sum is no total of anything.
    amounts_are_totals: ClassVar[bool] = True
    # Which way a partition's balance is owed (``Direction``), or None when its
    # amounts are no money owed: a statement says so, and the journal leaves
    # the kind out unless SETTLEQ_JOURNAL_ACCOUNTS maps it.
    direction: ClassVar[Direction | None] = None
    # The general-ledger accounts (debit, credit) a positive balance is booked
    # on, unless SETTLEQ_JOURNAL_ACCOUNTS says otherwise; None: not journaled.
    journal_accounts: ClassVar[tuple[str, str] | None] = None
    # The accounts (debit, credit) of an outcome's rows booked as entries of
    # their own (``disputed``, ``resolved``: their money; a remittance's
    # ``deducted``, ``written_off``: the money they took), unless
    # SETTLEQ_JOURNAL_ACCOUNTS says otherwise; an outcome not named here is
    # booked with the rest (docs/operations.md#configuration).
    journal_outcome_accounts: ClassVar[Mapping[str, tuple[str, str]]] = {}
    # The X12 transaction set a trading partner sends the kind's documents as
    # (docs/api.md#edi-intake), or None: the kind comes as JSON or NDJSON only.
    x12_set: ClassVar[str | None] = None
    # The query parameters of an X12 submission, besides ``contract_version``, that
    # its files take (an 810's ``partition_key`` and ``period``, which the file may
    # not say); another given for them is refused (``query_parameter_not_applicable``):
    # it would be ignored (docs/api.md#edi-intake).
    x12_query: ClassVar[tuple[str, ...]] = ()
    # Whether its X12 sets are mapped by the 210's fast path first, straight to
    # their documents' JSON bytes (``shared.domain.x12.mapping.freight_210.fast``), and so, in a
    # large file, on several cores (services/api/edi/parallel/parent.py). Only a kind of
    # 210s may say so (tests/unit/test_kind_registry.py).
    x12_fast_path: ClassVar[bool] = False
    # Whether every line's reconciliation key starts with its document's partition
    # and id: then an attempt leases the document once, not each line's key
    # (``leasing.document_lease``). A recipe's key is its content's, which two
    # requests can share: it leases each key.
    keys_name_document: ClassVar[bool] = False
    # Optional: a decoder of a strict subset of ``document_model`` (see
    # ``shared.domain.kinds.screen``), tried first at the front door.
    screen: ClassVar[Any] = None
    # Optional: ``(chunk bytes) -> documents | None``, reading a stored chunk at
    # C speed into objects with the model's field names and values (Decimal
    # money), never more leniently than the model; None: the model reads it.
    settle_decoder: ClassVar[Any] = None

    def contract_for_publication(self, body: Any) -> C:
        """``body`` as a version to publish: the contract model's checks and what no
        contract can sensibly price with (``contract_invalid``, at the field's
        path); raises ``pydantic.ValidationError``."""
        return self.contract_model.model_validate(body, context=_PUBLISHING)

    def check_document(self, document: D, contract: C) -> None:
        """Refuse a whole document: raise ``BusinessError`` (e.g. ``missing_price``)."""

    def repeated_line(self, document: Any) -> RepeatedLine | None:
        """A line reference the document (its model, or its screen struct) repeats:
        its lines would share one line_ref and one reconciliation key, so the
        front door refuses it (``duplicate_line``). None when each appears once."""
        return None

    def lines(self, document: D) -> list[Line]:
        raise NotImplementedError

    def settle(self, document: D, line: Line, contract: C) -> Settlement:
        """Settle one line; raise ``BusinessError`` with a reason code
        (docs/architecture.md#failures-and-reason-codes)."""
        raise NotImplementedError

    def line_count(self, document: D) -> int:
        return len(self.lines(document))

    # A line's business fields as a CSV of a job's lines shows them, after the
    # columns every kind shares (docs/api.md#jobs), named as on the wire.
    line_columns: ClassVar[tuple[str, ...]] = ()

    def line_cells(self, document: D) -> list[tuple[LineCell, ...]]:
        """``line_columns``' values for each line of ``document``, in line order
        (the order of ``lines``): text, or a number as a ``Decimal``."""
        return [() for _ in range(self.line_count(document))]
